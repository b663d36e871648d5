// Helpers for the node agent tests: an in-process coordinator, agents in front of it, ranks
// (psync::Client) connected through the agents, and the plan they follow. Not thread-safe except
// where noted; one test thread drives it.
#ifndef PSYNC_TESTS_AGENT_AGENT_HARNESS_H_
#define PSYNC_TESTS_AGENT_AGENT_HARNESS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/agent.h"
#include "client/client.h"
#include "client/testing/wait_until.h"  // WaitUntil, for the tests that include this
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::testing {

// The chunks rank `plan` stages with which optimizers, in its declared order.
std::vector<std::pair<uint32_t, std::string>> CheckinsOf(const v1::JoinRequest& plan);

// One checksum per group of `chunk` the rank belongs to, equal for every member of a group.
std::vector<v1::GroupChecksum> GroupChecksums(const v1::JoinRequest& plan, uint64_t step,
                                              uint32_t chunk);

// Runs fn(i) on one thread per i in [0, n) and joins them.
void OnThreads(size_t n, const std::function<void(size_t)>& fn);

// An agent in front of `target` (the coordinator, or a proxy in front of it).
std::unique_ptr<agent::Agent> StartAgent(const std::string& target,
                                         agent::AgentOptions options = {});

// A client of `plan` connected through `agent_target`; null (and a test failure) on error.
std::unique_ptr<Client> ConnectRank(const std::string& agent_target, v1::JoinRequest plan);

// A whole step of a rank: every check-in of its plan (one message each), then for each chunk it
// syncs, the directive and SyncDone. Thread-safe (one call per client at a time). Failures are
// test failures.
void RunStep(Client& client, const v1::JoinRequest& plan, uint64_t step);
// The second half of RunStep: wait for each chunk's directive and report SyncDone.
void SyncStep(Client& client, const v1::JoinRequest& plan, uint64_t step);

v1::JobStatus JobStatus(v1::Coordinator::Stub& coordinator, const std::string& job);

}  // namespace psync::testing

#endif  // PSYNC_TESTS_AGENT_AGENT_HARNESS_H_

// SimJob: a job of simulated ranks driven over real gRPC, one RawSession per rank, for the
// observability tests (dashboard, psyncctl). Every rank has a "dense" optimizer in every chunk and
// an "expert" one in the expert chunks (see tests/service/raw_session.h, MakeJoin). The test thread
// decides who stages what and when, so a rank can be held back. Not thread-safe.
#ifndef PSYNC_TESTS_OBSERVABILITY_SIM_JOB_H_
#define PSYNC_TESTS_OBSERVABILITY_SIM_JOB_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "tests/service/raw_session.h"

namespace psync::testing {

struct SimJobOptions {
  std::string job_id = "sim";
  uint32_t world_size = 4;
  uint32_t num_chunks = 4;
  std::vector<uint32_t> expert_chunks = {1, 3};
  uint32_t experts = 2;
  // > 0: rank r joins on node "node-<r / ranks_per_node>" (JoinRequest.node); 0: names none.
  uint32_t ranks_per_node = 0;
};

// One check-in that is held back: (rank, chunk, optimizer).
using Holdback = std::tuple<uint32_t, uint32_t, std::string>;

class SimJob {
 public:
  // Joins every rank and attaches its session. Errors: the first failing Join or attach.
  static absl::StatusOr<std::unique_ptr<SimJob>> Start(const std::string& target,
                                                       SimJobOptions options);

  // Stages every contributor of `step` in every chunk, except those in `held`; `straggler` (if
  // set) stages each chunk `delay` after the others.
  absl::Status StageStep(uint64_t step, const std::set<Holdback>& held = {}, int straggler = -1,
                         absl::Duration delay = absl::ZeroDuration());
  // Stages one contributor.
  absl::Status Stage(uint32_t rank, uint64_t step, uint32_t chunk, const std::string& optimizer);
  // Waits for the directive of (step, chunk) on every rank, then reports SyncDone from every rank
  // except `skip_rank` (-1: none).
  absl::Status SyncChunk(uint64_t step, uint32_t chunk, int skip_rank = -1);
  // StageStep + SyncChunk for every chunk.
  absl::Status RunStep(uint64_t step, int straggler = -1,
                       absl::Duration delay = absl::ZeroDuration());

  // The session of `rank`, to send hand-made messages.
  RawSession* session(uint32_t rank) { return sessions_[rank].get(); }
  uint64_t generation() const { return generation_; }
  const SimJobOptions& options() const { return options_; }
  v1::Coordinator::Stub* stub() { return stub_.get(); }
  std::vector<std::string> Optimizers(uint32_t chunk) const;

 private:
  SimJob(std::shared_ptr<grpc::Channel> channel, SimJobOptions options);

  SimJobOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  uint64_t generation_ = 0;
  std::vector<std::unique_ptr<RawSession>> sessions_;
};

}  // namespace psync::testing

#endif  // PSYNC_TESTS_OBSERVABILITY_SIM_JOB_H_

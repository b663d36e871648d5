// Agent: psync-agent, the per-node sidecar between a node's ranks and the psync coordinator.
//
// The node's ranks connect to the agent exactly as to the coordinator (same psync.v1.Coordinator
// service, so psync::Client and the simulated ranks work unchanged when given the agent's
// address); the agent holds ONE AgentSession stream to the coordinator for all of them, merges
// their check-ins into one message per (step, chunk, optimizer) with the list of ranks, and fans
// the coordinator's notices (one message for several ranks) out to the ranks' Sessions. The
// coordinator still applies and answers every rank's message as that rank, so exactly-once
// release, no early release and per-rank observability are those of direct Sessions.
// See agent/README.md and docs/design.md, "Node agents".
//
// Start() binds the listening address and starts connecting upstream (in the background, retrying
// with backoff); it fails only for bad options or an address it cannot bind. Shutdown() stops
// serving, ends the local Sessions and the upstream stream (the coordinator then detaches the
// agent's ranks); idempotent, also run by the destructor. Thread-safe.
#ifndef PSYNC_AGENT_AGENT_H_
#define PSYNC_AGENT_AGENT_H_

#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent_service.h"
#include "agent/stats.h"
#include "agent/upstream.h"
#include "client/backoff.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::agent {

struct AgentOptions {
  // The coordinator, e.g. "10.0.0.1:7070" or "dns:///psync:7070". Ignored when `channel` is set.
  std::string target;
  // An existing channel to the coordinator instead (tests: through a proxy). Shared.
  std::shared_ptr<grpc::Channel> channel;
  // Where the node's ranks connect: "host:port" (port 0 picks a free one) or "unix:PATH".
  std::string listen = "127.0.0.1:0";
  // Merging (see agent/upstream.h): 0 writes whatever is queued as soon as the writer is free.
  absl::Duration flush_window = absl::ZeroDuration();
  // Write at once when this many local messages are queued, whatever the window.
  size_t flush_messages = 1024;
  // Per AgentBatch: local messages (1..65536) and their bytes (the coordinator accepts 1 MiB
  // messages by default).
  size_t max_batch_messages = 1024;
  size_t max_batch_bytes = 512 << 10;
  // Reconnect delays of the upstream stream (also the channel's reconnect backoff).
  BackoffOptions backoff;
  // HTTP/2 keepalive of the channel to the coordinator, so a dead connection ends the stream.
  absl::Duration keepalive = absl::Seconds(10);
  // Largest message accepted from a local rank.
  int max_receive_message_bytes = 1 << 20;
};

// OK or INVALID_ARGUMENT naming the field.
absl::Status ValidateAgentOptions(const AgentOptions& options);

class Agent {
 public:
  static absl::StatusOr<std::unique_ptr<Agent>> Start(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // The bound TCP port (0 when listening on a unix socket).
  int port() const { return port_; }
  // The address a rank on this node connects to: "unix:PATH", or "127.0.0.1:PORT" for a wildcard
  // or loopback listen address (else "HOST:PORT").
  std::string local_target() const;
  AgentStats stats() const { return counters_.Snapshot(); }
  // True while a stream to the coordinator is open (it may still be connecting).
  bool upstream_connected() const { return upstream_->connected(); }

  void Shutdown();
  // Graceful stop (SIGTERM): the health service answers NOT_SERVING, no new local call is
  // accepted, local calls in flight (the ranks' Sessions) run until they end or `grace` passed and
  // are cancelled then; then the stream to the coordinator ends. Shutdown() is Drain(zero); only
  // the first of the two acts.
  void Drain(absl::Duration grace);
  // Blocks until Shutdown() or Drain() is called from another thread.
  void Wait();

 private:
  explicit Agent(AgentOptions options) : options_(std::move(options)) {}

  const AgentOptions options_;
  AgentCounters counters_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Coordinator::Stub> stub_;
  std::unique_ptr<Upstream> upstream_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::once_flag shutdown_once_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_AGENT_H_

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
// Replicas. Given several coordinator replicas (target "a:7070,b:7070,c:7070"), the agent holds
// one AgentSession stream per replica it uses and sends each job to one replica: first the list
// entry the job's ranks would start on themselves, then the owner a replica's OwnerRedirect
// names, the next entry when a replica is unreachable (agent/router.h). The ranks only ever talk
// to the agent: it follows redirects for them and never passes one on; a rank whose replica is
// gone or does not serve its job any more has its local Session ended with UNAVAILABLE and joins
// again through the agent (a resume at the job's owner), so training sees a delay. One target
// behaves as a single coordinator: one stream, re-attached after every reconnect; a redirect it
// answers (a Service in front of replicas) is still followed to the owner.
//
// Relaying. The agent also serves other node agents' AgentSessions (a relay tier: agents -> relay
// -> coordinator) through one more stream of its own per replica it relays to (agent/relay_hub.h,
// opened when the first agent's job goes there); each job goes to its replica as the agent's own
// do (agent/relayed_routes.h), so the node agents behind it keep their one stream to the relay
// through a failover. psync-agent started with --target pointing at another agent uses it as its
// relay.
//
// Start() binds the listening address and, with one target, starts connecting upstream (in the
// background, retrying with backoff; with several, a replica's stream opens when a job first goes
// there); it fails only for bad options (a target list with no target: INVALID_ARGUMENT naming
// `target`) or an address it cannot bind (the ranks' or http_listen's). Shutdown() stops serving,
// ends the local Sessions and the upstream streams (the coordinators then detach the agent's
// ranks); idempotent, also run by the destructor. Thread-safe.
#ifndef PSYNC_AGENT_AGENT_H_
#define PSYNC_AGENT_AGENT_H_

#include <algorithm>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/agent_metrics.h"
#include "agent/agent_service.h"
#include "agent/router.h"
#include "agent/stats.h"
#include "client/backoff.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/http/server.h"

namespace psync::agent {

struct AgentOptions {
  // The coordinator, e.g. "10.0.0.1:7070" or "dns:///psync:7070", or its replicas, comma-separated
  // ("10.0.0.1:7070,10.0.0.2:7070,10.0.0.3:7070"). Ignored when `channel` is set.
  std::string target;
  // An existing channel to the coordinator instead (tests: through a proxy). Shared.
  std::shared_ptr<grpc::Channel> channel;
  // Where the node's ranks connect: "host:port" (port 0 picks a free one) or "unix:PATH".
  std::string listen = "127.0.0.1:0";
  // Merging (see agent/upstream.h): how long a queued message may wait for others, except a
  // check-in a release may wait for (it completes a chunk on the node, or the agent cannot tell)
  // and a skip vote; 0 writes whatever is queued as soon as the writer is free.
  absl::Duration flush_window = absl::Milliseconds(20);
  // Write at once when this many local messages are queued, whatever the window.
  size_t flush_messages = 1024;
  // Relaying (a single target): how long other agents' batches may wait for more to merge with
  // (RelayHubOptions::flush_window); 0 sends them as soon as the stream is free. 2 ms: what a
  // relay saves the coordinator per message shortens the way up by more than the wait
  // (docs/performance.md, "A relay's window of 2 ms by default").
  absl::Duration relay_flush_window = absl::Milliseconds(2);
  // Relaying: threads that write the downstream agents' shares of a coordinator message
  // (RelayHubOptions::fanout_threads); -1: RelayFanoutThreadsFor the CPUs the process is given.
  int relay_fanout_threads = -1;
  // Per AgentBatch: local messages (1..65536) and their bytes (the coordinator accepts 1 MiB
  // messages by default).
  size_t max_batch_messages = 1024;
  size_t max_batch_bytes = 512 << 10;
  // The ranks' equal SyncDones as one entry of a batch (AgentBatch.merged_sync_dones). A
  // coordinator older than that field rejects them: false while such a coordinator serves.
  bool merge_sync_dones = true;
  // Reconnect delays of the upstream stream (also the channel's reconnect backoff).
  BackoffOptions backoff;
  // HTTP/2 keepalive of the channel to the coordinator (as ClientOptions::keepalive), so a dead
  // connection or a paused coordinator ends the stream within about three intervals.
  absl::Duration keepalive = absl::Seconds(1);
  // Largest message accepted from a local rank.
  int max_receive_message_bytes = 1 << 20;
  // "host:port" (port 0 picks a free one): serve GET /metrics there (Prometheus text format;
  // agent/agent_metrics.h). Empty: no HTTP side.
  std::string http_listen;
};

// The relay's fan-out threads for `cpus` CPUs: one fewer (the thread reading the coordinator's
// stream keeps one), at most 4; 0 below 3 CPUs, where one thread would only add a hand-over.
inline size_t RelayFanoutThreadsFor(int cpus) {
  return cpus < 3 ? 0 : static_cast<size_t>(std::min(cpus - 1, 4));
}

// OK or INVALID_ARGUMENT naming the field (a target list with no target names `target`; an
// http_listen that is not host:port names `http_listen`).
absl::Status ValidateAgentOptions(const AgentOptions& options);

class Agent {
 public:
  static absl::StatusOr<std::unique_ptr<Agent>> Start(AgentOptions options);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // The bound TCP port (0 when listening on a unix socket).
  int port() const { return port_; }
  // The bound HTTP port of /metrics (0 without http_listen).
  int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  // The address a rank on this node connects to: "unix:PATH", or "127.0.0.1:PORT" for a wildcard
  // or loopback listen address (else "HOST:PORT").
  std::string local_target() const;
  AgentStats stats() const { return counters_.Snapshot(); }
  // True while a stream to the coordinator (to some replica) is open (it may still be connecting).
  bool upstream_connected() const { return router_->connected(); }

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
  std::unique_ptr<AgentMetrics> metrics_;
  std::unique_ptr<http::Server> http_;  // with http_listen only
  std::unique_ptr<Router> router_;
  std::unique_ptr<AgentService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::once_flag shutdown_once_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_AGENT_H_

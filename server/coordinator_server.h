// CoordinatorServer: a running psync coordinator: the Coordinator, its gRPC service (with the
// standard health service and server reflection) and the gRPC server, wired together.
//
// Start() binds and returns once the server accepts calls. Shutdown() stops accepting calls,
// cancels open streams and waits for handlers; it is idempotent and called by the destructor.
// Drain() is the graceful form (SIGTERM): health NOT_SERVING, calls in flight finish within a
// grace period.
// Thread-safe.
#ifndef PSYNC_SERVER_COORDINATOR_SERVER_H_
#define PSYNC_SERVER_COORDINATOR_SERVER_H_

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "serve/clock.h"
#include "serve/http/server.h"
#include "serve/http/static_files.h"
#include "serve/metrics/registry.h"
#include "server/coordinator_metrics.h"
#include "server/ha/etcd_client.h"
#include "server/ha/replica.h"
#include "server/http_api.h"
#include "server/kv/rendezvous_cleanup.h"
#include "server/kv/rendezvous_store.h"
#include "server/owner/coordinator.h"
#include "server/rpc/service.h"

namespace psync::server {

struct ServerOptions {
  // host:port to listen on; port 0 picks a free port (see port()).
  std::string listen = "0.0.0.0:7070";
  // Largest message accepted from a client; larger ones fail with RESOURCE_EXHAUSTED.
  int max_receive_message_bytes = 1 << 20;
  CoordinatorOptions coordinator;
  // The bound of each stream's outbound queue (stream_writer.h): a client that does not read is
  // paused, then ended with RESOURCE_EXHAUSTED. The flags' defaults.
  // `streams.counters` is set by Start (stream_counters()).
  serve::StreamLimits streams = {1 << 20, absl::Seconds(10), 16 << 20, nullptr,
                                 absl::Milliseconds(50)};
  RendezvousLimits rendezvous;
  // Not owned; nullptr uses the real clock.
  serve::Clock* clock = nullptr;
  // How often to look for stalls (Coordinator::EnforceLiveness); zero disables the inspector
  // thread.
  absl::Duration inspect_interval = absl::Milliseconds(50);
  // Log each stall to stderr.
  bool log_stalls = true;  // and rank losses and evictions, one line each to stderr
  // TLS: PEM server certificate chain and private key (both or neither). With client_ca_pem, every
  // client must present a certificate signed by that CA (mutual TLS).
  std::string tls_cert_pem;
  std::string tls_key_pem;
  std::string tls_client_ca_pem;
  // Per job, at most this many psync_node_missing_contributors series (coordinator_metrics.h).
  uint32_t metrics_node_series = 10;
  // host:port for /metrics, the JSON API and the dashboard (see http_api.h); empty disables it.
  // With tls_cert_pem and tls_key_pem the HTTP side serves HTTPS with the same certificate (client
  // certificates are not asked for there: /api/ is guarded by http_api.token instead).
  std::string http_listen;
  // The HTTP side's threads and timeouts (its TLS fields are filled from tls_cert_pem/tls_key_pem).
  http::ServerOptions http;
  // Bearer token for /api/ (and /metrics with metrics_require_token); see http_api.h.
  HttpApiOptions http_api;
  // host:port of a plaintext gRPC server with only the health service (same statuses as on
  // `listen`), for Kubernetes' gRPC probes, which cannot speak TLS, when `listen` serves TLS; empty
  // disables it.
  std::string health_listen;
  // The dashboard's files (may be empty).
  absl::Span<const http::EmbeddedFile> dashboard;
  // Coordinator replicas (docs/design.md, "Replicas"): etcd's client endpoints
  // ("host:port[,host:port...]"); empty runs a single coordinator that serves every job.
  std::string etcd;
  // This replica's address as clients reach it (registered in etcd, sent in redirects).
  std::string advertise;
  // The TTL of this replica's etcd lease; it stops serving its jobs etcd_lease_margin before the
  // lease can expire without a renewal, and another replica takes them once it has.
  absl::Duration etcd_lease_ttl = absl::Seconds(5);
  absl::Duration etcd_lease_margin = absl::Seconds(1);
  // How often the replica set and the job owners are read from etcd.
  absl::Duration etcd_poll_interval = absl::Milliseconds(200);
  // How often an owner writes its part of each job's audit to etcd when it changed
  // (server/ha/audit_ledger.h); a rounded-up multiple of etcd_poll_interval in effect.
  absl::Duration etcd_audit_interval = absl::Seconds(1);
  // Tests: an etcd client to use instead of one for `etcd` (e.g. a FakeEtcd). Not owned.
  ha::EtcdClient* etcd_client = nullptr;
};

class CoordinatorServer {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(ServerOptions options);
  ~CoordinatorServer();

  // The bound gRPC port.
  int port() const { return port_; }
  // The bound HTTP port (0 when HTTP is disabled).
  int http_port() const { return http_ != nullptr ? http_->port() : 0; }
  // The bound port of health_listen (0 when disabled).
  int health_port() const { return health_port_; }
  // Whether the HTTP side serves HTTPS.
  bool http_tls() const { return http_ != nullptr && http_->tls(); }
  // "127.0.0.1:<port>": where a client on this machine connects.
  std::string local_target() const;
  Coordinator& coordinator() { return *coordinator_; }
  // What the stream bounds did (streams paused, ended for overflow).
  const serve::StreamCounters& stream_counters() const { return stream_counters_; }
  // This coordinator's replica membership and job ownership (null without --etcd).
  ha::Replica* replica() { return replica_.get(); }

  void Shutdown();
  // Graceful stop (SIGTERM): the health service answers NOT_SERVING for every service (open
  // health Watch calls see it), the server stops accepting connections and calls, the calls in
  // flight (open Session streams included: they keep checking in and being answered) run until
  // they end or `grace` has passed, and those still open then are cancelled (their clients
  // reconnect elsewhere); then the liveness inspector and the HTTP side (/metrics answers while
  // draining) stop. Returns when all that is done. Shutdown() is Drain(zero). Only the first of
  // Shutdown() and Drain() acts; a later call returns at once.
  void Drain(absl::Duration grace);
  // Blocks until Shutdown() or Drain() is called from another thread.
  void Wait();

 private:
  CoordinatorServer() = default;

  serve::RealClock real_clock_;
  serve::StreamCounters stream_counters_;
  std::unique_ptr<ha::EtcdClient> etcd_;
  std::unique_ptr<ha::Replica> replica_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<RendezvousStore> rendezvous_;
  std::unique_ptr<RendezvousCleanup> rendezvous_cleanup_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<grpc::Server> health_server_;  // health_listen's
  int health_port_ = 0;
  metrics::Registry registry_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
  std::unique_ptr<http::Server> http_;
  int port_ = 0;
  std::once_flag shutdown_once_;
  absl::Notification stop_inspector_;
  std::thread inspector_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_COORDINATOR_SERVER_H_

// TestServer: an in-process coordinator on 127.0.0.1 with a free port, for tests of clients,
// simulated ranks and the service. Shut down by the destructor. Thread-safe.
#ifndef PSYNC_SERVER_TEST_SERVER_H_
#define PSYNC_SERVER_TEST_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/coordinator_server.h"

namespace psync::server {

class TestServer {
 public:
  // `clock` (not owned) may be nullptr for the real clock.
  static absl::StatusOr<std::unique_ptr<TestServer>> Start(CoordinatorOptions options = {},
                                                           serve::Clock* clock = nullptr);
  // Full control (TLS, HTTP); `listen` is forced to 127.0.0.1:0 and the inspector thread off.
  static absl::StatusOr<std::unique_ptr<TestServer>> Start(ServerOptions options);

  std::string target() const { return server_->local_target(); }
  int http_port() const { return server_->http_port(); }
  int health_port() const { return server_->health_port(); }
  Coordinator& coordinator() { return server_->coordinator(); }
  const serve::StreamCounters& stream_counters() const { return server_->stream_counters(); }
  void Shutdown() { server_->Shutdown(); }
  void Drain(absl::Duration grace) { server_->Drain(grace); }

 private:
  explicit TestServer(std::unique_ptr<CoordinatorServer> server) : server_(std::move(server)) {}
  std::unique_ptr<CoordinatorServer> server_;
};

inline absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(CoordinatorOptions options,
                                                                     serve::Clock* clock) {
  ServerOptions server_options;
  server_options.coordinator = std::move(options);
  server_options.clock = clock;
  return Start(std::move(server_options));
}

inline absl::StatusOr<std::unique_ptr<TestServer>> TestServer::Start(ServerOptions server_options) {
  server_options.listen = "127.0.0.1:0";
  server_options.inspect_interval =
      absl::ZeroDuration();  // tests call EnforceLiveness() themselves
  auto server = CoordinatorServer::Start(std::move(server_options));
  if (!server.ok()) return server.status();
  return std::unique_ptr<TestServer>(new TestServer(std::move(*server)));
}

}  // namespace psync::server

#endif  // PSYNC_SERVER_TEST_SERVER_H_

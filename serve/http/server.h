// psync::http::Server: the coordinator's HTTP side (/metrics, the JSON API, the dashboard), a thin
// adapter over cpp-httplib (Debian libcpp-httplib-dev), with TLS when a certificate is given.
//
// Model: cpp-httplib's accept thread hands each connection to a fixed pool of
// ServerOptions::num_threads threads; a connection holds its thread until it closes. So what bounds
// a silent or slow client is the timeouts: a connection that sends nothing is closed after
// idle_timeout, one that stops sending in the middle of a request after read_timeout without a
// byte, and a response the client does not read after write_timeout. Connections past
// num_threads wait in the pool's queue until a thread is free. The pool is sized so that many
// idle connections (tests/observability: 64 at once) do not delay /metrics or the dashboard; see
// docs/reliability.md, "The HTTP side: security".
//
// Only GET and HEAD reach handlers (HEAD runs the GET handler and drops the body). Answers produced
// by the server itself: 404 for a path with no route, 405 (with "Allow: GET, HEAD") for another
// method, 500 when a handler throws, and cpp-httplib's own 400 / 414 for a malformed request or an
// over-long request line.
//
// Thread-safety: Handle/HandlePrefix/Start/Shutdown/port may be called from any thread. Routes are
// registered before Start and fixed afterwards. Handlers run concurrently on the pool's threads.
//
// Lifetime: Shutdown() (also run by the destructor) stops accepting, lets running requests finish
// (a worker blocked on a silent client returns within idle_timeout or read_timeout) and joins
// every thread. A server is started at most once.

#ifndef PSYNC_SERVE_HTTP_SERVER_H_
#define PSYNC_SERVE_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "serve/http/message.h"

namespace httplib {
class Server;
}  // namespace httplib

namespace psync::http {

struct ServerOptions {
  // Threads serving connections; at least 1. Each open connection holds one until it closes.
  int num_threads = 128;
  // A connection that sends no request (first or next) for this long is closed; at least 1 s
  // (cpp-httplib counts it in whole seconds).
  absl::Duration idle_timeout = absl::Seconds(2);
  // A request that stops arriving for this long (no byte) is dropped.
  absl::Duration read_timeout = absl::Seconds(5);
  // A response the client stops reading for this long is abandoned.
  absl::Duration write_timeout = absl::Seconds(5);
  // Requests served on one connection before it is closed.
  int max_requests_per_connection = 100;
  // TLS: the PEM certificate chain and private key (both or neither). With both, the server
  // speaks only HTTPS.
  std::string tls_cert_pem;
  std::string tls_key_pem;
};

class Server {
 public:
  Server() : Server(ServerOptions()) {}
  explicit Server(ServerOptions options);
  ~Server();

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Routes requests whose decoded path equals `path` to `handler`.
  // Errors: INVALID_ARGUMENT if `path` does not start with '/' or `handler`
  // is empty, ALREADY_EXISTS if `path` is routed already, FAILED_PRECONDITION
  // after Start. On error the route table is unchanged.
  absl::Status Handle(absl::string_view path, Handler handler) ABSL_LOCKS_EXCLUDED(mu_);

  // Routes requests whose decoded path starts with `prefix` to `handler`.
  // Exact routes win over prefixes; among prefixes the longest wins. Errors
  // as for Handle.
  absl::Status HandlePrefix(absl::string_view prefix, Handler handler) ABSL_LOCKS_EXCLUDED(mu_);

  // Binds `host`:`port` (port 0 picks a free one) and starts serving.
  // Errors: INVALID_ARGUMENT for a bad port or bad options (including a TLS certificate or key
  // that does not load, or one without the other), UNAVAILABLE if binding fails (e.g. the port
  // is taken), FAILED_PRECONDITION if already started. On error no thread is running.
  absl::Status Start(absl::string_view host, int port) ABSL_LOCKS_EXCLUDED(mu_);

  // The bound port after a successful Start; 0 before.
  int port() const { return port_.load(std::memory_order_acquire); }
  // Whether Start serves HTTPS (a certificate and key were given).
  bool tls() const { return !options_.tls_cert_pem.empty(); }

  // Stops serving and joins every thread; see the lifetime note above.
  // Idempotent; a no-op if never started. Must not be called from a handler.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Routes {
    absl::flat_hash_map<std::string, Handler> exact;
    std::vector<std::pair<std::string, Handler>> prefixes;  // Longest first.
  };

  absl::Status AddRoute(absl::string_view path, Handler handler, bool prefix)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Runs the handler routed for `request` (404 when none). Reads routes_ without locking: it is
  // fixed before the first request can arrive.
  Response Dispatch(const Request& request) const;

  // Constant after construction.
  const ServerOptions options_;

  std::atomic<int> port_{0};
  // Set by Start before serving begins; read by the pool's threads without locking.
  Routes routes_;

  // State below is protected by mu_.
  absl::Mutex mu_;
  Routes pending_routes_ ABSL_GUARDED_BY(mu_);
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<httplib::Server> impl_ ABSL_GUARDED_BY(mu_);
  std::thread listener_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::http

#endif  // PSYNC_SERVE_HTTP_SERVER_H_

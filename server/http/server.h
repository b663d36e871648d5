// psync::http::Server: a small embedded HTTP/1.1 server for the coordinator's
// /metrics endpoint, JSON status API and static dashboard.
//
// Model: one accept thread hands connections to a fixed pool of worker
// threads through a bounded queue; each worker serves one request per
// connection (every response carries "Connection: close"). Only GET and HEAD
// reach handlers; HEAD runs the GET handler and drops the body.
//
// Answers produced by the server itself: 400 for a malformed request, 404 for
// a path with no route, 405 (with "Allow: GET, HEAD") for another method on a
// routed path, 408 when a started request head does not complete within
// read_timeout, 431 when the request head exceeds max_header_bytes, 500 when
// a handler throws, 503 when the connection queue is full, 505 for an HTTP
// major version other than 1. An idle connection that sends nothing within
// read_timeout is closed without an answer; a response that cannot be written
// within write_timeout is abandoned. So a stuck client holds a worker for at
// most read_timeout + write_timeout (+ linger_timeout).
//
// Thread-safety: Handle/HandlePrefix/Start/Shutdown/port may be called from
// any thread. Routes are registered before Start and fixed afterwards.
// Handlers run concurrently on the worker threads.
//
// Lifetime: Shutdown() (also run by the destructor) stops accepting, wakes
// workers blocked on clients, waits for running handlers, joins every thread
// and closes every socket. A server is started at most once.

#ifndef PSYNC_SERVER_HTTP_SERVER_H_
#define PSYNC_SERVER_HTTP_SERVER_H_

#include <atomic>
#include <cstddef>
#include <deque>
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
#include "server/http/message.h"
#include "server/http/socket_io.h"

namespace psync::http {

struct ServerOptions {
  // Threads serving connections; at least 1.
  int num_workers = 4;
  // Accepted connections waiting for a worker; more are answered 503.
  int max_pending_connections = 64;
  // Largest request head (request line + header fields) accepted.
  size_t max_header_bytes = 16 * 1024;
  // Time allowed to receive the whole request head, from accept.
  absl::Duration read_timeout = absl::Seconds(10);
  // Time allowed to send the whole response.
  absl::Duration write_timeout = absl::Seconds(10);
  // After responding, the server half-closes and discards further input for
  // at most this long, so the client reads the response before the socket is
  // torn down (a close with unread input would reset the connection).
  absl::Duration linger_timeout = absl::Seconds(1);
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
  // Errors: INVALID_ARGUMENT for a bad host or port or bad options,
  // UNAVAILABLE if binding fails (e.g. the port is taken),
  // FAILED_PRECONDITION if already started. On error no thread is running
  // and the server may be started again.
  absl::Status Start(absl::string_view host, int port) ABSL_LOCKS_EXCLUDED(lifecycle_mu_, mu_);

  // The bound port after a successful Start; 0 before.
  int port() const { return port_.load(std::memory_order_acquire); }

  // Stops serving and joins every thread; see the lifetime note above.
  // Idempotent; a no-op if never started. Must not be called from a handler.
  void Shutdown() ABSL_LOCKS_EXCLUDED(lifecycle_mu_, mu_);

 private:
  struct Routes {
    absl::flat_hash_map<std::string, Handler> exact;
    std::vector<std::pair<std::string, Handler>> prefixes;  // Longest first.
  };

  absl::Status AddRoute(absl::string_view path, Handler handler, bool prefix)
      ABSL_LOCKS_EXCLUDED(mu_);
  void AcceptLoop() ABSL_LOCKS_EXCLUDED(mu_);
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ServeConnection(int fd) const;
  Response Dispatch(const Request& request) const;
  bool SendResponse(int fd, const Response& response, bool include_body) const;
  void Linger(int fd) const;

  // Constant after construction.
  const ServerOptions options_;

  // Serializes Start and Shutdown; held while threads are joined.
  absl::Mutex lifecycle_mu_;
  bool started_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  std::thread accept_thread_ ABSL_GUARDED_BY(lifecycle_mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(lifecycle_mu_);
  std::atomic<int> port_{0};

  // Set by Start before the threads start and released by Shutdown after they
  // are joined; the threads read them without locking.
  Routes routes_;
  UniqueFd listen_fd_;
  // Shutdown writes a byte to wake_write_fd_ and never drains it, so
  // wake_read_fd_ stays readable and wakes every poll() that includes it.
  UniqueFd wake_read_fd_;
  UniqueFd wake_write_fd_;

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  Routes pending_routes_ ABSL_GUARDED_BY(mu_);
  bool routes_frozen_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<int> queue_ ABSL_GUARDED_BY(mu_);  // Owned descriptors.
};

}  // namespace psync::http

#endif  // PSYNC_SERVER_HTTP_SERVER_H_

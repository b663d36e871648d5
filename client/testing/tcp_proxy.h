// TcpProxy: a TCP forwarder on 127.0.0.1 (free port) in front of one upstream address, for tests
// that need the network between a client and the coordinator to fail.
//
// Every accepted connection is paired with a new connection to the upstream and bytes are copied
// both ways. BreakConnections() shuts every paired connection down (both sides see the connection
// drop, as after a network failure or a coordinator restart). BlackholeConnections() makes every
// current connection silently drop what it carries, both ways, without closing it (a half-open
// connection: a cut network or a frozen host). While refusing, new connections are accepted and
// closed at once (the coordinator is unreachable).
//
// Thread-safe. The destructor breaks every connection and joins the proxy's threads.
#ifndef PSYNC_CLIENT_TESTING_TCP_PROXY_H_
#define PSYNC_CLIENT_TESTING_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace psync::testing {

class TcpProxy {
 public:
  // `upstream` is "127.0.0.1:PORT" (IPv4 literal and port).
  static absl::StatusOr<std::unique_ptr<TcpProxy>> Start(const std::string& upstream);
  ~TcpProxy();

  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  // "127.0.0.1:PORT" of the proxy.
  std::string target() const;
  void BreakConnections() ABSL_LOCKS_EXCLUDED(mu_);
  void BlackholeConnections() ABSL_LOCKS_EXCLUDED(mu_);
  void SetRefusing(bool refusing) ABSL_LOCKS_EXCLUDED(mu_);
  // New connections go to `upstream` ("127.0.0.1:PORT") from now on (e.g. a restarted
  // coordinator on another port); current ones are left as they are. INVALID_ARGUMENT if malformed.
  absl::Status SetUpstream(const std::string& upstream) ABSL_LOCKS_EXCLUDED(mu_);
  int connections_accepted() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Link {
    int downstream = -1;
    int upstream = -1;
    std::atomic<bool> blackholed{false};
    std::thread to_upstream;
    std::thread to_downstream;
  };

  TcpProxy(int listen_fd, int port, std::string upstream_host, int upstream_port);
  void AcceptLoop();
  int ConnectUpstream() const ABSL_LOCKS_EXCLUDED(mu_);
  static void Pump(int from, int to, const std::atomic<bool>* blackholed);

  // Constant after construction.
  const int listen_fd_;
  const int port_;
  int wake_fds_[2] = {-1, -1};  // a pipe: a byte written stops AcceptLoop

  mutable absl::Mutex mu_;
  std::string upstream_host_ ABSL_GUARDED_BY(mu_);
  int upstream_port_ ABSL_GUARDED_BY(mu_);
  bool refusing_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int accepted_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<Link>> links_ ABSL_GUARDED_BY(mu_);

  std::thread acceptor_;
};

}  // namespace psync::testing

#endif  // PSYNC_CLIENT_TESTING_TCP_PROXY_H_

#include "client/testing/tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace psync::testing {
namespace {

absl::Status Errno(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TcpProxy>> TcpProxy::Start(const std::string& upstream) {
  const size_t colon = upstream.rfind(':');
  int upstream_port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(upstream.substr(colon + 1), &upstream_port)) {
    return absl::InvalidArgumentError(absl::StrCat("upstream '", upstream, "' is not HOST:PORT"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    absl::Status s = Errno("bind/listen");
    close(fd);
    return s;
  }
  std::unique_ptr<TcpProxy> proxy(
      new TcpProxy(fd, ntohs(addr.sin_port), upstream.substr(0, colon), upstream_port));
  if (pipe2(proxy->wake_fds_, O_CLOEXEC) != 0) return Errno("pipe2");
  proxy->acceptor_ = std::thread([p = proxy.get()] { p->AcceptLoop(); });
  return proxy;
}

TcpProxy::TcpProxy(int listen_fd, int port, std::string upstream_host, int upstream_port)
    : listen_fd_(listen_fd),
      port_(port),
      upstream_host_(std::move(upstream_host)),
      upstream_port_(upstream_port) {}

TcpProxy::~TcpProxy() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (wake_fds_[1] >= 0) {
    const char byte = 0;
    (void)!write(wake_fds_[1], &byte, 1);
  }
  if (acceptor_.joinable()) acceptor_.join();
  BreakConnections();
  std::vector<std::unique_ptr<Link>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(links_);
  }
  for (auto& link : links) {
    link->to_upstream.join();
    link->to_downstream.join();
    close(link->downstream);
    close(link->upstream);
  }
  close(listen_fd_);
  for (int fd : wake_fds_) {
    if (fd >= 0) close(fd);
  }
}

std::string TcpProxy::target() const { return absl::StrCat("127.0.0.1:", port_); }

void TcpProxy::BreakConnections() {
  absl::MutexLock lock(&mu_);
  for (auto& link : links_) {
    shutdown(link->downstream, SHUT_RDWR);
    shutdown(link->upstream, SHUT_RDWR);
  }
}

void TcpProxy::BlackholeConnections() {
  absl::MutexLock lock(&mu_);
  for (auto& link : links_) link->blackholed = true;
}

void TcpProxy::SetRefusing(bool refusing) {
  absl::MutexLock lock(&mu_);
  refusing_ = refusing;
}

int TcpProxy::connections_accepted() const {
  absl::MutexLock lock(&mu_);
  return accepted_;
}

absl::Status TcpProxy::SetUpstream(const std::string& upstream) {
  const size_t colon = upstream.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(upstream.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("upstream '", upstream, "' is not HOST:PORT"));
  }
  absl::MutexLock lock(&mu_);
  upstream_host_ = upstream.substr(0, colon);
  upstream_port_ = port;
  return absl::OkStatus();
}

int TcpProxy::ConnectUpstream() const {
  std::string host;
  int port;
  {
    absl::MutexLock lock(&mu_);
    host = upstream_host_;
    port = upstream_port_;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void TcpProxy::AcceptLoop() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    const int downstream = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (downstream < 0) continue;
    const int one = 1;
    setsockopt(downstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    bool refuse;
    {
      absl::MutexLock lock(&mu_);
      ++accepted_;
      refuse = refusing_ || stopping_;
    }
    const int upstream = refuse ? -1 : ConnectUpstream();
    if (upstream < 0) {
      close(downstream);
      continue;
    }
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    // Listed before any byte flows, so that BreakConnections() never misses it.
    absl::MutexLock lock(&mu_);
    links_.push_back(std::make_unique<Link>());
    Link& link = *links_.back();
    link.downstream = downstream;
    link.upstream = upstream;
    link.to_upstream = std::thread(&TcpProxy::Pump, downstream, upstream, &link.blackholed);
    link.to_downstream = std::thread(&TcpProxy::Pump, upstream, downstream, &link.blackholed);
  }
}

void TcpProxy::Pump(int from, int to, const std::atomic<bool>* blackholed) {
  char buffer[16384];
  while (true) {
    const ssize_t n = read(from, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (blackholed->load()) continue;
    ssize_t done = 0;
    while (done < n) {
      const ssize_t w = send(to, buffer + done, n - done, MSG_NOSIGNAL);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        shutdown(from, SHUT_RDWR);
        shutdown(to, SHUT_RDWR);
        return;
      }
      done += w;
    }
  }
  shutdown(to, SHUT_WR);
}

}  // namespace psync::testing

#include "server/http/socket_io.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace psync::http {
namespace {

absl::Status ErrnoError(absl::string_view what, int error) {
  return absl::UnavailableError(absl::StrCat(what, ": ", strerror(error)));
}

// Milliseconds for poll() until `deadline`, rounded up; -1 for no deadline.
int PollTimeoutMs(absl::Time deadline) {
  if (deadline == absl::InfiniteFuture()) return -1;
  absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  int64_t ms = absl::ToInt64Milliseconds(absl::Ceil(left, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
}

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

// Resolves `host`:`port` for a TCP socket. `passive` resolves an empty host
// to the wildcard address.
absl::StatusOr<AddrInfoPtr> Resolve(absl::string_view host, int port, bool passive) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port ", port, " is outside [0, 65535]"));
  }
  absl::string_view bare = host;
  if (absl::StartsWith(bare, "[") && absl::EndsWith(bare, "]")) {
    bare = bare.substr(1, bare.size() - 2);
  }
  std::string host_string(bare);
  std::string port_string = absl::StrCat(port);
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host_string.empty() ? nullptr : host_string.c_str(), port_string.c_str(),
                       &hints, &result);
  if (rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host \"", host, "\": ", gai_strerror(rc)));
  }
  return AddrInfoPtr(result);
}

}  // namespace

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) reset(other.release());
  return *this;
}

int UniqueFd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) close(fd_);
  fd_ = fd;
}

absl::Status SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return ErrnoError("fcntl(O_NONBLOCK)", errno);
  }
  int fd_flags = fcntl(fd, F_GETFD, 0);
  if (fd_flags < 0 || fcntl(fd, F_SETFD, fd_flags | FD_CLOEXEC) < 0) {
    return ErrnoError("fcntl(FD_CLOEXEC)", errno);
  }
  return absl::OkStatus();
}

absl::Status WaitReady(int fd, short events, absl::Time deadline, int cancel_fd) {
  while (true) {
    pollfd fds[2];
    fds[0].fd = fd;
    fds[0].events = events;
    fds[0].revents = 0;
    fds[1].fd = cancel_fd;  // poll() ignores negative descriptors.
    fds[1].events = POLLIN;
    fds[1].revents = 0;
    int rc = poll(fds, 2, PollTimeoutMs(deadline));
    if (rc < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("poll", errno);
    }
    if (cancel_fd >= 0 && fds[1].revents != 0) {
      return absl::CancelledError("cancelled");
    }
    if (fds[0].revents != 0) return absl::OkStatus();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError("socket deadline exceeded");
    }
  }
}

absl::StatusOr<size_t> ReadSome(int fd, char* buffer, size_t size, absl::Time deadline,
                                int cancel_fd) {
  while (true) {
    if (absl::Status status = WaitReady(fd, POLLIN, deadline, cancel_fd); !status.ok()) {
      return status;
    }
    ssize_t n = recv(fd, buffer, size, 0);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
    return ErrnoError("recv", errno);
  }
}

absl::Status WriteAll(int fd, absl::string_view data, absl::Time deadline, int cancel_fd) {
  while (!data.empty()) {
    ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return ErrnoError("send", errno);
    }
    if (absl::Status status = WaitReady(fd, POLLOUT, deadline, cancel_fd); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> Connect(absl::string_view host, int port, absl::Time deadline) {
  absl::StatusOr<AddrInfoPtr> addresses = Resolve(host, port, false);
  if (!addresses.ok()) {
    return absl::UnavailableError(addresses.status().message());
  }
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", host, ":", port));
  for (addrinfo* ai = addresses->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoError("socket", errno);
      continue;
    }
    if (absl::Status status = SetNonBlocking(fd.get()); !status.ok()) {
      return status;
    }
    if (connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = ErrnoError(absl::StrCat("connect to ", host, ":", port), errno);
        continue;
      }
      absl::Status ready = WaitReady(fd.get(), POLLOUT, deadline, -1);
      if (absl::IsDeadlineExceeded(ready)) {
        return absl::DeadlineExceededError(
            absl::StrCat("connect to ", host, ":", port, " timed out"));
      }
      if (!ready.ok()) return ready;
      int error = 0;
      socklen_t length = sizeof(error);
      if (getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
        error = errno;
      }
      if (error != 0) {
        last = ErrnoError(absl::StrCat("connect to ", host, ":", port), error);
        continue;
      }
    }
    int one = 1;
    setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
  }
  return last;
}

absl::StatusOr<UniqueFd> Listen(absl::string_view host, int port, int backlog) {
  absl::StatusOr<AddrInfoPtr> addresses = Resolve(host, port, true);
  if (!addresses.ok()) return addresses.status();
  absl::Status last = absl::UnavailableError(absl::StrCat("no address for ", host, ":", port));
  for (addrinfo* ai = addresses->get(); ai != nullptr; ai = ai->ai_next) {
    UniqueFd fd(socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol));
    if (!fd.valid()) {
      last = ErrnoError("socket", errno);
      continue;
    }
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      last = ErrnoError(absl::StrCat("bind to ", host, ":", port), errno);
      continue;
    }
    if (listen(fd.get(), backlog) != 0) {
      last = ErrnoError("listen", errno);
      continue;
    }
    if (absl::Status status = SetNonBlocking(fd.get()); !status.ok()) {
      return status;
    }
    return fd;
  }
  return last;
}

absl::StatusOr<int> LocalPort(int fd) {
  sockaddr_storage address;
  socklen_t length = sizeof(address);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    return ErrnoError("getsockname", errno);
  }
  if (address.ss_family == AF_INET) {
    return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  }
  if (address.ss_family == AF_INET6) {
    return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  }
  return absl::UnavailableError("socket is not an IP socket");
}

}  // namespace psync::http

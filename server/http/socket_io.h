// POSIX socket helpers with deadlines, shared by Server and the client.
//
// Every blocking call takes an absolute deadline and, where useful, a
// `cancel_fd`: a descriptor whose becoming readable aborts the wait (the
// server's shutdown pipe); -1 means none. Functions are thread-safe as long as
// no two threads use the same descriptor at once.
//
// Errors: DEADLINE_EXCEEDED when the deadline passes, CANCELLED when
// `cancel_fd` fires, INVALID_ARGUMENT for a bad host or port, UNAVAILABLE for
// any other socket error (the message carries strerror). On error, nothing is
// consumed from or guaranteed about the descriptor's stream position.

#ifndef PSYNC_SERVER_HTTP_SOCKET_IO_H_
#define PSYNC_SERVER_HTTP_SOCKET_IO_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psync::http {

// Owns a file descriptor and closes it on destruction. Move-only.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership and returns the descriptor.
  int release();
  // Closes the owned descriptor, if any, and takes ownership of `fd`.
  void reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Puts `fd` into non-blocking mode and sets close-on-exec.
absl::Status SetNonBlocking(int fd);

// Waits until `fd` is ready for `events` (POLLIN and/or POLLOUT), or an error
// or hang-up is pending on it (the following read or write reports it).
absl::Status WaitReady(int fd, short events, absl::Time deadline, int cancel_fd);

// Reads up to `size` bytes from the non-blocking socket `fd` into `buffer`.
// Returns the number of bytes read; 0 means the peer closed its side.
absl::StatusOr<size_t> ReadSome(int fd, char* buffer, size_t size, absl::Time deadline,
                                int cancel_fd = -1);

// Writes all of `data` to the non-blocking socket `fd`. Never raises SIGPIPE.
// On error, a prefix of `data` may have been sent.
absl::Status WriteAll(int fd, absl::string_view data, absl::Time deadline, int cancel_fd = -1);

// Connects a non-blocking TCP socket to `host`:`port`. `host` is a name or a
// numeric IPv4/IPv6 address ("[::1]" is accepted); every resolved address is
// tried in turn. Fails with UNAVAILABLE when none accepts the connection.
absl::StatusOr<UniqueFd> Connect(absl::string_view host, int port, absl::Time deadline);

// Creates a non-blocking TCP socket listening on `host`:`port`. An empty host,
// "0.0.0.0" or "::" listens on all interfaces; port 0 picks a free port (see
// LocalPort). Fails with INVALID_ARGUMENT for a port outside [0, 65535] or a
// host that does not resolve, and UNAVAILABLE when binding fails.
absl::StatusOr<UniqueFd> Listen(absl::string_view host, int port, int backlog);

// Returns the local port a socket is bound to.
absl::StatusOr<int> LocalPort(int fd);

}  // namespace psync::http

#endif  // PSYNC_SERVER_HTTP_SOCKET_IO_H_

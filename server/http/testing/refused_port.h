// BindRefusedPort: for tests of connection failures, a loopback TCP socket bound to a free port but
// not listening. Connecting to the port is refused, and while the socket is held nobody else can
// take the port. Errors: UNAVAILABLE naming the failed call. Thread-safe.
#ifndef PSYNC_SERVER_HTTP_TESTING_REFUSED_PORT_H_
#define PSYNC_SERVER_HTTP_TESTING_REFUSED_PORT_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/http/socket_io.h"

namespace psync::http {

// The socket; its port is LocalPort(socket.get()).
inline absl::StatusOr<UniqueFd> BindRefusedPort() {
  UniqueFd bound(socket(AF_INET, SOCK_STREAM, 0));
  if (!bound.valid()) return absl::UnavailableError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  if (bind(bound.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return absl::UnavailableError(absl::StrCat("bind: ", strerror(errno)));
  }
  return bound;
}

}  // namespace psync::http

#endif  // PSYNC_SERVER_HTTP_TESTING_REFUSED_PORT_H_

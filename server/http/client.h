// A tiny blocking HTTP/1.1 client for tests and the command-line tool.
//
// Each call opens one connection, sends one request with
// "Connection: close", reads the whole response and closes. Thread-safe:
// calls share no state. Responses are returned whatever their HTTP status
// (a 404 is an OK StatusOr holding status 404).
//
// Errors: INVALID_ARGUMENT for a path that is not "/..." or contains
// whitespace or control characters; UNAVAILABLE when the server cannot be
// reached or drops the connection; DEADLINE_EXCEEDED when the whole exchange
// takes longer than ClientOptions::timeout; RESOURCE_EXHAUSTED when the
// response exceeds max_response_bytes; INTERNAL for a malformed response;
// UNIMPLEMENTED for a chunked response.

#ifndef PSYNC_SERVER_HTTP_CLIENT_H_
#define PSYNC_SERVER_HTTP_CLIENT_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/http/message.h"

namespace psync::http {

struct ClientOptions {
  // Limit for the whole exchange: connect, send, receive.
  absl::Duration timeout = absl::Seconds(10);
  // Largest response (head + body) accepted.
  size_t max_response_bytes = 64 << 20;
};

// GET http://host:port/path. `path` may carry a query ("/api?job=a").
absl::StatusOr<Response> Get(absl::string_view host, int port, absl::string_view path,
                             const ClientOptions& options = ClientOptions());

// Like Get, with any method (for HEAD the body is empty).
absl::StatusOr<Response> Fetch(absl::string_view host, int port, absl::string_view method,
                               absl::string_view path,
                               const ClientOptions& options = ClientOptions());

// Sends `raw_request` verbatim and returns every byte received until the
// server closes the connection. For tests of malformed input.
absl::StatusOr<std::string> Exchange(absl::string_view host, int port,
                                     absl::string_view raw_request,
                                     const ClientOptions& options = ClientOptions());

// Parses a complete response. With `head_request`, the body is empty whatever
// the header fields say. Errors: INTERNAL for a malformed status line or
// header field or a body shorter than its Content-Length, UNIMPLEMENTED for
// chunked transfer coding.
absl::StatusOr<Response> ParseResponse(absl::string_view raw, bool head_request);

}  // namespace psync::http

#endif  // PSYNC_SERVER_HTTP_CLIENT_H_

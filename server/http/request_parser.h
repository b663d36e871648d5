// Pure parsing of HTTP/1.x request heads and of URL-encoded text.
//
// Stateless functions with no I/O: safe to call from any thread. Errors are
// absl::Status values whose code tells the server which status to answer:
// INVALID_ARGUMENT means a malformed request (400 Bad Request) and
// UNIMPLEMENTED an HTTP major version other than 1 (505). Messages name the
// offending part of the input.

#ifndef PSYNC_SERVER_HTTP_REQUEST_PARSER_H_
#define PSYNC_SERVER_HTTP_REQUEST_PARSER_H_

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/http/message.h"

namespace psync::http {

// Returns the offset just past the empty line that ends the request head in
// `buffer` (after "\r\n\r\n" or "\n\n"), or absl::string_view::npos when the
// head is not complete yet. Empty lines before the request line are skipped,
// as RFC 9112 section 2.2 asks.
size_t FindHeadEnd(absl::string_view buffer);

// Returns false when `buffer`, the first bytes received on a connection, can
// no longer become a valid request: its first byte after any empty lines is
// not a method character (e.g. a TLS handshake sent to the plain-text port).
// Lets the server answer 400 without waiting for a head that never ends.
bool CouldStartRequest(absl::string_view buffer);

// Parses a request head: the request line, then one header field per line,
// optionally followed by the empty line. Lines end in "\r\n" or "\n".
// Accepts origin-form ("/a?b") and absolute-form ("http://h/a?b") targets.
// Rejects: a malformed request line, a method that is not a token, control
// characters in the target, a bad percent escape, a NUL byte or a ".."
// segment in the decoded path, malformed or folded header lines, and an
// HTTP/1.1 request without a Host field.
absl::StatusOr<Request> ParseRequestHead(absl::string_view head);

// Decodes %XX escapes in `text`; with `plus_as_space`, '+' becomes ' '.
// Returns INVALID_ARGUMENT for a truncated or non-hex escape.
absl::StatusOr<std::string> UrlDecode(absl::string_view text, bool plus_as_space);

// Parses a query string such as "job=a%20b&verbose" (no leading '?'). A name
// without '=' maps to "". The first occurrence of a name wins. Returns
// INVALID_ARGUMENT for a bad escape.
absl::StatusOr<absl::flat_hash_map<std::string, std::string>> ParseQuery(absl::string_view query);

}  // namespace psync::http

#endif  // PSYNC_SERVER_HTTP_REQUEST_PARSER_H_

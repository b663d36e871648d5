// HTTP request and response values exchanged between psync::http::Server, its
// handlers and the blocking client in client.h.
//
// Plain copyable values with no internal synchronization: a value may be read
// from several threads at once, but writes need external locking. Nothing here
// fails; parsing and its errors live in request_parser.h and client.h.

#ifndef PSYNC_SERVE_HTTP_MESSAGE_H_
#define PSYNC_SERVE_HTTP_MESSAGE_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace psync::http {

// A parsed request head. Requests served by Server carry no body: only GET and
// HEAD reach handlers.
struct Request {
  std::string method;   // As sent, e.g. "GET" or "HEAD".
  std::string target;   // The raw request target, e.g. "/api/jobs?job=a%20b".
  std::string path;     // Percent-decoded path; always starts with '/'.
  std::string version;  // "HTTP/1.0" or "HTTP/1.1".
  // Percent-decoded query parameters ('+' decodes to a space). When a name
  // repeats, the first occurrence wins.
  absl::flat_hash_map<std::string, std::string> query;
  // Header fields keyed by lower-case name. Repeated fields are joined with
  // ", " in arrival order.
  absl::flat_hash_map<std::string, std::string> headers;

  // Returns the query value for `name`, or `default_value` when absent.
  std::string QueryParam(absl::string_view name, absl::string_view default_value = "") const;
  // Returns the value of header `name` (matched case-insensitively), or "".
  std::string Header(absl::string_view name) const;
};

// A response produced by a handler (server side) or received by the client.
struct Response {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // Server side: extra header fields to send. Content-Type, Content-Length,
  // Connection and Date are set by the server and ignored here, as is any
  // field whose name or value contains CR or LF.
  // Client side: every header field received, names as sent.
  std::vector<std::pair<std::string, std::string>> headers;

  // Returns the value of the first header `name` (case-insensitive), or "".
  std::string Header(absl::string_view name) const;

  // A text/plain response.
  static Response Text(int status, std::string body);
  // An application/json response; `body` must already be JSON.
  static Response Json(int status, std::string body);
  // A text/plain response whose body is "<status> <reason phrase>\n".
  static Response Error(int status);
};

// Produces the response to one request. Called concurrently from the server's
// worker threads, so it must be thread-safe, and it should return promptly:
// Server::Shutdown() waits for running handlers.
using Handler = std::function<Response(const Request&)>;

// The standard reason phrase for `status` ("Not Found"), or "Unknown".
absl::string_view ReasonPhrase(int status);

}  // namespace psync::http

#endif  // PSYNC_SERVE_HTTP_MESSAGE_H_

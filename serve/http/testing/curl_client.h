// A blocking HTTP(S) client for tests, over libcurl: one request per call, on a new connection.
//
// Returns the response whatever its HTTP status (a 404 is an OK StatusOr holding status 404).
// Errors: UNAVAILABLE when the request could not be made or no complete response came back
// (connection refused or reset, TLS handshake failed, timeout), with curl's message.
// Thread-safe: calls share no state (curl_global_init runs once, on first use).
#ifndef PSYNC_SERVE_HTTP_TESTING_CURL_CLIENT_H_
#define PSYNC_SERVE_HTTP_TESTING_CURL_CLIENT_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "serve/http/message.h"

namespace psync::http::testing {

struct CurlOptions {
  std::string method = "GET";  // "HEAD" asks without a body.
  // Extra request header lines, e.g. "Authorization: Bearer t".
  std::vector<std::string> headers;
  // HTTPS: a PEM file of CAs to verify the server with (verification is on by default).
  std::string ca_file;
  absl::Duration timeout = absl::Seconds(10);
};

struct CurlResponse {
  Response response;  // status, body, content_type, every header received
  bool tls = false;   // the exchange ran over TLS (the URL's scheme was https)
};

absl::StatusOr<CurlResponse> CurlFetch(const std::string& url,
                                       const CurlOptions& options = CurlOptions());

// GET `url`; the Response alone.
absl::StatusOr<Response> CurlGet(const std::string& url, std::vector<std::string> headers = {});

}  // namespace psync::http::testing

#endif  // PSYNC_SERVE_HTTP_TESTING_CURL_CLIENT_H_

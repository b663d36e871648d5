#include "server/http/client.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "server/http/request_parser.h"
#include "server/http/socket_io.h"

namespace psync::http {
namespace {

constexpr size_t kReadChunk = 16 * 1024;

absl::Status ValidatePath(absl::string_view path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("path \"", path, "\" must start with '/'"));
  }
  for (char c : path) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          "path \"", absl::CEscape(path), "\" contains whitespace or a control character"));
    }
  }
  return absl::OkStatus();
}

std::string HostHeader(absl::string_view host, int port) {
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// Returns the Content-Length announced in a response head, if any.
std::optional<size_t> ContentLength(absl::string_view head) {
  for (absl::string_view line : absl::StrSplit(head, '\n')) {
    absl::string_view name = line.substr(0, line.find(':'));
    if (name.size() == line.size()) continue;
    if (!absl::EqualsIgnoreCase(name, "content-length")) continue;
    size_t length;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(name.size() + 1)), &length)) {
      return length;
    }
  }
  return std::nullopt;
}

// Sends `request` and reads the response. Stops reading once the head and
// Content-Length bytes of body have arrived (or just the head for HEAD),
// else at end of input.
absl::StatusOr<std::string> RoundTrip(absl::string_view host, int port, absl::string_view request,
                                      bool head_request, bool stop_at_content_length,
                                      const ClientOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  absl::StatusOr<UniqueFd> fd = Connect(host, port, deadline);
  if (!fd.ok()) return fd.status();
  if (absl::Status status = WriteAll(fd->get(), request, deadline); !status.ok()) {
    // The server may answer and close before reading everything (e.g. 431),
    // so a failed write is not yet an error: read what it sent.
    if (absl::IsDeadlineExceeded(status)) return status;
  }
  std::string response;
  while (true) {
    if (stop_at_content_length) {
      size_t head_end = FindHeadEnd(response);
      if (head_end != absl::string_view::npos) {
        if (head_request) break;
        std::optional<size_t> length =
            ContentLength(absl::string_view(response).substr(0, head_end));
        if (length.has_value() && response.size() >= head_end + *length) {
          break;
        }
      }
    }
    if (response.size() > options.max_response_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "response from ", host, ":", port, " exceeds ", options.max_response_bytes, " bytes"));
    }
    size_t old_size = response.size();
    response.resize(old_size + kReadChunk);
    absl::StatusOr<size_t> n = ReadSome(fd->get(), &response[old_size], kReadChunk, deadline);
    response.resize(old_size + (n.ok() ? *n : 0));
    if (!n.ok()) {
      if (absl::IsDeadlineExceeded(n.status())) {
        return absl::DeadlineExceededError(absl::StrCat("no complete response from ", host, ":",
                                                        port, " within ",
                                                        absl::FormatDuration(options.timeout)));
      }
      if (response.empty()) return n.status();
      break;  // Reset after some data: parse what arrived.
    }
    if (*n == 0) break;
  }
  return response;
}

}  // namespace

absl::StatusOr<Response> Get(absl::string_view host, int port, absl::string_view path,
                             const ClientOptions& options) {
  return Fetch(host, port, "GET", path, options);
}

absl::StatusOr<Response> Fetch(absl::string_view host, int port, absl::string_view method,
                               absl::string_view path, const ClientOptions& options) {
  if (absl::Status status = ValidatePath(path); !status.ok()) return status;
  if (method.empty() || absl::StrContains(method, ' ') || absl::StrContains(method, '\r') ||
      absl::StrContains(method, '\n')) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid method \"", absl::CEscape(method), "\""));
  }
  std::string request =
      absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: ", HostHeader(host, port),
                   "\r\nUser-Agent: psync\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  const bool head_request = method == "HEAD";
  absl::StatusOr<std::string> raw = RoundTrip(host, port, request, head_request,
                                              /*stop_at_content_length=*/true, options);
  if (!raw.ok()) return raw.status();
  if (raw->empty()) {
    return absl::UnavailableError(
        absl::StrCat(host, ":", port, " closed the connection without a response"));
  }
  return ParseResponse(*raw, head_request);
}

absl::StatusOr<std::string> Exchange(absl::string_view host, int port,
                                     absl::string_view raw_request, const ClientOptions& options) {
  return RoundTrip(host, port, raw_request, /*head_request=*/false,
                   /*stop_at_content_length=*/false, options);
}

absl::StatusOr<Response> ParseResponse(absl::string_view raw, bool head_request) {
  size_t head_end = FindHeadEnd(raw);
  if (head_end == absl::string_view::npos) {
    return absl::InternalError("response head is incomplete");
  }
  absl::string_view head = raw.substr(0, head_end);
  absl::string_view body = raw.substr(head_end);
  std::vector<absl::string_view> lines;
  for (absl::string_view line : absl::StrSplit(head, '\n')) {
    absl::ConsumeSuffix(&line, "\r");
    if (!line.empty()) lines.push_back(line);
  }
  // status-line = HTTP-version SP status-code SP [ reason-phrase ]
  absl::string_view status_line = lines.empty() ? "" : lines[0];
  Response response;
  response.content_type.clear();
  if (!absl::StartsWith(status_line, "HTTP/1.") || status_line.size() < 12 ||
      status_line[8] != ' ' || (status_line.size() > 12 && status_line[12] != ' ') ||
      !absl::SimpleAtoi(status_line.substr(9, 3), &response.status) || response.status < 100) {
    return absl::InternalError(
        absl::StrCat("malformed status line \"", absl::CEscape(status_line.substr(0, 64)), "\""));
  }
  bool chunked = false;
  std::optional<size_t> content_length;
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      return absl::InternalError(
          absl::StrCat("malformed header line \"", absl::CEscape(lines[i].substr(0, 64)), "\""));
    }
    std::string name(lines[i].substr(0, colon));
    std::string value(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
    if (absl::EqualsIgnoreCase(name, "content-type")) {
      response.content_type = value;
    } else if (absl::EqualsIgnoreCase(name, "transfer-encoding") &&
               !absl::EqualsIgnoreCase(value, "identity")) {
      chunked = true;
    } else if (absl::EqualsIgnoreCase(name, "content-length")) {
      size_t length;
      if (!absl::SimpleAtoi(value, &length)) {
        return absl::InternalError(absl::StrCat("malformed Content-Length \"", value, "\""));
      }
      content_length = length;
    }
    response.headers.emplace_back(std::move(name), std::move(value));
  }
  const bool has_body =
      !head_request && response.status >= 200 && response.status != 204 && response.status != 304;
  if (!has_body) return response;
  if (chunked) {
    return absl::UnimplementedError("chunked responses are not supported");
  }
  if (content_length.has_value()) {
    if (body.size() < *content_length) {
      return absl::InternalError(absl::StrCat("response body has ", body.size(), " of ",
                                              *content_length, " bytes announced"));
    }
    body = body.substr(0, *content_length);
  }
  response.body = std::string(body);
  return response;
}

}  // namespace psync::http

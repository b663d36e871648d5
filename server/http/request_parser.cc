#include "server/http/request_parser.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psync::http {
namespace {

// RFC 9110 section 5.6.2: tchar.
bool IsTokenChar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  return absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view text) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Splits `head` into lines ending in "\n" or "\r\n", dropping the empty line
// that ends the head and anything after it.
std::vector<absl::string_view> SplitLines(absl::string_view head) {
  std::vector<absl::string_view> lines;
  while (!head.empty()) {
    size_t newline = head.find('\n');
    absl::string_view line = head.substr(0, newline);
    head = newline == absl::string_view::npos ? absl::string_view() : head.substr(newline + 1);
    absl::ConsumeSuffix(&line, "\r");
    if (line.empty()) {
      if (lines.empty()) continue;  // Leading empty lines are tolerated.
      break;
    }
    lines.push_back(line);
  }
  return lines;
}

absl::Status ParseVersion(absl::string_view version) {
  // HTTP-version = "HTTP/" DIGIT "." DIGIT
  if (version.size() != 8 || !absl::StartsWith(version, "HTTP/") ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[5])) || version[6] != '.' ||
      !absl::ascii_isdigit(static_cast<unsigned char>(version[7]))) {
    return absl::InvalidArgumentError(absl::StrCat("malformed HTTP version \"", version, "\""));
  }
  if (version[5] != '1') {
    return absl::UnimplementedError(absl::StrCat("unsupported HTTP version \"", version, "\""));
  }
  return absl::OkStatus();
}

absl::Status ParseTarget(absl::string_view target, Request* request) {
  for (char c : target) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError("request target contains a control character");
    }
  }
  absl::string_view rest = target;
  // absolute-form: scheme "://" authority path-abempty [ "?" query ]
  if (absl::StartsWithIgnoreCase(rest, "http://") || absl::StartsWithIgnoreCase(rest, "https://")) {
    rest.remove_prefix(rest.find("://") + 3);
    size_t path_start = rest.find_first_of("/?#");
    rest = path_start == absl::string_view::npos ? absl::string_view() : rest.substr(path_start);
  } else if (rest.empty() || rest[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("request target \"", target, "\" must start with '/'"));
  }
  size_t fragment = rest.find('#');
  if (fragment != absl::string_view::npos) rest = rest.substr(0, fragment);
  size_t question = rest.find('?');
  absl::string_view raw_path = rest.substr(0, question);
  absl::string_view raw_query =
      question == absl::string_view::npos ? absl::string_view() : rest.substr(question + 1);
  if (raw_path.empty()) {
    request->path = "/";  // An absolute-form target may omit the path.
  } else {
    absl::StatusOr<std::string> path = UrlDecode(raw_path, false);
    if (!path.ok()) return path.status();
    request->path = *std::move(path);
  }
  if (request->path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("request path contains a NUL byte");
  }
  for (absl::string_view segment : absl::StrSplit(request->path, '/')) {
    if (segment == "..") {
      return absl::InvalidArgumentError("request path contains a \"..\" segment");
    }
  }
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> query = ParseQuery(raw_query);
  if (!query.ok()) return query.status();
  request->query = *std::move(query);
  request->target = std::string(target);
  return absl::OkStatus();
}

absl::Status ParseHeaderLine(absl::string_view line, Request* request) {
  if (line[0] == ' ' || line[0] == '\t') {
    return absl::InvalidArgumentError("obsolete line folding in header fields is not accepted");
  }
  size_t colon = line.find(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("header line without ':': \"", absl::CEscape(line.substr(0, 64)), "\""));
  }
  absl::string_view name = line.substr(0, colon);
  if (!IsToken(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid header field name \"", absl::CEscape(name.substr(0, 64)), "\""));
  }
  absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
  for (char c : value) {
    unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && u != '\t') || u == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat("header field \"", name, "\" contains a control character"));
    }
  }
  std::string key = absl::AsciiStrToLower(name);
  auto [it, inserted] = request->headers.try_emplace(key, value);
  if (!inserted) absl::StrAppend(&it->second, ", ", value);
  return absl::OkStatus();
}

}  // namespace

size_t FindHeadEnd(absl::string_view buffer) {
  size_t start = 0;
  while (start < buffer.size() && (buffer[start] == '\r' || buffer[start] == '\n')) {
    ++start;
  }
  for (size_t i = buffer.find('\n', start); i != absl::string_view::npos;
       i = buffer.find('\n', i + 1)) {
    if (i + 1 < buffer.size() && buffer[i + 1] == '\n') return i + 2;
    if (i + 2 < buffer.size() && buffer[i + 1] == '\r' && buffer[i + 2] == '\n') {
      return i + 3;
    }
  }
  return absl::string_view::npos;
}

bool CouldStartRequest(absl::string_view buffer) {
  for (char c : buffer) {
    if (c == '\r' || c == '\n') continue;
    return IsTokenChar(c);
  }
  return true;
}

absl::StatusOr<Request> ParseRequestHead(absl::string_view head) {
  std::vector<absl::string_view> lines = SplitLines(head);
  if (lines.empty()) return absl::InvalidArgumentError("empty request");
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("malformed request line \"",
                                                   absl::CEscape(lines[0].substr(0, 64)),
                                                   "\": expected \"METHOD TARGET HTTP/1.x\""));
  }
  Request request;
  if (!IsToken(parts[0])) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid method \"", absl::CEscape(parts[0].substr(0, 32)), "\""));
  }
  if (absl::Status status = ParseVersion(parts[2]); !status.ok()) {
    return status;
  }
  request.method = std::string(parts[0]);
  request.version = std::string(parts[2]);
  if (absl::Status status = ParseTarget(parts[1], &request); !status.ok()) {
    return status;
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    if (absl::Status status = ParseHeaderLine(lines[i], &request); !status.ok()) {
      return status;
    }
  }
  if (request.version == "HTTP/1.1" && !request.headers.contains("host")) {
    return absl::InvalidArgumentError("HTTP/1.1 request without Host field");
  }
  return request;
}

absl::StatusOr<std::string> UrlDecode(absl::string_view text, bool plus_as_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      int high = i + 1 < text.size() ? HexValue(text[i + 1]) : -1;
      int low = i + 2 < text.size() ? HexValue(text[i + 2]) : -1;
      if (high < 0 || low < 0) {
        return absl::InvalidArgumentError(absl::StrCat("bad percent escape at offset ", i, " in \"",
                                                       absl::CEscape(text.substr(0, 64)), "\""));
      }
      out.push_back(static_cast<char>(high * 16 + low));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, std::string>> ParseQuery(absl::string_view query) {
  absl::flat_hash_map<std::string, std::string> params;
  for (absl::string_view pair : absl::StrSplit(query, '&', absl::SkipEmpty())) {
    size_t equals = pair.find('=');
    absl::StatusOr<std::string> name = UrlDecode(pair.substr(0, equals), true);
    if (!name.ok()) return name.status();
    std::string value;
    if (equals != absl::string_view::npos) {
      absl::StatusOr<std::string> decoded = UrlDecode(pair.substr(equals + 1), true);
      if (!decoded.ok()) return decoded.status();
      value = *std::move(decoded);
    }
    params.try_emplace(*std::move(name), std::move(value));
  }
  return params;
}

}  // namespace psync::http

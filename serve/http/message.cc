#include "serve/http/message.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psync::http {

std::string Request::QueryParam(absl::string_view name, absl::string_view default_value) const {
  auto it = query.find(name);
  return it == query.end() ? std::string(default_value) : it->second;
}

std::string Request::Header(absl::string_view name) const {
  auto it = headers.find(absl::AsciiStrToLower(name));
  return it == headers.end() ? std::string() : it->second;
}

std::string Response::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return std::string();
}

Response Response::Text(int status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

Response Response::Json(int status, std::string body) {
  Response response;
  response.status = status;
  response.content_type = "application/json";
  response.body = std::move(body);
  return response;
}

Response Response::Error(int status) {
  return Text(status, absl::StrCat(status, " ", ReasonPhrase(status), "\n"));
}

absl::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 301:
      return "Moved Permanently";
    case 302:
      return "Found";
    case 304:
      return "Not Modified";
    case 307:
      return "Temporary Redirect";
    case 308:
      return "Permanent Redirect";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

}  // namespace psync::http

#include "serve/http/testing/curl_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psync::http::testing {
namespace {

size_t AppendBody(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

size_t AppendHeader(char* data, size_t size, size_t count, void* out) {
  absl::string_view line(data, size * count);
  const size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    static_cast<Response*>(out)->headers.emplace_back(
        std::string(absl::StripAsciiWhitespace(line.substr(0, colon))),
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return size * count;
}

}  // namespace

absl::StatusOr<CurlResponse> CurlFetch(const std::string& url, const CurlOptions& options) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  std::unique_ptr<CURL, void (*)(CURL*)> curl(curl_easy_init(), curl_easy_cleanup);
  if (curl == nullptr) return absl::UnavailableError("curl_easy_init failed");
  CurlResponse out;
  curl_slist* headers = nullptr;
  for (const std::string& h : options.headers) headers = curl_slist_append(headers, h.c_str());
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> header_list(headers, curl_slist_free_all);
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PATH_AS_IS, 1L);  // send "/a/../b" as is
  curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(absl::ToInt64Milliseconds(options.timeout)));
  if (options.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (options.method != "GET") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, options.method.c_str());
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &out.response.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, AppendHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &out.response);
  if (!options.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options.ca_file.c_str());
  if (const CURLcode code = curl_easy_perform(c); code != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat(url, ": ", curl_easy_strerror(code)));
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  out.response.status = static_cast<int>(status);
  char* scheme = nullptr;
  curl_easy_getinfo(c, CURLINFO_SCHEME, &scheme);
  out.tls = scheme != nullptr && absl::EqualsIgnoreCase(scheme, "https");
  out.response.content_type = out.response.Header("Content-Type");
  return out;
}

absl::StatusOr<Response> CurlGet(const std::string& url, std::vector<std::string> headers) {
  CurlOptions options;
  options.headers = std::move(headers);
  absl::StatusOr<CurlResponse> out = CurlFetch(url, options);
  if (!out.ok()) return out.status();
  return std::move(out->response);
}

}  // namespace psync::http::testing

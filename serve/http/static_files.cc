#include "serve/http/static_files.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psync::http {

Handler ServeEmbeddedFiles(absl::Span<const EmbeddedFile> files, absl::string_view mount) {
  std::string prefix(mount);
  if (prefix.empty() || prefix.back() != '/') prefix += '/';
  using FileMap = absl::flat_hash_map<std::string, const EmbeddedFile*>;
  FileMap map;
  for (const EmbeddedFile& file : files) {
    map.try_emplace(absl::StrCat(prefix, file.path), &file);
  }
  auto by_path = std::make_shared<const FileMap>(std::move(map));
  return [by_path](const Request& request) {
    std::string path = request.path;
    if (!path.empty() && path.back() == '/') path += "index.html";
    auto it = by_path->find(path);
    if (it == by_path->end()) return Response::Error(404);
    Response response;
    response.status = 200;
    response.content_type = it->second->content_type;
    response.body = std::string(it->second->bytes());
    response.headers.emplace_back("Cache-Control", "no-cache");
    response.headers.emplace_back("X-Content-Type-Options", "nosniff");
    return response;
  };
}

}  // namespace psync::http

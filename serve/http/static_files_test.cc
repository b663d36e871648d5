#include "serve/http/static_files.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "serve/http/server.h"
#include "serve/http/test_assets.h"
#include "serve/http/testing/curl_client.h"

namespace psync::http {
namespace {

using ::psync::http::testing::Files;
using ::psync::http::testing::kFiles;
using ::psync::http::testing::kNumFiles;

// Reads a data file from the test's runfiles (the working directory).
std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

absl::flat_hash_map<std::string, const EmbeddedFile*> ByPath() {
  absl::flat_hash_map<std::string, const EmbeddedFile*> by_path;
  for (const EmbeddedFile& file : Files()) by_path[file.path] = &file;
  return by_path;
}

TEST(EmbedFilesTest, TableHoldsEveryFileWithPathAndType) {
  EXPECT_EQ(kNumFiles, 5u);
  EXPECT_EQ(Files().data(), kFiles);
  auto by_path = ByPath();
  ASSERT_EQ(by_path.size(), 5u);
  ASSERT_TRUE(by_path.contains("index.html"));
  ASSERT_TRUE(by_path.contains("app.js"));
  ASSERT_TRUE(by_path.contains("css/site.css"));
  ASSERT_TRUE(by_path.contains("empty.txt"));
  ASSERT_TRUE(by_path.contains("all_bytes.bin"));
  EXPECT_STREQ(by_path["index.html"]->content_type, "text/html; charset=utf-8");
  EXPECT_STREQ(by_path["app.js"]->content_type, "text/javascript; charset=utf-8");
  EXPECT_STREQ(by_path["css/site.css"]->content_type, "text/css; charset=utf-8");
  EXPECT_STREQ(by_path["empty.txt"]->content_type, "text/plain; charset=utf-8");
  EXPECT_STREQ(by_path["all_bytes.bin"]->content_type, "application/octet-stream");
}

TEST(EmbedFilesTest, BytesMatchTheSourceFiles) {
  auto by_path = ByPath();
  for (const char* name : {"index.html", "app.js", "css/site.css"}) {
    EXPECT_EQ(by_path[name]->bytes(), ReadFile(std::string("serve/http/testdata/static/") + name))
        << name;
  }
  EXPECT_EQ(by_path["empty.txt"]->size, 0u);
  EXPECT_EQ(by_path["empty.txt"]->data[0], 0);  // NUL-terminated.
}

TEST(EmbedFilesTest, BinaryContentIsExact) {
  const EmbeddedFile* file = ByPath()["all_bytes.bin"];
  ASSERT_EQ(file->size, 256u);
  for (int i = 0; i < 256; ++i) {
    EXPECT_EQ(file->data[i], i) << "byte " << i;
  }
}

Request RequestFor(const std::string& path) {
  Request request;
  request.method = "GET";
  request.path = path;
  return request;
}

TEST(ServeEmbeddedFilesTest, ServesFilesAndDirectoryIndex) {
  Handler handler = ServeEmbeddedFiles(Files(), "/");
  Response response = handler(RequestFor("/app.js"));
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(response.body, "console.log(\"psync\");\n");
  EXPECT_EQ(response.Header("X-Content-Type-Options"), "nosniff");
  EXPECT_EQ(response.Header("Cache-Control"), "no-cache");

  response = handler(RequestFor("/"));
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.content_type, "text/html; charset=utf-8");
  EXPECT_NE(response.body.find("dashboard"), std::string::npos);

  EXPECT_EQ(handler(RequestFor("/css/site.css")).status, 200);
  EXPECT_EQ(handler(RequestFor("/css/")).status, 404);  // No index there.
  EXPECT_EQ(handler(RequestFor("/missing.js")).status, 404);
  EXPECT_EQ(handler(RequestFor("/APP.JS")).status, 404);
}

TEST(ServeEmbeddedFilesTest, ServesBelowAMount) {
  Handler handler = ServeEmbeddedFiles(Files(), "/ui");  // '/' is added.
  EXPECT_EQ(handler(RequestFor("/ui/app.js")).status, 200);
  EXPECT_EQ(handler(RequestFor("/ui/")).status, 200);
  EXPECT_EQ(handler(RequestFor("/app.js")).status, 404);
}

TEST(ServeEmbeddedFilesTest, EmptyTableServesNothing) {
  Handler handler = ServeEmbeddedFiles({}, "/");
  EXPECT_EQ(handler(RequestFor("/")).status, 404);
}

TEST(ServeEmbeddedFilesTest, ServedOverHttpIncludingBinary) {
  Server server;
  ASSERT_TRUE(server.HandlePrefix("/ui/", ServeEmbeddedFiles(Files(), "/ui/")).ok());
  ASSERT_TRUE(server.Start("127.0.0.1", 0).ok());
  absl::StatusOr<Response> response =
      testing::CurlGet(absl::StrCat("http://127.0.0.1:", server.port(), "/ui/all_bytes.bin"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->content_type, "application/octet-stream");
  EXPECT_EQ(response->body, ByPath()["all_bytes.bin"]->bytes());

  // Dot segments are not resolved: only the table's own paths are ever served.
  response = testing::CurlGet(absl::StrCat("http://127.0.0.1:", server.port(), "/ui/../secret"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
  EXPECT_EQ(response->body, "404 Not Found\n");
}

}  // namespace
}  // namespace psync::http

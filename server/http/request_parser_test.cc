#include "server/http/request_parser.h"

#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace psync::http {
namespace {

TEST(FindHeadEndTest, FindsCrlfAndLfTerminators) {
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r\nbody"), 27u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.0\n\nrest"), 16u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n"), absl::string_view::npos);
  EXPECT_EQ(FindHeadEnd(""), absl::string_view::npos);
}

TEST(FindHeadEndTest, SkipsLeadingEmptyLines) {
  EXPECT_EQ(FindHeadEnd("\r\n\r\n"), absl::string_view::npos);
  EXPECT_EQ(FindHeadEnd("\r\nGET / HTTP/1.0\r\n\r\n"), 20u);
}

TEST(CouldStartRequestTest, RejectsNonTokenFirstByte) {
  EXPECT_TRUE(CouldStartRequest(""));
  EXPECT_TRUE(CouldStartRequest("G"));
  EXPECT_TRUE(CouldStartRequest("\r\nGET / HT"));
  EXPECT_FALSE(CouldStartRequest(std::string("\x16\x03\x01", 3)));
  EXPECT_FALSE(CouldStartRequest(std::string("\0GET", 4)));
  EXPECT_FALSE(CouldStartRequest(" GET / HTTP/1.1"));
}

TEST(ParseRequestHeadTest, ParsesRequestLineHeadersAndQuery) {
  absl::StatusOr<Request> request = ParseRequestHead(
      "GET /api/jobs%2Fx?job=a%20b&verbose&n=1+2&job=second HTTP/1.1\r\n"
      "Host: localhost:8080\r\n"
      "Accept:  text/plain \r\n"
      "X-Tag: one\r\n"
      "x-tag: two\r\n"
      "\r\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->method, "GET");
  EXPECT_EQ(request->version, "HTTP/1.1");
  EXPECT_EQ(request->target, "/api/jobs%2Fx?job=a%20b&verbose&n=1+2&job=second");
  EXPECT_EQ(request->path, "/api/jobs/x");
  EXPECT_EQ(request->QueryParam("job"), "a b");  // First occurrence wins.
  EXPECT_EQ(request->QueryParam("n"), "1 2");
  EXPECT_TRUE(request->query.contains("verbose"));
  EXPECT_EQ(request->QueryParam("verbose", "absent"), "");
  EXPECT_EQ(request->Header("host"), "localhost:8080");
  EXPECT_EQ(request->Header("Accept"), "text/plain");
  EXPECT_EQ(request->Header("X-Tag"), "one, two");
}

TEST(ParseRequestHeadTest, AcceptsAbsoluteFormAndHttp10WithoutHost) {
  absl::StatusOr<Request> request =
      ParseRequestHead("GET http://example.com:9/metrics?x=1 HTTP/1.0\n\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->path, "/metrics");
  EXPECT_EQ(request->QueryParam("x"), "1");

  request = ParseRequestHead("GET http://example.com HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->path, "/");
}

TEST(ParseRequestHeadTest, PlusInPathIsLiteral) {
  absl::StatusOr<Request> request = ParseRequestHead("GET /a+b HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->path, "/a+b");
}

TEST(ParseRequestHeadTest, RejectsMalformedInput) {
  const char* const kBad[] = {
      "",
      "garbage",
      "GET /\r\n\r\n",
      "GET / HTTP/1.1 extra\r\nHost: a\r\n\r\n",
      "GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
      "G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET index.html HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET / HTTP/1\r\nHost: a\r\n\r\n",
      "GET / http/1.1\r\nHost: a\r\n\r\n",
      "GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /a%00b HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /static/../secret HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /static/%2e%2e/secret HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET /?q=%G0 HTTP/1.1\r\nHost: a\r\n\r\n",
      "GET / HTTP/1.1\r\n\r\n",  // HTTP/1.1 needs Host.
      "GET / HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\n: empty name\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nX: 1\r\n folded\r\n\r\n",
      "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01z\r\n\r\n",
      "GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
  };
  for (const char* head : kBad) {
    absl::StatusOr<Request> request = ParseRequestHead(head);
    EXPECT_TRUE(absl::IsInvalidArgument(request.status()))
        << "input: \"" << head << "\" gave " << request.status();
  }
}

TEST(ParseRequestHeadTest, UnsupportedMajorVersionIsUnimplemented) {
  EXPECT_TRUE(
      absl::IsUnimplemented(ParseRequestHead("GET / HTTP/2.0\r\nHost: a\r\n\r\n").status()));
  EXPECT_TRUE(absl::IsUnimplemented(ParseRequestHead("GET / HTTP/0.9\r\n\r\n").status()));
}

TEST(ParseRequestHeadTest, ErrorMessageNamesTheProblem) {
  absl::Status status =
      ParseRequestHead("GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n").status();
  EXPECT_NE(status.message().find("Bad Name"), absl::string_view::npos) << status;
}

TEST(UrlDecodeTest, DecodesEscapesAndOptionallyPlus) {
  EXPECT_EQ(*UrlDecode("a%20b%2Fc%2fd", false), "a b/c/d");
  EXPECT_EQ(*UrlDecode("a+b", false), "a+b");
  EXPECT_EQ(*UrlDecode("a+b", true), "a b");
  EXPECT_EQ(*UrlDecode("%E2%9C%93", false), "\xE2\x9C\x93");
  EXPECT_EQ(*UrlDecode("", true), "");
  EXPECT_TRUE(absl::IsInvalidArgument(UrlDecode("%", true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(UrlDecode("%4", true).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(UrlDecode("%4g", true).status()));
}

TEST(ParseQueryTest, HandlesEmptyPairsAndMissingValues) {
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> query =
      ParseQuery("&a=1&&b&c=&=x&a=2");
  ASSERT_TRUE(query.ok()) << query.status();
  EXPECT_EQ(query->size(), 4u);
  EXPECT_EQ(query->at("a"), "1");
  EXPECT_EQ(query->at("b"), "");
  EXPECT_EQ(query->at("c"), "");
  EXPECT_EQ(query->at(""), "x");
}

}  // namespace
}  // namespace psync::http

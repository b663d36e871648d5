#include "serve/http/message.h"

#include "gtest/gtest.h"

namespace psync::http {
namespace {

TEST(RequestTest, QueryParamReturnsValueOrDefault) {
  Request request;
  request.query["job"] = "a b";
  EXPECT_EQ(request.QueryParam("job"), "a b");
  EXPECT_EQ(request.QueryParam("step"), "");
  EXPECT_EQ(request.QueryParam("step", "7"), "7");
}

TEST(RequestTest, HeaderLookupIgnoresCase) {
  Request request;
  request.headers["user-agent"] = "curl";
  EXPECT_EQ(request.Header("User-Agent"), "curl");
  EXPECT_EQ(request.Header("USER-AGENT"), "curl");
  EXPECT_EQ(request.Header("Accept"), "");
}

TEST(ResponseTest, HeaderLookupIgnoresCaseAndReturnsFirst) {
  Response response;
  response.headers = {{"Allow", "GET"}, {"allow", "HEAD"}};
  EXPECT_EQ(response.Header("ALLOW"), "GET");
  EXPECT_EQ(response.Header("Vary"), "");
}

TEST(ResponseTest, Factories) {
  Response text = Response::Text(201, "made");
  EXPECT_EQ(text.status, 201);
  EXPECT_EQ(text.body, "made");
  EXPECT_EQ(text.content_type, "text/plain; charset=utf-8");

  Response json = Response::Json(200, "{}");
  EXPECT_EQ(json.content_type, "application/json");
  EXPECT_EQ(json.body, "{}");

  Response error = Response::Error(404);
  EXPECT_EQ(error.status, 404);
  EXPECT_EQ(error.body, "404 Not Found\n");
}

TEST(ReasonPhraseTest, KnownAndUnknown) {
  EXPECT_EQ(ReasonPhrase(200), "OK");
  EXPECT_EQ(ReasonPhrase(405), "Method Not Allowed");
  EXPECT_EQ(ReasonPhrase(431), "Request Header Fields Too Large");
  EXPECT_EQ(ReasonPhrase(505), "HTTP Version Not Supported");
  EXPECT_EQ(ReasonPhrase(299), "Unknown");
}

}  // namespace
}  // namespace psync::http

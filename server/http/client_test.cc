#include "server/http/client.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/http/server.h"
#include "server/http/socket_io.h"
#include "server/http/testing/refused_port.h"

namespace psync::http {
namespace {

constexpr char kHost[] = "127.0.0.1";

TEST(ParseResponseTest, ParsesStatusHeadersAndBody) {
  absl::StatusOr<Response> response = ParseResponse(
      "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n"
      "Content-Length: 5\r\nX-A: 1\r\n\r\nmissing",
      false);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
  EXPECT_EQ(response->content_type, "text/plain");
  EXPECT_EQ(response->body, "missi");  // Cut at Content-Length.
  EXPECT_EQ(response->Header("x-a"), "1");
}

TEST(ParseResponseTest, BodyRunsToEndWithoutContentLength) {
  absl::StatusOr<Response> response = ParseResponse("HTTP/1.0 200 OK\n\nall of it", false);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "all of it");
  EXPECT_EQ(response->content_type, "");
}

TEST(ParseResponseTest, StatusLineWithoutReasonIsAccepted) {
  absl::StatusOr<Response> response = ParseResponse("HTTP/1.1 204\r\n\r\n", false);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 204);
}

TEST(ParseResponseTest, HeadResponseHasNoBody) {
  absl::StatusOr<Response> response =
      ParseResponse("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", true);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "");
  EXPECT_EQ(response->Header("Content-Length"), "10");
}

TEST(ParseResponseTest, RejectsMalformedResponses) {
  for (const char* raw : {
           "",
           "HTTP/1.1 200 OK\r\n",  // Head never ends.
           "SSH-2.0-OpenSSH\r\n\r\n",
           "HTTP/1.1 2000 OK\r\n\r\n",
           "HTTP/1.1 abc OK\r\n\r\n",
           "HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
       }) {
    EXPECT_TRUE(absl::IsInternal(ParseResponse(raw, false).status())) << raw;
  }
  EXPECT_TRUE(
      absl::IsUnimplemented(ParseResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                          "5\r\nhello\r\n0\r\n\r\n",
                                          false)
                                .status()));
}

class ClientServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_
                    .Handle("/data",
                            [](const Request& request) {
                              return Response::Text(
                                  200, std::string(100000, 'd') + request.QueryParam("tail"));
                            })
                    .ok());
    ASSERT_TRUE(server_.Start(kHost, 0).ok());
  }

  Server server_;
};

TEST_F(ClientServerTest, GetReadsLargeBodyAndQuery) {
  absl::StatusOr<Response> response = Get(kHost, server_.port(), "/data?tail=end");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body.size(), 100003u);
  EXPECT_EQ(response->body.substr(100000), "end");
}

TEST_F(ClientServerTest, HostNameResolves) {
  absl::StatusOr<Response> response = Get("localhost", server_.port(), "/data");
  // "localhost" may resolve to ::1 first; the IPv4 address is tried next.
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
}

TEST_F(ClientServerTest, NotFoundIsAnOkResult) {
  absl::StatusOr<Response> response = Get(kHost, server_.port(), "/missing");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
}

TEST_F(ClientServerTest, ResponseLargerThanLimitIsResourceExhausted) {
  ClientOptions options;
  options.max_response_bytes = 1000;
  absl::StatusOr<Response> response = Get(kHost, server_.port(), "/data", options);
  EXPECT_TRUE(absl::IsResourceExhausted(response.status())) << response.status();
}

TEST(ClientTest, RejectsBadPathAndMethod) {
  EXPECT_TRUE(absl::IsInvalidArgument(Get(kHost, 1, "metrics").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Get(kHost, 1, "/a b").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Get(kHost, 1, "/a\r\nX: y").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Fetch(kHost, 1, "GET /x", "/").status()));
}

TEST(ClientTest, RefusedConnectionIsUnavailable) {
  absl::StatusOr<UniqueFd> bound = BindRefusedPort();
  ASSERT_TRUE(bound.ok()) << bound.status();
  absl::StatusOr<Response> response = Get(kHost, *LocalPort(bound->get()), "/");
  EXPECT_TRUE(absl::IsUnavailable(response.status())) << response.status();
}

TEST(ClientTest, SilentServerIsDeadlineExceeded) {
  // The kernel completes the handshake for a listening socket, but nobody
  // ever accepts or answers.
  absl::StatusOr<UniqueFd> listener = Listen(kHost, 0, 4);
  ASSERT_TRUE(listener.ok()) << listener.status();
  ClientOptions options;
  options.timeout = absl::Milliseconds(100);
  absl::StatusOr<Response> response = Get(kHost, *LocalPort(listener->get()), "/", options);
  EXPECT_TRUE(absl::IsDeadlineExceeded(response.status())) << response.status();
}

TEST(ClientTest, ServerClosingWithoutAnswerIsUnavailable) {
  absl::StatusOr<UniqueFd> listener = Listen(kHost, 0, 4);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int port = *LocalPort(listener->get());
  std::thread closer([&] {
    ASSERT_TRUE(WaitReady(listener->get(), POLLIN, absl::Now() + absl::Seconds(10), -1).ok());
    UniqueFd accepted(accept(listener->get(), nullptr, nullptr));
    // Closing right away: the client sees end of input (or a reset).
  });
  absl::StatusOr<Response> response = Get(kHost, port, "/");
  closer.join();
  EXPECT_TRUE(absl::IsUnavailable(response.status())) << response.status();
}

TEST(ClientTest, ExchangeReturnsRawBytes) {
  Server server;
  ASSERT_TRUE(server.Handle("/x", [](const Request&) { return Response::Text(200, "raw"); }).ok());
  ASSERT_TRUE(server.Start(kHost, 0).ok());
  absl::StatusOr<std::string> raw = Exchange(kHost, server.port(), "GET /x HTTP/1.0\r\n\r\n");
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->substr(0, 17), "HTTP/1.1 200 OK\r\n");
  EXPECT_EQ(raw->substr(raw->size() - 3), "raw");
}

}  // namespace
}  // namespace psync::http

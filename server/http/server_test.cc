#include "server/http/server.h"

#include <sys/socket.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/http/client.h"
#include "server/http/socket_io.h"

namespace psync::http {
namespace {

constexpr char kHost[] = "127.0.0.1";

Response Hello(const Request&) { return Response::Text(200, "hello\n"); }

// Echoes the decoded path and query parameters.
Response Echo(const Request& request) {
  return Response::Text(
      200, absl::StrCat("path=", request.path, " name=", request.QueryParam("name", "<none>"),
                        " n=", request.QueryParam("n", "<none>")));
}

// Returns the status code of a raw response ("HTTP/1.1 400 ...").
int RawStatus(absl::string_view raw) {
  absl::StatusOr<Response> response = ParseResponse(raw, false);
  return response.ok() ? response->status : -1;
}

class ServerTest : public ::testing::Test {
 protected:
  void StartServer(ServerOptions options = ServerOptions()) {
    server_ = std::make_unique<Server>(options);
    ASSERT_TRUE(server_->Handle("/hello", Hello).ok());
    ASSERT_TRUE(server_->Handle("/echo", Echo).ok());
    ASSERT_TRUE(server_
                    ->HandlePrefix("/files/",
                                   [](const Request& request) {
                                     return Response::Text(200, "prefix:" + request.path);
                                   })
                    .ok());
    ASSERT_TRUE(
        server_
            ->HandlePrefix("/files/special/",
                           [](const Request&) { return Response::Text(200, "longer prefix"); })
            .ok());
    ASSERT_TRUE(
        server_->Handle("/files/exact", [](const Request&) { return Response::Text(200, "exact"); })
            .ok());
    ASSERT_TRUE(server_->Start(kHost, 0).ok());
    port_ = server_->port();
    ASSERT_GT(port_, 0);
  }

  std::unique_ptr<Server> server_;
  int port_ = 0;
};

TEST_F(ServerTest, ServesRegisteredPath) {
  StartServer();
  absl::StatusOr<Response> response = Get(kHost, port_, "/hello");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "hello\n");
  EXPECT_EQ(response->content_type, "text/plain; charset=utf-8");
  EXPECT_EQ(response->Header("Content-Length"), "6");
  EXPECT_EQ(response->Header("Connection"), "close");
  EXPECT_TRUE(absl::EndsWith(response->Header("Date"), " GMT"));
}

TEST_F(ServerTest, UnknownPathIs404) {
  StartServer();
  absl::StatusOr<Response> response = Get(kHost, port_, "/nope");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
  // Exact routes match whole paths only.
  response = Get(kHost, port_, "/hello/more");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
}

TEST_F(ServerTest, OtherMethodsAre405WithAllow) {
  StartServer();
  for (const char* method : {"POST", "PUT", "DELETE", "OPTIONS", "BREW"}) {
    absl::StatusOr<Response> response = Fetch(kHost, port_, method, "/hello");
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 405) << method;
    EXPECT_EQ(response->Header("Allow"), "GET, HEAD");
  }
}

TEST_F(ServerTest, PostWithBodyGets405) {
  StartServer();
  absl::StatusOr<std::string> raw =
      Exchange(kHost, port_,
               "POST /hello HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"
               "hello world");
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(RawStatus(*raw), 405);
}

TEST_F(ServerTest, GarbageIs400) {
  StartServer();
  for (const char* garbage : {"garbage\r\n\r\n", "GET\r\n\r\n", "GET / HTTP/1.1\r\n\r\n",
                              "GET nopath HTTP/1.1\r\nHost: x\r\n\r\n"}) {
    absl::StatusOr<std::string> raw = Exchange(kHost, port_, garbage);
    ASSERT_TRUE(raw.ok()) << raw.status();
    EXPECT_EQ(RawStatus(*raw), 400) << garbage << " -> " << *raw;
  }
}

TEST_F(ServerTest, BinaryPrefixIs400WithoutWaitingForTheHead) {
  ServerOptions options;
  options.read_timeout = absl::Hours(1);
  StartServer(options);
  // The start of a TLS ClientHello: no line end ever comes.
  const std::string hello("\x16\x03\x01\x02\x00\x01\x00\x01\xfc", 9);
  absl::StatusOr<std::string> raw = Exchange(kHost, port_, hello);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(RawStatus(*raw), 400) << *raw;
}

TEST_F(ServerTest, EndOfInputInsideHeadIs400) {
  StartServer();
  absl::StatusOr<UniqueFd> fd = Connect(kHost, port_, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(fd.ok()) << fd.status();
  ASSERT_TRUE(
      WriteAll(fd->get(), "GET /hello HTTP/1.1\r\nHo", absl::Now() + absl::Seconds(10)).ok());
  ASSERT_EQ(shutdown(fd->get(), SHUT_WR), 0);
  std::string raw;
  char buffer[1024];
  while (true) {
    absl::StatusOr<size_t> n =
        ReadSome(fd->get(), buffer, sizeof(buffer), absl::Now() + absl::Seconds(10));
    ASSERT_TRUE(n.ok()) << n.status();
    if (*n == 0) break;
    raw.append(buffer, *n);
  }
  EXPECT_EQ(RawStatus(raw), 400) << raw;
}

TEST_F(ServerTest, UnsupportedVersionIs505) {
  StartServer();
  absl::StatusOr<std::string> raw =
      Exchange(kHost, port_, "GET /hello HTTP/2.0\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(RawStatus(*raw), 505);
}

TEST_F(ServerTest, OversizedHeadIs431) {
  StartServer();
  std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 40; ++i) {
    absl::StrAppend(&request, "X-Filler-", i, ": ", std::string(500, 'a'), "\r\n");
  }
  request += "\r\n";
  ASSERT_GT(request.size(), 16u * 1024);
  absl::StatusOr<std::string> raw = Exchange(kHost, port_, request);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(RawStatus(*raw), 431);

  // A head that never ends is cut off at the limit too.
  absl::StatusOr<std::string> endless =
      Exchange(kHost, port_, "GET /" + std::string(64 * 1024, 'a'));
  ASSERT_TRUE(endless.ok()) << endless.status();
  EXPECT_EQ(RawStatus(*endless), 431);
}

TEST_F(ServerTest, HeadJustUnderTheLimitIsServed) {
  StartServer();
  std::string request = "GET /hello HTTP/1.1\r\nHost: x\r\nX-Filler: ";
  request += std::string(16 * 1024 - request.size() - 4, 'a');
  request += "\r\n\r\n";
  ASSERT_EQ(request.size(), 16u * 1024);
  absl::StatusOr<std::string> raw = Exchange(kHost, port_, request);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(RawStatus(*raw), 200);
}

TEST_F(ServerTest, ParsesAndDecodesQuery) {
  StartServer();
  absl::StatusOr<Response> response =
      Get(kHost, port_, "/echo?name=job%2Da%20%C3%A9&n=1+2&name=ignored");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "path=/echo name=job-a \xC3\xA9 n=1 2");

  response = Get(kHost, port_, "/echo?name=%zz");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 400);
}

TEST_F(ServerTest, PrefixRoutesPreferExactThenLongest) {
  StartServer();
  absl::StatusOr<Response> response = Get(kHost, port_, "/files/a/b.txt");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "prefix:/files/a/b.txt");
  response = Get(kHost, port_, "/files/special/x");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "longer prefix");
  response = Get(kHost, port_, "/files/exact");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "exact");
  response = Get(kHost, port_, "/files");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
}

TEST_F(ServerTest, HeadHasHeadersButNoBody) {
  StartServer();
  absl::StatusOr<std::string> raw =
      Exchange(kHost, port_, "HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_TRUE(absl::StartsWith(*raw, "HTTP/1.1 200 OK\r\n")) << *raw;
  EXPECT_TRUE(absl::StrContains(*raw, "Content-Length: 6\r\n")) << *raw;
  EXPECT_TRUE(absl::EndsWith(*raw, "\r\n\r\n")) << *raw;

  absl::StatusOr<Response> response = Fetch(kHost, port_, "HEAD", "/hello");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "");
}

TEST_F(ServerTest, HandlerExtraHeadersAreSentAndUnsafeOnesDropped) {
  auto server = std::make_unique<Server>();
  ASSERT_TRUE(server
                  ->Handle("/h",
                           [](const Request&) {
                             Response response = Response::Text(200, "x");
                             response.headers = {
                                 {"X-Good", "yes"},
                                 {"X-Split", "a\r\nSet-Cookie: evil"},
                                 {"Content-Length", "999"},
                             };
                             return response;
                           })
                  .ok());
  ASSERT_TRUE(server->Start(kHost, 0).ok());
  absl::StatusOr<Response> response = Get(kHost, server->port(), "/h");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->Header("X-Good"), "yes");
  EXPECT_EQ(response->Header("X-Split"), "");
  EXPECT_EQ(response->Header("Set-Cookie"), "");
  EXPECT_EQ(response->Header("Content-Length"), "1");
  EXPECT_EQ(response->body, "x");
}

TEST_F(ServerTest, ThrowingHandlerIs500) {
  Server server;
  ASSERT_TRUE(
      server.Handle("/boom", [](const Request&) -> Response { throw std::runtime_error("boom"); })
          .ok());
  ASSERT_TRUE(server.Start(kHost, 0).ok());
  absl::StatusOr<Response> response = Get(kHost, server.port(), "/boom");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 500);
}

TEST_F(ServerTest, ConcurrentClientsAllSucceed) {
  ServerOptions options;
  options.num_workers = 4;
  StartServer(options);
  constexpr int kThreads = 16;
  constexpr int kRequestsPerThread = 20;
  std::atomic<int> ok{0};
  std::vector<std::string> failures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRequestsPerThread; ++i) {
        std::string path = absl::StrCat("/echo?name=t", t, "&n=", i);
        absl::StatusOr<Response> response = Get(kHost, port_, path);
        if (response.ok() && response->status == 200 &&
            response->body == absl::StrCat("path=/echo name=t", t, " n=", i)) {
          ok.fetch_add(1);
        } else if (failures[t].empty()) {
          failures[t] = response.ok() ? response->body : response.status().ToString();
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), kThreads * kRequestsPerThread);
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(failures[t], "") << "thread " << t;
  }
}

TEST_F(ServerTest, ShutdownReturnsWhileClientHoldsIdleConnection) {
  ServerOptions options;
  options.num_workers = 2;
  options.read_timeout = absl::Hours(1);
  StartServer(options);
  // An idle connection: connected, sends half a request line, then nothing.
  absl::StatusOr<UniqueFd> idle = Connect(kHost, port_, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(idle.ok()) << idle.status();
  ASSERT_TRUE(WriteAll(idle->get(), "GET /hel", absl::Now() + absl::Seconds(10)).ok());
  // Connections are accepted and queued in order, so once a later request is
  // answered, a worker has taken the idle connection and is blocked on it.
  absl::StatusOr<Response> response = Get(kHost, port_, "/hello");
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->status, 200);

  const absl::Time start = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));

  // The server closed the idle connection without an answer.
  char buffer[64];
  absl::StatusOr<size_t> n =
      ReadSome(idle->get(), buffer, sizeof(buffer), absl::Now() + absl::Seconds(10));
  EXPECT_TRUE(!n.ok() || *n == 0);
  server_->Shutdown();  // Idempotent.
}

TEST_F(ServerTest, ReadTimeoutFreesTheWorker) {
  ServerOptions options;
  options.num_workers = 1;
  options.read_timeout = absl::Milliseconds(200);
  StartServer(options);
  absl::StatusOr<UniqueFd> idle = Connect(kHost, port_, absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(idle.ok()) << idle.status();
  ASSERT_TRUE(
      WriteAll(idle->get(), "GET /hello HTTP/1.1\r\n", absl::Now() + absl::Seconds(10)).ok());
  // The only worker is held by the stuck client until its read timeout, then
  // serves this request.
  absl::StatusOr<Response> response = Get(kHost, port_, "/hello");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  // The stuck client was told why.
  std::string raw;
  char buffer[1024];
  while (true) {
    absl::StatusOr<size_t> n =
        ReadSome(idle->get(), buffer, sizeof(buffer), absl::Now() + absl::Seconds(10));
    if (!n.ok() || *n == 0) break;
    raw.append(buffer, *n);
  }
  EXPECT_EQ(RawStatus(raw), 408) << raw;
}

TEST_F(ServerTest, WriteTimeoutFreesTheWorker) {
  ServerOptions options;
  options.num_workers = 1;
  options.write_timeout = absl::Milliseconds(200);
  auto server = std::make_unique<Server>(options);
  const std::string big(32 << 20, 'x');
  ASSERT_TRUE(
      server->Handle("/big", [&big](const Request&) { return Response::Text(200, big); }).ok());
  ASSERT_TRUE(server->Handle("/hello", Hello).ok());
  ASSERT_TRUE(server->Start(kHost, 0).ok());
  // This client asks for a large body and never reads it.
  absl::StatusOr<UniqueFd> stuck = Connect(kHost, server->port(), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(stuck.ok()) << stuck.status();
  ASSERT_TRUE(WriteAll(stuck->get(), "GET /big HTTP/1.1\r\nHost: x\r\n\r\n",
                       absl::Now() + absl::Seconds(10))
                  .ok());
  absl::StatusOr<Response> response = Get(kHost, server->port(), "/hello");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
}

TEST(ServerRoutesTest, RejectsBadAndDuplicateRoutes) {
  Server server;
  EXPECT_TRUE(absl::IsInvalidArgument(server.Handle("nope", Hello)));
  EXPECT_TRUE(absl::IsInvalidArgument(server.Handle("", Hello)));
  EXPECT_TRUE(absl::IsInvalidArgument(server.Handle("/empty", Handler())));
  EXPECT_TRUE(server.Handle("/a", Hello).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(server.Handle("/a", Hello)));
  EXPECT_TRUE(server.HandlePrefix("/a", Hello).ok());  // Separate table.
  EXPECT_TRUE(absl::IsAlreadyExists(server.HandlePrefix("/a", Hello)));
  ASSERT_TRUE(server.Start(kHost, 0).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(server.Handle("/late", Hello)));
  EXPECT_TRUE(absl::IsFailedPrecondition(server.Start(kHost, 0)));
}

TEST(ServerStartTest, ReportsBindErrors) {
  Server first;
  ASSERT_TRUE(first.Start(kHost, 0).ok());
  Server second;
  EXPECT_TRUE(absl::IsUnavailable(second.Start(kHost, first.port())));
  EXPECT_EQ(second.port(), 0);
  EXPECT_TRUE(absl::IsInvalidArgument(second.Start(kHost, 65536)));
  EXPECT_TRUE(absl::IsInvalidArgument(second.Start("no.such.host.invalid", 0)));
  // A failed Start leaves the server startable.
  EXPECT_TRUE(second.Start(kHost, 0).ok());
  EXPECT_GT(second.port(), 0);
}

TEST(ServerStartTest, RejectsBadOptions) {
  ServerOptions options;
  options.num_workers = 0;
  Server server(options);
  EXPECT_TRUE(absl::IsInvalidArgument(server.Start(kHost, 0)));
}

TEST(ServerStartTest, ShutdownWithoutStartAndDestructorAreSafe) {
  Server never_started;
  never_started.Shutdown();
  Server started;
  ASSERT_TRUE(started.Start(kHost, 0).ok());
  // The destructor shuts it down.
}

}  // namespace
}  // namespace psync::http

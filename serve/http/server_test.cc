#include "serve/http/server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "serve/http/testing/curl_client.h"
#include "serve/http/testing/test_certificate.h"

namespace psync::http {
namespace {

using testing::CurlFetch;
using testing::CurlGet;
using testing::CurlOptions;

constexpr char kHost[] = "127.0.0.1";

Response Hello(const Request&) { return Response::Text(200, "hello\n"); }

std::string Url(const Server& server, const std::string& path) {
  return absl::StrCat(server.tls() ? "https" : "http", "://127.0.0.1:", server.port(), path);
}

// A TCP connection to 127.0.0.1:port that the test writes raw bytes to (or nothing).
class RawConnection {
 public:
  explicit RawConnection(int port) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) close(fd_);
  }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Waits up to `timeout` for the server to close the connection; returns whether it did.
  // Whatever the server sends before closing is discarded.
  bool ClosedByServerWithin(absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    char buffer[4096];
    while (absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now())) + 1;
      if (poll(&p, 1, ms) <= 0) continue;
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) return true;
    }
    return false;
  }

 private:
  int fd_;
  bool connected_ = false;
};

class ServerTest : public ::testing::Test {
 protected:
  void StartWith(ServerOptions options) {
    server_ = std::make_unique<Server>(std::move(options));
    ASSERT_TRUE(server_->Handle("/hello", Hello).ok());
    ASSERT_TRUE(server_
                    ->Handle("/echo",
                             [](const Request& r) {
                               return Response::Text(
                                   200,
                                   absl::StrCat(r.method, " ", r.path, " job=", r.QueryParam("job"),
                                                " auth=", r.Header("Authorization")));
                             })
                    .ok());
    ASSERT_TRUE(
        server_
            ->HandlePrefix("/files/",
                           [](const Request& r) { return Response::Text(200, "files:" + r.path); })
            .ok());
    ASSERT_TRUE(
        server_
            ->HandlePrefix("/files/deep/",
                           [](const Request& r) { return Response::Text(200, "deep:" + r.path); })
            .ok());
    ASSERT_TRUE(server_
                    ->Handle("/throws",
                             [](const Request&) -> Response { throw std::runtime_error("boom"); })
                    .ok());
    ASSERT_TRUE(server_
                    ->Handle("/headers",
                             [](const Request&) {
                               Response response = Response::Text(200, "h");
                               response.headers.emplace_back("X-Psync", "yes");
                               response.headers.emplace_back("X-Bad", "a\r\nInjected: 1");
                               return response;
                             })
                    .ok());
    ASSERT_TRUE(server_->Start(kHost, 0).ok());
    ASSERT_GT(server_->port(), 0);
  }
  void SetUp() override { StartWith(ServerOptions()); }

  std::unique_ptr<Server> server_;
};

TEST_F(ServerTest, ServesRegisteredPath) {
  absl::StatusOr<Response> response = CurlGet(Url(*server_, "/hello"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "hello\n");
  EXPECT_EQ(response->content_type, "text/plain; charset=utf-8");
}

TEST_F(ServerTest, UnknownPathIs404) {
  absl::StatusOr<Response> response = CurlGet(Url(*server_, "/nope"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 404);
  EXPECT_EQ(response->body, "404 Not Found\n");
}

TEST_F(ServerTest, OtherMethodsAre405WithAllow) {
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    CurlOptions options;
    options.method = method;
    options.headers = {"Content-Length: 0"};
    absl::StatusOr<testing::CurlResponse> response = CurlFetch(Url(*server_, "/hello"), options);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->response.status, 405) << method;
    EXPECT_EQ(response->response.body, "405 Method Not Allowed\n") << method;
    EXPECT_EQ(response->response.Header("Allow"), "GET, HEAD") << method;
  }
}

TEST_F(ServerTest, HeadHasHeadersButNoBody) {
  CurlOptions options;
  options.method = "HEAD";
  absl::StatusOr<testing::CurlResponse> response = CurlFetch(Url(*server_, "/hello"), options);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->response.status, 200);
  EXPECT_EQ(response->response.body, "");
  EXPECT_EQ(response->response.Header("Content-Length"), "6");
}

TEST_F(ServerTest, DecodesPathQueryAndHeaders) {
  absl::StatusOr<Response> response =
      CurlGet(Url(*server_, "/ec%68o?job=a%20b&job=second"), {"Authorization: Bearer x"});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->body, "GET /echo job=a b auth=Bearer x");
}

TEST_F(ServerTest, PrefixRoutesPreferExactThenLongest) {
  EXPECT_EQ(CurlGet(Url(*server_, "/files/a.txt"))->body, "files:/files/a.txt");
  EXPECT_EQ(CurlGet(Url(*server_, "/files/deep/b.txt"))->body, "deep:/files/deep/b.txt");
  EXPECT_EQ(CurlGet(Url(*server_, "/files"))->status, 404);
}

TEST_F(ServerTest, HandlerExtraHeadersAreSentAndUnsafeOnesDropped) {
  absl::StatusOr<Response> response = CurlGet(Url(*server_, "/headers"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->Header("X-Psync"), "yes");
  EXPECT_EQ(response->Header("X-Bad"), "");
  EXPECT_EQ(response->Header("Injected"), "");
}

TEST_F(ServerTest, ThrowingHandlerIs500) {
  absl::StatusOr<Response> response = CurlGet(Url(*server_, "/throws"));
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 500);
  EXPECT_EQ(response->body, "500 Internal Server Error\n");
}

// The figure docs/reliability.md quotes: 64 connections that send nothing, or stop halfway through
// a request, do not delay anyone else. The timeouts are a minute, so the answers cannot come from
// the server giving up on the idle connections: they come from the threads left over.
TEST_F(ServerTest, SixtyFourIdleConnectionsDoNotDelayOthers) {
  ServerOptions options;
  options.idle_timeout = absl::Seconds(60);
  options.read_timeout = absl::Seconds(60);
  StartWith(options);
  const absl::Time connecting = absl::Now();
  std::vector<std::unique_ptr<RawConnection>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<RawConnection>(server_->port()));
    ASSERT_TRUE(idle.back()->connected()) << i;
    if (i % 2 == 1) {  // half of them stop in the middle of a request
      ASSERT_TRUE(idle.back()->Send("GET /hello HTTP/1.1\r\nHost: x\r\n")) << i;
    }
  }
  // How long the burst took to connect is a figure, printed below (with the library's backlog of
  // 5, lost SYNs cost 1 s each; with 1024, milliseconds).
  const absl::Duration connect_time = absl::Now() - connecting;
  const absl::Time start = absl::Now();
  for (int i = 0; i < 8; ++i) {
    absl::StatusOr<Response> response = CurlGet(Url(*server_, "/hello"));
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "hello\n");
  }
  // A held server would not answer before curl's 10 s timeout: the requests above would fail.
  const absl::Duration elapsed = absl::Now() - start;
  std::cout << "64 connections opened in " << connect_time
            << "; 8 requests beside them: " << elapsed << "\n";
}

TEST_F(ServerTest, SilentConnectionIsClosedAfterIdleTimeout) {
  ServerOptions options;
  options.idle_timeout = absl::Seconds(1);
  StartWith(options);
  RawConnection silent(server_->port());
  ASSERT_TRUE(silent.connected());
  EXPECT_TRUE(silent.ClosedByServerWithin(absl::Seconds(20)));
}

TEST_F(ServerTest, StalledRequestIsDroppedAfterReadTimeout) {
  ServerOptions options;
  options.read_timeout = absl::Milliseconds(200);
  StartWith(options);
  RawConnection stalled(server_->port());
  ASSERT_TRUE(stalled.connected());
  ASSERT_TRUE(stalled.Send("GET /hello HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(stalled.ClosedByServerWithin(absl::Seconds(20)));
}

class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("TEST_TMPDIR");
    absl::StatusOr<testing::TestCertificate> cert =
        testing::MakeTestCertificate(dir ? dir : "/tmp");
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = *cert;
  }
  testing::TestCertificate cert_;
};

TEST_F(TlsServerTest, ServesHttpsWithTheGivenCertificate) {
  ServerOptions options;
  options.tls_cert_pem = cert_.cert_pem;
  options.tls_key_pem = cert_.key_pem;
  Server server(options);
  ASSERT_TRUE(server.Handle("/hello", Hello).ok());
  ASSERT_TRUE(server.Start(kHost, 0).ok());
  EXPECT_TRUE(server.tls());

  CurlOptions verified;
  verified.ca_file = cert_.cert_path;  // verification on: the certificate is the one given
  absl::StatusOr<testing::CurlResponse> response =
      CurlFetch(absl::StrCat("https://localhost:", server.port(), "/hello"), verified);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->tls);
  EXPECT_EQ(response->response.status, 200);
  EXPECT_EQ(response->response.body, "hello\n");

  // Without the CA the certificate is not trusted; plain HTTP gets no answer.
  EXPECT_TRUE(absl::IsUnavailable(
      CurlFetch(absl::StrCat("https://localhost:", server.port(), "/hello")).status()));
  EXPECT_TRUE(absl::IsUnavailable(
      CurlGet(absl::StrCat("http://127.0.0.1:", server.port(), "/hello")).status()));
}

TEST_F(TlsServerTest, RejectsBadOrMismatchedKeys) {
  ServerOptions only_cert;
  only_cert.tls_cert_pem = cert_.cert_pem;
  EXPECT_TRUE(absl::IsInvalidArgument(Server(only_cert).Start(kHost, 0)));

  ServerOptions garbage;
  garbage.tls_cert_pem = "not a certificate";
  garbage.tls_key_pem = cert_.key_pem;
  EXPECT_TRUE(absl::IsInvalidArgument(Server(garbage).Start(kHost, 0)));

  absl::StatusOr<testing::TestCertificate> other = testing::MakeTestCertificate(
      absl::StrCat(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp", "/.."));
  ASSERT_TRUE(other.ok()) << other.status();
  ServerOptions mismatched;
  mismatched.tls_cert_pem = cert_.cert_pem;
  mismatched.tls_key_pem = other->key_pem;
  EXPECT_TRUE(absl::IsInvalidArgument(Server(mismatched).Start(kHost, 0)));
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
  EXPECT_TRUE(absl::IsUnavailable(second.Start("no.such.host.invalid", 0)));
  // A failed Start leaves the server startable.
  EXPECT_TRUE(second.Start(kHost, 0).ok());
  EXPECT_GT(second.port(), 0);
}

TEST(ServerStartTest, RejectsBadOptions) {
  ServerOptions options;
  options.num_threads = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(Server(options).Start(kHost, 0)));
  options = ServerOptions();
  options.idle_timeout = absl::Milliseconds(500);
  EXPECT_TRUE(absl::IsInvalidArgument(Server(options).Start(kHost, 0)));
}

TEST(ServerStartTest, ShutdownWithoutStartAndDestructorAreSafe) {
  Server never_started;
  never_started.Shutdown();
  Server started;
  ASSERT_TRUE(started.Start(kHost, 0).ok());
  started.Shutdown();
  started.Shutdown();
  EXPECT_EQ(CurlGet(absl::StrCat("http://127.0.0.1:", started.port(), "/")).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace psync::http

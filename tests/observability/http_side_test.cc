// The coordinator's HTTP side end to end, in process (server/coordinator_server.h with the
// dashboard): idle connections do not hold it, /api/ needs the token when one is set, it speaks
// HTTPS with the gRPC side's certificate, /api/events is paged and refuses a limit out of range,
// and /api/jobs lists a job once and reads `states` in any case.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "serve/http/testing/curl_client.h"
#include "serve/http/testing/test_certificate.h"
#include "server/dashboard/assets.h"
#include "server/http_api.h"
#include "server/test_server.h"
#include "tests/observability/sim_job.h"
#include "tests/service/raw_session.h"

namespace psync::server {
namespace {

using http::testing::CurlFetch;
using http::testing::CurlGet;
using http::testing::CurlOptions;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr char kToken[] = "s3cret-token";

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

absl::StatusOr<std::unique_ptr<TestServer>> StartHttp(ServerOptions options) {
  options.http_listen = "127.0.0.1:0";
  options.dashboard = dashboard::Files();
  return TestServer::Start(std::move(options));
}

std::string Url(const TestServer& server, const std::string& path) {
  return absl::StrCat("http://127.0.0.1:", server.http_port(), path);
}

// A TCP connection that sends nothing, or the start of a request and then nothing.
class IdleConnection {
 public:
  IdleConnection(int port, const std::string& partial) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = fd_ >= 0 && connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
          (partial.empty() || send(fd_, partial.data(), partial.size(), MSG_NOSIGNAL) ==
                                  static_cast<ssize_t>(partial.size()));
  }
  ~IdleConnection() {
    if (fd_ >= 0) close(fd_);
  }
  IdleConnection(const IdleConnection&) = delete;
  IdleConnection& operator=(const IdleConnection&) = delete;
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = false;
};

// The figure in docs/reliability.md ("The HTTP side: security"): with the shipped thread count,
// 64 connections that send nothing or half a request leave the dashboard and /metrics answering
// at once. The timeouts are raised to a minute so the answers cannot come from the server giving
// up on the idle connections.
TEST(HttpSideTest, DashboardAndMetricsAnswerBesideSixtyFourIdleConnections) {
  ServerOptions options;
  options.http.idle_timeout = absl::Seconds(60);
  options.http.read_timeout = absl::Seconds(60);
  auto server = StartHttp(options);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<std::unique_ptr<IdleConnection>> idle;
  for (int i = 0; i < 64; ++i) {
    idle.push_back(std::make_unique<IdleConnection>(
        (*server)->http_port(), i % 2 == 0 ? "" : "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
    ASSERT_TRUE(idle.back()->ok()) << i;
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<http::Response> page = CurlGet(Url(**server, "/"));
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->status, 200);
  EXPECT_TRUE(absl::StrContains(page->body, "<title>")) << page->body.substr(0, 200);
  absl::StatusOr<http::Response> metrics = CurlGet(Url(**server, "/metrics"));
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status, 200);
  EXPECT_TRUE(absl::StrContains(metrics->body, "# TYPE psync_")) << metrics->body.substr(0, 200);
  // A server held by the idle connections would not answer before curl's 10 s timeout (the
  // server's own timeouts are a minute here): the requests above would fail. The time is a figure.
  const absl::Duration elapsed = absl::Now() - start;
  std::cout << "dashboard + /metrics beside 64 idle connections: " << elapsed << "\n";
}

TEST(HttpSideTest, ApiRequiresTheBearerTokenAndMetricsStayOpen) {
  ServerOptions options;
  options.http_api.token = kToken;
  auto server = StartHttp(options);
  ASSERT_TRUE(server.ok()) << server.status();

  absl::StatusOr<http::Response> missing = CurlGet(Url(**server, "/api/jobs"));
  ASSERT_TRUE(missing.ok()) << missing.status();
  EXPECT_EQ(missing->status, 401);
  EXPECT_EQ(missing->body,
            "401 Unauthorized: no Authorization header; send 'Authorization: Bearer <token>'\n");
  EXPECT_EQ(missing->Header("WWW-Authenticate"), "Bearer realm=\"psync\"");

  absl::StatusOr<http::Response> basic =
      CurlGet(Url(**server, "/api/jobs"), {"Authorization: Basic eDp5"});
  ASSERT_TRUE(basic.ok()) << basic.status();
  EXPECT_EQ(basic->status, 401);
  EXPECT_EQ(basic->body,
            "401 Unauthorized: the Authorization header is not a Bearer token; send "
            "'Authorization: Bearer <token>'\n");

  absl::StatusOr<http::Response> wrong =
      CurlGet(Url(**server, "/api/jobs"), {"Authorization: Bearer s3cret-tokeN"});
  ASSERT_TRUE(wrong.ok()) << wrong.status();
  EXPECT_EQ(wrong->status, 401);
  EXPECT_EQ(wrong->body, "401 Unauthorized: wrong token; send 'Authorization: Bearer <token>'\n");

  for (const char* path : {"/api/jobs", "/api/job?id=none", "/api/events?since=0"}) {
    absl::StatusOr<http::Response> right =
        CurlGet(Url(**server, path), {absl::StrCat("Authorization: Bearer ", kToken)});
    ASSERT_TRUE(right.ok()) << right.status();
    EXPECT_EQ(right->status, absl::StrContains(path, "none") ? 404 : 200) << path;
  }
  absl::StatusOr<http::Response> jobs =
      CurlGet(Url(**server, "/api/jobs"), {absl::StrCat("Authorization: Bearer ", kToken)});
  EXPECT_EQ(jobs->body, "{\"jobs\":[]}");

  // Unguarded: /metrics (by default) and the dashboard's files, which hold no data.
  EXPECT_EQ(CurlGet(Url(**server, "/metrics"))->status, 200);
  EXPECT_EQ(CurlGet(Url(**server, "/"))->status, 200);
  EXPECT_EQ(CurlGet(Url(**server, "/app.js"))->status, 200);
}

TEST(HttpSideTest, MetricsRequireTheTokenWhenAsked) {
  ServerOptions options;
  options.http_api.token = kToken;
  options.http_api.metrics_require_token = true;
  auto server = StartHttp(options);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<http::Response> open = CurlGet(Url(**server, "/metrics"));
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->status, 401);
  EXPECT_EQ(open->body,
            "401 Unauthorized: no Authorization header; send 'Authorization: Bearer <token>'\n");
  absl::StatusOr<http::Response> with =
      CurlGet(Url(**server, "/metrics"), {absl::StrCat("Authorization: Bearer ", kToken)});
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->status, 200);
  EXPECT_TRUE(absl::StrContains(with->body, "# TYPE psync_"));
}

TEST(HttpSideTest, NoTokenConfiguredMeansNoneNeeded) {
  auto server = StartHttp(ServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<http::Response> jobs = CurlGet(Url(**server, "/api/jobs"));
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->status, 200);
  EXPECT_EQ(jobs->body, "{\"jobs\":[]}");
}

TEST(HttpSideTest, ServesHttpsWithTheGrpcSidesCertificate) {
  absl::StatusOr<http::testing::TestCertificate> cert =
      http::testing::MakeTestCertificate(TempDir());
  ASSERT_TRUE(cert.ok()) << cert.status();
  ServerOptions options;
  options.tls_cert_pem = cert->cert_pem;
  options.tls_key_pem = cert->key_pem;
  options.http_api.token = kToken;
  auto server = StartHttp(options);
  ASSERT_TRUE(server.ok()) << server.status();

  CurlOptions verified;
  verified.ca_file = cert->cert_path;
  verified.headers = {absl::StrCat("Authorization: Bearer ", kToken)};
  const std::string base = absl::StrCat("https://localhost:", (*server)->http_port());
  absl::StatusOr<http::testing::CurlResponse> jobs = CurlFetch(base + "/api/jobs", verified);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_TRUE(jobs->tls);
  EXPECT_EQ(jobs->response.status, 200);
  EXPECT_EQ(jobs->response.body, "{\"jobs\":[]}");
  absl::StatusOr<http::testing::CurlResponse> metrics = CurlFetch(base + "/metrics", verified);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_TRUE(metrics->tls);
  EXPECT_EQ(metrics->response.status, 200);
  // Plain HTTP on the same port gets no answer.
  EXPECT_FALSE(CurlGet(Url(**server, "/metrics")).ok());
}

// Reads the number after "\"<name>\":" in `json`.
uint64_t JsonNumber(const std::string& json, const std::string& name) {
  const std::string key = absl::StrCat("\"", name, "\":");
  const size_t at = json.find(key);
  if (at == std::string::npos) return UINT64_MAX;
  size_t end = at + key.size();
  while (end < json.size() && json[end] >= '0' && json[end] <= '9') ++end;
  uint64_t value = 0;
  if (!absl::SimpleAtoi(json.substr(at + key.size(), end - at - key.size()), &value)) {
    return UINT64_MAX;
  }
  return value;
}

TEST(HttpSideTest, EventsArePagedWithLimitAndNext) {
  auto server = StartHttp(ServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  auto job = testing::SimJob::Start((*server)->target(), testing::SimJobOptions());
  ASSERT_TRUE(job.ok()) << job.status();
  for (uint64_t step = 0; step < 2; ++step) {
    absl::Status ran = (*job)->RunStep(step);
    ASSERT_TRUE(ran.ok()) << ran;
  }

  uint64_t end = 0;
  (*server)->coordinator().EventsSince(0, &end, 0);
  ASSERT_GT(end, 10u);

  // Pages of 4 from 0 cover every event once, in order, and stop at `end`.
  uint64_t since = 0;
  int pages = 0;
  uint64_t events = 0;
  while (since < end) {
    absl::StatusOr<http::Response> page =
        CurlGet(Url(**server, absl::StrCat("/api/events?since=", since, "&limit=4")));
    ASSERT_TRUE(page.ok()) << page.status();
    ASSERT_EQ(page->status, 200) << page->body;
    const uint64_t next = JsonNumber(page->body, "next");
    EXPECT_EQ(next, std::min(since + 4, end)) << page->body;
    EXPECT_GE(JsonNumber(page->body, "end"), end) << page->body;
    uint64_t in_page = 0;
    for (size_t at = page->body.find("\"index\""); at != std::string::npos;
         at = page->body.find("\"index\"", at + 1)) {
      ++in_page;
    }
    // Event 0 has index 0, which JSON leaves out (proto3 default).
    EXPECT_EQ(in_page + (since == 0 ? 1 : 0), next - since) << page->body;
    events += next - since;
    since = next;
    ++pages;
  }
  EXPECT_EQ(events, end);
  EXPECT_EQ(pages, static_cast<int>((end + 3) / 4));

  // Past the end: empty, and `next` stays at the end.
  absl::StatusOr<http::Response> past =
      CurlGet(Url(**server, absl::StrCat("/api/events?since=", end)));
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(past->status, 200);
  EXPECT_TRUE(absl::StartsWith(past->body, "{\"events\":[],\"next\":")) << past->body;

  for (const char* bad : {"limit=0", "limit=1001", "limit=x", "since=-1"}) {
    absl::StatusOr<http::Response> refused =
        CurlGet(Url(**server, absl::StrCat("/api/events?", bad)));
    ASSERT_TRUE(refused.ok());
    EXPECT_EQ(refused->status, 400) << bad;
  }
  absl::StatusOr<http::Response> refused = CurlGet(Url(**server, "/api/events?limit=1001"));
  EXPECT_EQ(refused->body, "query parameter 'limit' must be in 1..1000\n");
}

// A `limit` out of 1..1000 is refused with one text naming the parameter and its range, never
// clamped (docs/observability.md): past 64 bits, negative and non-numeric ones too.
TEST(HttpSideTest, EventsRefuseEveryLimitOutOfRangeNamingTheRange) {
  auto server = StartHttp(ServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  auto job = testing::SimJob::Start((*server)->target(), testing::SimJobOptions());
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*job)->RunStep(0).ok());
  for (const char* bad : {"0", "1001", "4294967296", "18446744073709551615", "18446744073709551616",
                          "99999999999999999999999", "-1", "x", "1e3", "1000.0"}) {
    absl::StatusOr<http::Response> refused =
        CurlGet(Url(**server, absl::StrCat("/api/events?limit=", bad)));
    ASSERT_TRUE(refused.ok()) << refused.status();
    EXPECT_EQ(refused->status, 400) << bad;
    EXPECT_EQ(refused->body, "query parameter 'limit' must be in 1..1000\n") << bad;
  }
  // The largest limit is taken as given: the page covers every event there is (fewer than 1000).
  uint64_t end = 0;
  (*server)->coordinator().EventsSince(0, &end, 0);
  ASSERT_GT(end, 0u);
  ASSERT_LT(end, 1000u);
  absl::StatusOr<http::Response> page = CurlGet(Url(**server, "/api/events?limit=1000"));
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->status, 200) << page->body;
  EXPECT_EQ(JsonNumber(page->body, "next"), end) << page->body;
}

// /api/overview: the job by node, a page of nodes as asked; every limit out of range is 400 naming
// it; /api/job's list_limit cuts each chunk's lists and keeps their counts, and so does
// /api/chunk's.
TEST(HttpSideTest, OverviewPagesNodesAndRefusesLimitsOutOfRange) {
  auto server = StartHttp(ServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  testing::SimJobOptions options;
  options.job_id = "wide";
  options.world_size = 8;
  options.ranks_per_node = 2;  // node-0 .. node-3
  auto job = testing::SimJob::Start((*server)->target(), options);
  ASSERT_TRUE(job.ok()) << job.status();
  ASSERT_TRUE((*job)->StageStep(0, {{5, 1, "expert"}}).ok());
  for (uint32_t c : {0, 2, 3}) ASSERT_TRUE((*job)->SyncChunk(0, c).ok());

  absl::StatusOr<http::Response> page =
      CurlGet(Url(**server, "/api/overview?id=wide&node_offset=1&node_limit=2&expand=node-2"));
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->status, 200) << page->body;
  v1::JobOverview overview;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(page->body, &overview).ok())
      << page->body;
  EXPECT_EQ(overview.num_nodes(), 4u);
  ASSERT_EQ(overview.nodes_size(), 2);
  EXPECT_EQ(overview.nodes(0).node(), "node-1");
  EXPECT_EQ(overview.nodes(1).node(), "node-2");
  EXPECT_EQ(overview.nodes(1).missing(), 1u);
  ASSERT_EQ(overview.missing_size(), 1);
  EXPECT_EQ(overview.missing(0).what(), "expert");
  EXPECT_THAT(overview.missing(0).nodes(), ElementsAre("node-2"));
  ASSERT_EQ(overview.expanded_size(), 2);
  EXPECT_EQ(overview.expanded(1).rank(), 5u);
  EXPECT_THAT(overview.expanded(1).missing(), ElementsAre("c1:expert"));

  const std::vector<std::pair<std::string, std::string>> refused = {
      {"node_limit=4097", "node_limit 4097 out of range [0, 4096]\n"},
      {"missing_limit=1025", "missing_limit 1025 out of range [0, 1024]\n"},
      {"node_offset=4294967296", "query parameter 'node_offset' must be below 2^32\n"},
      {"node_limit=x", "query parameter 'node_limit' must be an unsigned integer\n"},
      {"expand=a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "expand_nodes: 17 names, at most 16\n"},
  };
  for (const auto& [query, message] : refused) {
    absl::StatusOr<http::Response> answer =
        CurlGet(Url(**server, absl::StrCat("/api/overview?id=wide&", query)));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 400) << query;
    EXPECT_EQ(answer->body, message) << query;
  }
  absl::StatusOr<http::Response> unknown = CurlGet(Url(**server, "/api/overview?id=nope"));
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->status, 404);

  absl::StatusOr<http::Response> cut = CurlGet(Url(**server, "/api/job?id=wide&list_limit=3"));
  ASSERT_TRUE(cut.ok()) << cut.status();
  v1::JobStatus status;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(cut->body, &status).ok()) << cut->body;
  EXPECT_EQ(status.chunks(1).staged_size(), 3);
  EXPECT_EQ(status.chunks(1).staged_count(), 15u);
  EXPECT_EQ(status.chunks(1).missing_count(), 1u);

  // One chunk, its lists cut the same way: the first staged by rank, the counts of all.
  absl::StatusOr<http::Response> chunk =
      CurlGet(Url(**server, "/api/chunk?id=wide&step=0&chunk=1&list_limit=2"));
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  ASSERT_EQ(chunk->status, 200) << chunk->body;
  v1::ChunkStatus one;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(chunk->body, &one).ok()) << chunk->body;
  ASSERT_EQ(one.staged_size(), 2);
  EXPECT_EQ(one.staged(0).rank(), 0u);
  EXPECT_EQ(one.staged_after_micros_size(), 2);
  EXPECT_EQ(one.staged_count(), 15u);
  ASSERT_EQ(one.missing_size(), 1);
  EXPECT_EQ(one.missing(0).rank(), 5u);
  EXPECT_EQ(one.missing_count(), 1u);
  absl::StatusOr<http::Response> bad =
      CurlGet(Url(**server, "/api/chunk?id=wide&step=0&chunk=1&list_limit=x"));
  ASSERT_TRUE(bad.ok()) << bad.status();
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->body, "query parameter 'list_limit' must be an unsigned integer\n");
}

// /api/jobs as a summary per line: "job_id STATE".
std::vector<std::string> ListedJobs(const std::string& json) {
  v1::ListJobsResponse response;
  std::vector<std::string> out;
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &response);
  if (!parsed.ok()) {
    ADD_FAILURE() << parsed.ToString() << ": " << json;
    return out;
  }
  for (const v1::JobSummary& job : response.jobs()) out.push_back(job.job_id() + " " + job.state());
  return out;
}

// /api/jobs answers as ListJobs: a job evicted and joined again is one line, its live run;
// `states` names any case; an unknown name is 400 naming the parameter and the allowed values.
TEST(HttpSideTest, JobsListsAJobOnceAndReadsStatesInAnyCase) {
  serve::FakeClock clock;
  ServerOptions options;
  options.clock = &clock;
  options.coordinator.job_idle_ttl = absl::Minutes(1);
  options.coordinator.rank_lease = absl::Hours(1);  // no lost-rank abort in this test
  options.coordinator.lost_rank_abort_after = absl::Hours(2);
  auto server = StartHttp(options);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Coordinator::NewStub(
      grpc::CreateChannel((*server)->target(), grpc::InsecureChannelCredentials()));
  auto join_all = [&](const std::string& job) {
    for (uint32_t r = 0; r < 2; ++r) {
      grpc::ClientContext context;
      v1::JoinResponse joined;
      const grpc::Status s = stub->Join(&context, testing::MakeJoin(job, 2, r, 1), &joined);
      ASSERT_TRUE(s.ok()) << job << ": " << s.error_message();
    }
  };
  auto get = [&](const std::string& path) {
    absl::StatusOr<http::Response> response = CurlGet(Url(**server, path));
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : http::Response::Text(0, "");
  };
  join_all("done");
  ASSERT_TRUE((*server)->coordinator().EndJob("done", "finished", "").ok());
  join_all("again");
  clock.Advance(absl::Minutes(1));
  ASSERT_EQ((*server)->coordinator().EnforceLiveness().size(), 1u);  // "again" evicted
  EXPECT_THAT(ListedJobs(get("/api/jobs").body), ElementsAre("done ENDED", "again EVICTED"));
  join_all("again");

  EXPECT_THAT(ListedJobs(get("/api/jobs").body), ElementsAre("again RUNNING", "done ENDED"));
  EXPECT_THAT(ListedJobs(get("/api/jobs?states=running").body), ElementsAre("again RUNNING"));
  EXPECT_THAT(ListedJobs(get("/api/jobs?states=Ended,RUNNING").body),
              ElementsAre("again RUNNING", "done ENDED"));
  EXPECT_THAT(ListedJobs(get("/api/jobs?states=evicted").body), IsEmpty());
  EXPECT_THAT(ListedJobs(get("/api/jobs?states=ENDED,evicted").body), ElementsAre("done ENDED"));
  for (const char* bad : {"done", "run", "EVICTEDX"}) {
    const http::Response refused = get(absl::StrCat("/api/jobs?states=ended,", bad));
    EXPECT_EQ(refused.status, 400) << bad;
    EXPECT_EQ(refused.body, absl::StrCat("query parameter 'states': '", bad,
                                         "' is not a job state (FORMING, RUNNING, DEGRADED, "
                                         "ABORTED, ENDED, EVICTED, in any case)\n"));
  }
}

}  // namespace
}  // namespace psync::server

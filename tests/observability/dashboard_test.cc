// The dashboard end to end: the coordinator binary serves it on its HTTP port, a job of simulated
// ranks runs over gRPC with one rank held back, and headless Chromium loads the page; the test
// asserts on the DOM the page rendered (data attributes set by app.js), then lets the held-back
// rank stage and checks that the page moves to the next step. It also saves a screenshot of the
// populated page (test outputs; and to $PSYNC_DASHBOARD_SCREENSHOT when set, e.g. the
// docs/dashboard.png of the repository).
//
// Skipped when Chromium is not installed (Debian package "chromium").
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/http/testing/curl_client.h"
#include "tests/observability/sim_job.h"

namespace psync::testing {
namespace {

using ::testing::Ge;
using ::testing::HasSubstr;

std::string TempDir() { return ::testing::TempDir(); }

bool IsExecutable(const std::string& path) { return access(path.c_str(), X_OK) == 0; }

// Chromium's path: $CHROMIUM, or Debian's /usr/bin/chromium; "" when neither exists.
std::string FindChromium() {
  if (const char* env = std::getenv("CHROMIUM"); env != nullptr && IsExecutable(env)) return env;
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (IsExecutable(path)) return path;
  }
  return "";
}

// The coordinator binary: $PSYNC_COORDINATOR, or //server:psync-coordinator from the runfiles.
std::string CoordinatorBinary() {
  if (const char* env = std::getenv("PSYNC_COORDINATOR"); env != nullptr && *env != '\0') {
    return env;
  }
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return absl::StrCat(srcdir != nullptr ? srcdir : ".", "/psync/server/psync-coordinator");
}

// A child process; terminated (SIGTERM, then SIGKILL) and reaped by the destructor.
class Process {
 public:
  static std::unique_ptr<Process> Start(const std::vector<std::string>& argv,
                                        const std::string& log_path) {
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      const int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (log >= 0) {
        dup2(log, STDOUT_FILENO);
        dup2(log, STDERR_FILENO);
      }
      execv(args[0], args.data());
      _exit(127);
    }
    return std::unique_ptr<Process>(new Process(pid));
  }
  ~Process() {
    kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  bool running() const { return waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  explicit Process(pid_t pid) : pid_(pid) {}
  pid_t pid_;
};

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// Waits for a port file written by the coordinator; 0 on timeout.
int WaitForPort(const std::string& path, const Process& process) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && process.running()) {
    int port = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFile(path)), &port) && port > 0) {
      return port;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return 0;
}

// Runs a shell command; returns its stdout.
std::string Capture(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[8192];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

class Chromium {
 public:
  explicit Chromium(std::string binary) : binary_(std::move(binary)) {}

  // Loads `url`, lets the page run for 5 s of virtual time, and returns the serialized DOM.
  std::string DumpDom(const std::string& url) {
    return Capture(Command({"--dump-dom", Quote(url)}));
  }

  // Loads `url` and writes a PNG screenshot of the window to `path`.
  void Screenshot(const std::string& url, const std::string& path) {
    Capture(Command({"--window-size=1280,900", "--hide-scrollbars",
                     Quote(absl::StrCat("--screenshot=", path)), Quote(url)}));
  }

 private:
  static std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

  std::string Command(const std::vector<std::string>& extra) {
    const std::string profile = absl::StrCat(TempDir(), "/chromium-profile-", runs_++);
    mkdir(profile.c_str(), 0700);
    std::vector<std::string> parts = {
        absl::StrCat("HOME=", Quote(TempDir())),
        "timeout 120",
        Quote(binary_),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        Quote(absl::StrCat("--user-data-dir=", profile)),
        "--virtual-time-budget=5000",
    };
    parts.insert(parts.end(), extra.begin(), extra.end());
    parts.push_back(absl::StrCat("2>>", Quote(absl::StrCat(TempDir(), "/chromium.log"))));
    return absl::StrJoin(parts, " ");
  }

  std::string binary_;
  int runs_ = 0;
};

// The attributes of every element with tag `tag` whose opening tag contains `marker`.
std::vector<std::map<std::string, std::string>> Elements(const std::string& dom,
                                                         const std::string& tag,
                                                         const std::string& marker) {
  std::vector<std::map<std::string, std::string>> out;
  const std::regex open("<" + tag + "\\b([^>]*)>");
  const std::regex attr("([a-zA-Z_:][-a-zA-Z0-9_:.]*)=\"([^\"]*)\"");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), open); it != std::sregex_iterator();
       ++it) {
    const std::string attrs = (*it)[1];
    if (attrs.find(marker) == std::string::npos) continue;
    std::map<std::string, std::string> element;
    for (auto a = std::sregex_iterator(attrs.begin(), attrs.end(), attr);
         a != std::sregex_iterator(); ++a) {
      element[(*a)[1]] = (*a)[2];
    }
    out.push_back(std::move(element));
  }
  return out;
}

// The node map: node -> its tile's attributes.
std::map<std::string, std::map<std::string, std::string>> Tiles(const std::string& dom) {
  std::map<std::string, std::map<std::string, std::string>> tiles;
  for (auto& e : Elements(dom, "div", "class=\"node\"")) tiles[e["data-node"]] = e;
  return tiles;
}

// The expanded node's ranks: (rank, chunk) -> state.
std::map<std::pair<int, int>, std::string> Cells(const std::string& dom) {
  std::map<std::pair<int, int>, std::string> cells;
  for (auto& e : Elements(dom, "td", "class=\"cell\"")) {
    cells[{std::stoi(e["data-rank"]), std::stoi(e["data-chunk"])}] = e["data-state"];
  }
  return cells;
}

// The step shown in the header of each chunk's column.
std::map<int, std::string> ChunkSteps(const std::string& dom) {
  std::map<int, std::string> steps;
  for (auto& e : Elements(dom, "th", "class=\"chunk-head\"")) {
    steps[std::stoi(e["data-chunk"])] = e["data-step"];
  }
  return steps;
}

std::string Attr(const std::string& dom, const std::string& tag, const std::string& marker,
                 const std::string& name) {
  auto elements = Elements(dom, tag, marker);
  return elements.empty() ? "" : elements.front()[name];
}

class DashboardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string chromium = FindChromium();
    if (chromium.empty()) {
      GTEST_SKIP() << "Chromium is not installed: the dashboard test needs Debian's 'chromium' "
                      "package (apt-get install chromium) or $CHROMIUM";
    }
    chromium_ = std::make_unique<Chromium>(chromium);
    // The coordinator pings every 2 s and drops a peer that does not answer within 2 s. The
    // simulated ranks use the synchronous API and sit idle while Chromium runs, so their pings are
    // only answered by gRPC's backup poller (every 5 s by default): poll more often. Read when
    // gRPC starts, i.e. before the first channel below.
    setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "200", /*overwrite=*/0);
    const std::string grpc_port_file = TempDir() + "/grpc.port";
    const std::string http_port_file = TempDir() + "/http.port";
    std::remove(grpc_port_file.c_str());
    std::remove(http_port_file.c_str());
    const std::string binary = CoordinatorBinary();
    ASSERT_TRUE(IsExecutable(binary)) << binary;
    coordinator_ =
        Process::Start({binary, "--listen=127.0.0.1:0", "--port_file=" + grpc_port_file,
                        "--http_listen=127.0.0.1:0", "--http_port_file=" + http_port_file,
                        "--inspect_interval=20ms", "--stall_initial=300ms", "--stall_floor=100ms"},
                       TempDir() + "/coordinator.log");
    const int grpc_port = WaitForPort(grpc_port_file, *coordinator_);
    http_port_ = WaitForPort(http_port_file, *coordinator_);
    ASSERT_GT(grpc_port, 0) << ReadFile(TempDir() + "/coordinator.log");
    ASSERT_GT(http_port_, 0) << ReadFile(TempDir() + "/coordinator.log");
    for (const char* path : {"/", "/index.html", "/app.js", "/style.css"}) {
      auto page = http::testing::CurlGet(absl::StrCat("http://127.0.0.1:", http_port_, path));
      ASSERT_TRUE(page.ok()) << path << ": " << page.status();
      ASSERT_EQ(page->status, 200) << "the coordinator does not serve the dashboard's " << path
                                   << " (ServerOptions::dashboard = psync::dashboard::Files())";
    }
    SimJobOptions options;
    options.job_id = "train";
    options.world_size = 8;
    options.num_chunks = 6;
    options.expert_chunks = {1, 3, 5};
    options.experts = 2;
    options.ranks_per_node = 4;  // "node-0": ranks 0-3, "node-1": ranks 4-7
    auto job = SimJob::Start(absl::StrCat("127.0.0.1:", grpc_port), options);
    ASSERT_TRUE(job.ok()) << job.status();
    job_ = std::move(*job);
  }

  std::string Url(const std::string& extra = "") const {
    return absl::StrCat("http://127.0.0.1:", http_port_, "/?job=train", extra);
  }

  // Waits (up to 20 s) until the coordinator has recorded a stall of (step, chunk) of the job,
  // reading /api/events page by page; returns whether it did.
  bool WaitForStall(uint64_t step, uint32_t chunk) {
    const std::string step_field = absl::StrCat("\"step\":\"", step, "\"");
    const std::string chunk_field = absl::StrCat("\"chunk\":", chunk);
    uint64_t since = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      auto page = http::testing::CurlGet(absl::StrCat(
          "http://127.0.0.1:", http_port_, "/api/events?job=train&kinds=stall&since=", since));
      if (page.ok() && page->status == 200) {
        for (absl::string_view event : absl::StrSplit(page->body, "},{")) {
          if (absl::StrContains(event, step_field) &&
              (absl::StrContains(event, chunk_field + ",") ||
               absl::StrContains(event, chunk_field + "}"))) {
            return true;
          }
        }
        // Continue after what this answer covered: {"events":[...],"next":N,"end":E}.
        absl::string_view rest = page->body;
        const size_t at = rest.find("\"next\":");
        if (at != absl::string_view::npos) {
          rest.remove_prefix(at + 7);
          absl::SimpleAtoi(rest.substr(0, rest.find(',')), &since);
        }
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    return false;
  }

  std::unique_ptr<Chromium> chromium_;
  std::unique_ptr<Process> coordinator_;
  int http_port_ = 0;
  std::unique_ptr<SimJob> job_;
};

TEST_F(DashboardTest, ShowsTheHeldBackRankAsMissingThenTheNextStep) {
  // 8 ranks, 6 chunks (dense everywhere, expert in chunks 1, 3, 5). Eight clean steps; rank 7
  // stages each chunk a few ms after the others (the straggler). In step 7, rank 1 reports that
  // it executed chunk 2's sync twice (a violation).
  for (uint64_t step = 0; step < 8; ++step) {
    ASSERT_TRUE(job_->StageStep(step, {}, /*straggler=*/7, absl::Milliseconds(2)).ok());
    for (uint32_t c = 0; c < 6; ++c) {
      ASSERT_TRUE(job_->SyncChunk(step, c, step == 7 && c == 2 ? 1 : -1).ok());
    }
    if (step == 7) {
      v1::SessionUp up;
      up.mutable_sync_done()->set_generation(job_->generation());
      v1::SyncDone* item = up.mutable_sync_done()->add_items();
      item->set_step(7);
      item->set_chunk(2);
      item->set_executions(2);
      ASSERT_TRUE(job_->session(1)->Send(up).ok());
    }
  }
  // Step 8: rank 5's expert optimizer holds chunk 3 back; chunk 4 is released but rank 6 does not
  // report its SyncDone; the other chunks finish. Chunk 3 waits past its stall deadline.
  ASSERT_TRUE(job_->StageStep(8, {{5, 3, "expert"}}).ok());
  for (uint32_t c : {0, 1, 2, 5}) ASSERT_TRUE(job_->SyncChunk(8, c).ok());
  ASSERT_TRUE(job_->SyncChunk(8, 4, /*skip_rank=*/6).ok());
  // The page is read once chunk 3 has waited past its stall deadline (the stall is recorded).
  ASSERT_TRUE(WaitForStall(8, 3)) << ReadFile(TempDir() + "/coordinator.log");

  // Node 1 (ranks 4-7) is drilled into: its ranks' cells are on the page.
  const std::string dom = chromium_->DumpDom(Url("&node=node-1"));
  ASSERT_THAT(dom, HasSubstr("id=\"node-map\"")) << ReadFile(TempDir() + "/chromium.log");
  EXPECT_THAT(Attr(dom, "body", "data-renders", "data-connection"), "live") << dom;
  int renders = 0;
  ASSERT_TRUE(absl::SimpleAtoi(Attr(dom, "body", "data-renders", "data-renders"), &renders));
  EXPECT_THAT(renders, Ge(2));

  // The node map: one tile per node, with its worst state per chunk.
  auto tiles = Tiles(dom);
  ASSERT_EQ(tiles.size(), 2u) << dom;
  EXPECT_EQ(tiles["node-0"]["data-chunks"], "IIISDI");
  EXPECT_EQ(tiles["node-0"]["data-state"], "staged");
  EXPECT_EQ(tiles["node-0"]["data-missing"], "0");
  EXPECT_EQ(tiles["node-1"]["data-chunks"], "IIIMYI");
  EXPECT_EQ(tiles["node-1"]["data-state"], "missing");
  EXPECT_EQ(tiles["node-1"]["data-missing"], "1");

  const auto cells = Cells(dom);
  ASSERT_EQ(cells.size(), 24u) << dom;
  for (int r = 4; r < 8; ++r) {
    EXPECT_EQ(cells.at({r, 3}), r == 5 ? "missing" : "staged") << "rank " << r;
    EXPECT_EQ(cells.at({r, 4}), r == 6 ? "syncing" : "synced") << "rank " << r;
    for (int c : {0, 1, 2, 5}) EXPECT_EQ(cells.at({r, c}), "idle") << r << "," << c;
  }
  EXPECT_EQ(ChunkSteps(dom), (std::map<int, std::string>{
                                 {0, "9"}, {1, "9"}, {2, "9"}, {3, "8"}, {4, "8"}, {5, "9"}}));

  // Missing now, grouped, the longest waiting first: chunk 3's expert optimizer of one rank (past
  // the deadline), then chunk 4's SyncDone of one rank; the oldest waiter is rank 5.
  auto missing = Elements(dom, "tr", "data-what=");
  ASSERT_EQ(missing.size(), 2u) << dom;
  EXPECT_EQ(missing[0]["data-chunk"], "3");
  EXPECT_EQ(missing[0]["data-step"], "8");
  EXPECT_EQ(missing[0]["data-what"], "expert");
  EXPECT_EQ(missing[0]["data-ranks"], "1");
  EXPECT_EQ(missing[0]["data-nodes"], "1");
  EXPECT_EQ(missing[0]["data-late"], "true");
  EXPECT_EQ(missing[1]["data-chunk"], "4");
  EXPECT_EQ(missing[1]["data-what"], "sync_done");
  EXPECT_EQ(Attr(dom, "p", "id=\"oldest-waiter\"", "data-rank"), "5") << dom;

  // The slowest node holds rank 7.
  auto slow_nodes = Elements(dom, "tr", "data-score=");
  ASSERT_FALSE(slow_nodes.empty()) << dom;
  EXPECT_EQ(slow_nodes[0]["data-node"], "node-1");
  EXPECT_EQ(slow_nodes[0]["data-position"], "1");

  // Stragglers: rank 7 first.
  auto stragglers = Elements(dom, "tr", "data-rank=\"");
  stragglers.erase(std::remove_if(stragglers.begin(), stragglers.end(),
                                  [](auto& e) { return e.count("data-position") == 0; }),
                   stragglers.end());
  ASSERT_FALSE(stragglers.empty()) << dom;
  EXPECT_EQ(stragglers[0]["data-rank"], "7");
  EXPECT_EQ(stragglers[0]["data-position"], "1");

  // Release wait per step: steps 0..8.
  EXPECT_EQ(Attr(dom, "svg", "id=\"wait-chart\"", "data-points"), "9");

  // The stall of chunk 3 and the repeated sync.
  auto problems = Elements(dom, "li", "data-kind=");
  std::map<std::string, int> kinds;
  for (auto& p : problems) ++kinds[p["data-kind"]];
  EXPECT_GE(kinds["stall"], 1) << dom;
  EXPECT_EQ(kinds["violation"], 1) << dom;
  bool stall_of_chunk_3 = false;
  for (auto& p : problems) {
    stall_of_chunk_3 |=
        p["data-kind"] == "stall" && p["data-chunk"] == "3" && p["data-step"] == "8";
  }
  EXPECT_TRUE(stall_of_chunk_3) << dom;
  EXPECT_THAT(dom, HasSubstr("missing rank 5 expert"));
  EXPECT_THAT(dom, HasSubstr("repeated sync: rank 1 executed the sync of step 7 chunk 2 2 times"));

  // Counters: 8 steps x 6 chunks + 5 chunks of step 8 released.
  EXPECT_EQ(Attr(dom, "dd", "data-counter=\"releases\"", "data-value"), "53");
  EXPECT_EQ(Attr(dom, "dd", "data-counter=\"repeated_syncs\"", "data-value"), "1");

  // A screenshot of the populated page.
  const char* outputs = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  const std::string png = absl::StrCat(outputs != nullptr ? outputs : TempDir(), "/dashboard.png");
  chromium_->Screenshot(Url("&node=node-1"), png);
  const std::string image = ReadFile(png);
  ASSERT_GT(image.size(), 1000u) << ReadFile(TempDir() + "/chromium.log");
  EXPECT_EQ(image.substr(0, 8), "\x89PNG\r\n\x1a\n");
  if (const char* copy = std::getenv("PSYNC_DASHBOARD_SCREENSHOT"); copy != nullptr && *copy) {
    std::ofstream(copy, std::ios::binary) << image;
  }

  // Rank 5 stages, rank 6 reports its SyncDone, every rank syncs chunk 3: the job is at step 9.
  absl::Status staged = job_->Stage(5, 8, 3, "expert");
  ASSERT_TRUE(staged.ok()) << staged << "\n" << ReadFile(TempDir() + "/coordinator.log");
  ASSERT_TRUE(job_->session(6)->SyncDone(job_->generation(), 8, 4).ok());
  absl::Status synced = job_->SyncChunk(8, 3);
  ASSERT_TRUE(synced.ok()) << synced;
  const std::string next = chromium_->DumpDom(Url("&node=node-1"));
  EXPECT_EQ(ChunkSteps(next), (std::map<int, std::string>{
                                  {0, "9"}, {1, "9"}, {2, "9"}, {3, "9"}, {4, "9"}, {5, "9"}}));
  for (const auto& [cell, state] : Cells(next)) {
    EXPECT_EQ(state, "idle") << cell.first << "," << cell.second;
  }
  EXPECT_EQ(Attr(next, "dd", "id=\"min-step\"", "data-value"), "9");
  EXPECT_TRUE(Elements(next, "tr", "data-what=").empty());
  for (const auto& [node, tile] : Tiles(next)) EXPECT_EQ(tile.at("data-state"), "idle") << node;
}

}  // namespace
}  // namespace psync::testing

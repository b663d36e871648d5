// psyncctl against an in-process coordinator (real gRPC, fake clock) with a held-back rank: each
// command's table, JSON and exit code; usage errors and RPC failures exit 2. The last test runs
// the built binary to check main's wiring of the exit codes.
#include "client/psyncctl.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "server/test_server.h"
#include "tests/observability/sim_job.h"

namespace psync::testing {
namespace {

using ::testing::AllOf;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int code = -1;
  std::string out;
  std::string err;
};

class PsyncctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::CoordinatorOptions options;
    options.observer.deadline.initial = absl::Seconds(1);
    options.rank_lease = absl::Seconds(10);
    options.lost_rank_abort_after = absl::Hours(1);
    auto server = server::TestServer::Start(options, &clock_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    SimJobOptions job;
    job.job_id = "train";
    auto sim = SimJob::Start(server_->target(), job);
    ASSERT_TRUE(sim.ok()) << sim.status();
    job_ = std::move(*sim);
  }

  Result Run(std::vector<std::string> args, ctl::Interrupt* interrupt = nullptr) {
    args.insert(args.begin(), {"--target", server_->target()});
    std::ostringstream out;
    std::ostringstream err;
    Result r;
    r.code = ctl::RunPsyncctl(args, out, err, interrupt);
    r.out = out.str();
    r.err = err.str();
    return r;
  }

  // Steps 0..n-1 complete; rank 3 stages each chunk 20 ms (fake time) after the others.
  void RunCleanSteps(int n) {
    for (int step = 0; step < n; ++step) {
      std::set<Holdback> rank3;
      for (uint32_t c = 0; c < 4; ++c) {
        for (const std::string& opt : job_->Optimizers(c)) rank3.insert({3, c, opt});
      }
      ASSERT_TRUE(job_->StageStep(step, rank3).ok());
      clock_.Advance(absl::Milliseconds(20));
      for (const auto& [rank, chunk, opt] : rank3)
        ASSERT_TRUE(job_->Stage(rank, step, chunk, opt).ok());
      for (uint32_t c = 0; c < 4; ++c) ASSERT_TRUE(job_->SyncChunk(step, c).ok());
    }
  }

  // In step `step`, rank 2's expert optimizer does not stage chunk 1; the other chunks are
  // released and synced by every rank.
  void HoldBackRank2(uint64_t step) {
    ASSERT_TRUE(job_->StageStep(step, {{2, 1, "expert"}}).ok());
    for (uint32_t c : {0, 2, 3}) ASSERT_TRUE(job_->SyncChunk(step, c).ok());
  }

  serve::FakeClock clock_{absl::FromUnixSeconds(1700000000)};
  std::unique_ptr<server::TestServer> server_;
  std::unique_ptr<SimJob> job_;
};

TEST_F(PsyncctlTest, MissingNamesTheHeldBackRankAndExitsOneOncePastTheDeadline) {
  RunCleanSteps(2);
  HoldBackRank2(2);
  clock_.Advance(absl::Milliseconds(50));

  // Within the deadline: listed, exit 0.
  Result early = Run({"missing", "train"});
  EXPECT_EQ(early.code, 0) << early.err;
  EXPECT_THAT(early.out, HasSubstr("stage expert"));
  EXPECT_THAT(early.out, Not(HasSubstr("LATE")));

  clock_.Advance(absl::Seconds(5));
  Result late = Run({"missing", "train"});
  EXPECT_EQ(late.code, 1) << late.err;
  const std::vector<std::string> lines = absl::StrSplit(late.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << late.out;
  EXPECT_THAT(lines[0],
              ContainsRegex("^CHUNK +STEP +MISSING +RANKS +NODES +WAITING +DEADLINE +WHO$"));
  EXPECT_THAT(lines[1], ContainsRegex("^    1 +2 +stage expert +1 +1 +5\\.05s +1\\.00s +LATE +"
                                      "rank 2 \\(ranks 0-3\\)$"));
  // One row per rank with --ranks.
  Result by_rank = Run({"missing", "train", "--ranks"});
  EXPECT_EQ(by_rank.code, 1) << by_rank.err;
  const std::vector<std::string> rank_lines = absl::StrSplit(by_rank.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(rank_lines.size(), 2u) << by_rank.out;
  EXPECT_THAT(rank_lines[0], ContainsRegex("^CHUNK +STEP +RANK +MISSING +WAITING +DEADLINE$"));
  EXPECT_THAT(rank_lines[1], ContainsRegex("^    1 +2 +2 +stage expert +5\\.05s +1\\.00s +LATE$"));

  // One chunk, by step.
  Result one = Run({"missing", "train", "--step", "2", "--chunk", "1"});
  EXPECT_EQ(one.code, 1) << one.err;
  EXPECT_THAT(one.out, ContainsRegex("\n +1 +2 +2 +stage expert +5\\.05s +1\\.00s +LATE\n"));
  EXPECT_THAT(one.out, HasSubstr("STAGED_RANK  OPTIMIZER  AFTER_FIRST"));
  // Chunk 0 is done with step 2 and waits for nothing.
  Result other = Run({"missing", "train", "--chunk=0"});
  EXPECT_EQ(other.code, 0);
  EXPECT_EQ(other.out, "nobody is missing\n");
}

TEST_F(PsyncctlTest, MissingListsRanksWithoutSyncDone) {
  ASSERT_TRUE(job_->StageStep(0).ok());
  for (uint32_t c = 0; c < 4; ++c) {
    ASSERT_TRUE(job_->SyncChunk(0, c, /*skip_rank=*/c == 2 ? 3 : -1).ok());
  }
  clock_.Advance(absl::Milliseconds(1500));
  Result r = Run({"missing", "train", "--ranks"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_EQ(r.out,
            "CHUNK  STEP  RANK  MISSING    WAITING  DEADLINE\n"
            "    2     0     3  sync_done    1.50s     1.00s  LATE\n");
  Result grouped = Run({"missing", "train"});
  EXPECT_EQ(grouped.code, 1) << grouped.err;
  EXPECT_EQ(grouped.out,
            "CHUNK  STEP  MISSING    RANKS  NODES  WAITING  DEADLINE        WHO\n"
            "    2     0  sync_done      1      1    1.50s     1.00s  LATE  rank 3 (ranks 0-3)\n");
}

TEST_F(PsyncctlTest, MissingJsonIsTheChunkStatus) {
  HoldBackRank2(0);
  clock_.Advance(absl::Seconds(3));
  Result r = Run({"--json", "missing", "train", "--step=0", "--chunk=1"});
  EXPECT_EQ(r.code, 1) << r.err;
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(r.out, &parsed).ok()) << r.out;
  const auto& chunks = parsed.fields().at("chunks").list_value();
  ASSERT_EQ(chunks.values_size(), 1);
  v1::ChunkStatus status;
  std::string chunk_json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(chunks.values(0), &chunk_json).ok());
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(chunk_json, &status).ok());
  EXPECT_EQ(status.state(), "WAITING");
  ASSERT_EQ(status.missing_size(), 1);
  EXPECT_EQ(status.missing(0).rank(), 2u);
  EXPECT_EQ(status.missing(0).optimizer(), "expert");
  EXPECT_EQ(status.waiting_micros(), 3000000);
}

TEST_F(PsyncctlTest, StatusTableAndJson) {
  RunCleanSteps(1);
  HoldBackRank2(1);
  Result table = Run({"status", "train"});
  EXPECT_EQ(table.code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("state       RUNNING"));
  EXPECT_THAT(table.out, HasSubstr("nodes       1, 1 holding a chunk back\n"));
  EXPECT_THAT(table.out, ContainsRegex("\n +1 +1 +WAITING +7/8 +0us +1\\.00s +"
                                       "expert: rank 2 \\(ranks 0-3\\)\n"));
  // Rank 3 staged every chunk 20 ms after the others in step 0: the slowest node's slowest rank.
  EXPECT_THAT(table.out, ContainsRegex("\nSLOWEST_NODE +RANKS +SLOWEST_RANK +SCORE +HOLDING_BACK\n"
                                       "ranks 0-3 +0-3 +3 +[0-9.]+ms +1\n$"));
  Result by_rank = Run({"status", "train", "--ranks"});
  EXPECT_EQ(by_rank.code, 0) << by_rank.err;
  EXPECT_THAT(by_rank.out, ContainsRegex("\n +1 +1 +WAITING +7/8 +0us +1\\.00s +2/expert\n"));
  EXPECT_THAT(by_rank.out, Not(HasSubstr("SLOWEST_NODE")));

  clock_.Advance(absl::Seconds(2));
  Result json = Run({"status", "train", "--json"});
  EXPECT_EQ(json.code, 1) << "a chunk waits past its deadline";
  v1::JobStatus status;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &status).ok()) << json.out;
  EXPECT_EQ(status.job_id(), "train");
  EXPECT_EQ(status.chunks(1).missing(0).rank(), 2u);
}

// 64 ranks on 8 named nodes: the expert optimizers of nodes 2-4 (24 ranks) and rank 61's dense
// optimizer hold chunk 1 back. By default each is one line; --ranks lists 25.
TEST_F(PsyncctlTest, MissingAndStatusGroupRanksByNode) {
  SimJobOptions options;
  options.job_id = "big";
  options.world_size = 64;
  options.ranks_per_node = 8;
  auto big = SimJob::Start(server_->target(), options);
  ASSERT_TRUE(big.ok()) << big.status();
  std::set<Holdback> held = {{61, 1, "dense"}};
  for (uint32_t r = 16; r < 40; ++r) held.insert({r, 1, "expert"});
  ASSERT_TRUE((*big)->StageStep(0, held).ok());
  for (uint32_t c : {0, 2, 3}) ASSERT_TRUE((*big)->SyncChunk(0, c).ok());
  clock_.Advance(absl::Seconds(2));

  Result grouped = Run({"missing", "big"});
  EXPECT_EQ(grouped.code, 1) << grouped.err;
  EXPECT_EQ(grouped.out,
            "CHUNK  STEP  MISSING       RANKS  NODES  WAITING  DEADLINE        WHO\n"
            "    1     0  stage dense       1      1    2.00s     1.00s  LATE  rank 61 (node-7)\n"
            "    1     0  stage expert     24      3    2.00s     1.00s  LATE  "
            "ranks 16-39 (node-2, node-3, node-4)\n");
  Result by_rank = Run({"missing", "big", "--ranks"});
  EXPECT_EQ(by_rank.code, 1);
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(by_rank.out, '\n', absl::SkipEmpty())).size(),
            1u + 25u);

  Result json = Run({"--json", "missing", "big"});
  EXPECT_EQ(json.code, 1);
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok()) << json.out;
  const auto& groups = parsed.fields().at("groups").list_value();
  ASSERT_EQ(groups.values_size(), 2);
  v1::MissingGroup expert;
  std::string expert_json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(groups.values(1), &expert_json).ok());
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(expert_json, &expert).ok());
  EXPECT_EQ(expert.what(), "expert");
  EXPECT_EQ(expert.num_ranks(), 24u);
  EXPECT_EQ(expert.num_nodes(), 3u);
  ASSERT_EQ(expert.ranks_size(), 1);
  EXPECT_EQ(expert.ranks(0).first(), 16u);
  EXPECT_EQ(expert.ranks(0).last(), 39u);

  Result status = Run({"status", "big"});
  EXPECT_EQ(status.code, 1);
  EXPECT_THAT(status.out, HasSubstr("nodes       8, 4 holding a chunk back\n"));
  EXPECT_THAT(status.out, ContainsRegex("\n +1 +0 +WAITING +103/128 +2\\.00s +1\\.00s +LATE +"
                                        "dense: rank 61 \\(node-7\\); expert: ranks 16-39 "
                                        "\\(node-2, node-3, node-4\\)\n"));
}

TEST_F(PsyncctlTest, StatusOfADegradedJobExitsOne) {
  RunCleanSteps(1);
  ASSERT_TRUE(job_->session(3)->Finish().ok());  // rank 3's session ends; it does not come back
  clock_.Advance(absl::Seconds(11));
  server_->coordinator().EnforceLiveness();
  Result r = Run({"status", "train"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("state       DEGRADED"));
  EXPECT_THAT(r.out, HasSubstr("lost ranks  3"));
  Result lost = Run({"watch", "train", "--kinds", "rank_lost", "--replay", "--count", "1"});
  EXPECT_EQ(lost.code, 1);
  EXPECT_THAT(lost.out, HasSubstr("rank_lost"));
}

TEST_F(PsyncctlTest, HealthAnswersServingPerServiceAndNotFoundOtherwise) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"health"}, {"health", "psync.v1.Coordinator"}}) {
    Result r = Run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, "SERVING\n");
  }
  Result json = Run({"--json", "health", "psync.v1.Coordinator"});
  EXPECT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.out, "{\"status\":\"SERVING\"}\n");
  Result unknown = Run({"health", "psync.v1.Nope"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.out, "");
  EXPECT_NE(unknown.err.find("Health.Check to " + server_->target() + " failed: NOT_FOUND"),
            std::string::npos)
      << unknown.err;
  EXPECT_EQ(Run({"health", "a", "b"}).code, 2);
}

TEST_F(PsyncctlTest, JobsListsEveryJobSorted) {
  SimJobOptions other;
  other.job_id = "alpha";
  other.world_size = 2;
  auto second = SimJob::Start(server_->target(), other);
  ASSERT_TRUE(second.ok());
  Result r = Run({"jobs"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out,
            "JOB    STATE    GEN  RANKS  MIN_STEP  ENDED_BECAUSE\n"
            "alpha  RUNNING    1    2/2         0\n"
            "train  RUNNING    1    4/4         0\n");
  Result json = Run({"jobs", "--json"});
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &jobs).ok()) << json.out;
  ASSERT_EQ(jobs.jobs_size(), 2);
  EXPECT_EQ(jobs.jobs(0).job_id(), "alpha");
}

// end-job ends a job; it then shows as ENDED with its reason (live jobs first), --state filters,
// and ending it again says so.
TEST_F(PsyncctlTest, EndJobThenJobsShowsItAsEndedWithItsReason) {
  SimJobOptions other;
  other.job_id = "alpha";
  other.world_size = 2;
  auto second = SimJob::Start(server_->target(), other);
  ASSERT_TRUE(second.ok());
  Result ended = Run({"end-job", "alpha", "--reason", "ablation done"});
  EXPECT_EQ(ended.code, 0) << ended.err;
  EXPECT_EQ(ended.out, "job alpha ended: ablation done\n");
  Result r = Run({"jobs"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out,
            "JOB    STATE    GEN  RANKS  MIN_STEP  ENDED_BECAUSE\n"
            "train  RUNNING    1    4/4         0\n"
            "alpha  ENDED      1    2/2         0  ablation done\n");
  Result only_ended = Run({"jobs", "--state", "ENDED"});
  EXPECT_EQ(only_ended.out,
            "JOB    STATE  GEN  RANKS  MIN_STEP  ENDED_BECAUSE\n"
            "alpha  ENDED    1    2/2         0  ablation done\n");
  Result bogus = Run({"jobs", "--state", "DONE"});
  EXPECT_EQ(bogus.code, 2);
  EXPECT_THAT(bogus.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(bogus.err, HasSubstr("states[0]: 'DONE' is not a job state"));
  Result again = Run({"end-job", "alpha"});
  EXPECT_EQ(again.code, 0);
  EXPECT_EQ(again.out, "job alpha had already ended: ablation done\n");
  Result unknown = Run({"end-job", "nope"});
  EXPECT_EQ(unknown.code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("NOT_FOUND"));
  Result status = Run({"status", "alpha"});
  EXPECT_THAT(status.out, HasSubstr("state       ENDED: ablation done\n"));
}

TEST_F(PsyncctlTest, StragglersRankTheLateRankFirst) {
  RunCleanSteps(3);
  Result r = Run({"stragglers", "train", "--top", "2"});
  EXPECT_EQ(r.code, 0) << r.err;
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_THAT(lines[0], ContainsRegex("^RANK +SCORE +LAST +SAMPLES +TIMES_LAST$"));
  EXPECT_THAT(lines[1], ContainsRegex("^   3 +[0-9.]+ms +20\\.0ms +[0-9]+ +12$")) << r.out;
  Result json = Run({"stragglers", "train", "--json"});
  google::protobuf::Struct parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &parsed).ok()) << json.out;
  EXPECT_EQ(parsed.fields()
                .at("stragglers")
                .list_value()
                .values(0)
                .struct_value()
                .fields()
                .at("rank")
                .number_value(),
            3);
}

TEST_F(PsyncctlTest, AuditIsCleanThenFlagsARepeatedSync) {
  RunCleanSteps(2);
  Result clean = Run({"audit", "train"});
  EXPECT_EQ(clean.code, 0) << clean.err;
  EXPECT_THAT(clean.out, ContainsRegex("^GEN +STEP +CHUNK +SEQ +RELEASES +SYNCS_DONE +COMPLETE "
                                       "+WAIT +SYNC +PROBLEMS\n"));
  EXPECT_THAT(clean.out, HasSubstr("totals: released=8 complete=8 double_releases=0"));

  // Step 2: rank 0 reports it executed chunk 0's sync twice.
  ASSERT_TRUE(job_->StageStep(2).ok());
  ASSERT_TRUE(job_->SyncChunk(2, 0, /*skip_rank=*/0).ok());
  v1::SessionUp up;
  up.mutable_sync_done()->set_generation(job_->generation());
  v1::SyncDone* item = up.mutable_sync_done()->add_items();
  item->set_step(2);
  item->set_chunk(0);
  item->set_executions(2);
  ASSERT_TRUE(job_->session(0)->Send(up).ok());
  Result bad = Run({"audit", "train", "--last", "4"});
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_THAT(bad.out, HasSubstr("1 repeated"));
  EXPECT_THAT(bad.out, HasSubstr("repeated_syncs=1"));
  Result json = Run({"audit", "train", "--json"});
  EXPECT_EQ(json.code, 1);
  v1::GetAuditResponse audit;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &audit).ok()) << json.out;
  EXPECT_EQ(audit.totals().repeated_syncs(), 1u);
}

TEST_F(PsyncctlTest, WatchPrintsEventsUntilCountAndFlagsStalls) {
  RunCleanSteps(1);
  Result releases = Run({"watch", "train", "--kinds", "release", "--replay", "--count", "2"});
  EXPECT_EQ(releases.code, 0) << releases.err;
  const std::vector<std::string> lines = absl::StrSplit(releases.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << releases.out;
  EXPECT_THAT(lines[0], ContainsRegex("release +job=train gen=1 step=0 chunk=0 rank=3 "
                                      "opt=dense seq=1 dur=20\\.0ms"));

  HoldBackRank2(1);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(server_->coordinator().EnforceLiveness().size(), 1u);
  Result stall = Run({"watch", "train", "--kinds=stall,violation", "--replay", "--count=1"});
  EXPECT_EQ(stall.code, 1) << stall.err;
  EXPECT_THAT(stall.out, AllOf(HasSubstr("stall"), HasSubstr("missing=2/expert")));

  Result json = Run({"watch", "--json", "--replay", "--count", "1", "--kinds", "stall"});
  v1::Event event;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json.out, &event).ok()) << json.out;
  EXPECT_EQ(event.kind(), "stall");
  EXPECT_EQ(event.contributors(0).rank(), 2u);
}

TEST_F(PsyncctlTest, WatchStopsOnInterrupt) {
  ctl::Interrupt interrupt;
  Result r;
  absl::Notification done;
  std::thread watcher([&] {
    r = Run({"watch", "train", "--kinds", "release"}, &interrupt);
    done.Notify();
  });
  ASSERT_TRUE(job_->StageStep(0).ok());
  // The watcher may not have subscribed before the releases; either way it must stop.
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  interrupt.Fire();
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  watcher.join();
  EXPECT_EQ(r.code, 0) << r.err;
}

TEST_F(PsyncctlTest, TraceWritesChromeTraceJson) {
  RunCleanSteps(2);
  const std::string path = absl::StrCat(::testing::TempDir(), "/trace.json");
  Result r = Run({"trace", "train", "--steps", "0:1", "-o", path});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("bytes to " + path));
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(text.str(), &trace).ok()) << text.str();
  int spans = 0;
  for (const auto& e : trace.fields().at("traceEvents").list_value().values()) {
    if (e.struct_value().fields().at("ph").string_value() == "X") ++spans;
  }
  // Per (step, chunk): 4 stage + 1 release + 4 sync spans.
  EXPECT_EQ(spans, 2 * 4 * 9);
}

TEST_F(PsyncctlTest, UsageErrorsAndRpcFailuresExitTwo) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, "no command given"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
      {{"missing"}, "'missing' takes 1 argument (JOB), got 0"},
      {{"status", "a", "b"}, "'status' takes 1 argument (JOB), got 2"},
      {{"missing", "train", "--step", "1"}, "--step needs --chunk"},
      {{"missing", "train", "--step", "x", "--chunk", "0"},
       "--step must be a non-negative integer"},
      {{"missing", "train", "--chunk", "9"}, "--chunk 9 out of range [0, 4)"},
      {{"missing", "train", "--top", "3"}, "flag --top does not apply to 'missing'"},
      {{"status", "train", "--bogus"}, "unknown flag '--bogus'"},
      {{"status", "train", "--json=yes"}, "flag --json takes no value"},
      {{"stragglers", "train", "--top"}, "flag --top needs a value"},
      {{"trace", "train", "-o", "x"}, "trace needs --steps A:B"},
      {{"trace", "train", "--steps", "3:1", "-o", "x"}, "A must not exceed B"},
      {{"trace", "train", "--steps", "1-3", "-o", "x"}, "--steps must be A:B"},
      {{"trace", "train", "--steps", "1:3"}, "trace needs -o FILE"},
      {{"watch", "--count", "0"}, "--count must be at least 1"},
      {{"status", "nope"}, "GetJobOverview to 127.0.0.1:"},
      {{"status", "nope", "--ranks"}, "GetJobStatus to 127.0.0.1:"},
      {{"stragglers", "train", "--ranks"},
       "flag --ranks does not apply to 'stragglers' (it belongs to 'status' or 'missing')"},
      {{"status", "nope"}, "failed: NOT_FOUND: "},
      {{"--timeout", "0", "jobs"}, "--timeout must be a positive number"},
  };
  for (const Case& c : cases) {
    Result r = Run(c.args);
    EXPECT_EQ(r.code, 2) << absl::StrJoin(c.args, " ");
    EXPECT_THAT(r.err, HasSubstr(c.message)) << absl::StrJoin(c.args, " ");
    EXPECT_EQ(r.out, "") << absl::StrJoin(c.args, " ");
  }
  // Nobody listens on port 1.
  std::ostringstream out;
  std::ostringstream err;
  EXPECT_EQ(ctl::RunPsyncctl({"--target", "127.0.0.1:1", "--timeout", "2", "jobs"}, out, err), 2);
  EXPECT_THAT(err.str(), HasSubstr("ListJobs to 127.0.0.1:1 failed: UNAVAILABLE"));
}

TEST_F(PsyncctlTest, HelpExitsZero) {
  Result r = Run({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("Usage: psyncctl"));
  EXPECT_THAT(r.out, HasSubstr("Exit codes:"));
}

// The binary, as a user runs it.
TEST_F(PsyncctlTest, BinaryExitCodes) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  ASSERT_NE(srcdir, nullptr);
  const std::string binary = absl::StrCat(srcdir, "/psync/client/psyncctl");
  auto run = [&](const std::string& args, std::string* out) {
    const std::string command =
        absl::StrCat(binary, " --target ", server_->target(), " ", args, " 2>&1");
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[4096];
    size_t n;
    out->clear();
    while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
    const int status = pclose(pipe);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  std::string out;
  EXPECT_EQ(run("--help", &out), 0);
  EXPECT_EQ(run("missing", &out), 2);
  EXPECT_THAT(out, HasSubstr("'missing' takes 1 argument"));
  HoldBackRank2(0);
  EXPECT_EQ(run("missing train", &out), 0) << out;
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(run("missing train", &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("stage expert"));
}

}  // namespace
}  // namespace psync::testing

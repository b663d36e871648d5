#include "worker/report.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

ModelConfig Config() {
  ModelConfig c;
  c.world_size = 4;
  c.rank = 1;
  c.expert_parallel = 2;
  c.num_chunks = 2;
  return c;
}

// A diff of `n` elements that are all wrong.
WeightDiff AllWrong(int64_t n, int64_t zeroed, int64_t nonfinite, double max_abs_error) {
  WeightDiff d;
  d.elements = n;
  d.mismatched = n;
  d.zeroed = zeroed;
  d.nonfinite = nonfinite;
  d.max_abs_error = max_abs_error;
  d.first_mismatch = 0;
  return d;
}

WeightDiff Zeroed(int64_t n) { return AllWrong(n, /*zeroed=*/n, /*nonfinite=*/0, 0.5); }

WeightDiff Garbage(int64_t n) { return AllWrong(n, /*zeroed=*/n / 4, /*nonfinite=*/1, 2.5); }

// A naive step: chunk c synced twice; the first sync left garbage in the expert weights, the
// second zeros in the dense weights.
StepResult NaiveStep(int64_t step) {
  StepResult r;
  r.step = step;
  r.chunks_synced = 2;
  r.executions = 4;
  r.early_sync_answers = 2;
  r.final_diff.resize(2);
  for (int c = 0; c < 2; ++c) {
    SyncExecution first;
    first.chunk = c;
    first.execution = 1;
    first.dense_staged = true;
    first.diff[static_cast<int>(ParamKind::kExpert)] = Garbage(4096);
    r.syncs.push_back(first);
    r.final_diff[c][static_cast<int>(ParamKind::kDense)] = Zeroed(4096);
  }
  for (int c = 0; c < 2; ++c) {
    SyncExecution second;
    second.chunk = c;
    second.execution = 2;
    second.dense_staged = second.expert_staged = true;
    second.diff[static_cast<int>(ParamKind::kDense)] = Zeroed(4096);
    r.syncs.push_back(second);
  }
  return r;
}

std::string Joined(const std::vector<std::string>& lines) { return absl::StrJoin(lines, "\n"); }

TEST(StepLinesTest, CorrectStepIsOneLine) {
  StepResult r;
  r.step = 3;
  r.chunks_synced = 2;
  r.executions = 2;
  r.verified = true;
  r.final_diff.resize(2);
  const std::vector<std::string> lines = StepLines(Config(), TrainerOptions(), r);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("rank 1 step 3: synced 2/2 chunks in 2 executions"), std::string::npos)
      << lines[0];
  EXPECT_NE(lines[0].find("verify OK"), std::string::npos) << lines[0];
}

TEST(StepLinesTest, NaiveStepNamesChunksWeightsAndHow) {
  const std::string text = Joined(StepLines(Config(), TrainerOptions(), NaiveStep(0)));
  EXPECT_NE(text.find("verify FAIL"), std::string::npos) << text;
  EXPECT_NE(text.find("chunk 0 dense weights (dp) WRONG at the end of the step: 100.0% of 4096 "
                      "elements wrong: 100.0% zeroed"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("chunk 1 expert weights (edp1) WRONG after sync 1 of 2 (ran after the "
                      "dense optimizer staged, before the expert optimizer staged)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2 SyncDone answered 'before the release'"), std::string::npos) << text;
  // The dense zeros of the last execution are reported once, as the end-of-step state.
  EXPECT_EQ(text.find("dense weights (dp) WRONG after sync 2"), std::string::npos) << text;
}

TEST(RunSummaryTest, OkRun) {
  RunSummary summary(Config(), TrainerOptions());
  StepResult r;
  r.chunks_synced = 2;
  r.executions = 2;
  r.verified = true;
  summary.Add(r);
  summary.Add(r);
  EXPECT_TRUE(summary.ok());
  const std::string text = Joined(summary.Lines());
  EXPECT_NE(text.find("rank 1 result: OK: all 2 steps verified"), std::string::npos) << text;
  EXPECT_NE(text.find("bit for bit"), std::string::npos) << text;
  EXPECT_NE(text.find("4 chunk syncs in 4 executions"), std::string::npos) << text;
}

TEST(RunSummaryTest, NaiveRunSaysWhichChunksAndWeightsWentWrong) {
  RunSummary summary(Config(), TrainerOptions());
  summary.Add(NaiveStep(0));
  summary.Add(NaiveStep(1));
  EXPECT_FALSE(summary.ok());
  EXPECT_EQ(summary.failed_steps(), 2);
  const std::string text = Joined(summary.Lines());
  EXPECT_NE(text.find("rank 1 result: FAIL: 2 of 2 steps ended with wrong weights"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("chunk 1 dense weights (dp) wrong at the end of 2 of 2 steps: up to "
                      "100.0% of the elements wrong, 100.0% zeroed"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("chunk 0 expert weights (edp1) wrong after sync 1 of 2 in 2 steps"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("4 chunk syncs in 8 executions (exactly once would be 4); 4 SyncDone"),
            std::string::npos)
      << text;
}

TEST(BenchTest, MediansAndBandwidth) {
  std::vector<StepResult> timed(5);
  for (int i = 0; i < 5; ++i) {
    timed[i].grad_seconds = 0.001 * (i + 1);
    timed[i].stage_seconds = 0.002;
    timed[i].sync_seconds = 0.003;
  }
  const BenchSummary b = SummarizeBench(timed);
  EXPECT_EQ(b.steps, 5);
  EXPECT_DOUBLE_EQ(b.grad_median, 0.003);
  EXPECT_DOUBLE_EQ(b.step_median, 0.008);
  GatherStats gather[2];
  gather[0].calls = 10;
  gather[0].bytes = 10 * 1000000;
  gather[0].seconds = 0.01;
  TrainerOptions options;
  options.verify = false;
  const std::string text = Joined(BenchLines(Config(), options, "cpu", "gloo", b, gather, 2));
  EXPECT_NE(text.find("step median 8.000 ms"), std::string::npos) << text;
  // 1e7 bytes in 10 ms: algbw 1 GB/s, busbw 3/4 of it over the 4-rank dp group.
  EXPECT_NE(text.find("algbw 1.00 GB/s, busbw 0.75 GB/s"), std::string::npos) << text;
  EXPECT_EQ(text.find("expert all-gather"), std::string::npos) << text;  // no calls
}

TEST(AuditTest, StepRanges) {
  EXPECT_EQ(StepRanges({}), "");
  EXPECT_EQ(StepRanges({4}), "4");
  EXPECT_EQ(StepRanges({0, 1, 2, 3, 5, 7, 8, 9}), "0-3,5,7-9");
}

TEST(AuditTest, CleanAndViolatingAudits) {
  AuditSnapshot s;
  s.status.set_job_id("demo");
  s.status.set_generation(1);
  s.status.set_state("RUNNING");
  s.status.set_world_size(4);
  s.status.set_ranks_joined(4);
  psync::v1::AuditTotals* t = s.audit.mutable_totals();
  t->set_released(8);
  t->set_complete(8);
  EXPECT_TRUE(AuditClean(*t));
  EXPECT_NE(Joined(AuditLines(s)).find("coordinator audit: CLEAN: 8 (step, chunk)s"),
            std::string::npos);

  t->set_early_syncs(8);
  t->set_repeated_syncs(4);
  for (uint64_t step : {0, 1, 2, 4}) {
    psync::v1::SyncAuditRecord* r = s.audit.add_records();
    r->set_step(step);
    r->set_chunk(1);
    r->set_releases(1);
    r->set_complete(true);
    r->set_early_syncs(2);
    r->set_repeated_syncs(1);
  }
  EXPECT_FALSE(AuditClean(*t));
  const std::string text = Joined(AuditLines(s));
  EXPECT_NE(text.find("chunk 1: 8 early syncs (SyncDone before the release) in steps 0-2,4; 4 "
                      "repeated syncs (a rank synced twice) in steps 0-2,4"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("coordinator audit: VIOLATIONS: 8 early syncs, 4 repeated syncs"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace worker
}  // namespace psync

#include "worker/trainer.h"

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo_collective.h"
#include "worker/collective/in_memory_kv_store.h"
#include "worker/compute/cpu_backend.h"
#include "worker/fake_coordination.h"
#include "worker/trainer_testing.h"

namespace psync {
namespace worker {
namespace {

constexpr uint64_t kSeed = 9;
constexpr int kChunks = 2;
constexpr absl::Duration kTimeout = absl::Seconds(30);

struct RankRun {
  absl::Status status = absl::UnknownError("not run");
  std::vector<StepResult> results;
  std::unique_ptr<FakeCoordination> link = std::make_unique<FakeCoordination>();
};

// Runs `steps` steps on 2 ranks (E = 2: expert groups of one rank) as threads, each with its own
// fake link prepared by `prepare`.
std::vector<RankRun> RunRanks(TrainerOptions options, int steps,
                              const std::function<void(FakeCoordination&)>& prepare = nullptr) {
  constexpr int kWorld = 2;
  InMemoryKeyValueStore store;
  std::unique_ptr<CollectiveFactory> factory = NewGlooCollectiveFactory(GlooOptions());
  std::vector<RankRun> runs(kWorld);
  for (RankRun& run : runs) {
    if (prepare) prepare(*run.link);
  }
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.emplace_back([&, rank] {
      RankRun& run = runs[rank];
      ModelConfig config;
      config.world_size = kWorld;
      config.rank = rank;
      config.expert_parallel = 2;
      config.num_chunks = kChunks;
      config.dense_elements = 300;
      config.expert_elements = 200;
      config.buckets = 2;
      std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
      std::unique_ptr<Collective> groups[2];
      for (ParamKind kind : kParamKinds) {
        auto group = factory->Create(config.GroupName(kind), config.GroupRank(kind),
                                     config.GroupSize(kind), &store, kTimeout);
        if (!group.ok()) {
          run.status = group.status();
          return;
        }
        groups[static_cast<int>(kind)] = std::move(*group);
      }
      auto model = RankModel::Create(config, kSeed, AdamParams(), backend.get(), groups[0].get(),
                                     groups[1].get());
      if (!model.ok()) {
        run.status = model.status();
        return;
      }
      ReferenceModel reference(config, kSeed, AdamParams());
      Trainer trainer(model->get(), &reference, run.link.get(), options);
      run.status = RunSteps(trainer, steps, &run.results);
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

TEST(SyncModeTest, NamesRoundTrip) {
  for (SyncMode mode : {SyncMode::kCoordinated, SyncMode::kNaive, SyncMode::kLocalDeferred}) {
    EXPECT_EQ(*ParseSyncMode(SyncModeName(mode)), mode);
  }
  EXPECT_EQ(ParseSyncMode("eager").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainerTest, CoordinatedStagesEverythingThenSyncsEachChunkOnItsDirective) {
  std::vector<RankRun> runs = RunRanks(TrainerOptions(), 2);
  for (RankRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    for (const StepResult& r : run.results) {
      EXPECT_TRUE(r.verified) << "step " << r.step;
      EXPECT_EQ(r.chunks_synced, kChunks);
      EXPECT_EQ(r.executions, kChunks);
      EXPECT_EQ(r.early_sync_answers, 0);
    }
    const std::vector<std::string> want = {
        "staged 0 0 dense", "staged 0 1 dense", "staged 0 0 expert", "staged 0 1 expert",
        "wait 0 0",         "done 0 0 x1",      "wait 0 1",          "done 0 1 x1"};
    std::vector<std::string> log = run.link->log();
    log.resize(want.size());
    EXPECT_EQ(log, want);
    for (const FakeCoordination::SyncDoneCall& c : run.link->sync_dones()) {
      EXPECT_EQ(c.checksums, 2u);  // dp and edp<k>
    }
  }
}

TEST(TrainerTest, DirectiveTimeoutEndsTheStepWithItsStatus) {
  std::vector<RankRun> runs = RunRanks(TrainerOptions(), 1, [](FakeCoordination& link) {
    link.directive_status = absl::DeadlineExceededError("no directive");
  });
  for (RankRun& run : runs) {
    EXPECT_EQ(run.status.code(), absl::StatusCode::kDeadlineExceeded) << run.status;
    EXPECT_NE(run.status.message().find("step 0 chunk 0"), std::string::npos) << run.status;
  }
}

TEST(TrainerTest, NaiveSyncsTwicePerChunkAndZeroesTheDenseWeights) {
  TrainerOptions options;
  options.mode = SyncMode::kNaive;
  std::vector<RankRun> runs = RunRanks(options, 2, [](FakeCoordination& link) {
    link.early_sync_done_status = absl::FailedPreconditionError("before the release");
  });
  for (RankRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    for (const StepResult& r : run.results) {
      EXPECT_FALSE(r.verified);
      EXPECT_EQ(r.chunks_synced, kChunks);
      EXPECT_EQ(r.executions, 2 * kChunks);
      // Both local reports of each chunk come before the (fake) release.
      EXPECT_EQ(r.early_sync_answers, 2 * kChunks);
      ASSERT_EQ(r.final_diff.size(), static_cast<size_t>(kChunks));
      for (int c = 0; c < kChunks; ++c) {
        const WeightDiff& dense = r.final_diff[c][static_cast<int>(ParamKind::kDense)];
        EXPECT_EQ(dense.actual_zeros, dense.elements) << dense.Describe();
        EXPECT_EQ(dense.zeroed, dense.mismatched) << dense.Describe();
        EXPECT_TRUE(r.final_diff[c][static_cast<int>(ParamKind::kExpert)].ok());
      }
      // The first execution of each chunk ran before the expert optimizer staged, and left
      // garbage in the expert weights.
      int first_executions = 0;
      for (const SyncExecution& e : r.syncs) {
        if (e.execution != 1) continue;
        ++first_executions;
        EXPECT_TRUE(e.dense_staged);
        EXPECT_FALSE(e.expert_staged);
        EXPECT_FALSE(e.diff[static_cast<int>(ParamKind::kExpert)].ok());
        EXPECT_TRUE(e.diff[static_cast<int>(ParamKind::kDense)].ok());
      }
      EXPECT_EQ(first_executions, kChunks);
    }
    // Per chunk: x1 after the dense stage, x2 after the expert stage, then x2 after the directive.
    std::vector<std::tuple<uint32_t, uint32_t>> step0;
    for (const FakeCoordination::SyncDoneCall& c : run.link->sync_dones()) {
      if (c.step == 0) step0.emplace_back(c.chunk, c.executions);
    }
    const std::vector<std::tuple<uint32_t, uint32_t>> want = {{0, 1}, {1, 1}, {0, 2},
                                                              {1, 2}, {0, 2}, {1, 2}};
    EXPECT_EQ(step0, want);
  }
}

TEST(TrainerTest, LocalDeferredSyncsOnceWithoutWaitingAndReportsAfterTheRelease) {
  TrainerOptions options;
  options.mode = SyncMode::kLocalDeferred;
  std::vector<RankRun> runs = RunRanks(options, 2);
  for (RankRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    for (const StepResult& r : run.results) {
      EXPECT_TRUE(r.verified);
      EXPECT_EQ(r.executions, kChunks);
    }
    const std::vector<std::string> want = {
        "staged 0 0 dense", "staged 0 1 dense", "staged 0 0 expert", "staged 0 1 expert",
        "done 0 0 x1",      "done 0 1 x1",      "wait 0 0",          "done 0 0 x1",
        "wait 0 1",         "done 0 1 x1"};
    std::vector<std::string> log = run.link->log();
    log.resize(want.size());
    EXPECT_EQ(log, want);
  }
}

TEST(TrainerTest, NaiveWithoutReportsNeverCallsTheCoordinator) {
  TrainerOptions options;
  options.mode = SyncMode::kNaive;
  options.report = false;
  std::vector<RankRun> runs = RunRanks(options, 1);
  for (RankRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_TRUE(run.link->log().empty());
    EXPECT_FALSE(run.results[0].verified);
  }
}

TEST(TrainerTest, BackendGradientsRunUnverified) {
  TrainerOptions options;
  options.verify = false;
  options.checksums = false;
  options.gradients = GradientSource::kBackend;
  std::vector<RankRun> runs = RunRanks(options, 2);
  for (RankRun& run : runs) {
    ASSERT_TRUE(run.status.ok()) << run.status;
    EXPECT_EQ(run.results[1].executions, kChunks);
    EXPECT_TRUE(run.results[1].final_diff.empty());
    for (const FakeCoordination::SyncDoneCall& c : run.link->sync_dones())
      EXPECT_EQ(c.checksums, 0u);
  }
}

}  // namespace
}  // namespace worker
}  // namespace psync

// The training loop on GPUs: CUDA compute and NCCL groups, checked bit for bit against the CPU
// reference. Built only with --config=cuda (worker/BUILD); a case fails, naming what is missing,
// when the machine lacks the GPUs it needs (one, or two for the 2-rank cases): a test that ran
// nothing never passes. On a one-GPU machine, leave the 2-rank cases out explicitly:
//   bazel test --config=cuda //worker:trainer_gpu_test --test_arg=--gtest_filter=-*TwoGpus*
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/collective/collective_factory.h"
#include "worker/collective/in_memory_kv_store.h"
#include "worker/compute/backend_registry.h"
#include "worker/fake_coordination.h"
#include "worker/trainer.h"
#include "worker/trainer_testing.h"

namespace psync {
namespace worker {
namespace {

constexpr uint64_t kSeed = 13;
constexpr int kChunks = 2;
constexpr int kSteps = 3;
constexpr absl::Duration kTimeout = absl::Seconds(60);

// Why GPUs 0..world-1 cannot be used here, or "" when they can.
std::string GpusMissing(int world) {
  for (int gpu = 0; gpu < world; ++gpu) {
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
        MakeComputeBackend(absl::StrCat("cuda:", gpu));
    if (!backend.ok()) return std::string(backend.status().message());
  }
  absl::StatusOr<std::unique_ptr<CollectiveFactory>> nccl = MakeCollectiveFactory("nccl");
  if (!nccl.ok()) return std::string(nccl.status().message());
  return "";
}

struct RankRun {
  absl::Status status = absl::UnknownError("not run");
  std::vector<StepResult> results;
};

// `world` ranks, one thread and one GPU each, E = world (expert groups of one rank) or 1.
std::vector<RankRun> RunOnGpus(int world, int experts, ParamDtype dtype, SyncMode mode) {
  InMemoryKeyValueStore store;
  absl::StatusOr<std::unique_ptr<CollectiveFactory>> factory = MakeCollectiveFactory("nccl");
  std::vector<RankRun> runs(world);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      RankRun& run = runs[rank];
      ModelConfig config;
      config.world_size = world;
      config.rank = rank;
      config.expert_parallel = experts;
      config.num_chunks = kChunks;
      config.dense_elements = (1 << 20) + 100;  // padded
      config.expert_elements = 1 << 19;
      config.buckets = 3;
      config.dtype = dtype;
      absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
          MakeComputeBackend(absl::StrCat("cuda:", rank));
      if (!backend.ok()) {
        run.status = backend.status();
        return;
      }
      // Makes this thread's GPU current for the NCCL groups.
      if (auto touch = (*backend)->Allocate(0); !touch.ok()) {
        run.status = touch.status();
        return;
      }
      std::unique_ptr<Collective> groups[2];
      for (ParamKind kind : kParamKinds) {
        auto group = (*factory)->Create(
            absl::StrCat(ParamDtypeName(dtype), SyncModeName(mode), ".", config.GroupName(kind)),
            config.GroupRank(kind), config.GroupSize(kind), &store, kTimeout);
        if (!group.ok()) {
          run.status = group.status();
          return;
        }
        groups[static_cast<int>(kind)] = std::move(*group);
      }
      auto model = RankModel::Create(config, kSeed, AdamParams(), backend->get(), groups[0].get(),
                                     groups[1].get());
      if (!model.ok()) {
        run.status = model.status();
        return;
      }
      ReferenceModel reference(config, kSeed, AdamParams());
      FakeCoordination link;
      TrainerOptions options;
      options.mode = mode;
      Trainer trainer(model->get(), &reference, &link, options);
      run.status = RunSteps(trainer, kSteps, &run.results);
    });
  }
  for (std::thread& t : threads) t.join();
  return runs;
}

void ExpectVerified(const std::vector<RankRun>& runs) {
  for (size_t rank = 0; rank < runs.size(); ++rank) {
    ASSERT_TRUE(runs[rank].status.ok()) << "rank " << rank << ": " << runs[rank].status;
    for (const StepResult& r : runs[rank].results) {
      EXPECT_TRUE(r.verified) << "rank " << rank << " step " << r.step;
      EXPECT_EQ(r.executions, kChunks);
    }
  }
}

void ExpectDenseZeroed(const std::vector<RankRun>& runs) {
  for (size_t rank = 0; rank < runs.size(); ++rank) {
    ASSERT_TRUE(runs[rank].status.ok()) << "rank " << rank << ": " << runs[rank].status;
    for (const StepResult& r : runs[rank].results) {
      EXPECT_FALSE(r.verified);
      for (int c = 0; c < kChunks; ++c) {
        const WeightDiff& dense = r.final_diff[c][static_cast<int>(ParamKind::kDense)];
        EXPECT_EQ(dense.actual_zeros, dense.elements) << dense.Describe();
        EXPECT_EQ(dense.zeroed, dense.mismatched) << dense.Describe();
      }
    }
  }
}

class TrainerGpuTest : public ::testing::TestWithParam<ParamDtype> {};

TEST_P(TrainerGpuTest, OneGpuCoordinatedMatchesTheCpuReferenceBitForBit) {
  ASSERT_EQ(GpusMissing(1), "") << "this case needs 1 GPU(s)";
  ExpectVerified(RunOnGpus(1, 1, GetParam(), SyncMode::kCoordinated));
}

TEST_P(TrainerGpuTest, OneGpuNaiveZeroesTheDenseWeights) {
  ASSERT_EQ(GpusMissing(1), "") << "this case needs 1 GPU(s)";
  ExpectDenseZeroed(RunOnGpus(1, 1, GetParam(), SyncMode::kNaive));
}

TEST_P(TrainerGpuTest, TwoGpusCoordinatedMatchTheCpuReferenceBitForBit) {
  ASSERT_EQ(GpusMissing(2), "") << "this case needs 2 GPU(s)";
  ExpectVerified(RunOnGpus(2, 1, GetParam(), SyncMode::kCoordinated));
  ExpectVerified(RunOnGpus(2, 2, GetParam(), SyncMode::kLocalDeferred));
}

TEST_P(TrainerGpuTest, TwoGpusNaiveZeroesTheDenseWeights) {
  ASSERT_EQ(GpusMissing(2), "") << "this case needs 2 GPU(s)";
  ExpectDenseZeroed(RunOnGpus(2, 1, GetParam(), SyncMode::kNaive));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, TrainerGpuTest,
                         ::testing::Values(ParamDtype::kBf16, ParamDtype::kMxfp8),
                         [](const ::testing::TestParamInfo<ParamDtype>& info) {
                           return std::string(ParamDtypeName(info.param));
                         });

}  // namespace
}  // namespace worker
}  // namespace psync

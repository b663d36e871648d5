#include "worker/rank_model.h"

#include <cstring>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo_collective.h"
#include "worker/collective/in_memory_kv_store.h"
#include "worker/compute/cpu_backend.h"
#include "worker/reference_model.h"
#include "worker/weights_check.h"

namespace psync {
namespace worker {
namespace {

constexpr uint64_t kSeed = 5;
constexpr absl::Duration kTimeout = absl::Seconds(30);

ModelConfig Config(int world, int rank, int experts, ParamDtype dtype) {
  ModelConfig c;
  c.world_size = world;
  c.rank = rank;
  c.expert_parallel = experts;
  c.num_chunks = 2;
  c.dense_elements = 1000;  // padded
  c.expert_elements = 700;
  c.buckets = 2;
  c.dtype = dtype;
  return c;
}

// Runs body(rank, model, reference) on `world` threads, each rank with its own CPU backend, Gloo
// groups over one in-memory store, and reference; returns the statuses.
std::vector<absl::Status> RunRanks(
    int world, int experts, ParamDtype dtype, const std::string& name,
    const std::function<absl::Status(int, RankModel&, ReferenceModel&)>& body) {
  InMemoryKeyValueStore store;
  std::unique_ptr<CollectiveFactory> factory = NewGlooCollectiveFactory(GlooOptions());
  std::vector<absl::Status> statuses(world, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank] {
      const ModelConfig config = Config(world, rank, experts, dtype);
      std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
      std::unique_ptr<Collective> groups[2];
      for (ParamKind kind : kParamKinds) {
        absl::StatusOr<std::unique_ptr<Collective>> group =
            factory->Create(absl::StrCat(name, ".", config.GroupName(kind)), config.GroupRank(kind),
                            config.GroupSize(kind), &store, kTimeout);
        if (!group.ok()) {
          statuses[rank] = group.status();
          return;
        }
        groups[static_cast<int>(kind)] = std::move(*group);
      }
      absl::StatusOr<std::unique_ptr<RankModel>> model = RankModel::Create(
          config, kSeed, AdamParams(), backend.get(), groups[0].get(), groups[1].get());
      if (!model.ok()) {
        statuses[rank] = model.status();
        return;
      }
      ReferenceModel reference(config, kSeed, AdamParams());
      statuses[rank] = body(rank, **model, reference);
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "rank " << i << ": " << statuses[i];
  }
}

absl::Status Compare(RankModel& model, const ReferenceModel& reference, int chunk, ParamKind kind,
                     WeightDiff* diff) {
  absl::StatusOr<std::vector<float>> weights = model.Weights(chunk, kind);
  if (!weights.ok()) return weights.status();
  *diff = CompareWeights(*weights, reference.ExpectedWeights(chunk, kind), 0.0f);
  return absl::OkStatus();
}

#define RETURN_IF_ERROR(expr)          \
  do {                                 \
    absl::Status status_ = (expr);     \
    if (!status_.ok()) return status_; \
  } while (false)

// Stage everything, then sync each chunk once: the weights equal the reference bit for bit.
TEST(RankModelTest, StageAllThenSyncOnceMatchesTheReferenceBitForBit) {
  for (ParamDtype dtype : {ParamDtype::kBf16, ParamDtype::kMxfp8}) {
    SCOPED_TRACE(ParamDtypeName(dtype));
    ExpectAllOk(RunRanks(
        4, 2, dtype, absl::StrCat("ok", static_cast<int>(dtype)),
        [](int rank, RankModel& model, ReferenceModel& reference) {
          for (int64_t step = 0; step < 3; ++step) {
            RETURN_IF_ERROR(reference.Step(step));
            RETURN_IF_ERROR(model.WriteGradients(step, GradientSource::kExactHost));
            RETURN_IF_ERROR(model.ReduceScatterGradients());
            for (ParamKind kind : kParamKinds) {
              for (int c = 0; c < 2; ++c) RETURN_IF_ERROR(model.Stage(c, kind, step));
            }
            for (int c = 0; c < 2; ++c) RETURN_IF_ERROR(model.Sync(c));
            for (int c = 0; c < 2; ++c) {
              for (ParamKind kind : kParamKinds) {
                WeightDiff diff;
                RETURN_IF_ERROR(Compare(model, reference, c, kind, &diff));
                if (!diff.ok()) {
                  return absl::InternalError(absl::StrCat("rank ", rank, " step ", step, " chunk ",
                                                          c, " ", ParamKindName(kind), ": ",
                                                          diff.Describe()));
                }
              }
            }
          }
          return absl::OkStatus();
        }));
  }
}

// Megatron #4800: sync each chunk right after each optimizer's stage. The first sync gathers
// the expert buffer before the expert optimizer staged it (gradient bytes: garbage), the second
// gathers the dense buffer after the first sync zeroed it. The fp32 main params stay right.
TEST(RankModelTest, SyncAfterEachOptimizerZeroesTheDenseWeights) {
  ExpectAllOk(RunRanks(
      2, 1, ParamDtype::kBf16, "naive", [](int rank, RankModel& model, ReferenceModel& reference) {
        RETURN_IF_ERROR(reference.Step(0));
        RETURN_IF_ERROR(model.WriteGradients(0, GradientSource::kExactHost));
        RETURN_IF_ERROR(model.ReduceScatterGradients());
        const int64_t real_dense = model.config().dense_elements;
        for (int c = 0; c < 2; ++c) {
          RETURN_IF_ERROR(model.Stage(c, ParamKind::kDense, 0));
          RETURN_IF_ERROR(model.Sync(c));
          WeightDiff expert;
          RETURN_IF_ERROR(Compare(model, reference, c, ParamKind::kExpert, &expert));
          if (expert.mismatched_fraction() < 0.9) {
            return absl::InternalError(absl::StrCat(
                "expert weights after the first sync: ", expert.Describe(), "; want garbage"));
          }
        }
        for (int c = 0; c < 2; ++c) {
          RETURN_IF_ERROR(model.Stage(c, ParamKind::kExpert, 0));
          RETURN_IF_ERROR(model.Sync(c));
          WeightDiff dense, expert;
          RETURN_IF_ERROR(Compare(model, reference, c, ParamKind::kDense, &dense));
          RETURN_IF_ERROR(Compare(model, reference, c, ParamKind::kExpert, &expert));
          // Every real dense element is now zero (the padding is zero in both).
          if (dense.zeroed != real_dense || dense.zeroed != dense.mismatched) {
            return absl::InternalError(absl::StrCat("dense weights: ", dense.Describe()));
          }
          if (!expert.ok()) {
            return absl::InternalError(absl::StrCat("expert weights: ", expert.Describe()));
          }
          // The fp32 main params are right: a norm of them would look healthy.
          absl::StatusOr<std::vector<float>> shard = model.MainParamShard(c, ParamKind::kDense);
          if (!shard.ok()) return shard.status();
          const BufferLayout layout = model.config().Layout(ParamKind::kDense);
          const absl::Span<const float> main = reference.MainParams(c, ParamKind::kDense);
          for (int b = 0; b < layout.buckets(); ++b) {
            for (int64_t j = 0; j < layout.shard_bucket_elements(); ++j) {
              if ((*shard)[layout.ShardIndexOf(b, j)] != main[layout.ElementOf(b, rank, j)]) {
                return absl::InternalError("main param shard differs from the reference");
              }
            }
          }
        }
        return absl::OkStatus();
      }));
}

TEST(RankModelTest, CreateRejectsGroupsOfTheWrongShape) {
  InMemoryKeyValueStore store;
  std::unique_ptr<CollectiveFactory> factory = NewGlooCollectiveFactory(GlooOptions());
  absl::StatusOr<std::unique_ptr<Collective>> solo =
      factory->Create("solo", 0, 1, &store, kTimeout);
  ASSERT_TRUE(solo.ok()) << solo.status();
  std::unique_ptr<ComputeBackend> backend = NewCpuBackend();
  // World size 2 needs a dp group of 2.
  absl::StatusOr<std::unique_ptr<RankModel>> model =
      RankModel::Create(Config(2, 0, 2, ParamDtype::kBf16), kSeed, AdamParams(), backend.get(),
                        solo->get(), solo->get());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("dp"), std::string::npos) << model.status();
  model = RankModel::Create(Config(1, 0, 1, ParamDtype::kBf16), kSeed, AdamParams(), backend.get(),
                            solo->get(), nullptr);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace worker
}  // namespace psync

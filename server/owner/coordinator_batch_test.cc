// Coordinator::ApplyBatch: a batch's answers and counts are those of its messages applied one by
// one, in order, whatever it mixes (check-ins grouped by item between SyncDones and skips, several
// ranks' merged SyncDone, ranks repeating a check-in or a SyncDone, wrong steps, chunks and
// checksums), and whether its runs of
// check-ins are applied group by group or chunk by chunk on several threads at once. Two
// coordinators are given the same random messages: one as batches, the other one message at a
// time.
#include <algorithm>
#include <deque>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/owner/checkin_groups.h"
#include "server/owner/coordinator.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::server::testing::DenseDone;
using ::psync::server::testing::DensePlan;

constexpr uint32_t kRanks = 6;
constexpr uint32_t kChunks = 3;

// Every run of two or more check-ins over two or more chunks applied chunk by chunk on 2 helper
// threads and the caller's.
CoordinatorOptions ByChunk() {
  CoordinatorOptions options;
  options.apply_threads = 2;
  options.apply_by_chunk_min_messages = 2;
  return options;
}

class Twin {
 public:
  explicit Twin(CoordinatorOptions options = CoordinatorOptions())
      : coordinator_(std::move(options), &clock_) {
    for (core::RankId r = 0; r < kRanks; ++r) {
      auto joined = coordinator_.Join(DensePlan("job", r, kRanks, kChunks));
      EXPECT_TRUE(joined.ok()) << joined.status();
    }
  }
  std::vector<absl::Status> Apply(absl::Span<const RankMessage> batch) {
    return coordinator_.ApplyBatch("job", 1, batch);
  }
  JobCounters counters() { return coordinator_.GetJobStatus("job")->counters; }
  core::Step min_step() { return coordinator_.GetJobStatus("job")->snapshot.min_rank_step; }

 private:
  serve::FakeClock clock_;
  Coordinator coordinator_;
};

// Random messages of a job stepping along: check-ins and SyncDones of the slowest rank's step or
// the one after (right for some ranks, early for others), now and then of a chunk out of range, a
// SyncDone now and then with a disagreeing or foreign checksum or two items; ranks repeat; now and
// then a skip, of a step too far ahead.
class Messages {
 public:
  explicit Messages(uint32_t seed) : rng_(seed) {}

  std::vector<RankMessage> NextBatch(Twin& twin) {
    std::vector<RankMessage> batch;
    const size_t n = 1 + Uniform(12);
    for (size_t i = 0; i < n; ++i) {
      RankMessage m;
      m.rank = static_cast<core::RankId>(Uniform(kRanks));
      const core::Step step = twin.min_step() + (Uniform(4) == 0 ? 1 : 0);
      const uint32_t chunk = static_cast<uint32_t>(Uniform(kChunks + (Uniform(10) == 0)));
      switch (Uniform(10)) {
        case 0:
        case 1:
        case 2: {
          m.kind = RankMessage::Kind::kSyncDone;
          std::vector<core::SyncDoneItem> done = DenseDone(step, {chunk});
          switch (Uniform(8)) {
            case 0:  // disagreeing checksum: a mismatch, or a conflicting duplicate
              done[0].checksums[0].checksum = 1;
              break;
            case 1:  // not a group of the chunk
              done[0].checksums[0].group = "tp";
              break;
            case 2:
              done[0].checksums.clear();
              break;
            case 3:
              done.push_back(DenseDone(step, {(chunk + 1) % kChunks})[0]);
              break;
          }
          m.sync_done = Keep(std::move(done));
          // Now and then the same report from a few more ranks (a node's merged SyncDone: one
          // item for all, a rank repeating it among them).
          if (m.sync_done.size() == 1 && Uniform(3) == 0) {
            for (size_t more = 1 + Uniform(4); more > 0; --more) {
              batch.push_back(m);
              m.rank = static_cast<core::RankId>(Uniform(kRanks));
            }
          }
          break;
        }
        case 3:
          if (Uniform(4) == 0) {  // refused (too far ahead): a vote would hold the step back
            m.kind = RankMessage::Kind::kSkip;
            m.skip_step = step + 5;
            break;
          }
          [[fallthrough]];
        default:
          m.staged = Keep(std::vector<core::StagedItem>{Item(step, chunk, "dense")});
      }
      batch.push_back(m);
    }
    return batch;
  }

 private:
  size_t Uniform(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  // A RankMessage is a view: its items are kept here.
  absl::Span<const core::StagedItem> Keep(std::vector<core::StagedItem> items) {
    staged_.push_back(std::move(items));
    return staged_.back();
  }
  absl::Span<const core::SyncDoneItem> Keep(std::vector<core::SyncDoneItem> items) {
    done_.push_back(std::move(items));
    return done_.back();
  }

  std::mt19937 rng_;
  std::deque<std::vector<core::StagedItem>> staged_;
  std::deque<std::vector<core::SyncDoneItem>> done_;
};

// Messages of `batch` that follow a one-item SyncDone carrying the very same item (a merged
// SyncDone's, which Job::ApplyMessages records together).
size_t SameSyncDoneFollowers(absl::Span<const RankMessage> batch) {
  size_t n = 0;
  for (size_t i = 1; i < batch.size(); ++i) {
    n += batch[i].kind == RankMessage::Kind::kSyncDone &&
         batch[i - 1].kind == RankMessage::Kind::kSyncDone && batch[i].sync_done.size() == 1 &&
         batch[i].sync_done.data() == batch[i - 1].sync_done.data();
  }
  return n;
}

// Runs of `batch` that ApplyCheckinGroups applies chunk by chunk with ByChunk().
size_t RunsByChunk(absl::Span<const RankMessage> batch) {
  size_t n = 0;
  for (const BatchRun& run : SplitIntoRuns(batch)) {
    if (!run.groups.has_value() || run.end - run.begin < 2) continue;
    const auto& groups = run.groups->groups();
    n += std::any_of(groups.begin(), groups.end(), [&](const CheckinGroups::Group& g) {
      return g.item->chunk != groups[0].item->chunk;
    });
  }
  return n;
}

void ExpectBatchesAnswerAsMessagesOneByOne(const CoordinatorOptions& options, size_t* grouped_runs,
                                           size_t* runs_by_chunk, size_t* same_sync_dones) {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    Twin batched(options);
    Twin one_by_one;
    Messages messages(seed);
    for (int b = 0; b < 200; ++b) {
      const std::vector<RankMessage> batch = messages.NextBatch(batched);
      for (const BatchRun& run : SplitIntoRuns(batch)) *grouped_runs += run.groups.has_value();
      *runs_by_chunk += RunsByChunk(batch);
      *same_sync_dones += SameSyncDoneFollowers(batch);
      const std::vector<absl::Status> together = batched.Apply(batch);
      ASSERT_EQ(together.size(), batch.size());
      for (size_t i = 0; i < batch.size(); ++i) {
        const std::vector<absl::Status> alone = one_by_one.Apply({batch[i]});
        ASSERT_EQ(alone.size(), 1u);
        ASSERT_EQ(together[i], alone[0]) << "seed " << seed << " batch " << b << " message " << i;
      }
      const JobCounters a = batched.counters();
      const JobCounters o = one_by_one.counters();
      ASSERT_EQ(a.checkins, o.checkins) << "seed " << seed << " batch " << b;
      ASSERT_EQ(a.releases, o.releases);
      ASSERT_EQ(a.syncs_done, o.syncs_done);
      ASSERT_EQ(a.skipped_steps, o.skipped_steps);
      ASSERT_EQ(a.violations, o.violations);
      ASSERT_EQ(a.rejected, o.rejected);
      ASSERT_EQ(a.duplicate_checkins, o.duplicate_checkins);
    }
    // The run is not vacuous: the job stepped along.
    EXPECT_GT(batched.counters().releases, 0u) << "seed " << seed;
  }
}

TEST(CoordinatorBatchTest, ABatchAnswersAsItsMessagesOneByOne) {
  size_t grouped_runs = 0;
  size_t runs_by_chunk = 0;
  size_t same_sync_dones = 0;
  ExpectBatchesAnswerAsMessagesOneByOne(CoordinatorOptions(), &grouped_runs, &runs_by_chunk,
                                        &same_sync_dones);
  EXPECT_GT(grouped_runs, 0u);
  EXPECT_GT(same_sync_dones, 1000u);  // merged SyncDones, recorded together
}

TEST(CoordinatorBatchTest, ABatchAnswersAsItsMessagesOneByOneWithItsChunksAppliedAtOnce) {
  size_t grouped_runs = 0;
  size_t runs_by_chunk = 0;
  size_t same_sync_dones = 0;
  ExpectBatchesAnswerAsMessagesOneByOne(ByChunk(), &grouped_runs, &runs_by_chunk, &same_sync_dones);
  EXPECT_GT(runs_by_chunk, 500u);  // most of them mix ranks that need more than a slot
}

}  // namespace
}  // namespace psync::server

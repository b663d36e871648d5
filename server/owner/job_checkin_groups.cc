// Job::ApplyCheckinGroups: runs of one-item check-ins grouped by item (checkin_groups.h), applied
// group by group, or chunk by chunk on several threads at once when they are many.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "server/owner/job.h"

namespace psync::server {
namespace {

// One chunk's share of the runs, applied on one thread: its groups (run, group), what the
// tracker decided for them, and the ranks it left to StageMerged (run, group, index in the
// group). Aligned so that two threads' shares share no cache line.
struct alignas(64) ChunkShare {
  core::ChunkId chunk = 0;
  std::vector<std::pair<uint32_t, uint32_t>> groups;
  core::Decisions decisions;
  struct Left {
    uint32_t run;
    uint32_t group;
    uint32_t index;
  };
  std::vector<Left> others;
  std::vector<core::Step> recorded;  // steps with a check-in recorded in a slot
};

}  // namespace

size_t Job::ApplyCheckinGroups(absl::Span<const CheckinRun> runs, absl::Time now,
                               const ApplyByChunk& by_chunk, core::Decisions& decisions,
                               Effects* effects) {
  size_t messages = 0;
  bool several_chunks = false;
  std::optional<core::ChunkId> first_chunk;
  for (const CheckinRun& run : runs) {
    for (const CheckinGroups::Group& g : run.groups->groups()) {
      messages += g.end - g.begin;
      if (!first_chunk.has_value()) first_chunk = g.item->chunk;
      several_chunks = several_chunks || g.item->chunk != *first_chunk;
    }
  }
  std::vector<absl::Status> group_statuses;
  const auto apply_group = [&](const CheckinRun& run,
                               const CheckinGroups::Group& g) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    group_statuses.assign(g.end - g.begin, absl::OkStatus());
    ApplyMergedCheckin(run.generation, *g.item, run.groups->ranks(g), now, decisions, effects,
                       absl::MakeSpan(group_statuses));
    const absl::Span<const uint32_t> indices = run.groups->messages(g);
    for (size_t k = 0; k < indices.size(); ++k) {
      run.statuses[indices[k]] = std::move(group_statuses[k]);
    }
  };
  if (!WorthApplyingByChunk(by_chunk, messages) || !several_chunks) {
    for (const CheckinRun& run : runs) {
      for (const CheckinGroups::Group& g : run.groups->groups()) apply_group(run, g);
    }
    return 0;
  }
  // Each chunk's groups, and where their ranks are recorded, created before the threads start
  // (they create nothing). Every answer is OK but for the ranks left to StageMerged below: the
  // threads write none (neighbouring answers are other threads').
  std::vector<ChunkShare> shares;
  std::vector<std::vector<bool>> open(runs.size());
  for (uint32_t r = 0; r < runs.size(); ++r) {
    const std::vector<CheckinGroups::Group>& all = runs[r].groups->groups();
    open[r].resize(all.size());
    for (uint32_t g = 0; g < all.size(); ++g) {
      auto it = std::find_if(shares.begin(), shares.end(),
                             [&](const ChunkShare& s) { return s.chunk == all[g].item->chunk; });
      if (it == shares.end()) it = shares.insert(shares.end(), ChunkShare{all[g].item->chunk});
      it->groups.emplace_back(r, g);
      open[r][g] =
          tracker->OpenInSlots(runs[r].generation, *all[g].item, runs[r].groups->ranks(all[g]));
    }
    std::fill(runs[r].statuses.begin(), runs[r].statuses.end(), absl::OkStatus());
  }
  std::sort(shares.begin(), shares.end(),
            [](const ChunkShare& a, const ChunkShare& b) { return a.chunk < b.chunk; });
  // Each chunk's groups on one thread: they touch only that chunk's marks (StageInSlots).
  core::JobTracker* const chunks_tracker = tracker.get();
  by_chunk.fan_out->Run(shares.size(), 1, [&](size_t begin, size_t end) {
    std::vector<absl::Status> share_statuses;
    std::vector<uint32_t> left;
    for (size_t s = begin; s < end; ++s) {
      ChunkShare& share = shares[s];
      share.decisions.merge_rank_events = decisions.merge_rank_events;
      share.decisions.deliver_to_members_whole = decisions.deliver_to_members_whole;
      for (const auto& [r, g] : share.groups) {
        const CheckinGroups::Group& group = runs[r].groups->groups()[g];
        const absl::Span<const core::RankId> ranks = runs[r].groups->ranks(group);
        left.clear();
        if (open[r][g]) {
          share_statuses.resize(ranks.size());
          chunks_tracker->StageInSlots(runs[r].generation, *group.item, ranks, now,
                                       &share.decisions, absl::MakeSpan(share_statuses), &left);
        } else {
          for (uint32_t k = 0; k < ranks.size(); ++k) left.push_back(k);
        }
        for (const uint32_t k : left) share.others.push_back({r, g, k});
        const core::Step step = group.item->step;
        if (left.size() < ranks.size() &&
            std::find(share.recorded.begin(), share.recorded.end(), step) == share.recorded.end()) {
          share.recorded.push_back(step);
        }
      }
    }
  });
  // Back on this thread, in the chunks' order: their records, the ranks that need more than a slot
  // (a duplicate, a wrong step: StageMerged judges them as it would have in their group), and
  // each chunk's release once its groups are in.
  for (ChunkShare& share : shares) {
    std::move(share.decisions.events.begin(), share.decisions.events.end(),
              std::back_inserter(effects->events));
  }
  for (const ChunkShare& share : shares) {
    for (const ChunkShare::Left& l : share.others) {
      const CheckinRun& run = runs[l.run];
      const CheckinGroups::Group& group = run.groups->groups()[l.group];
      const core::RankId rank = run.groups->ranks(group)[l.index];
      absl::Status status;
      ApplyMergedCheckin(run.generation, *group.item, absl::MakeConstSpan(&rank, 1), now, decisions,
                         effects, absl::MakeSpan(&status, 1));
      run.statuses[run.groups->messages(group)[l.index]] = std::move(status);
    }
  }
  for (const ChunkShare& share : shares) {
    for (const core::Step step : share.recorded) {
      decisions.deliveries.clear();
      decisions.events.swap(effects->events);
      tracker->ReleaseIfReady(step, share.chunk, now, &decisions);
      decisions.events.swap(effects->events);
      QueueNotices(decisions.deliveries, effects);
    }
  }
  return messages;
}

}  // namespace psync::server

// Job::ApplyCheckinGroups: a run of a node's or relay's batch, grouped by item (checkin_groups.h),
// applied group by group, or chunk by chunk on several threads at once when the run is large.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "server/owner/job.h"

namespace psync::server {
namespace {

// One chunk's share of a run applied on its own thread: its groups, what the tracker decided for
// them, and the ranks it left to StageMerged (group, index in the group).
struct ChunkShare {
  core::ChunkId chunk = 0;
  std::vector<uint32_t> groups;
  core::Decisions decisions;
  std::vector<std::pair<uint32_t, uint32_t>> others;
  std::vector<core::Step> recorded_steps;  // steps with a check-in recorded in a slot
};

}  // namespace

void Job::ApplyCheckinGroups(uint64_t generation, const CheckinGroups& groups, absl::Time now,
                             const ApplyByChunk& by_chunk, core::Decisions& decisions,
                             Effects* effects, absl::Span<absl::Status> statuses) {
  const std::vector<CheckinGroups::Group>& all = groups.groups();
  const size_t messages = all.empty() ? 0 : all.back().end;  // the groups cover the run in order
  const bool several_chunks = std::any_of(
      all.begin(), all.end(),
      [&](const CheckinGroups::Group& g) { return g.item->chunk != all[0].item->chunk; });
  std::vector<absl::Status> group_statuses;
  const auto apply_group = [&](uint32_t g) {
    group_statuses.assign(all[g].end - all[g].begin, absl::OkStatus());
    ApplyMergedCheckin(generation, *all[g].item, groups.ranks(all[g]), now, decisions, effects,
                       absl::MakeSpan(group_statuses));
    const absl::Span<const uint32_t> indices = groups.messages(all[g]);
    for (size_t k = 0; k < indices.size(); ++k) statuses[indices[k]] = std::move(group_statuses[k]);
  };
  if (by_chunk.fan_out == nullptr || by_chunk.fan_out->helpers() == 0 || !several_chunks ||
      messages < by_chunk.min_messages) {
    for (uint32_t g = 0; g < all.size(); ++g) apply_group(g);
    return;
  }
  std::vector<ChunkShare> shares;
  for (uint32_t g = 0; g < all.size(); ++g) {
    auto it = std::find_if(shares.begin(), shares.end(),
                           [&](const ChunkShare& s) { return s.chunk == all[g].item->chunk; });
    if (it == shares.end()) it = shares.insert(shares.end(), ChunkShare{all[g].item->chunk});
    it->groups.push_back(g);
  }
  // Where a group's ranks are recorded exists before the threads start (they create nothing).
  std::vector<bool> open(all.size());
  for (uint32_t g = 0; g < all.size(); ++g) {
    open[g] = tracker->OpenInSlots(generation, *all[g].item, groups.ranks(all[g]));
  }
  // Each chunk's groups on one thread: they touch only that chunk's marks (StageInSlots). The
  // statuses they set are distinct elements; nothing else is shared.
  core::JobTracker* const chunks_tracker = tracker.get();
  std::sort(shares.begin(), shares.end(),
            [](const ChunkShare& a, const ChunkShare& b) { return a.chunk < b.chunk; });
  by_chunk.fan_out->Run(shares.size(), 1, [&](size_t begin, size_t end) {
    std::vector<absl::Status> share_statuses;
    std::vector<uint32_t> left;
    for (size_t s = begin; s < end; ++s) {
      ChunkShare& share = shares[s];
      share.decisions.merge_rank_events = decisions.merge_rank_events;
      for (const uint32_t g : share.groups) {
        const absl::Span<const core::RankId> ranks = groups.ranks(all[g]);
        left.clear();
        if (open[g]) {
          share_statuses.assign(ranks.size(), absl::OkStatus());
          chunks_tracker->StageInSlots(generation, *all[g].item, ranks, now, &share.decisions,
                                       absl::MakeSpan(share_statuses), &left);
        } else {
          for (uint32_t k = 0; k < ranks.size(); ++k) left.push_back(k);
        }
        const absl::Span<const uint32_t> indices = groups.messages(all[g]);
        size_t next_left = 0;
        for (uint32_t k = 0; k < ranks.size(); ++k) {
          if (next_left < left.size() && left[next_left] == k) {
            share.others.emplace_back(g, k);
            ++next_left;
          } else {
            statuses[indices[k]] = absl::OkStatus();
          }
        }
        if (left.size() < ranks.size() &&
            std::find(share.recorded_steps.begin(), share.recorded_steps.end(),
                      all[g].item->step) == share.recorded_steps.end()) {
          share.recorded_steps.push_back(all[g].item->step);
        }
      }
    }
  });
  // Back on this thread, in the chunks' order: their records, the ranks that need more than a slot
  // (a duplicate, a wrong step: StageMerged judges them as it would have in the group), and each
  // chunk's release once its groups are in.
  for (ChunkShare& share : shares) {
    std::move(share.decisions.events.begin(), share.decisions.events.end(),
              std::back_inserter(effects->events));
  }
  for (const ChunkShare& share : shares) {
    for (const auto& [g, k] : share.others) {
      absl::Status status;
      const core::RankId rank = groups.ranks(all[g])[k];
      ApplyMergedCheckin(generation, *all[g].item, absl::MakeConstSpan(&rank, 1), now, decisions,
                         effects, absl::MakeSpan(&status, 1));
      statuses[groups.messages(all[g])[k]] = std::move(status);
    }
  }
  for (const ChunkShare& share : shares) {
    for (const core::Step step : share.recorded_steps) {
      decisions.deliveries.clear();
      decisions.events.swap(effects->events);
      tracker->ReleaseIfReady(step, share.chunk, now, &decisions);
      decisions.events.swap(effects->events);
      QueueNotices(decisions.deliveries, effects);
    }
  }
}

}  // namespace psync::server

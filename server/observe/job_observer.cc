#include "server/observe/job_observer.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync::observe {
namespace {

// Enough emptied check-in lists for the chunks of a step or two to start without growing one.
constexpr size_t kSpareCheckinLists = 8;

// " and N more" after a stall's list of `listed` of `total`; nothing when it lists them all.
std::string AndMore(uint32_t total, size_t listed) {
  return total > listed ? absl::StrCat(" and ", total - listed, " more") : std::string();
}

}  // namespace

JobObserver::JobObserver(ObserverOptions options)
    : options_(options), deadlines_(options.deadline), stragglers_(options.straggler_alpha) {}

SyncAudit& JobObserver::AuditFor(const core::Event& e) {
  const Key key{e.generation, *e.step, *e.chunk};
  if (SyncAudit* last = last_audit_.Find(key)) return *last;
  auto [it, inserted] = audit_.try_emplace(key);
  if (inserted) {
    it->second.generation = e.generation;
    it->second.step = *e.step;
    it->second.chunk = *e.chunk;
    // The oldest records go; never the one just made (an event of a step older than all of them).
    while (audit_.size() > std::max<size_t>(options_.audit_capacity, 1)) {
      audit_.erase(audit_.begin() == it ? std::next(it) : audit_.begin());
    }
  }
  last_audit_.Set(key, &it->second);
  return it->second;
}

void JobObserver::OnEvent(const core::Event& e) {
  using core::EventKind;
  if (e.kind == EventKind::kGeneration) {
    open_checkins_.clear();
    last_open_.Clear();
    return;
  }
  if (!e.step.has_value() || !e.chunk.has_value()) return;
  const Key key{e.generation, *e.step, *e.chunk};
  switch (e.kind) {
    case EventKind::kCheckin: {
      CheckinTimes* times = last_open_.Find(key);
      if (times == nullptr) {
        auto [it, added] = open_checkins_.try_emplace(key);
        if (added && !spare_checkins_.empty()) {
          it->second = std::move(spare_checkins_.back());
          spare_checkins_.pop_back();
        }
        times = &it->second;
        last_open_.Set(key, times);
      }
      const int64_t at = absl::ToUnixNanos(e.time);
      core::ForEachRank(e, [&](core::RankId rank) { times->emplace_back(rank, at); });
      break;
    }
    case EventKind::kRelease: {
      auto open = open_checkins_.find(key);
      if (open != open_checkins_.end()) {
        stragglers_.OnRelease(open->second);
        if (spare_checkins_.size() < kSpareCheckinLists) {
          open->second.clear();
          spare_checkins_.push_back(std::move(open->second));
        }
        open_checkins_.erase(open);
        last_open_.Clear();
      }
      deadlines_.Observe(*e.chunk, e.duration);
      SyncAudit& a = AuditFor(e);
      a.sequence = e.sequence;
      a.wait = e.duration;
      if (++a.releases > 1) ++totals_.double_releases;
      ++totals_.released;
      if (e.resumed) {
        a.resumed = true;
        ++totals_.resumed;
      }
      break;
    }
    case EventKind::kSyncDone:
      AuditFor(e).syncs_done += core::RankCount(e);
      break;
    case EventKind::kSyncComplete: {
      SyncAudit& a = AuditFor(e);
      a.complete = true;
      a.sync_duration = e.duration;
      ++totals_.complete;
      break;
    }
    case EventKind::kViolation: {
      SyncAudit& a = AuditFor(e);
      const absl::string_view kind = core::ViolationKind(e);
      if (kind == "checksum_mismatch") {
        a.checksum_mismatch = true;
        ++totals_.checksum_mismatches;
      } else if (kind == "early_sync") {
        ++a.early_syncs;
        ++totals_.early_syncs;
      } else if (kind == "repeated_sync") {
        ++a.repeated_syncs;
        ++totals_.repeated_syncs;
      }
      break;
    }
    default:
      break;
  }
  // Open check-ins of steps long gone (e.g. a generation that ended) must not pile up.
  while (open_checkins_.size() > options_.audit_capacity) {
    open_checkins_.erase(open_checkins_.begin());
    last_open_.Clear();
  }
}

std::vector<core::Event> JobObserver::Inspect(absl::Time now, const core::JobSnapshot& snapshot,
                                              const ListsOf& lists_of) {
  const size_t limit = options_.stall_list_limit;
  std::vector<core::Event> out;
  for (const core::ChunkSnapshot& c : snapshot.chunks) {
    const bool waiting = c.state == "WAITING";
    const bool syncing = c.state == "RELEASED";
    if (!waiting && !syncing) continue;
    const absl::Duration deadline = deadlines_.Deadline(c.chunk);
    if (c.waiting <= deadline) continue;
    if (!reported_stalls_.insert({snapshot.generation, c.step, c.chunk, syncing}).second) continue;
    ++stalls_;
    const core::ChunkSnapshot full = lists_of ? lists_of(c, limit) : core::ChunkSnapshot();
    const core::ChunkSnapshot& lists = lists_of ? full : c;
    core::Event e;
    e.kind = core::EventKind::kStall;
    e.time = now;
    e.job_id = snapshot.job_id;
    e.generation = snapshot.generation;
    e.step = c.step;
    e.chunk = c.chunk;
    e.duration = c.waiting;
    // missing_count: the lists' count where ChunkAt cut them short; a snapshot's own lists are
    // whole, so their size.
    if (waiting) {
      e.contributors.assign(lists.missing.begin(),
                            lists.missing.begin() + std::min(lists.missing.size(), limit));
      e.missing_count = std::max(lists.missing_count, static_cast<uint32_t>(lists.missing.size()));
      e.detail = absl::StrCat(
          "chunk ", c.chunk, " step ", c.step, " waited ", absl::FormatDuration(c.waiting),
          " (deadline ", absl::FormatDuration(deadline), ") for ",
          absl::StrJoin(e.contributors, ", ",
                        [](std::string* s, const core::Contributor& who) {
                          absl::StrAppend(s, "rank ", who.rank, " ", who.optimizer);
                        }),
          AndMore(e.missing_count, e.contributors.size()));
    } else {
      e.ranks.assign(lists.sync_pending.begin(),
                     lists.sync_pending.begin() + std::min(lists.sync_pending.size(), limit));
      e.missing_count =
          std::max(lists.sync_pending_count, static_cast<uint32_t>(lists.sync_pending.size()));
      e.detail = absl::StrCat(
          "chunk ", c.chunk, " step ", c.step, " released ", absl::FormatDuration(c.waiting),
          " ago (deadline ", absl::FormatDuration(deadline), "); no SyncDone from ranks [",
          absl::StrJoin(e.ranks, ","), "]", AndMore(e.missing_count, e.ranks.size()));
    }
    out.push_back(std::move(e));
  }
  // Forget stalls of steps every chunk has moved past.
  if (reported_stalls_.size() > options_.audit_capacity) reported_stalls_.clear();
  return out;
}

std::vector<SyncAudit> JobObserver::Audit() const {
  std::vector<SyncAudit> out;
  out.reserve(audit_.size());
  for (const auto& [key, a] : audit_) out.push_back(a);
  return out;
}

}  // namespace psync::observe

// JobTracker: SyncDone and the checksum audit. CheckSyncDone validates one item (chunk, sync
// groups, released or released before a restart, duplicate or conflicting duplicate; an early
// sync is a violation); SyncDone applies a batch all or nothing, records repeated syncs and the
// completion of a (step, chunk), and advances the rank; CheckChecksums reports members whose
// gathered weights disagree. Part of JobTracker; thread-compatible.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/core/first_repeat.h"
#include "server/core/job_tracker.h"
#include "server/core/tracker_text.h"

namespace psync::core {
namespace {

using internal::ChecksumsText;
using internal::Describe;
using internal::FirstRepeat;

// Checksums compare regardless of the order the rank listed its groups in.
GroupChecksums SortedByGroup(absl::Span<const GroupChecksum> checksums) {
  GroupChecksums sorted(checksums.begin(), checksums.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const GroupChecksum& a, const GroupChecksum& b) { return a.group < b.group; });
  return sorted;
}

}  // namespace

absl::Status JobTracker::CheckSyncDone(RankId rank, size_t i, const SyncDoneItem& item,
                                       bool* duplicate, Decisions* out, absl::Time now) const {
  *duplicate = false;
  // The field an error names; built only for an error.
  const auto where = [i] { return absl::StrCat("items[", i, "]"); };
  if (item.chunk >= plan_.num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ".chunk ", item.chunk,
                                                   " out of range [0, ", plan_.num_chunks(), ")"));
  }
  // Once the plan is complete, the chunk's slots answer for a member of one sync group reporting
  // at most that group's checksum (the common case) without reading the rank's own plan.
  std::optional<uint32_t> member_slot;
  if (plan_.complete()) member_slot = plan_.chunk(item.chunk).slots.MemberSlot(rank);
  const std::string* only_group =
      member_slot.has_value() ? plan_.chunk(item.chunk).slots.OnlyGroupOf(*member_slot) : nullptr;
  const bool checksums_valid =
      member_slot.has_value() &&
      (item.checksums.empty() || (item.checksums.size() == 1 && only_group != nullptr &&
                                  item.checksums[0].group == *only_group));
  const ChunkPart* part = checksums_valid ? nullptr : plan_.part(rank, item.chunk);
  if (!checksums_valid && part == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ".chunk ", item.chunk, ": rank ", rank,
                                                   " is in no sync group of chunk ", item.chunk));
  }
  for (size_t j = 0; !checksums_valid && j < item.checksums.size(); ++j) {
    const std::string& group = item.checksums[j].group;
    const bool member = std::any_of(part->groups.begin(), part->groups.end(),
                                    [&](const GroupDecl& g) { return g.name == group; });
    // At most max_groups_per_chunk checksums: compared pairwise.
    const bool repeated = std::any_of(item.checksums.begin(), item.checksums.begin() + j,
                                      [&](const GroupChecksum& g) { return g.group == group; });
    if (!member || repeated) {
      return absl::InvalidArgumentError(absl::StrCat(
          where(), ".checksums[", j, "].group '", group, "' is ",
          member ? "listed twice"
                 : absl::StrCat("not a sync group of rank ", rank, " in chunk ", item.chunk)));
    }
  }
  const Step current = rank_step(rank);
  auto st = steps_.find(item.step);
  const ChunkStep* cs = nullptr;
  if (st != steps_.end()) {
    auto found = st->second.chunks.find(item.chunk);
    if (found != st->second.chunks.end()) cs = &found->second;
  }
  // A member that contributes nothing to a chunk can receive its directive for a later step
  // while it still finishes its own step: that SyncDone is accepted.
  // A chunk a resuming rank re-announced was released by the coordinator before a restart.
  const bool released = cs != nullptr && (cs->released || cs->synced_before);
  if (item.step > current && !released) {
    return absl::FailedPreconditionError(absl::StrCat(
        where(), ": SyncDone before the directive: step ", item.step, " chunk ", item.chunk,
        " has not been released (rank ", rank, " is at step ", current, ")"));
  }
  if (st == steps_.end() && item.step < current) {
    if (LateRepeat(rank, item.step)) {
      *duplicate = true;
      return absl::OkStatus();
    }
    return absl::OutOfRangeError(absl::StrCat(where(), ".step ", item.step,
                                              " is before the oldest retained step ",
                                              steps_.empty() ? current : steps_.begin()->first));
  }
  if (!released) {
    // A rank that executed a sync nobody released gathered buffers not every contributor staged.
    std::vector<std::string> missing;
    plan_.chunk(item.chunk).ForEachContributor([&](const Contributor& who) {
      if (cs == nullptr || !cs->staged.contains(who)) missing.push_back(Describe(who));
    });
    Event v = MakeChunkEvent(EventKind::kViolation, now, item.step, item.chunk);
    v.rank = rank;
    v.detail = absl::StrCat("early sync: rank ", rank, " synced step ", item.step, " chunk ",
                            item.chunk, " before its release; not staged: ",
                            missing.empty() ? "(plan incomplete)" : absl::StrJoin(missing, ", "));
    out->events.push_back(std::move(v));
    return absl::FailedPreconditionError(
        absl::StrCat(where(), ": SyncDone before the directive: step ", item.step, " chunk ",
                     item.chunk, " has not been released"));
  }
  if (const std::optional<GroupChecksums> done = cs->done.Find(rank); done.has_value()) {
    if (*done == SortedByGroup(item.checksums)) {
      *duplicate = true;
      return absl::OkStatus();
    }
    Event v = MakeChunkEvent(EventKind::kViolation, now, item.step, item.chunk);
    v.rank = rank;
    v.detail = absl::StrCat("conflicting duplicate SyncDone: checksums ",
                            ChecksumsText(item.checksums), " after ", ChecksumsText(*done));
    out->events.push_back(std::move(v));
    return absl::AlreadyExistsError(
        absl::StrCat(where(), ": rank ", rank, " already reported SyncDone for step ", item.step,
                     " chunk ", item.chunk, " with checksums ", ChecksumsText(*done)));
  }
  return absl::OkStatus();
}

bool JobTracker::SyncDoneInSlot(RankId rank, uint64_t generation, const SyncDoneItem& item,
                                absl::Time now, Decisions* out) {
  return SyncDonesInSlots(generation, item, absl::MakeConstSpan(&rank, 1), now, out) == 1;
}

void JobTracker::RecordIfSyncComplete(Step step, ChunkId chunk, const ChunkStep& cs, absl::Time now,
                                      Decisions* out) {
  // After a coordinator restart a SyncDone may come before the plan is complete or the chunk is
  // released again; MaybeRelease() then records the completion.
  if (!plan_.complete() || !cs.released || cs.done.size() != plan_.chunk(chunk).members.size()) {
    return;
  }
  Event c = MakeChunkEvent(EventKind::kSyncComplete, now, step, chunk);
  c.sequence = cs.sequence;
  c.duration = now - cs.released_at;
  c.detail = absl::StrCat("all ", cs.done.size(), " ranks synced in ",
                          absl::FormatDuration(now - cs.released_at));
  out->events.push_back(std::move(c));
  CheckChecksums(step, chunk, cs, now, out);
}

absl::Status JobTracker::SyncDone(RankId rank, uint64_t generation,
                                  absl::Span<const SyncDoneItem> items, absl::Time now,
                                  Decisions* out) {
  // The common report (one item, released, fresh, a member's one checksum) without the general
  // checks' second lookups and copies; anything else is judged below.
  if (items.size() == 1 && SyncDoneInSlot(rank, generation, items[0], now, out)) {
    return absl::OkStatus();
  }
  if (auto s = CheckBatch(rank, generation, items.size()); !s.ok()) return s;
  // Items are judged in order: the first bad one names the error.
  const ptrdiff_t repeat = FirstRepeat(items, [](const SyncDoneItem& item) {
    return std::pair<Step, ChunkId>(item.step, item.chunk);
  });
  absl::InlinedVector<bool, 16> fresh(items.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    if (static_cast<ptrdiff_t>(i) == repeat) {
      return absl::InvalidArgumentError(
          absl::StrCat("items[", i, "] repeats an earlier item (step ", items[i].step, " chunk ",
                       items[i].chunk, ")"));
    }
    bool duplicate = false;
    if (auto s = CheckSyncDone(rank, i, items[i], &duplicate, out, now); !s.ok()) return s;
    fresh[i] = !duplicate;
  }
  for (size_t i = 0; i < items.size(); ++i) {
    const SyncDoneItem& item = items[i];
    if (!fresh[i]) continue;
    ChunkStep& cs = ChunkStepFor(item.step, item.chunk);
    InsertDone(cs, item.step, rank, item.checksums);
    if (item.executions > 1) {
      Event v = MakeChunkEvent(EventKind::kViolation, now, item.step, item.chunk);
      v.rank = rank;
      v.sequence = cs.sequence;
      v.detail = absl::StrCat("repeated sync: rank ", rank, " executed the sync of step ",
                              item.step, " chunk ", item.chunk, " ", item.executions, " times");
      out->events.push_back(std::move(v));
    }
    AppendRankEvent(EventKind::kSyncDone, now, item.step, item.chunk, rank, /*optimizer=*/"",
                    cs.sequence, out);
    RecordIfSyncComplete(item.step, item.chunk, cs, now, out);
  }
  MaybeAdvance(rank, now, out);
  return absl::OkStatus();
}

void JobTracker::CheckChecksums(Step step, ChunkId chunk, const ChunkStep& cs, absl::Time now,
                                Decisions* out) const {
  // One pass, nothing copied: the first checksum seen per group. Members of one group follow each
  // other in their slots and name it by the same string, so most need no lookup. Only a group
  // that disagrees needs the per-checksum rank lists of the report below.
  absl::flat_hash_map<absl::string_view, uint64_t> first;
  first.reserve(plan_.chunk(chunk).groups.size());
  bool mismatch = false;
  const std::string* last_group = nullptr;  // the group of the checksum before, and its first
  uint64_t last_first = 0;
  cs.done.ForEachChecksum([&](const std::string& group, uint64_t checksum) {
    if (&group != last_group) {
      last_group = &group;
      last_first = first.try_emplace(group, checksum).first->second;
    }
    mismatch |= checksum != last_first;
  });
  if (!mismatch) return;
  // group -> checksum -> ranks
  std::map<std::string, std::map<uint64_t, std::vector<RankId>>> by_group;
  cs.done.ForEach([&](RankId rank, const GroupChecksums& checksums) {
    for (const GroupChecksum& g : checksums) by_group[g.group][g.checksum].push_back(rank);
  });
  for (auto& [group, values] : by_group) {
    if (values.size() <= 1) continue;
    std::vector<std::string> parts;
    for (auto& [value, ranks] : values) {
      std::sort(ranks.begin(), ranks.end());
      parts.push_back(absl::StrFormat("%#x from ranks [%s]", value, absl::StrJoin(ranks, ",")));
    }
    Event v = MakeChunkEvent(EventKind::kViolation, now, step, chunk);
    v.sequence = cs.sequence;
    v.detail =
        absl::StrCat("checksum mismatch in group '", group, "': ", absl::StrJoin(parts, "; "));
    out->events.push_back(std::move(v));
  }
}

}  // namespace psync::core

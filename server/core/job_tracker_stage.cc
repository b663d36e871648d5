// JobTracker: check-ins (StagedBatch). CheckStaged validates one item (chunk, declared optimizer,
// step window, skipped step, duplicate or conflicting duplicate); Stage applies a batch all or
// nothing, aborts the generation on a skip disagreement, and asks MaybeRelease
// (job_tracker_release.cc) about each chunk it touched. Only declared contributors are admitted
// to `staged`, which the release rule relies on (release_rule.h). Part of JobTracker;
// thread-compatible.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "server/core/first_repeat.h"
#include "server/core/job_tracker.h"
#include "server/core/tracker_text.h"

namespace psync::core {
namespace {

using internal::ChecksumText;
using internal::Describe;
using internal::FirstRepeat;

bool IsDeclared(const ChunkPart* part, absl::string_view optimizer) {
  return part != nullptr && std::find(part->optimizers.begin(), part->optimizers.end(),
                                      optimizer) != part->optimizers.end();
}

}  // namespace

absl::Status JobTracker::CheckStaged(RankId rank, size_t i, const StagedItem& item, bool* duplicate,
                                     Decisions* out, absl::Time now) const {
  *duplicate = false;
  // The field an error names; built only for an error.
  const auto where = [i] { return absl::StrCat("items[", i, "]"); };
  if (item.chunk >= plan_.num_chunks()) {
    return absl::InvalidArgumentError(absl::StrCat(where(), ".chunk ", item.chunk,
                                                   " out of range [0, ", plan_.num_chunks(), ")"));
  }
  // Declared contributors are the chunk's slots once the plan is complete (no plan lookup).
  const bool declared =
      plan_.complete()
          ? plan_.chunk(item.chunk).slots.ContributorSlot(rank, item.optimizer).has_value()
          : IsDeclared(plan_.part(rank, item.chunk), item.optimizer);
  if (!declared) {
    const ChunkPart* part = plan_.part(rank, item.chunk);
    return absl::InvalidArgumentError(
        absl::StrCat(where(), ".optimizer '", item.optimizer, "' is not declared by rank ", rank,
                     " for chunk ", item.chunk, " (declared: [",
                     part == nullptr ? "" : absl::StrJoin(part->optimizers, ","), "])"));
  }
  const Step current = rank_step(rank);
  if (item.step > current) return CheckNotAhead(rank, absl::StrCat(where(), ".step"), item.step);
  auto st = steps_.find(item.step);
  if (item.step < current && st == steps_.end()) {
    if (LateRepeat(rank, item.step)) {
      *duplicate = true;
      return absl::OkStatus();
    }
    const Step oldest = steps_.empty() ? current : steps_.begin()->first;
    return absl::OutOfRangeError(
        absl::StrCat(where(), ".step ", item.step, " is before the oldest retained step ", oldest));
  }
  if (st != steps_.end() && st->second.skipped) {
    return absl::FailedPreconditionError(
        absl::StrCat(where(), ".step ", item.step, " was skipped by every rank"));
  }
  const Contributor who{rank, item.optimizer};
  if (st != steps_.end()) {
    auto cs = st->second.chunks.find(item.chunk);
    if (cs != st->second.chunks.end()) {
      const std::optional<StagedMark> found = cs->second.staged.Find(who);
      if (found.has_value()) {
        if (found->checksum() == item.checksum) {
          *duplicate = true;
          return absl::OkStatus();
        }
        Event v = MakeChunkEvent(EventKind::kViolation, now, item.step, item.chunk);
        v.rank = rank;
        v.optimizer = item.optimizer;
        v.detail =
            absl::StrCat("conflicting duplicate check-in: shard_checksum ",
                         ChecksumText(item.checksum), " after ", ChecksumText(found->checksum()));
        out->events.push_back(std::move(v));
        return absl::AlreadyExistsError(
            absl::StrCat(where(), ": step ", item.step, " chunk ", item.chunk, " ", Describe(who),
                         " already staged with shard_checksum ", ChecksumText(found->checksum()),
                         ", now ", ChecksumText(item.checksum)));
      }
    }
  }
  if (item.step < current) {
    return absl::FailedPreconditionError(absl::StrCat(where(), ".step ", item.step,
                                                      " is already finished for rank ", rank,
                                                      " (it is at step ", current, ")"));
  }
  return absl::OkStatus();
}

absl::Status JobTracker::Stage(RankId rank, uint64_t generation, absl::Span<const StagedItem> items,
                               absl::Time now, Decisions* out) {
  if (auto s = CheckBatch(rank, generation, items.size()); !s.ok()) return s;
  // Items are judged in order: the first bad one names the error.
  const ptrdiff_t repeat = FirstRepeat(items, [](const StagedItem& item) {
    return std::tuple<Step, ChunkId, absl::string_view>(item.step, item.chunk, item.optimizer);
  });
  absl::InlinedVector<bool, 16> fresh(items.size(), false);
  for (size_t i = 0; i < items.size(); ++i) {
    const StagedItem& item = items[i];
    if (static_cast<ptrdiff_t>(i) == repeat) {
      return absl::InvalidArgumentError(
          absl::StrCat("items[", i, "] repeats an earlier item (step ", item.step, " chunk ",
                       item.chunk, " ", item.optimizer, ")"));
    }
    bool duplicate = false;
    if (auto s = CheckStaged(rank, i, item, &duplicate, out, now); !s.ok()) return s;
    fresh[i] = !duplicate;
  }

  // The input is valid. A check-in for a step that other ranks skip is a disagreement.
  const Step current = rank_step(rank);
  auto st = steps_.find(current);
  if (st != steps_.end() && !st->second.skip_votes.empty() &&
      std::find(fresh.begin(), fresh.end(), true) != fresh.end()) {
    std::vector<RankId> voters(st->second.skip_votes.begin(), st->second.skip_votes.end());
    std::sort(voters.begin(), voters.end());
    AbortGeneration(current,
                    absl::StrCat("skip disagreement at step ", current, ": rank ", rank,
                                 " staged while ranks [", absl::StrJoin(voters, ","), "] skip it (",
                                 st->second.skip_reason, ")"),
                    now, out);
    return absl::AbortedError(abort_reason_);
  }

  absl::InlinedVector<ChunkId, 8> touched;
  for (size_t i = 0; i < items.size(); ++i) {
    const StagedItem& item = items[i];
    const Contributor who{rank, item.optimizer};
    if (!fresh[i]) {
      Event e = MakeChunkEvent(EventKind::kDuplicate, now, item.step, item.chunk);
      e.rank = rank;
      e.optimizer = item.optimizer;
      out->events.push_back(std::move(e));
      continue;
    }
    ChunkStep& cs = ChunkStepFor(item.step, item.chunk);
    cs.staged.Insert(who, StagedMark(item.checksum, now));
    if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
    cs.last_checkin = now;
    cs.last = who;
    AppendRankEvent(EventKind::kCheckin, now, item.step, item.chunk, rank, item.optimizer,
                    /*sequence=*/0, out);
    touched.push_back(item.chunk);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (ChunkId chunk : touched) MaybeRelease(current, chunk, now, out);
  return absl::OkStatus();
}

}  // namespace psync::core

// DecideRelease and FirstUndeclared; the rule, its invariant and the contract: release_rule.h.
#include "server/core/release_rule.h"

#include "absl/strings/str_cat.h"
#include "serve/injected_faults.h"

namespace psync::core {

ReleaseDecision DecideRelease(bool plan_complete, const ChunkInfo& chunk, const ChunkStep& cs) {
  ReleaseDecision d;
  d.staged = cs.staged.size();
  d.contributors = chunk.num_contributors();
  if (!plan_complete) {
    d.verdict = ReleaseVerdict::kPlanIncomplete;
  } else if (cs.released && !serve::IsInjected(serve::Injected().release_again)) {
    d.verdict = ReleaseVerdict::kAlreadyReleased;
  } else if (d.contributors == 0) {
    d.verdict = ReleaseVerdict::kNoContributors;
  } else if (cs.synced_before) {
    d.verdict = ReleaseVerdict::kSyncedBefore;
  } else if (serve::IsInjected(serve::Injected().release_one_early) && d.contributors >= 2 &&
             d.staged + 1 == d.contributors) {
    d.verdict = ReleaseVerdict::kAllStaged;
  } else if (d.staged < d.contributors) {
    d.verdict = ReleaseVerdict::kWaiting;  // every check-in but the last ends here, in O(1)
  } else if ((d.undeclared = FirstUndeclared(cs.staged, chunk.slots)).has_value() ||
             d.staged != d.contributors) {
    d.verdict = ReleaseVerdict::kUndeclaredStaged;
  } else {
    d.verdict = ReleaseVerdict::kAllStaged;
  }
  return d;
}

std::optional<Contributor> FirstUndeclared(const StagedSet& staged, const ChunkSlots& slots) {
  // A set kept in these slots holds declared contributors in them by construction and keeps
  // anyone else outside them, so an empty outside is the whole check.
  if (staged.slots() == &slots && staged.outside_slots() == 0) return std::nullopt;
  std::optional<Contributor> found;
  staged.ForEach([&](const Contributor& who, const StagedMark&) {
    if (!found.has_value() && !slots.ContributorSlot(who.rank, who.optimizer).has_value()) {
      found = who;
    }
  });
  return found;
}

std::string ReleaseDecision::Reason() const {
  switch (verdict) {
    case ReleaseVerdict::kPlanIncomplete:
      return "waiting: the plan is incomplete (not every rank joined)";
    case ReleaseVerdict::kAlreadyReleased:
      return "already released: a (step, chunk) is released once";
    case ReleaseVerdict::kNoContributors:
      return "never released: the chunk has no declared contributors";
    case ReleaseVerdict::kWaiting:
      return absl::StrCat("waiting: ", staged, " of ", contributors, " contributors staged");
    case ReleaseVerdict::kAllStaged:
      return absl::StrCat("release: all ", contributors, " contributors staged");
    case ReleaseVerdict::kSyncedBefore:
      return "release: a rank executed this sync before a coordinator restart";
    case ReleaseVerdict::kUndeclaredStaged:
      return absl::StrCat("not released: internal invariant broken: ", staged, " staged for ",
                          contributors, " declared contributors",
                          undeclared.has_value()
                              ? absl::StrCat(", rank ", undeclared->rank, " ",
                                             undeclared->optimizer, " is not declared")
                              : "");
  }
  return "unknown";
}

}  // namespace psync::core

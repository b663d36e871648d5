// JobTracker: releasing a (step, chunk). MaybeRelease asks the release rule (release_rule.h,
// the whole decision) and, on a release, assigns the sequence number, sends the SyncDirective to
// every member that has not executed the sync yet, and records the release (and the completion,
// when every member had synced before a coordinator restart). Part of JobTracker;
// thread-compatible.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/core/job_tracker.h"
#include "server/core/release_rule.h"
#include "server/core/tracker_text.h"

namespace psync::core {
namespace {

using internal::Describe;

}  // namespace

void JobTracker::MaybeRelease(Step step, ChunkId chunk, absl::Time now, Decisions* out) {
  // The rule waits while the plan forms too; returning first creates no chunk-step then. An
  // aborted generation releases nothing (see below).
  if (!plan_.complete() || state_ == JobState::kAborted) return;
  // Nothing of a step that is or may be skipped is released (a skip vote beside a check-in aborts
  // the generation instead; a rebuilt job learns skipped steps from the resumes).
  if (MaySkip(step)) return;
  ChunkStep& cs = ChunkStepFor(step, chunk);
  // A (step, chunk) first seen after the job was rebuilt (Reconcile, or a check-in that arrives
  // later) counts the ranks already past it: they finished it with the old coordinator. (Found by
  // the deterministic simulation, seed 906.)
  if (rebuilt_ && !cs.ranks_past_counted) CountRanksPast(step, chunk, cs, now);
  const ChunkInfo& info = plan_.chunk(chunk);
  const ReleaseDecision decision = DecideRelease(plan_.complete(), info, cs);
  if (decision.verdict == ReleaseVerdict::kUndeclaredStaged) {
    // Every path into `staged` checks the plan, so this is a bug in the tracker, not bad input.
    // Releasing could be an early sync: end the generation instead (its ranks join again and
    // restage), with a violation that names the chunk.
    AbortGeneration(step, absl::StrCat("step ", step, " chunk ", chunk, ": ", decision.Reason()),
                    now, out);
    return;
  }
  if (!decision.release()) return;
  if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
  cs.released = true;
  cs.sequence = ++sequence_;
  cs.released_at = now;
  SyncDirective directive{generation_, step, chunk, cs.sequence, cs.last, now - cs.first_checkin,
                          /*epoch=*/0, now};
  // Grown once per release, not by doubling (a delivery moved is a notice moved); geometrically
  // over the several releases of one batch.
  // Members that already executed this sync (re-announced after a restart) need no directive;
  // most releases have none, and are not looked up member by member.
  const bool some_synced = cs.done.size() > 0;
  const std::shared_ptr<const Notice> notice = Decisions::Share(directive);
  std::vector<Delivery>& deliveries = out->deliveries;
  if (!some_synced && out->deliver_to_members_whole) {
    deliveries.push_back(Delivery::ToMembersOf(chunk, notice));
  } else {
    const size_t needed = deliveries.size() + info.members.size();
    if (needed > deliveries.capacity()) {
      deliveries.reserve(std::max(needed, 2 * deliveries.capacity()));
    }
    for (RankId member : info.members) {
      if (!some_synced || !cs.done.contains(member)) out->Deliver(member, notice);
    }
  }
  Event e = MakeChunkEvent(EventKind::kRelease, now, step, chunk);
  e.rank = cs.last.rank;
  e.optimizer = cs.last.optimizer;
  e.sequence = cs.sequence;
  e.duration = now - cs.first_checkin;
  e.resumed = cs.synced_before;
  e.detail =
      e.resumed ? absl::StrCat(
                      "resumed: ranks synced it before this coordinator held the "
                      "job; directive to the ",
                      info.members.size() - cs.done.size(), " of ", info.members.size(),
                      " ranks that had not")
                : absl::StrCat("all ", info.num_contributors(), " contributors staged; last ",
                               Describe(cs.last), "; directive to ", info.members.size(), " ranks");
  out->events.push_back(std::move(e));
  if (cs.done.size() == info.members.size()) {
    // Every member had synced before a coordinator restart: complete at once.
    Event c = MakeChunkEvent(EventKind::kSyncComplete, now, step, chunk);
    c.sequence = cs.sequence;
    c.duration = absl::ZeroDuration();
    c.detail =
        absl::StrCat("all ", cs.done.size(), " ranks had synced before a coordinator restart");
    out->events.push_back(std::move(c));
    CheckChecksums(step, chunk, cs, now, out);
  }
}

}  // namespace psync::core

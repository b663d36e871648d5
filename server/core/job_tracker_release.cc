// JobTracker: releasing a (step, chunk). MaybeRelease decides whether every declared contributor
// staged and, on a release, assigns the sequence number, sends the SyncDirective to
// every member that has not executed the sync yet, and records the release (and the completion,
// when every member had synced before a coordinator restart). Part of JobTracker;
// thread-compatible.
#include "server/core/job_tracker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/tracker_text.h"

namespace psync::core {
namespace {

using internal::Describe;

}  // namespace

void JobTracker::MaybeRelease(Step step, ChunkId chunk, absl::Time now, Decisions* out) {
  if (!plan_.complete()) return;
  ChunkStep& cs = ChunkStepFor(step, chunk);
  if (cs.released) return;
  const ChunkInfo& info = plan_.chunk(chunk);
  if (info.num_contributors() == 0) return;
  // `staged` holds only declared contributors of the chunk (Stage, a resume and Reconcile admit
  // no others), so comparing sizes is the whole check: O(1) per check-in instead of a scan of
  // N x K contributors.
  if (!cs.synced_before && cs.staged.size() != info.num_contributors()) return;
  if (cs.first_checkin == absl::InfinitePast()) cs.first_checkin = now;
  cs.released = true;
  cs.sequence = ++sequence_;
  cs.released_at = now;
  SyncDirective directive{generation_, step, chunk, cs.sequence, cs.last, now - cs.first_checkin};
  for (RankId member : info.members) {
    // Members that already executed this sync (re-announced after a restart) need no directive.
    if (!cs.done.contains(member)) out->deliveries.push_back({member, directive});
  }
  Event e = MakeEvent(EventKind::kRelease, now);
  e.step = step;
  e.chunk = chunk;
  e.rank = cs.last.rank;
  e.optimizer = cs.last.optimizer;
  e.sequence = cs.sequence;
  e.duration = now - cs.first_checkin;
  e.detail = absl::StrCat("all ", info.num_contributors(), " contributors staged; last ",
                          Describe(cs.last), "; directive to ", info.members.size(), " ranks");
  out->events.push_back(std::move(e));
  if (cs.done.size() == info.members.size()) {
    // Every member had synced before a coordinator restart: complete at once.
    Event c = MakeEvent(EventKind::kSyncComplete, now);
    c.step = step;
    c.chunk = chunk;
    c.sequence = cs.sequence;
    c.duration = absl::ZeroDuration();
    c.detail = absl::StrCat("all ", cs.done.size(), " ranks had synced before a coordinator restart");
    out->events.push_back(std::move(c));
    CheckChecksums(step, chunk, cs, now, out);
  }
}

}  // namespace psync::core

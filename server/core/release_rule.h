// The release rule: whether one (step, chunk) may be released now, and why. This is the "no early
// sync" and "exactly once" guarantee of job_tracker.h in one pure function.
//
// A (step, chunk) is released when, in this order:
//   1. the plan is complete (a rank that has not joined may still declare contributors),
//   2. it was not released already (exactly once),
//   3. the chunk has at least one declared contributor (nothing staged, nothing to sync), and
//   4. a resuming rank re-announced that it executed the sync (an earlier coordinator released
//      it), or every declared contributor staged.
//
// Step 4 compares sizes: staged.size() == the chunk's contributor count. That is the whole check
// only because of an invariant: `staged` holds declared contributors of the chunk and no one else
// (Stage refuses an undeclared optimizer, a resume is validated against the rank's own plan,
// Reconcile inserts from the plan's contributor list; StagedSet is a set, so nobody counts twice).
// DecideRelease does not trust the comment: before it says "release" on sizes, it verifies the
// invariant (FirstUndeclared; O(1) for a set kept in the chunk's slots, O(staged) once per release
// for a set started while the plan formed), and answers kUndeclaredStaged, never a release, when
// it does not hold. The owner treats that as a bug of its own and aborts the generation.
//
// Pure: no I/O, no clock, no state. Thread-safe (it reads only its arguments). Owns nothing: the
// decision holds copies, no pointers into the arguments.
#ifndef PSYNC_SERVER_CORE_RELEASE_RULE_H_
#define PSYNC_SERVER_CORE_RELEASE_RULE_H_

#include <cstddef>
#include <optional>
#include <string>

#include "server/core/chunk_sets.h"
#include "server/core/chunk_slots.h"
#include "server/core/plan.h"
#include "server/core/step_state.h"
#include "server/core/types.h"

namespace psync::core {

enum class ReleaseVerdict {
  kPlanIncomplete,    // wait
  kAlreadyReleased,   // never again
  kNoContributors,    // never
  kWaiting,           // wait: a declared contributor has not staged
  kAllStaged,         // release
  kSyncedBefore,      // release: released before a coordinator restart
  kUndeclaredStaged,  // never: the invariant above is broken (a bug, not bad input)
};

struct ReleaseDecision {
  ReleaseVerdict verdict = ReleaseVerdict::kPlanIncomplete;
  size_t staged = 0;                      // contributors in the staged set
  size_t contributors = 0;                // declared contributors of the chunk
  std::optional<Contributor> undeclared;  // kUndeclaredStaged: the first one found

  bool release() const {
    return verdict == ReleaseVerdict::kAllStaged || verdict == ReleaseVerdict::kSyncedBefore;
  }
  // Human-readable, for events and the status page; built only when asked for.
  std::string Reason() const;
};

// The rule above for one (step, chunk): `chunk` is its ChunkInfo in the job's plan, `cs` its state.
ReleaseDecision DecideRelease(bool plan_complete, const ChunkInfo& chunk, const ChunkStep& cs);

// The invariant: the first contributor in `staged` that is not a declared contributor of the
// chunk whose slots are `slots` (a complete plan's), or nullopt when there is none.
std::optional<Contributor> FirstUndeclared(const StagedSet& staged, const ChunkSlots& slots);

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_RELEASE_RULE_H_

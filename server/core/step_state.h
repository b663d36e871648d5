// Per-step bookkeeping of one job generation: who staged each chunk, whether and when it was
// released, who reported SyncDone with which checksums, and skip votes.
//
// Plain data owned by JobTracker; no behaviour. Thread-compatible.
#ifndef PSYNC_SERVER_CORE_STEP_STATE_H_
#define PSYNC_SERVER_CORE_STEP_STATE_H_

#include <map>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "server/core/chunk_sets.h"
#include "server/core/types.h"

namespace psync::core {

struct ChunkStep {
  StagedSet staged;
  absl::Time first_checkin = absl::InfinitePast();
  absl::Time last_checkin = absl::InfinitePast();
  bool released = false;
  uint64_t sequence = 0;
  absl::Time released_at = absl::InfinitePast();
  Contributor last;
  DoneSet done;  // who reported SyncDone, with their checksums
  // A rank re-announced (after a coordinator restart) that it executed this sync: the chunk was
  // released before, whatever the new coordinator has seen.
  bool synced_before = false;
  // In a generation rebuilt from resumes: the ranks already past the step were counted as having
  // staged and synced it (JobTracker::CountRanksPast), once.
  bool ranks_past_counted = false;
};

struct StepState {
  std::map<ChunkId, ChunkStep> chunks;
  absl::flat_hash_set<RankId> skip_votes;
  std::string skip_reason;  // the first vote's reason
  bool skipped = false;
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_STEP_STATE_H_

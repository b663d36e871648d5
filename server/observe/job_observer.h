// JobObserver: what psync derives, for one job, from its event stream and its snapshots: learned
// stall deadlines, stalls (chunks waiting for contributors, or for members' SyncDone, past their
// deadline), straggler scores, and the sync audit of recent (step, chunk)s.
//
// Feed every event of the job in order to OnEvent; call Inspect periodically with a snapshot. Each
// stall is reported once per (generation, step, chunk, kind). Pure (time is passed in);
// thread-compatible: the Coordinator serializes calls under its lock.
#ifndef PSYNC_SERVER_OBSERVE_JOB_OBSERVER_H_
#define PSYNC_SERVER_OBSERVE_JOB_OBSERVER_H_

#include <functional>
#include <map>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "server/core/job_tracker.h"
#include "server/core/types.h"
#include "server/observe/deadline_learner.h"
#include "server/observe/straggler_scores.h"

namespace psync::observe {

struct ObserverOptions {
  DeadlineOptions deadline;
  double straggler_alpha = 0.1;
  // (step, chunk) audit records kept.
  size_t audit_capacity = 4096;
  // The most missing contributors (or sync-pending members) a stall event names, in its list and
  // its text; Event::missing_count says how many are missing in all. At 131,072 ranks a stall with
  // half of them missing would otherwise be an event of megabytes, built while the job waits.
  size_t stall_list_limit = 64;
};

// The audit record of one released (generation, step, chunk).
struct SyncAudit {
  uint64_t generation = 0;
  core::Step step = 0;
  core::ChunkId chunk = 0;
  uint64_t sequence = 0;
  uint32_t releases = 0;    // must be 1
  bool resumed = false;     // released for ranks that synced it before this coordinator held it
  uint32_t syncs_done = 0;  // ranks that reported SyncDone
  bool complete = false;    // every member reported
  bool checksum_mismatch = false;
  uint32_t early_syncs = 0;      // SyncDone reports before the release
  uint32_t repeated_syncs = 0;   // ranks that executed the sync more than once
  absl::Duration wait;           // first check-in -> release
  absl::Duration sync_duration;  // release -> last SyncDone (when complete)
};

struct AuditTotals {
  uint64_t released = 0;
  // Of `released`: (step, chunk)s ranks had synced before this coordinator held the job (a
  // restart, or a move to another replica), released again for the members that had not.
  uint64_t resumed = 0;
  uint64_t complete = 0;
  uint64_t double_releases = 0;
  uint64_t checksum_mismatches = 0;
  uint64_t early_syncs = 0;
  uint64_t repeated_syncs = 0;
};

class JobObserver {
 public:
  explicit JobObserver(ObserverOptions options = {});

  void OnEvent(const core::Event& event);
  // Gives a chunk's snapshot with its contributor lists (missing, sync_pending) filled in up to
  // `list_limit` entries each, and their counts (core::JobTracker::ChunkAt).
  using ListsOf = std::function<core::ChunkSnapshot(const core::ChunkSnapshot&, size_t list_limit)>;
  // Stall events for chunks that waited past their deadline, each reported once. The lists of a
  // stalled chunk come from `lists_of` when given (then `snapshot` may carry none: building them
  // is O(ranks) per chunk, needed only for a new report), else from `snapshot`. An event names at
  // most options.stall_list_limit of them.
  std::vector<core::Event> Inspect(absl::Time now, const core::JobSnapshot& snapshot,
                                   const ListsOf& lists_of = nullptr);

  absl::Duration Deadline(core::ChunkId chunk) const { return deadlines_.Deadline(chunk); }
  std::vector<StragglerScore> TopStragglers(size_t k) const { return stragglers_.Top(k); }
  std::vector<StragglerScore> StragglersByRank() const { return stragglers_.ByRank(); }
  // Audit records, oldest first.
  std::vector<SyncAudit> Audit() const;
  const AuditTotals& totals() const { return totals_; }
  uint64_t stalls() const { return stalls_; }

 private:
  using Key = std::tuple<uint64_t, core::Step, core::ChunkId>;  // generation, step, chunk
  // The value of the last map entry looked up, with its key: consecutive events of one (step,
  // chunk), as a node's batch brings them, skip the map's lookup. Whoever erases from the map
  // clears it. Copying or moving the observer leaves it empty (it points into the original).
  template <typename V>
  class LastEntry {
   public:
    LastEntry() = default;
    LastEntry(const LastEntry&) {}
    LastEntry& operator=(const LastEntry&) {
      value_ = nullptr;
      return *this;
    }
    V* Find(const Key& key) const { return value_ != nullptr && key_ == key ? value_ : nullptr; }
    void Set(const Key& key, V* value) {
      key_ = key;
      value_ = value;
    }
    void Clear() { value_ = nullptr; }

   private:
    Key key_{};
    V* value_ = nullptr;
  };
  using CheckinTimes = std::vector<StragglerScores::Checkin>;

  SyncAudit& AuditFor(const core::Event& e);

  ObserverOptions options_;
  DeadlineLearner deadlines_;
  StragglerScores stragglers_;
  // Check-in times of chunks not yet released.
  std::map<Key, CheckinTimes> open_checkins_;
  LastEntry<CheckinTimes> last_open_;
  // Emptied lists of released chunks, kept with their capacity for the next chunks' check-ins:
  // a list grown a check-in at a time to a chunk's size, each step, cost more than the tracker's
  // own work on those check-ins. At most kSpareCheckinLists.
  std::vector<CheckinTimes> spare_checkins_;
  std::map<Key, SyncAudit> audit_;
  LastEntry<SyncAudit> last_audit_;
  AuditTotals totals_;
  absl::flat_hash_set<std::tuple<uint64_t, core::Step, core::ChunkId, bool>> reported_stalls_;
  uint64_t stalls_ = 0;
};

}  // namespace psync::observe

#endif  // PSYNC_SERVER_OBSERVE_JOB_OBSERVER_H_

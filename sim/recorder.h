// Recorder: the independent witness of a simulated job. Simulated ranks tell it when they send
// each check-in and when each directive reaches them; Analyze() then checks, per (step, chunk),
// the coordinator's guarantees without asking the coordinator:
//  * no early release: no directive reached a member before every contributor of the chunk had
//    sent its check-in;
//  * exactly once: every member got the directive once past its client's de-duplication (and
//    WaitForDirective handed it out once), no rank outside the chunk got it, and skipped steps
//    released nothing;
//  * sequence numbers: all members saw the same one, and no two (step, chunk) share one.
//
// Times come from an injected monotonic clock (nanoseconds), so tests can replay any order.
// Thread-safe: every simulated rank and client reader thread reports concurrently.
#ifndef PSYNC_SIM_RECORDER_H_
#define PSYNC_SIM_RECORDER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "sim/report.h"
#include "sim/sim_plan.h"

namespace psync::sim {

class Recorder {
 public:
  // `now_nanos` returns monotonic nanoseconds; the default reads std::chrono::steady_clock.
  explicit Recorder(std::function<int64_t()> now_nanos = nullptr);

  // A contributor is about to send its check-in (again, when `duplicate`).
  void CheckinSent(uint64_t step, uint32_t chunk, uint32_t rank, const std::string& optimizer,
                   bool duplicate) ABSL_LOCKS_EXCLUDED(mu_);
  // A rank is about to send its skip vote (again, when `duplicate`).
  void SkipSent(uint64_t step, uint32_t rank, bool duplicate) ABSL_LOCKS_EXCLUDED(mu_);
  // A directive passed `rank`'s client de-duplication (the client's notice handler).
  void DirectiveArrived(uint32_t rank, const psync::v1::SyncDirective& directive)
      ABSL_LOCKS_EXCLUDED(mu_);
  // WaitForDirective handed `directive` to `rank`'s training loop.
  void DirectiveTaken(uint32_t rank, const psync::v1::SyncDirective& directive)
      ABSL_LOCKS_EXCLUDED(mu_);
  void StepSkippedArrived(uint32_t rank, uint64_t step) ABSL_LOCKS_EXCLUDED(mu_);
  // Counters of `rank`'s client at the end of the run: directives dropped by its de-duplication,
  // reconnects, messages re-sent on a new stream.
  void ClientCounters(uint32_t rank, uint64_t duplicates_dropped, uint64_t reconnects,
                      uint64_t messages_resent) ABSL_LOCKS_EXCLUDED(mu_);

  // Checks the steps [first_step, first_step + steps) of `plan`; `skipped` are the steps every rank
  // skipped. Fills everything of the report but `errors` and `wall_time`.
  SimReport Analyze(const SimPlan& plan, uint64_t first_step, uint64_t steps,
                    const std::set<uint64_t>& skipped) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Arrival {
    int64_t time = 0;
    uint64_t generation = 0;
    uint64_t sequence = 0;
  };
  struct ChunkRecord {
    std::map<std::pair<uint32_t, std::string>, int64_t> first_sent;  // (rank, optimizer) -> time
    std::map<uint32_t, std::vector<Arrival>> arrivals;               // rank -> deliveries
    std::map<uint32_t, int> taken;                                   // rank -> hand-outs
  };
  using Key = std::pair<uint64_t, uint32_t>;  // (step, chunk)

  // Constant after construction.
  const std::function<int64_t()> now_nanos_;

  mutable absl::Mutex mu_;
  std::map<Key, ChunkRecord> chunks_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::set<uint32_t>> skip_votes_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, std::set<uint32_t>> skipped_arrivals_ ABSL_GUARDED_BY(mu_);
  uint64_t checkins_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t duplicates_sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t skips_sent_ ABSL_GUARDED_BY(mu_) = 0;
  struct Counters {
    uint64_t duplicates_dropped = 0;
    uint64_t reconnects = 0;
    uint64_t messages_resent = 0;
  };
  std::map<uint32_t, Counters> client_counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::sim

#endif  // PSYNC_SIM_RECORDER_H_

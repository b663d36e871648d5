// TrackerHarness: drives one core::JobTracker for the fuzz targets and audits every call.
//
// Each method forwards one input to the tracker at the harness's current time, then checks:
//  * every Decisions output with an InvariantChecker (server/core/invariant_checker.h) built, per
//    generation, from the plans the harness saw accepted (never read from the tracker), and fed
//    every accepted check-in; release sequence numbers rise across generations too;
//  * a rejected input left StateText() (snapshot, steps, NoticesToHold()) unchanged and produced no
//    delivery, only violation events; the one exception is an input that ends the generation
//    (ABORTED): then the state is aborted and every joined rank got the abort;
//  * inputs that must be rejected were (stale generation, rank not joined, chunk out of range,
//    optimizer not declared, empty batch), and accepted SyncDones answer released directives;
//  * NoticesToHold(rank) of every joined rank lists exactly the directives delivered to it and not
//  yet
//    acknowledged with SyncDone, and the snapshot agrees with the releases seen;
//  * every violation event has a known class, and reconnects keep generation and session.
// The first failed check prints what happened and the tracker's state, then aborts the process,
// which libFuzzer (or the corpus replay test) reports as a crash. With PSYNC_FUZZ_TRACE set in the
// environment, every state-changing call, its status and its decisions are printed to stderr.
//
// Test-only. Thread-compatible.
#ifndef PSYNC_TESTS_FUZZ_TRACKER_HARNESS_H_
#define PSYNC_TESTS_FUZZ_TRACKER_HARNESS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/core/invariant_checker.h"
#include "server/core/job_tracker.h"
#include "server/core/types.h"

namespace psync::fuzz {

class TrackerHarness {
 public:
  TrackerHarness(std::string job_id, core::TrackerOptions options);

  // `plan` must have passed core::ValidateRankPlan and carry this harness's job id.
  absl::StatusOr<core::JoinResult> Join(const core::RankPlan& plan);
  absl::Status Stage(core::RankId rank, uint64_t generation,
                     absl::Span<const core::StagedItem> items);
  absl::Status Skip(core::RankId rank, uint64_t generation, core::Step step,
                    absl::string_view reason);
  absl::Status SyncDone(core::RankId rank, uint64_t generation,
                        absl::Span<const core::SyncDoneItem> items);
  void Abort(std::string reason);
  // CheckAttach, then the NoticesToHold() audit of `rank`.
  absl::Status Attach(core::RankId rank, uint64_t generation, absl::string_view session_id);
  // ChunkAt, checked against the releases and skips seen.
  void Query(core::Step step, core::ChunkId chunk);
  void Advance(absl::Duration d) { now_ += d; }

  const core::JobTracker& tracker() const { return tracker_; }
  // The plan the harness saw accepted for `rank` in the current generation, or nullptr.
  const core::RankPlan* joined_plan(core::RankId rank) const;
  // The session issued to `rank` in the current generation ("" when not joined).
  std::string session(core::RankId rank) const;

 private:
  using Key = std::tuple<uint64_t, core::Step, core::ChunkId>;  // generation, step, chunk
  struct Release {
    uint64_t sequence = 0;
    std::set<core::RankId> delivered;
    std::set<core::RankId> done;  // accepted SyncDone
  };
  struct Joined {
    core::RankPlan plan;
    std::string session;
  };

  [[noreturn]] void Fail(const std::string& what) const;
  // The checks shared by every state-changing call; `before` is StateText before the call.
  void Audit(const absl::Status& status, const std::string& before, core::JobState state_before,
             const core::Decisions& out);
  void CheckMustReject(const absl::Status& status, bool must_reject, const std::string& why);
  // Runs `call`, a tracker call that writes its decisions to the Decisions it is given; checks
  // that it was refused exactly when `must_reject` names a reason; runs `on_accepted` when it was
  // accepted; then audits it. Returns the call's status.
  absl::Status CheckedCall(const std::string& must_reject,
                           absl::FunctionRef<absl::Status(core::Decisions*)> call,
                           absl::FunctionRef<void()> on_accepted);
  void StartGenerationRecords(uint64_t generation);
  void MaybeComplete();
  void CheckPending(core::RankId rank) const;
  void CheckSnapshot() const;
  // The expected chunks of the current generation, from the accepted plans.
  std::vector<core::ExpectedChunk> ExpectedChunks() const;
  // Why a call by (rank, generation) must be rejected regardless of its items, or "".
  std::string SenderProblem(core::RankId rank, uint64_t generation) const;
  // The same for a batch of `items` items: its size first.
  std::string BatchProblem(core::RankId rank, uint64_t generation, size_t items) const;

  // Constant after construction.
  const core::TrackerOptions tracker_options_;
  const bool trace_;

  core::JobTracker tracker_;
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  std::string last_call_;

  // The current generation, as seen from the accepted joins.
  uint64_t generation_ = 0;
  std::map<core::RankId, Joined> joined_;
  bool complete_ = false;
  bool aborted_ = false;
  std::unique_ptr<core::InvariantChecker> checker_;
  std::vector<std::pair<core::RankId, std::vector<core::StagedItem>>> staged_while_forming_;
  std::vector<core::ExpectedChunk> expected_;

  std::map<Key, Release> releases_;  // every generation
  std::set<std::pair<uint64_t, core::Step>> skipped_;
  std::set<std::string> sessions_;  // every session id issued
  uint64_t last_sequence_ = 0;
};

}  // namespace psync::fuzz

#endif  // PSYNC_TESTS_FUZZ_TRACKER_HARNESS_H_

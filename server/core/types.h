// Domain types of the readiness core: plans, check-ins, notices sent to ranks, events.
//
// Plain value types, no behaviour beyond comparison and hashing. They mirror psync.v1 but depend on
// Abseil only, so the core can be tested without gRPC. Thread-compatible.
#ifndef PSYNC_SERVER_CORE_TYPES_H_
#define PSYNC_SERVER_CORE_TYPES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/time/time.h"

namespace psync::core {

using Step = uint64_t;
using ChunkId = uint32_t;
using RankId = uint32_t;

// One optimizer of one rank: the unit that checks in.
struct Contributor {
  RankId rank = 0;
  std::string optimizer;

  friend bool operator==(const Contributor& a, const Contributor& b) {
    return a.rank == b.rank && a.optimizer == b.optimizer;
  }
  friend bool operator!=(const Contributor& a, const Contributor& b) { return !(a == b); }
  friend bool operator<(const Contributor& a, const Contributor& b) {
    return std::tie(a.rank, a.optimizer) < std::tie(b.rank, b.optimizer);
  }
  template <typename H>
  friend H AbslHashValue(H h, const Contributor& c) {
    return H::combine(std::move(h), c.rank, c.optimizer);
  }
};

// A named set of ranks that all-gather a chunk together.
struct GroupDecl {
  std::string name;
  std::vector<RankId> ranks;  // as declared; compared as a set
};

// One rank's part in one chunk.
struct ChunkPart {
  ChunkId chunk = 0;
  std::vector<std::string> optimizers;  // may be empty: the rank contributes nothing here
  std::vector<GroupDecl> groups;        // at least one
};

struct StagedItem;

// What a running rank re-announces when it joins a coordinator that may have restarted.
struct ResumeState {
  uint64_t generation = 0;
  Step step = 0;
  std::vector<std::pair<ChunkId, std::string>> staged;  // (chunk, optimizer) staged at `step`
  std::vector<ChunkId> synced_chunks;                   // chunks of `step` it synced
  std::vector<ChunkId> released_chunks;  // chunks of `step` released to it, not reported synced
  // It voted to skip `step` (the vote sent), and has not seen the step skipped.
  std::optional<std::string> skip_reason;
  // Steps before `step` it saw skipped (at most 64, the most recent).
  std::vector<Step> skipped_steps;
  // (step, chunk) after `step` whose directive it received (at most 64, the most recent).
  std::vector<std::pair<Step, ChunkId>> released_ahead;
  // The latest generation known aborted when the rank's run began (JoinResult::restarted_after of
  // its latest join; 0: none).
  uint64_t restarted_after = 0;
};

// What one rank declares when it joins.
struct RankPlan {
  std::string job_id;
  uint32_t world_size = 0;
  RankId rank = 0;
  uint32_t num_chunks = 0;
  Step first_step = 0;
  std::string incarnation;
  std::vector<ChunkPart> chunks;
  std::string token;  // checked by the owner, not the core
  std::optional<ResumeState> resume;
  std::string node;  // where the rank runs, for the status views only (empty: not said)
};

struct StagedItem {
  Step step = 0;
  ChunkId chunk = 0;
  std::string optimizer;
  std::optional<uint64_t> checksum;
};

struct GroupChecksum {
  std::string group;
  uint64_t checksum = 0;
  friend bool operator==(const GroupChecksum& a, const GroupChecksum& b) {
    return a.group == b.group && a.checksum == b.checksum;
  }
};

// A rank's checksums of one sync, one per sync group of the chunk: nearly always one, kept inline.
using GroupChecksums = absl::InlinedVector<GroupChecksum, 1>;

struct SyncDoneItem {
  Step step = 0;
  ChunkId chunk = 0;
  GroupChecksums checksums;
  uint32_t executions = 1;  // times the rank executed this sync; > 1 is a violation
};

// ---- Notices: what the coordinator sends down to ranks ----

struct SyncDirective {
  uint64_t generation = 0;
  Step step = 0;
  ChunkId chunk = 0;
  uint64_t sequence = 0;
  Contributor last;
  absl::Duration wait;
  // The releasing replica's ownership epoch (v1.SyncDirective.epoch): stamped by the coordinator
  // when it hands the directive out; the tracker leaves it 0.
  uint64_t epoch = 0;
  // When the release was decided (the `now` of the call that decided it). A timestamp, not part
  // of the directive's identity: left out of ==.
  absl::Time released_at = absl::InfinitePast();
  friend bool operator==(const SyncDirective& a, const SyncDirective& b) {
    return a.generation == b.generation && a.step == b.step && a.chunk == b.chunk &&
           a.sequence == b.sequence && a.last == b.last && a.wait == b.wait && a.epoch == b.epoch;
  }
};

struct StepSkipped {
  uint64_t generation = 0;
  Step step = 0;
  friend bool operator==(const StepSkipped& a, const StepSkipped& b) {
    return a.generation == b.generation && a.step == b.step;
  }
};

struct AbortNotice {
  uint64_t generation = 0;
  Step step = 0;
  std::string reason;
  // A forming generation rebuilt from resumes was renumbered: the rank re-joins with its resume
  // (v1.Abort.rejoin).
  bool rejoin = false;
  friend bool operator==(const AbortNotice& a, const AbortNotice& b) {
    return a.generation == b.generation && a.step == b.step && a.reason == b.reason &&
           a.rejoin == b.rejoin;
  }
};

using Notice = std::variant<SyncDirective, StepSkipped, AbortNotice>;

// A notice addressed to one rank of one job, or to every member of one chunk (members_of). The
// notice is shared: a release's directive, or a skip's notice, is one object for every rank it
// goes to, so addressing it to 16,384 ranks copies a pointer a rank, not a notice. Immutable once
// made; never null.
struct Delivery {
  Delivery() = default;
  Delivery(RankId rank, Notice notice)
      : rank(rank), notice(std::make_shared<const Notice>(std::move(notice))) {}
  Delivery(RankId rank, std::shared_ptr<const Notice> notice)
      : rank(rank), notice(std::move(notice)) {}
  // To every member of `chunk` (its plan's ChunkInfo::members, in their order); `rank` unused.
  static Delivery ToMembersOf(ChunkId chunk, std::shared_ptr<const Notice> notice) {
    Delivery d(0, std::move(notice));
    d.members_of = chunk;
    return d;
  }
  RankId rank = 0;
  std::shared_ptr<const Notice> notice;
  // Set: the notice goes to every member of this chunk instead of to `rank`. Made only for an
  // owner that asked for it (Decisions::deliver_to_members_whole).
  std::optional<ChunkId> members_of;
};

// ---- Events: every decision the core makes, for observability and audit ----

enum class EventKind {
  kJoin,          // a rank joined (or reconnected)
  kGeneration,    // a new generation started
  kCheckin,       // a contributor staged (first time); merged: several ranks' (see Event)
  kDuplicate,     // an identical check-in was repeated
  kRelease,       // a (step, chunk) was released
  kSyncDone,      // a rank reported SyncDone for a (step, chunk); merged: several (see Event)
  kSyncComplete,  // every member reported SyncDone for a (step, chunk)
  kSkipVote,      // a rank asked to skip a step
  kStepSkipped,   // every rank skipped a step
  kViolation,     // a protocol violation (conflict, disagreement, checksum mismatch)
  kAbort,         // the generation was aborted
  kRejected,      // a message was refused (bad input); state unchanged
  kStall,         // a chunk waited past its deadline for contributors (or members' SyncDone)
  kRankLost,      // a joined rank had no session for longer than its lease
  kJobEnded,      // the job ended (EndJob, or every rank left finished): it moved to the history
  kJobEvicted,    // the job had no session and no message for the idle TTL: it moved to the history
};

const char* EventKindName(EventKind kind);

// A job id shared by the many events of one job: copying it copies a pointer, not the text (a
// long id copied into every check-in's event cost about 9% of the coordinator's CPU per check-in).
// Immutable; thread-safe to copy and read.
class SharedJobId {
 public:
  SharedJobId() = default;
  SharedJobId(std::string text)  // NOLINT: implicit, an id is a string
      : text_(std::make_shared<const std::string>(std::move(text))) {}
  SharedJobId(const char* text) : SharedJobId(std::string(text)) {}  // NOLINT
  const std::string& str() const { return text_ ? *text_ : Empty(); }
  operator const std::string&() const { return str(); }  // NOLINT
  bool empty() const { return str().empty(); }
  friend bool operator==(const SharedJobId& a, const SharedJobId& b) {
    return a.text_ == b.text_ || a.str() == b.str();
  }
  friend bool operator!=(const SharedJobId& a, const SharedJobId& b) { return !(a == b); }
  friend bool operator==(const SharedJobId& a, const std::string& b) { return a.str() == b; }
  friend bool operator!=(const SharedJobId& a, const std::string& b) { return a.str() != b; }
  friend bool operator==(const std::string& a, const SharedJobId& b) { return a == b.str(); }
  friend bool operator!=(const std::string& a, const SharedJobId& b) { return a != b.str(); }
  friend std::ostream& operator<<(std::ostream& out, const SharedJobId& id) {
    return out << id.str();
  }

 private:
  static const std::string& Empty() {
    static const std::string* const kEmpty = new std::string();
    return *kEmpty;
  }
  std::shared_ptr<const std::string> text_;
};

// kCheckin and kSyncDone events may be merged records: the same input of several ranks of one batch
// (a node's merged check-ins: one (step, chunk, optimizer), or one (step, chunk)'s SyncDone), at
// the same time, recorded once. One rank: `rank` is set and `ranks` is empty. Several: `rank` is
// unset and `ranks` lists them in the order applied. RankCount and ForEachRank read both forms.
struct Event {
  uint64_t index = 0;  // position in the coordinator's event log (set by the owner)
  EventKind kind = EventKind::kCheckin;
  absl::Time time;
  SharedJobId job_id;
  uint64_t generation = 0;
  std::optional<Step> step;
  std::optional<ChunkId> chunk;
  std::optional<RankId> rank;
  std::string optimizer;
  uint64_t sequence = 0;    // releases only
  absl::Duration duration;  // release: first check-in -> release; sync_complete: release -> last
                            // SyncDone; stall: time waited so far
  std::vector<Contributor> contributors;  // stall: the missing contributors (the first ones)
  std::vector<RankId> ranks;  // stall: members that did not report SyncDone (the first ones);
                              // checkin, sync_done: the ranks of a merged record
  // stall: how many contributors (waiting) or members (released) are missing in all, of which
  // `contributors` or `ranks` name the first (observe::ObserverOptions::stall_list_limit).
  uint32_t missing_count = 0;
  std::string detail;  // human-readable reason
  // Release only: the (step, chunk) was synced before this coordinator held the job (a restart,
  // or a move to another replica) and re-announced by ranks; the directive goes only to the
  // members that had not executed it. Not a second sync on any rank.
  bool resumed = false;
};

// The ranks a kCheckin or kSyncDone event stands for (one, or a merged record's).
inline size_t RankCount(const Event& e) { return e.rank.has_value() ? 1 : e.ranks.size(); }
template <typename Fn>
void ForEachRank(const Event& e, Fn fn) {
  if (e.rank.has_value()) {
    fn(*e.rank);
  } else {
    for (RankId r : e.ranks) fn(r);
  }
}

// The class of a kViolation event: "early_sync", "repeated_sync", "checksum_mismatch",
// "conflicting_duplicate", "skip_disagreement", or "other".
const char* ViolationKind(const Event& event);

// The output of one input to the core: notices to send and events to record.
struct Decisions {
  // Appends a delivery of `notice` (one of Notice's alternatives) to `rank`, a notice of its own.
  template <typename NoticeT>
  void Deliver(RankId rank, NoticeT notice) {
    deliveries.emplace_back(rank, Share(std::move(notice)));
  }
  // Appends a delivery of a notice made once for several ranks (Share).
  void Deliver(RankId rank, const std::shared_ptr<const Notice>& notice) {
    deliveries.emplace_back(rank, notice);
  }
  // `notice` as one object for several deliveries, built in place (GCC's -Wmaybe-uninitialized
  // misreads a moved temporary variant as reading its inactive alternatives).
  template <typename NoticeT>
  static std::shared_ptr<const Notice> Share(NoticeT notice) {
    return std::make_shared<const Notice>(std::in_place_type<NoticeT>, std::move(notice));
  }

  std::vector<Delivery> deliveries;
  std::vector<Event> events;
  // Set by an owner that keeps each chunk's members grouped by where their notices go: a release
  // to every member of a chunk is then one Delivery::ToMembersOf instead of one delivery a member
  // (at 131,072 ranks a pointer copied and a session looked up per member and release were 44 ms
  // of a step's deliveries). Unset (tools, tests, the simulation): every delivery names its rank.
  bool deliver_to_members_whole = false;
  // Set by an owner that applies one batch of several ranks' messages (a node's) through the same
  // Decisions: an accepted check-in or SyncDone then joins a record of the same input made
  // earlier at the same time, within the trailing run of such records (no other event since), so
  // a node's merged check-ins cost one record instead of one event per rank. Order is kept: a
  // release or any other event ends the run, so it still follows every check-in it needed.
  bool merge_rank_events = false;
  // Where merging stands in `events` (the tracker's bookkeeping, reset when `events` shrinks).
  struct MergeRun {
    size_t begin = 0;        // the first event of the trailing run of check-in and SyncDone records
    size_t checked = 0;      // events before it were looked at
    size_t last = SIZE_MAX;  // the record the last check-in or SyncDone joined or made
  };
  MergeRun merge_run;
};

}  // namespace psync::core

#endif  // PSYNC_SERVER_CORE_TYPES_H_

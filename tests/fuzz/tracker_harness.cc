#include "tests/fuzz/tracker_harness.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/test_util.h"

namespace psync::fuzz {
namespace {

using core::AbortNotice;
using core::ChunkId;
using core::Contributor;
using core::Decisions;
using core::Delivery;
using core::Event;
using core::EventKind;
using core::RankId;
using core::RankPlan;
using core::Step;
using core::StepSkipped;
using core::SyncDirective;
using core::testing::DeliveryText;
using core::testing::EventText;
using core::testing::StateText;

std::vector<RankId> SortedRanks(const std::vector<RankId>& ranks) {
  std::vector<RankId> out = ranks;
  std::sort(out.begin(), out.end());
  return out;
}

// Whether two plans of one rank declare the same thing (incarnation and token aside), written
// independently of core::SamePlan: optimizers in order, group members as sets.
bool PlansMatch(const RankPlan& a, const RankPlan& b) {
  if (a.job_id != b.job_id || a.world_size != b.world_size || a.rank != b.rank ||
      a.num_chunks != b.num_chunks || a.first_step != b.first_step ||
      a.chunks.size() != b.chunks.size()) {
    return false;
  }
  for (size_t i = 0; i < a.chunks.size(); ++i) {
    const core::ChunkPart& x = a.chunks[i];
    const core::ChunkPart& y = b.chunks[i];
    if (x.chunk != y.chunk || x.optimizers != y.optimizers || x.groups.size() != y.groups.size()) {
      return false;
    }
    for (size_t j = 0; j < x.groups.size(); ++j) {
      if (x.groups[j].name != y.groups[j].name ||
          SortedRanks(x.groups[j].ranks) != SortedRanks(y.groups[j].ranks)) {
        return false;
      }
    }
  }
  return true;
}

std::string ContributorsText(const std::vector<Contributor>& contributors) {
  return absl::StrJoin(contributors, ",", [](std::string* out, const Contributor& c) {
    absl::StrAppend(out, c.rank, "/", c.optimizer);
  });
}

// "<call> rank <rank> generation <generation> [<item>, ...]", each item written by `format`.
template <typename Item, typename Format>
std::string BatchCallText(absl::string_view call, RankId rank, uint64_t generation,
                          absl::Span<const Item> items, Format format) {
  return absl::StrCat(call, " rank ", rank, " generation ", generation, " [",
                      absl::StrJoin(items, ", ", format), "]");
}

}  // namespace

TrackerHarness::TrackerHarness(std::string job_id, core::TrackerOptions options)
    : tracker_options_(options),
      trace_(std::getenv("PSYNC_FUZZ_TRACE") != nullptr),
      tracker_(std::move(job_id), std::move(options)) {}

void TrackerHarness::Fail(const std::string& what) const {
  std::fprintf(stderr, "tracker invariant violated: %s\nlast call: %s\nstate:\n%s\n", what.c_str(),
               last_call_.c_str(), StateText(tracker_, now_).c_str());
  std::fflush(stderr);
  std::abort();
}

const RankPlan* TrackerHarness::joined_plan(RankId rank) const {
  auto it = joined_.find(rank);
  return it == joined_.end() ? nullptr : &it->second.plan;
}

std::string TrackerHarness::session(RankId rank) const {
  auto it = joined_.find(rank);
  return it == joined_.end() ? "" : it->second.session;
}

std::string TrackerHarness::SenderProblem(RankId rank, uint64_t generation) const {
  if (generation != generation_) return "stale generation";
  if (aborted_) return "generation aborted";
  if (joined_.count(rank) == 0) return "rank not joined";
  return "";
}

std::string TrackerHarness::BatchProblem(RankId rank, uint64_t generation, size_t items) const {
  if (items == 0 || items > tracker_options_.max_batch_items) return "batch size";
  return SenderProblem(rank, generation);
}

void TrackerHarness::CheckMustReject(const absl::Status& status, bool must_reject,
                                     const std::string& why) {
  if (must_reject && status.ok())
    Fail(absl::StrCat("accepted an input that must be refused: ", why));
}

void TrackerHarness::StartGenerationRecords(uint64_t generation) {
  generation_ = generation;
  joined_.clear();
  complete_ = false;
  aborted_ = false;
  checker_.reset();
  staged_while_forming_.clear();
  expected_.clear();
}

std::vector<core::ExpectedChunk> TrackerHarness::ExpectedChunks() const {
  if (joined_.empty()) return {};
  std::vector<core::ExpectedChunk> chunks(joined_.begin()->second.plan.num_chunks);
  std::vector<std::set<RankId>> members(chunks.size());
  for (const auto& [rank, joined] : joined_) {
    for (const core::ChunkPart& part : joined.plan.chunks) {
      for (const std::string& opt : part.optimizers) {
        chunks[part.chunk].contributors.push_back({rank, opt});
      }
      for (const core::GroupDecl& group : part.groups) {
        members[part.chunk].insert(group.ranks.begin(), group.ranks.end());
      }
    }
  }
  for (size_t c = 0; c < chunks.size(); ++c) {
    std::sort(chunks[c].contributors.begin(), chunks[c].contributors.end());
    chunks[c].members.assign(members[c].begin(), members[c].end());
  }
  return chunks;
}

void TrackerHarness::MaybeComplete() {
  if (!complete_ && !joined_.empty() && joined_.size() == joined_.begin()->second.plan.world_size) {
    complete_ = true;
    expected_ = ExpectedChunks();
    checker_ = std::make_unique<core::InvariantChecker>(expected_);
    for (const auto& [rank, items] : staged_while_forming_) {
      checker_->OnStaged(rank, generation_, items);
    }
    staged_while_forming_.clear();
  }
  if (tracker_.plan().complete() != complete_) {
    Fail(absl::StrCat("the tracker's plan is ", tracker_.plan().complete() ? "" : "not ",
                      "complete; ", joined_.size(), " ranks were seen joining"));
  }
}

void TrackerHarness::Audit(const absl::Status& status, const std::string& before,
                           core::JobState state_before, const Decisions& out) {
  const std::string after = StateText(tracker_, now_);
  if (trace_) {
    std::fprintf(stderr, "%s -> %s\n", last_call_.c_str(), status.ToString().c_str());
    for (const Delivery& d : out.deliveries)
      std::fprintf(stderr, "  %s\n", DeliveryText(d).c_str());
    for (const Event& e : out.events) std::fprintf(stderr, "  %s\n", EventText(e).c_str());
  }
  if (!status.ok()) {
    if (after != before) {
      const bool ended = status.code() == absl::StatusCode::kAborted &&
                         state_before != core::JobState::kAborted &&
                         tracker_.state() == core::JobState::kAborted;
      if (!ended) {
        Fail(absl::StrCat("a rejected input (", status.ToString(), ") changed the state from\n",
                          before, "to\n", after));
      }
    } else {
      for (const Delivery& d : out.deliveries) {
        Fail(
            absl::StrCat("a rejected input (", status.ToString(), ") delivered ", DeliveryText(d)));
      }
      for (const Event& e : out.events) {
        if (e.kind != EventKind::kViolation) {
          Fail(absl::StrCat("a rejected input (", status.ToString(), ") recorded ", EventText(e)));
        }
      }
    }
  }
  bool abort_event = false;
  for (const Event& e : out.events) {
    if (e.generation != tracker_.generation()) {
      Fail(absl::StrCat("event of generation ", e.generation, " at generation ",
                        tracker_.generation(), ": ", EventText(e)));
    }
    if (e.kind == EventKind::kViolation && std::string(core::ViolationKind(e)) == "other") {
      Fail(absl::StrCat("violation of no known class: ", EventText(e), " (", e.detail, ")"));
    }
    if (e.kind == EventKind::kAbort) abort_event = true;
  }
  if (abort_event) {
    // The generation ended: every joined rank is told, once.
    if (tracker_.state() != core::JobState::kAborted) Fail("abort event, but the job runs on");
    std::set<RankId> told;
    for (const Delivery& d : out.deliveries) {
      const auto* a = std::get_if<AbortNotice>(d.notice.get());
      if (a != nullptr && a->generation == generation_ && !told.insert(d.rank).second) {
        Fail(absl::StrCat("abort delivered twice: ", DeliveryText(d)));
      }
    }
    for (const auto& [rank, joined] : joined_) {
      if (told.count(rank) == 0) Fail(absl::StrCat("rank ", rank, " was not told of the abort"));
    }
    aborted_ = true;
  }
  if (aborted_ != (tracker_.state() == core::JobState::kAborted)) {
    Fail(absl::StrCat("the job is ", core::JobStateName(tracker_.state()),
                      aborted_ ? " after an abort" : " without an abort event"));
  }

  // The invariants of the core, audited by the checker once the plan is complete.
  if (checker_ != nullptr) {
    if (auto s = checker_->OnDecisions(out); !s.ok()) Fail(s.ToString());
  }
  for (const Event& e : out.events) {
    if (e.kind != EventKind::kRelease) continue;
    if (checker_ == nullptr)
      Fail(absl::StrCat("release before the plan is complete: ", EventText(e)));
    if (e.sequence <= last_sequence_) {
      Fail(absl::StrCat("release sequence ", e.sequence, " after ", last_sequence_));
    }
    last_sequence_ = e.sequence;
    releases_[Key{e.generation, *e.step, *e.chunk}].sequence = e.sequence;
  }
  for (const Delivery& d : out.deliveries) {
    if (const auto* directive = std::get_if<SyncDirective>(d.notice.get())) {
      if (checker_ == nullptr || directive->generation != generation_) {
        Fail(absl::StrCat("directive outside a complete current generation: ", DeliveryText(d)));
      }
      releases_[Key{directive->generation, directive->step, directive->chunk}].delivered.insert(
          d.rank);
    } else if (const auto* skipped = std::get_if<StepSkipped>(d.notice.get())) {
      if (checker_ == nullptr || skipped->generation != generation_) {
        Fail(absl::StrCat("skip outside a complete current generation: ", DeliveryText(d)));
      }
      skipped_.insert({skipped->generation, skipped->step});
    }
  }
  for (const auto& [rank, joined] : joined_) CheckPending(rank);
  CheckSnapshot();
}

void TrackerHarness::CheckPending(RankId rank) const {
  const std::vector<core::Notice> notices = tracker_.NoticesToHold(rank);
  if (aborted_) {
    if (notices.size() != 1 || !std::holds_alternative<AbortNotice>(notices[0]) ||
        std::get<AbortNotice>(notices[0]).generation != generation_) {
      Fail(absl::StrCat("NoticesToHold(", rank, ") of an aborted generation: ", notices.size(),
                        " notices, not its abort"));
    }
    return;
  }
  std::set<std::tuple<Step, ChunkId, uint64_t>> listed;
  for (const core::Notice& n : notices) {
    // A skip the tracker announced is listed again for a re-attaching rank.
    if (const auto* k = std::get_if<StepSkipped>(&n)) {
      if (k->generation != generation_ || skipped_.count({k->generation, k->step}) == 0) {
        Fail(absl::StrCat("NoticesToHold(", rank, ") lists ", core::testing::NoticeText(n),
                          ", a step not skipped"));
      }
      continue;
    }
    const auto* d = std::get_if<SyncDirective>(&n);
    if (d == nullptr || d->generation != generation_) {
      Fail(absl::StrCat("NoticesToHold(", rank, ") lists ", core::testing::NoticeText(n)));
    }
    if (!listed.insert({d->step, d->chunk, d->sequence}).second) {
      Fail(
          absl::StrCat("NoticesToHold(", rank, ") lists ", core::testing::NoticeText(n), " twice"));
    }
  }
  std::set<std::tuple<Step, ChunkId, uint64_t>> owed;
  for (auto it = releases_.lower_bound(Key{generation_, 0, 0});
       it != releases_.end() && std::get<0>(it->first) == generation_; ++it) {
    const Release& r = it->second;
    if (r.delivered.count(rank) > 0 && r.done.count(rank) == 0) {
      owed.insert({std::get<1>(it->first), std::get<2>(it->first), r.sequence});
    }
  }
  if (listed != owed) {
    auto text = [](const std::set<std::tuple<Step, ChunkId, uint64_t>>& s) {
      return absl::StrJoin(s, ", ", [](std::string* out, const auto& t) {
        absl::StrAppend(out, "s", std::get<0>(t), " c", std::get<1>(t), " seq", std::get<2>(t));
      });
    };
    Fail(absl::StrCat("NoticesToHold(", rank, ") lists [", text(listed),
                      "], but the directives delivered and not acknowledged are [", text(owed),
                      "]"));
  }
}

void TrackerHarness::CheckSnapshot() const {
  const core::JobSnapshot snap = tracker_.Snapshot(now_);
  if (snap.generation != generation_) {
    Fail(absl::StrCat("snapshot generation ", snap.generation, ", joins say ", generation_));
  }
  if (joined_.empty()) return;
  const std::vector<core::ExpectedChunk> expected = complete_ ? expected_ : ExpectedChunks();
  if (snap.chunks.size() != expected.size()) {
    Fail(absl::StrCat("snapshot has ", snap.chunks.size(), " chunks, the plan ", expected.size()));
  }
  for (const core::ChunkSnapshot& c : snap.chunks) {
    std::vector<Contributor> all = c.staged;
    all.insert(all.end(), c.missing.begin(), c.missing.end());
    std::sort(all.begin(), all.end());
    if (all != expected[c.chunk].contributors) {
      Fail(absl::StrCat("snapshot chunk ", c.chunk, " staged+missing [", ContributorsText(all),
                        "], expected contributors [",
                        ContributorsText(expected[c.chunk].contributors), "]"));
    }
    auto release = releases_.find(Key{generation_, c.step, c.chunk});
    const bool released = release != releases_.end();
    if (released != (c.state == "RELEASED")) {
      Fail(absl::StrCat("snapshot chunk ", c.chunk, " step ", c.step, " is ", c.state, ", but it ",
                        released ? "was" : "was not", " released"));
    }
    if (released) {
      std::vector<RankId> pending;
      for (RankId m : expected[c.chunk].members) {
        if (release->second.done.count(m) == 0) pending.push_back(m);
      }
      if (pending != c.sync_pending) {
        Fail(absl::StrCat("snapshot chunk ", c.chunk, " sync_pending [",
                          absl::StrJoin(c.sync_pending, ","), "], expected [",
                          absl::StrJoin(pending, ","), "]"));
      }
    }
  }
}

absl::StatusOr<core::JoinResult> TrackerHarness::Join(const RankPlan& plan) {
  last_call_ = absl::StrCat("Join rank ", plan.rank, " incarnation '", plan.incarnation, "' world ",
                            plan.world_size, " chunks ", plan.num_chunks);
  const std::string before = StateText(tracker_, now_);
  const core::JobState state_before = tracker_.state();
  auto existing = joined_.find(plan.rank);
  const bool same_incarnation = existing != joined_.end() && !aborted_ &&
                                existing->second.plan.incarnation == plan.incarnation;
  std::string must_reject;
  if (same_incarnation && !PlansMatch(existing->second.plan, plan)) {
    must_reject = "same incarnation, different plan";
  }
  if (existing == joined_.end() && generation_ > 0 && !aborted_) {
    for (const auto& [rank, joined] : joined_) {
      if (joined.plan.world_size != plan.world_size || joined.plan.num_chunks != plan.num_chunks ||
          joined.plan.first_step != plan.first_step) {
        must_reject = absl::StrCat("plan conflicts with rank ", rank);
      }
    }
  }

  Decisions out;
  absl::StatusOr<core::JoinResult> result = tracker_.Join(plan, now_, &out);
  CheckMustReject(result.status(), !must_reject.empty(), must_reject);
  if (!result.ok()) {
    if (same_incarnation && must_reject.empty()) {
      Fail(
          absl::StrCat("a reconnect with the same plan was refused: ", result.status().ToString()));
    }
    if (!out.events.empty() || !out.deliveries.empty()) Fail("a refused join had decisions");
    Audit(result.status(), before, state_before, out);
    return result;
  }
  if (result->generation != tracker_.generation()) Fail("join answered another generation");
  if (result->reconnect) {
    if (!same_incarnation || result->generation != generation_ ||
        result->session_id != existing->second.session ||
        result->next_step != tracker_.rank_step(plan.rank) || !out.deliveries.empty()) {
      Fail(absl::StrCat("bad reconnect of rank ", plan.rank, ": generation ", result->generation,
                        " session ", result->session_id));
    }
    if (StateText(tracker_, now_) != before) Fail("a reconnect changed the state");
  } else {
    if (same_incarnation) Fail("a reconnect was answered as a new join");
    const bool new_generation = result->generation != generation_;
    if (new_generation) {
      if (result->generation != generation_ + 1) {
        Fail(absl::StrCat("generation ", generation_, " -> ", result->generation));
      }
      // Ranks of a running generation hear that it ended.
      if (generation_ > 0 && !aborted_) {
        std::set<RankId> told;
        for (const Delivery& d : out.deliveries) {
          const auto* a = std::get_if<AbortNotice>(d.notice.get());
          if (a != nullptr && a->generation == generation_) told.insert(d.rank);
        }
        for (const auto& [rank, joined] : joined_) {
          if (told.count(rank) == 0) {
            Fail(absl::StrCat("rank ", rank, " was not told that generation ", generation_,
                              " ended"));
          }
        }
      }
      StartGenerationRecords(result->generation);
    } else if (existing != joined_.end() || aborted_ || generation_ == 0) {
      Fail(absl::StrCat("rank ", plan.rank, " joined generation ", generation_,
                        " again without a new generation"));
    }
    if (result->next_step != plan.first_step) Fail("a new join does not start at first_step");
    if (!sessions_.insert(result->session_id).second) {
      Fail(absl::StrCat("session id ", result->session_id, " issued twice"));
    }
    joined_[plan.rank] = Joined{plan, result->session_id};
  }
  MaybeComplete();
  Audit(absl::OkStatus(), before, state_before, out);
  return result;
}

absl::Status TrackerHarness::CheckedCall(const std::string& must_reject,
                                         absl::FunctionRef<absl::Status(Decisions*)> call,
                                         absl::FunctionRef<void()> on_accepted) {
  const std::string before = StateText(tracker_, now_);
  const core::JobState state_before = tracker_.state();
  Decisions out;
  absl::Status status = call(&out);
  CheckMustReject(status, !must_reject.empty(), must_reject);
  if (status.ok()) on_accepted();
  Audit(status, before, state_before, out);
  return status;
}

absl::Status TrackerHarness::Stage(RankId rank, uint64_t generation,
                                   absl::Span<const core::StagedItem> items) {
  last_call_ = BatchCallText("Stage", rank, generation, items,
                             [](std::string* out, const core::StagedItem& i) {
                               absl::StrAppend(out, "s", i.step, " c", i.chunk, " ", i.optimizer);
                               if (i.checksum) absl::StrAppend(out, "#", *i.checksum);
                             });
  std::string must_reject = BatchProblem(rank, generation, items.size());
  if (const RankPlan* plan = joined_plan(rank); plan != nullptr) {
    for (const core::StagedItem& item : items) {
      if (item.chunk >= plan->num_chunks) must_reject = "chunk out of range";
      const auto part =
          std::find_if(plan->chunks.begin(), plan->chunks.end(),
                       [&](const core::ChunkPart& p) { return p.chunk == item.chunk; });
      if (part == plan->chunks.end() || std::find(part->optimizers.begin(), part->optimizers.end(),
                                                  item.optimizer) == part->optimizers.end()) {
        must_reject = "optimizer not declared";
      }
    }
  }
  return CheckedCall(
      must_reject,
      [&](Decisions* out) { return tracker_.Stage(rank, generation, items, now_, out); },
      [&] {
        if (checker_ != nullptr) {
          checker_->OnStaged(rank, generation, items);
        } else {
          staged_while_forming_.emplace_back(
              rank, std::vector<core::StagedItem>(items.begin(), items.end()));
        }
      });
}

absl::Status TrackerHarness::Skip(RankId rank, uint64_t generation, Step step,
                                  absl::string_view reason) {
  last_call_ = absl::StrCat("Skip rank ", rank, " generation ", generation, " step ", step,
                            " reason of ", reason.size(), " characters");
  std::string must_reject = SenderProblem(rank, generation);
  if (reason.size() > tracker_options_.max_reason_length) must_reject = "reason too long";
  return CheckedCall(
      must_reject,
      [&](Decisions* out) { return tracker_.Skip(rank, generation, step, reason, now_, out); },
      [] {});
}

absl::Status TrackerHarness::SyncDone(RankId rank, uint64_t generation,
                                      absl::Span<const core::SyncDoneItem> items) {
  last_call_ = BatchCallText("SyncDone", rank, generation, items,
                             [](std::string* out, const core::SyncDoneItem& i) {
                               absl::StrAppend(out, "s", i.step, " c", i.chunk, " x", i.executions,
                                               " groups ", i.checksums.size());
                             });
  std::string must_reject = BatchProblem(rank, generation, items.size());
  std::set<std::pair<Step, ChunkId>> in_batch;
  for (const core::SyncDoneItem& item : items) {
    if (!in_batch.insert({item.step, item.chunk}).second) must_reject = "item repeated in batch";
    auto release = releases_.find(Key{generation, item.step, item.chunk});
    if (release == releases_.end() || release->second.delivered.count(rank) == 0) {
      must_reject = absl::StrCat("SyncDone of step ", item.step, " chunk ", item.chunk,
                                 " before its directive reached rank ", rank);
    }
  }
  return CheckedCall(
      must_reject,
      [&](Decisions* out) { return tracker_.SyncDone(rank, generation, items, now_, out); },
      [&] {
        for (const core::SyncDoneItem& item : items) {
          releases_[Key{generation, item.step, item.chunk}].done.insert(rank);
        }
      });
}

void TrackerHarness::Abort(std::string reason) {
  last_call_ = absl::StrCat("Abort (", reason, ")");
  const std::string before = StateText(tracker_, now_);
  const core::JobState state_before = tracker_.state();
  Decisions out;
  tracker_.Abort(std::move(reason), now_, &out);
  if (generation_ > 0 && tracker_.state() != core::JobState::kAborted) Fail("Abort did not abort");
  if (state_before == core::JobState::kAborted && !(out.events.empty() && out.deliveries.empty())) {
    Fail("a second Abort had decisions");
  }
  Audit(absl::OkStatus(), before, state_before, out);
}

absl::Status TrackerHarness::Attach(RankId rank, uint64_t generation,
                                    absl::string_view session_id) {
  last_call_ =
      absl::StrCat("Attach rank ", rank, " generation ", generation, " session '", session_id, "'");
  absl::Status status = tracker_.CheckAttach(rank, generation, session_id);
  auto joined = joined_.find(rank);
  const bool valid =
      generation == generation_ && joined != joined_.end() && joined->second.session == session_id;
  if (valid != status.ok()) {
    Fail(absl::StrCat("CheckAttach answered ", status.ToString(), " for a ",
                      valid ? "valid" : "wrong", " attach"));
  }
  if (joined != joined_.end()) CheckPending(rank);
  return status;
}

void TrackerHarness::Query(Step step, ChunkId chunk) {
  last_call_ = absl::StrCat("ChunkAt step ", step, " chunk ", chunk);
  absl::StatusOr<core::ChunkSnapshot> snap = tracker_.ChunkAt(step, chunk, now_);
  const size_t num_chunks = joined_.empty() ? 0 : joined_.begin()->second.plan.num_chunks;
  if (chunk >= num_chunks) {
    if (snap.status().code() != absl::StatusCode::kInvalidArgument) {
      Fail(absl::StrCat("ChunkAt of chunk ", chunk, " of ", num_chunks, ": ",
                        snap.status().ToString()));
    }
    return;
  }
  if (!snap.ok()) {
    if (snap.status().code() != absl::StatusCode::kOutOfRange) {
      Fail(absl::StrCat("ChunkAt: ", snap.status().ToString()));
    }
    return;
  }
  const std::vector<core::ExpectedChunk> expected = complete_ ? expected_ : ExpectedChunks();
  auto release = releases_.find(Key{generation_, step, chunk});
  const bool released = release != releases_.end();
  const bool skipped = skipped_.count({generation_, step}) > 0;
  bool ok = true;
  if (snap->state == "SKIPPED") {
    ok = skipped && snap->staged.empty() && snap->missing.empty();
  } else {
    std::vector<Contributor> all = snap->staged;
    all.insert(all.end(), snap->missing.begin(), snap->missing.end());
    std::sort(all.begin(), all.end());
    ok = !skipped && all == expected[chunk].contributors &&
         snap->staged.size() == snap->staged_after.size();
    if (snap->state == "SYNCED" || snap->state == "RELEASED") {
      ok = ok && released &&
           (snap->state == "SYNCED") ==
               (release->second.done.size() == expected[chunk].members.size());
    } else {
      ok = ok && !released && (snap->state == "IDLE" || snap->state == "WAITING");
    }
  }
  if (!ok) {
    Fail(absl::StrCat("ChunkAt step ", step, " chunk ", chunk, " is ", snap->state, " staged [",
                      ContributorsText(snap->staged), "] missing [",
                      ContributorsText(snap->missing), "]; released: ", released,
                      ", skipped: ", skipped));
  }
}

}  // namespace psync::fuzz

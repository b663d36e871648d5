// Simulation: joins, check-ins, skips, SyncDones, reconnects, audits; contract:
// tracker_simulation.h.
#include "server/core/tracker_simulation.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/core/test_util.h"

namespace psync::core::testing {

absl::Status Simulation::Run() {
  const Step end = plan_.first_step + plan_.steps;
  for (uint64_t iteration = 0;; ++iteration) {
    if (iteration > 200000) return Fail("the run did not finish");
    std::vector<RankId> active;
    bool finished = true;
    for (RankId r = 0; r < plan_.world_size; ++r) {
      const RankSim& rank = ranks_[r];
      if (!rank.joined || rank.step < end || !rank.directives.empty()) finished = false;
      if (CanAct(r)) active.push_back(r);
    }
    if (finished) break;
    if (active.empty()) return Fail("no rank can act, yet the run is not finished");
    const RankId r = active[Uniform(0, active.size() - 1)];
    now_ += absl::Milliseconds(Uniform(0, 50));
    absl::Status status = Act(r);
    if (!status.ok()) return status;
    ++calls_;
    ++coverage_.calls;
  }
  if (auto s = mirror_.Flush(); !s.ok()) return Fail(s.ToString());
  coverage_.merged_records = mirror_.merged_records();
  std::vector<Step> steps;
  for (Step s = plan_.first_step; s < end; ++s) steps.push_back(s);
  const std::vector<Step> skipped(plan_.skipped.begin(), plan_.skipped.end());
  if (auto s = checker_.CheckComplete(1, steps, skipped); !s.ok()) return Fail(s.ToString());
  size_t chunks_with_contributors = 0;
  for (const ExpectedChunk& c : plan_.expected) chunks_with_contributors += !c.contributors.empty();
  const size_t releases = (plan_.steps - skipped.size()) * chunks_with_contributors;
  if (checker_.releases() != releases) {
    return Fail(absl::StrCat(checker_.releases(), " releases, expected ", releases));
  }
  return absl::OkStatus();
}

MergedMirror::Call Simulation::JoinCall(RankId r) const {
  const RankPlan plan = plan_.plans[r];
  return
      [plan](JobTracker& t, absl::Time now, Decisions* d) { return t.Join(plan, now, d).status(); };
}

MergedMirror::Call Simulation::SkipCall(RankId r, Step step) {
  return [r, step](JobTracker& t, absl::Time now, Decisions* d) {
    return t.Skip(r, 1, step, "found_inf", now, d);
  };
}

absl::Status Simulation::Mirror(const MergedMirror::Call& call, const absl::Status& status,
                                const Decisions& out) {
  if (auto s = mirror_.Batched(call, status, out, now_); !s.ok()) return Fail(s.ToString());
  return absl::OkStatus();
}

absl::Status Simulation::Fail(const std::string& what) const {
  return absl::InternalError(absl::StrCat(what, "\nafter ", calls_, " calls; last call: ",
                                          last_call_, "\n", StateText(tracker_, now_)));
}

bool Simulation::CanAct(RankId r) const {
  const RankSim& rank = ranks_[r];
  if (!rank.joined) return true;
  if (!rank.directives.empty()) return true;
  if (rank.step >= plan_.first_step + plan_.steps) return false;
  if (IsSkipped(rank.step)) return !rank.skip_voted;
  return !rank.to_stage.empty();
}

Step Simulation::KeepFrom() const {
  Step lowest = ~Step{0};
  bool all_joined = true;
  for (const RankSim& rank : ranks_) {
    if (rank.joined) lowest = std::min(lowest, rank.step);
    all_joined &= rank.joined;
  }
  if (!all_joined) lowest = std::min(lowest, plan_.first_step);
  return lowest > plan_.history_steps ? lowest - plan_.history_steps : 0;
}

void Simulation::EnterStep(RankId r, Step s) {
  RankSim& rank = ranks_[r];
  rank.step = s;
  rank.skip_voted = false;
  rank.to_stage.clear();
  if (s >= plan_.first_step + plan_.steps || IsSkipped(s)) return;
  for (const ChunkPart& part : plan_.plans[r].chunks) {
    for (const std::string& opt : part.optimizers) rank.to_stage.push_back({part.chunk, opt});
  }
}

void Simulation::MaybeAdvance(RankId r) {
  RankSim& rank = ranks_[r];
  while (rank.step < plan_.first_step + plan_.steps && !IsSkipped(rank.step) &&
         rank.to_stage.empty()) {
    for (ChunkId c : plan_.synced[r]) {
      const bool done = std::any_of(rank.done.begin(), rank.done.end(), [&](const SyncDoneItem& d) {
        return d.step == rank.step && d.chunk == c;
      });
      if (!done) return;
    }
    EnterStep(r, rank.step + 1);
  }
}

GroupChecksums Simulation::Checksums(RankId r, Step step, ChunkId chunk) const {
  GroupChecksums sums;
  for (const ChunkPart& part : plan_.plans[r].chunks) {
    if (part.chunk != chunk) continue;
    for (const GroupDecl& g : part.groups) {
      sums.push_back({g.name, step * 1000003 + chunk * 101 + g.name.size() * 7 + g.ranks[0]});
    }
  }
  return sums;
}

absl::Status Simulation::Apply(const Decisions& out) {
  if (auto s = checker_.OnDecisions(out); !s.ok()) return Fail(s.ToString());
  for (const Event& e : out.events) {
    if (e.kind == EventKind::kViolation || e.kind == EventKind::kAbort ||
        e.kind == EventKind::kRejected) {
      return Fail(absl::StrCat("unexpected event: ", EventText(e), " (", e.detail, ")"));
    }
  }
  std::set<Step> skipped_now;
  for (const Delivery& d : out.deliveries) {
    if (d.rank >= plan_.world_size || !ranks_[d.rank].joined) {
      return Fail(absl::StrCat("delivery to a rank that has not joined: ", DeliveryText(d)));
    }
    RankSim& rank = ranks_[d.rank];
    if (const auto* directive = std::get_if<SyncDirective>(d.notice.get())) {
      if (directive->step < rank.step) {
        return Fail(absl::StrCat("directive for a step the rank finished: ", DeliveryText(d)));
      }
      rank.directives.insert({directive->step, directive->chunk});
    } else if (const auto* skipped = std::get_if<StepSkipped>(d.notice.get())) {
      if (!IsSkipped(skipped->step) || skipped->step != rank.step) {
        return Fail(absl::StrCat("unexpected skip: ", DeliveryText(d)));
      }
      if (skipped_now.insert(skipped->step).second) ++coverage_.skipped_steps;
      EnterStep(d.rank, skipped->step + 1);
    } else {
      return Fail(absl::StrCat("unexpected abort: ", DeliveryText(d)));
    }
  }
  for (Step s : skipped_now) {
    for (RankId r = 0; r < plan_.world_size; ++r) {
      if (ranks_[r].step <= s) {
        return Fail(absl::StrCat("rank ", r, " was not told that step ", s, " was skipped"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Simulation::CheckSteps() const {
  for (RankId r = 0; r < plan_.world_size; ++r) {
    if (ranks_[r].joined && tracker_.rank_step(r) != ranks_[r].step) {
      return Fail(absl::StrCat("rank ", r, " is at step ", tracker_.rank_step(r),
                               " in the tracker, ", ranks_[r].step, " by the protocol"));
    }
  }
  return absl::OkStatus();
}

absl::Status Simulation::Expect(const absl::Status& status, const std::string& call) {
  last_call_ = call;
  if (!status.ok()) return Fail(absl::StrCat(call, " -> ", status.ToString()));
  return absl::OkStatus();
}

absl::Status Simulation::Act(RankId r) {
  RankSim& rank = ranks_[r];
  Decisions out;
  if (!rank.joined) {
    absl::StatusOr<JoinResult> joined = tracker_.Join(plan_.plans[r], now_, &out);
    if (auto s = Expect(joined.status(), absl::StrCat("Join rank ", r)); !s.ok()) return s;
    if (auto s = mirror_.Alone(JoinCall(r), joined.status(), out, now_); !s.ok()) {
      return Fail(s.ToString());
    }
    if (joined->generation != 1 || joined->reconnect) return Fail("unexpected join result");
    rank.joined = true;
    rank.session = joined->session_id;
    EnterStep(r, plan_.first_step);
    if (auto s = Apply(out); !s.ok()) return s;
    return CheckSteps();
  }
  // Now and then, a reconnect: same generation and session, the pending directives re-listed.
  if (Chance(0.02)) {
    absl::StatusOr<JoinResult> again = tracker_.Join(plan_.plans[r], now_, &out);
    if (auto s = Expect(again.status(), absl::StrCat("reconnect rank ", r)); !s.ok()) return s;
    if (auto s = mirror_.Alone(JoinCall(r), again.status(), out, now_); !s.ok()) {
      return Fail(s.ToString());
    }
    if (!again->reconnect || again->generation != 1 || again->session_id != rank.session ||
        again->next_step != rank.step || !out.deliveries.empty()) {
      return Fail(absl::StrCat("bad reconnect of rank ", r));
    }
    std::set<std::pair<Step, ChunkId>> pending;
    for (const Notice& n : tracker_.NoticesToHold(r)) {
      // The StepSkipped of a retained skipped step behind the rank is listed again.
      if (const auto* k = std::get_if<StepSkipped>(&n)) {
        if (k->step < rank.step && IsSkipped(k->step)) continue;
        return Fail(absl::StrCat("pending ", NoticeText(n), " at rank step ", rank.step));
      }
      const auto* d = std::get_if<SyncDirective>(&n);
      if (d == nullptr) return Fail(absl::StrCat("pending ", NoticeText(n)));
      pending.insert({d->step, d->chunk});
    }
    if (pending != rank.directives) {
      return Fail(absl::StrCat("NoticesToHold(", r, ") lists ", pending.size(),
                               " directives, the rank holds ", rank.directives.size()));
    }
    ++coverage_.reconnects;
    return Apply(out);
  }

  const Step end = plan_.first_step + plan_.steps;
  const bool can_skip = rank.step < end && IsSkipped(rank.step) && !rank.skip_voted;
  const bool can_stage = rank.step < end && !rank.to_stage.empty();
  const bool can_done = !rank.directives.empty();
  std::vector<int> choices;
  if (can_skip) choices.push_back(0);
  if (can_stage) choices.push_back(1);
  if (can_done) choices.push_back(2);
  switch (choices[Uniform(0, choices.size() - 1)]) {
    case 0:
      return DoSkip(r);
    case 1:
      return DoStage(r);
    default:
      return DoSyncDone(r);
  }
}

absl::Status Simulation::DoSkip(RankId r) {
  RankSim& rank = ranks_[r];
  const Step step = rank.step;
  Decisions out;
  absl::Status status = tracker_.Skip(r, 1, step, "found_inf", now_, &out);
  if (auto s = Expect(status, absl::StrCat("Skip rank ", r, " step ", step)); !s.ok()) return s;
  if (auto s = Mirror(SkipCall(r, step), status, out); !s.ok()) return s;
  rank.skip_voted = true;
  rank.skips.push_back(step);
  if (auto s = Apply(out); !s.ok()) return s;
  // A repeated vote, for this step or a skipped one still retained, is a no-op.
  if (Chance(0.3)) {
    const Step again = rank.skips[Uniform(0, rank.skips.size() - 1)];
    if (again >= KeepFrom()) {
      Decisions dup;
      status = tracker_.Skip(r, 1, again, "found_inf", now_, &dup);
      if (auto s = Expect(status, absl::StrCat("repeated Skip rank ", r, " step ", again));
          !s.ok()) {
        return s;
      }
      if (auto s = Mirror(SkipCall(r, again), status, dup); !s.ok()) return s;
      if (!dup.deliveries.empty()) return Fail("a repeated skip vote delivered notices");
      ++coverage_.repeated_skips;
      if (auto s = Apply(dup); !s.ok()) return s;
    }
  }
  return CheckSteps();
}

absl::Status Simulation::DoStage(RankId r) {
  RankSim& rank = ranks_[r];
  std::shuffle(rank.to_stage.begin(), rank.to_stage.end(), rng_);
  const size_t fresh = Uniform(1, rank.to_stage.size());
  std::vector<StagedItem> items;
  for (size_t i = 0; i < fresh; ++i) {
    std::optional<uint64_t> checksum;
    if (Chance(0.5)) checksum = rng_();
    items.push_back({rank.step, rank.to_stage[i].first, rank.to_stage[i].second, checksum});
  }
  // Duplicates of accepted check-ins the tracker still retains.
  const Step keep_from = KeepFrom();
  for (int d = Uniform(0, 2); d > 0 && !rank.staged.empty(); --d) {
    const StagedItem& old = rank.staged[Uniform(0, rank.staged.size() - 1)];
    const bool repeated = std::any_of(items.begin(), items.end(), [&](const StagedItem& i) {
      return i.step == old.step && i.chunk == old.chunk && i.optimizer == old.optimizer;
    });
    if (old.step >= keep_from && !repeated) {
      items.insert(items.begin() + Uniform(0, items.size()), old);
      ++coverage_.duplicate_checkins;
    }
  }
  if (items.size() > 1) ++coverage_.multi_item_batches;
  if (tracker_.state() == JobState::kForming) ++coverage_.checkins_while_forming;
  Decisions out;
  absl::Status status = tracker_.Stage(r, 1, items, now_, &out);
  if (auto s = Expect(
          status, absl::StrCat("Stage rank ", r, " step ", rank.step, " ", items.size(), " items"));
      !s.ok()) {
    return s;
  }
  auto stage = [r, items](JobTracker& t, absl::Time now, Decisions* d) {
    return t.Stage(r, 1, items, now, d);
  };
  if (auto s = Mirror(stage, status, out); !s.ok()) return s;
  checker_.OnStaged(r, 1, items);
  for (const StagedItem& item : items) {
    auto at = std::find(rank.to_stage.begin(), rank.to_stage.end(),
                        std::make_pair(item.chunk, item.optimizer));
    if (item.step == rank.step && at != rank.to_stage.end()) {
      rank.to_stage.erase(at);
      rank.staged.push_back(item);
    }
  }
  if (auto s = Apply(out); !s.ok()) return s;
  return CheckSteps();
}

absl::Status Simulation::DoSyncDone(RankId r) {
  RankSim& rank = ranks_[r];
  std::vector<std::pair<Step, ChunkId>> directives(rank.directives.begin(), rank.directives.end());
  std::shuffle(directives.begin(), directives.end(), rng_);
  directives.resize(Uniform(1, directives.size()));
  std::vector<SyncDoneItem> items;
  for (const auto& [step, chunk] : directives) {
    items.push_back({step, chunk, Checksums(r, step, chunk)});
  }
  const Step keep_from = KeepFrom();
  if (Chance(0.3) && !rank.done.empty()) {
    const SyncDoneItem& old = rank.done[Uniform(0, rank.done.size() - 1)];
    if (old.step >= keep_from) {
      items.insert(items.begin() + Uniform(0, items.size()), old);
      ++coverage_.duplicate_sync_dones;
    }
  }
  for (const auto& directive : directives)
    coverage_.sync_dones_ahead += directive.first > rank.step;
  Decisions out;
  absl::Status status = tracker_.SyncDone(r, 1, items, now_, &out);
  if (auto s =
          Expect(status, absl::StrCat("SyncDone rank ", r, " ", items.size(), " items, first step ",
                                      items[0].step, " chunk ", items[0].chunk));
      !s.ok()) {
    return s;
  }
  auto sync_done = [r, items](JobTracker& t, absl::Time now, Decisions* d) {
    return t.SyncDone(r, 1, items, now, d);
  };
  if (auto s = Mirror(sync_done, status, out); !s.ok()) return s;
  for (const auto& directive : directives) {
    rank.directives.erase(directive);
    rank.done.push_back(
        {directive.first, directive.second, Checksums(r, directive.first, directive.second)});
  }
  MaybeAdvance(r);
  if (auto s = Apply(out); !s.ok()) return s;
  return CheckSteps();
}

}  // namespace psync::core::testing

// Randomized property test of JobTracker: for many seeds, a random MoE plan and a full simulated
// run of kSteps steps with random interleaving across ranks (joins, check-ins in random batches,
// duplicates, all-rank skips, SyncDone in random order, reconnects). The InvariantChecker audits
// every decision; every call must be answered OK, no violation may be reported, and every step
// must complete. Deterministic per seed; a failure prints the seed and the plan.
// Run one seed: bazel test //server/core:job_tracker_property_test
// --test_env=PSYNC_PROPERTY_SEED=<seed>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "server/core/invariant_checker.h"
#include "server/core/job_tracker.h"
#include "server/core/test_util.h"

namespace psync::core {
namespace {

using ::psync::core::testing::DeliveryText;
using ::psync::core::testing::EventText;
using ::psync::core::testing::NoticeText;
using ::psync::core::testing::StateText;

constexpr int kSeeds = 200;
constexpr Step kSteps = 10;

enum class ChunkKind { kMixed, kDense, kExpert };

// A random plan, with the expected contributors and members computed from its own definition.
struct RandomPlan {
  uint32_t world_size = 0;
  uint32_t num_chunks = 0;
  uint32_t expert_dp = 0;  // E: size of each expert data-parallel group
  Step first_step = 0;
  uint32_t history_steps = 0;
  std::vector<RankPlan> plans;
  std::vector<ExpectedChunk> expected;
  std::vector<std::vector<ChunkId>> synced;  // per rank: chunks with contributors it syncs
  std::set<Step> skipped;                    // steps every rank skips
  std::string description;
};

RandomPlan MakeRandomPlan(std::mt19937& rng) {
  auto uniform = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };

  RandomPlan p;
  p.world_size = uniform(1, 16);
  p.num_chunks = uniform(1, 6);
  std::vector<uint32_t> divisors;
  for (uint32_t d = 1; d <= p.world_size; ++d) {
    if (p.world_size % d == 0) divisors.push_back(d);
  }
  p.expert_dp = divisors[uniform(0, divisors.size() - 1)];
  p.first_step = uniform(0, 3);
  p.history_steps = uniform(1, 16);
  const uint32_t num_edp = p.world_size / p.expert_dp;  // edp<k> = {r : r % num_edp == k}
  auto edp_name = [&](RankId r) { return absl::StrCat("edp", r % num_edp); };
  auto edp_ranks = [&](RankId r) {
    std::vector<RankId> ranks;
    for (RankId x = r % num_edp; x < p.world_size; x += num_edp) ranks.push_back(x);
    return ranks;
  };
  std::vector<RankId> all(p.world_size);
  for (RankId r = 0; r < p.world_size; ++r) all[r] = r;

  p.plans.resize(p.world_size);
  for (RankId r = 0; r < p.world_size; ++r) {
    p.plans[r] = testing::Plan(r, p.world_size, p.num_chunks, {}, "inc0", p.first_step);
  }
  p.expected.resize(p.num_chunks);
  std::vector<std::string> chunk_texts;
  for (ChunkId c = 0; c < p.num_chunks; ++c) {
    // Chunk 0 always has a dense part, so every rank syncs at least one chunk with contributors.
    const ChunkKind kind = c == 0 ? (chance(0.5) ? ChunkKind::kMixed : ChunkKind::kDense)
                                  : static_cast<ChunkKind>(uniform(0, 2));
    std::vector<bool> no_expert(p.world_size);
    for (RankId r = 0; r < p.world_size; ++r) no_expert[r] = chance(0.25);
    std::vector<bool> edp_in(num_edp, true);  // expert-only: which expert groups take part
    if (kind == ChunkKind::kExpert) {
      for (uint32_t k = 0; k < num_edp; ++k) edp_in[k] = chance(0.7);
      edp_in[uniform(0, num_edp - 1)] = true;
      bool any = false;
      for (RankId r = 0; r < p.world_size; ++r) any |= edp_in[r % num_edp] && !no_expert[r];
      if (!any) {
        for (RankId r = 0; r < p.world_size; ++r) {
          if (edp_in[r % num_edp]) {
            no_expert[r] = false;
            break;
          }
        }
      }
    }
    ExpectedChunk& expected = p.expected[c];
    std::string text = absl::StrCat("c", c,
                                    kind == ChunkKind::kMixed   ? " mixed"
                                    : kind == ChunkKind::kDense ? " dense"
                                                                : " expert",
                                    ":");
    for (RankId r = 0; r < p.world_size; ++r) {
      ChunkPart part;
      part.chunk = c;
      switch (kind) {
        case ChunkKind::kMixed:
          part.optimizers = {"dense"};
          if (!no_expert[r]) part.optimizers.push_back("expert");
          part.groups = {testing::Group("dp", all), testing::Group(edp_name(r), edp_ranks(r))};
          break;
        case ChunkKind::kDense:
          part.optimizers = {"dense"};
          part.groups = {testing::Group("dp", all)};
          break;
        case ChunkKind::kExpert:
          if (!edp_in[r % num_edp]) continue;  // this rank does not take part in the chunk
          if (!no_expert[r]) part.optimizers = {"expert"};
          part.groups = {testing::Group(edp_name(r), edp_ranks(r))};
          break;
      }
      for (const std::string& opt : part.optimizers) expected.contributors.push_back({r, opt});
      expected.members.push_back(r);  // every group of the rank includes it, and dp is everyone
      absl::StrAppend(&text, " ", r, "[", absl::StrJoin(part.optimizers, "+"), "]");
      p.plans[r].chunks.push_back(std::move(part));
    }
    chunk_texts.push_back(text);
  }
  p.synced.resize(p.world_size);
  for (ChunkId c = 0; c < p.num_chunks; ++c) {
    if (p.expected[c].contributors.empty()) continue;
    for (RankId r : p.expected[c].members) p.synced[r].push_back(c);
  }
  for (Step s = p.first_step; s < p.first_step + kSteps; ++s) {
    if (chance(0.15)) p.skipped.insert(s);
  }
  p.description =
      absl::StrCat("W=", p.world_size, " E=", p.expert_dp, " C=", p.num_chunks,
                   " first_step=", p.first_step, " history=", p.history_steps, " skipped=[",
                   absl::StrJoin(p.skipped, ","), "]\n  ", absl::StrJoin(chunk_texts, "\n  "));
  return p;
}

// One simulated run. Returns the first failure, naming what happened.
class Simulation {
 public:
  Simulation(uint32_t seed, RandomPlan plan)
      : rng_(seed),
        plan_(std::move(plan)),
        tracker_("job", Options(plan_)),
        checker_(plan_.expected),
        ranks_(plan_.world_size) {}

  absl::Status Run() {
    const Step end = plan_.first_step + kSteps;
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
    std::vector<Step> steps;
    for (Step s = plan_.first_step; s < end; ++s) steps.push_back(s);
    const std::vector<Step> skipped(plan_.skipped.begin(), plan_.skipped.end());
    if (auto s = checker_.CheckComplete(1, steps, skipped); !s.ok()) return Fail(s.ToString());
    size_t chunks_with_contributors = 0;
    for (const ExpectedChunk& c : plan_.expected)
      chunks_with_contributors += !c.contributors.empty();
    const size_t releases = (kSteps - skipped.size()) * chunks_with_contributors;
    if (checker_.releases() != releases) {
      return Fail(absl::StrCat(checker_.releases(), " releases, expected ", releases));
    }
    return absl::OkStatus();
  }

  // What the runs exercised, summed over seeds; each must be non-zero.
  struct Coverage {
    uint64_t calls = 0;
    uint64_t checkins_while_forming = 0;
    uint64_t duplicate_checkins = 0;
    uint64_t duplicate_sync_dones = 0;
    uint64_t repeated_skips = 0;
    uint64_t skipped_steps = 0;
    uint64_t sync_dones_ahead = 0;  // SyncDone of a step after the rank's own
    uint64_t reconnects = 0;
    uint64_t multi_item_batches = 0;
  };
  const Coverage& coverage() const { return coverage_; }

 private:
  struct RankSim {
    bool joined = false;
    std::string session;
    Step step = 0;                                          // the step the rank is in
    std::vector<std::pair<ChunkId, std::string>> to_stage;  // not staged yet in `step`
    bool skip_voted = false;
    std::set<std::pair<Step, ChunkId>> directives;  // received, SyncDone not reported
    std::vector<StagedItem> staged;                 // accepted check-ins
    std::vector<SyncDoneItem> done;                 // accepted SyncDones
    std::vector<Step> skips;                        // accepted skip votes
  };

  static TrackerOptions Options(const RandomPlan& plan) {
    TrackerOptions options;
    options.history_steps = plan.history_steps;
    return options;
  }

  size_t Uniform(size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  absl::Status Fail(const std::string& what) const {
    return absl::InternalError(absl::StrCat(what, "\nafter ", calls_, " calls; last call: ",
                                            last_call_, "\n", StateText(tracker_, now_)));
  }

  bool IsSkipped(Step s) const { return plan_.skipped.count(s) > 0; }

  bool CanAct(RankId r) const {
    const RankSim& rank = ranks_[r];
    if (!rank.joined) return true;
    if (!rank.directives.empty()) return true;
    if (rank.step >= plan_.first_step + kSteps) return false;
    if (IsSkipped(rank.step)) return !rank.skip_voted;
    return !rank.to_stage.empty();
  }

  // The oldest step the tracker still retains.
  Step KeepFrom() const {
    Step lowest = ~Step{0};
    bool all_joined = true;
    for (const RankSim& rank : ranks_) {
      if (rank.joined) lowest = std::min(lowest, rank.step);
      all_joined &= rank.joined;
    }
    if (!all_joined) lowest = std::min(lowest, plan_.first_step);
    return lowest > plan_.history_steps ? lowest - plan_.history_steps : 0;
  }

  void EnterStep(RankId r, Step s) {
    RankSim& rank = ranks_[r];
    rank.step = s;
    rank.skip_voted = false;
    rank.to_stage.clear();
    if (s >= plan_.first_step + kSteps || IsSkipped(s)) return;
    for (const ChunkPart& part : plan_.plans[r].chunks) {
      for (const std::string& opt : part.optimizers) rank.to_stage.push_back({part.chunk, opt});
    }
  }

  // The rank finished its step once it reported SyncDone for every chunk it syncs there.
  void MaybeAdvance(RankId r) {
    RankSim& rank = ranks_[r];
    while (rank.step < plan_.first_step + kSteps && !IsSkipped(rank.step) &&
           rank.to_stage.empty()) {
      for (ChunkId c : plan_.synced[r]) {
        const bool done =
            std::any_of(rank.done.begin(), rank.done.end(),
                        [&](const SyncDoneItem& d) { return d.step == rank.step && d.chunk == c; });
        if (!done) return;
      }
      EnterStep(r, rank.step + 1);
    }
  }

  GroupChecksums Checksums(RankId r, Step step, ChunkId chunk) const {
    GroupChecksums sums;
    for (const ChunkPart& part : plan_.plans[r].chunks) {
      if (part.chunk != chunk) continue;
      for (const GroupDecl& g : part.groups) {
        sums.push_back({g.name, step * 1000003 + chunk * 101 + g.name.size() * 7 + g.ranks[0]});
      }
    }
    return sums;
  }

  // Feeds `out` to the checker and to the simulated ranks.
  absl::Status Apply(const Decisions& out) {
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
      if (const auto* directive = std::get_if<SyncDirective>(&d.notice)) {
        if (directive->step < rank.step) {
          return Fail(absl::StrCat("directive for a step the rank finished: ", DeliveryText(d)));
        }
        rank.directives.insert({directive->step, directive->chunk});
      } else if (const auto* skipped = std::get_if<StepSkipped>(&d.notice)) {
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

  absl::Status CheckSteps() const {
    for (RankId r = 0; r < plan_.world_size; ++r) {
      if (ranks_[r].joined && tracker_.rank_step(r) != ranks_[r].step) {
        return Fail(absl::StrCat("rank ", r, " is at step ", tracker_.rank_step(r),
                                 " in the tracker, ", ranks_[r].step, " by the protocol"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Expect(const absl::Status& status, const std::string& call) {
    last_call_ = call;
    if (!status.ok()) return Fail(absl::StrCat(call, " -> ", status.ToString()));
    return absl::OkStatus();
  }

  absl::Status Act(RankId r) {
    RankSim& rank = ranks_[r];
    Decisions out;
    if (!rank.joined) {
      absl::StatusOr<JoinResult> joined = tracker_.Join(plan_.plans[r], now_, &out);
      if (auto s = Expect(joined.status(), absl::StrCat("Join rank ", r)); !s.ok()) return s;
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
      if (!again->reconnect || again->generation != 1 || again->session_id != rank.session ||
          again->next_step != rank.step || !out.deliveries.empty()) {
        return Fail(absl::StrCat("bad reconnect of rank ", r));
      }
      std::set<std::pair<Step, ChunkId>> pending;
      for (const Notice& n : tracker_.Pending(r)) {
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
        return Fail(absl::StrCat("Pending(", r, ") lists ", pending.size(),
                                 " directives, the rank holds ", rank.directives.size()));
      }
      ++coverage_.reconnects;
      return Apply(out);
    }

    const Step end = plan_.first_step + kSteps;
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

  absl::Status DoSkip(RankId r) {
    RankSim& rank = ranks_[r];
    const Step step = rank.step;
    Decisions out;
    absl::Status status = tracker_.Skip(r, 1, step, "found_inf", now_, &out);
    if (auto s = Expect(status, absl::StrCat("Skip rank ", r, " step ", step)); !s.ok()) return s;
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
        if (!dup.deliveries.empty()) return Fail("a repeated skip vote delivered notices");
        ++coverage_.repeated_skips;
        if (auto s = Apply(dup); !s.ok()) return s;
      }
    }
    return CheckSteps();
  }

  absl::Status DoStage(RankId r) {
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
    if (auto s = Expect(status, absl::StrCat("Stage rank ", r, " step ", rank.step, " ",
                                             items.size(), " items"));
        !s.ok()) {
      return s;
    }
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

  absl::Status DoSyncDone(RankId r) {
    RankSim& rank = ranks_[r];
    std::vector<std::pair<Step, ChunkId>> directives(rank.directives.begin(),
                                                     rank.directives.end());
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
    if (auto s = Expect(status,
                        absl::StrCat("SyncDone rank ", r, " ", items.size(), " items, first step ",
                                     items[0].step, " chunk ", items[0].chunk));
        !s.ok()) {
      return s;
    }
    for (const auto& directive : directives) {
      rank.directives.erase(directive);
      rank.done.push_back(
          {directive.first, directive.second, Checksums(r, directive.first, directive.second)});
    }
    MaybeAdvance(r);
    if (auto s = Apply(out); !s.ok()) return s;
    return CheckSteps();
  }

  std::mt19937 rng_;
  const RandomPlan plan_;
  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  JobTracker tracker_;
  InvariantChecker checker_;
  std::vector<RankSim> ranks_;
  uint64_t calls_ = 0;
  std::string last_call_;
  Coverage coverage_;
};

TEST(JobTrackerPropertyTest, RandomRunsReleaseEveryChunkExactlyOnceAndComplete) {
  std::vector<uint32_t> seeds;
  if (const char* only = std::getenv("PSYNC_PROPERTY_SEED"); only != nullptr) {
    seeds.push_back(static_cast<uint32_t>(std::strtoul(only, nullptr, 10)));
  } else {
    for (uint32_t seed = 1; seed <= kSeeds; ++seed) seeds.push_back(seed);
  }
  Simulation::Coverage total;
  int failures = 0;
  for (uint32_t seed : seeds) {
    std::mt19937 plan_rng(seed);
    RandomPlan plan = MakeRandomPlan(plan_rng);
    const std::string description = plan.description;
    Simulation sim(seed * 7919u + 1, std::move(plan));
    const absl::Status status = sim.Run();
    const Simulation::Coverage& c = sim.coverage();
    total.calls += c.calls;
    total.checkins_while_forming += c.checkins_while_forming;
    total.duplicate_checkins += c.duplicate_checkins;
    total.duplicate_sync_dones += c.duplicate_sync_dones;
    total.repeated_skips += c.repeated_skips;
    total.skipped_steps += c.skipped_steps;
    total.sync_dones_ahead += c.sync_dones_ahead;
    total.reconnects += c.reconnects;
    total.multi_item_batches += c.multi_item_batches;
    if (!status.ok()) {
      ADD_FAILURE() << "seed " << seed << " (rerun with PSYNC_PROPERTY_SEED=" << seed
                    << "): " << status.message() << "\nplan: " << description;
      if (++failures >= 3) break;  // keep the log readable
    }
  }
  std::printf(
      "%zu seeds: %lu calls, %lu check-ins while forming, %lu duplicate check-ins, %lu "
      "duplicate SyncDones, %lu repeated skips, %lu skipped steps, %lu SyncDones ahead, "
      "%lu reconnects, %lu multi-item batches\n",
      seeds.size(), total.calls, total.checkins_while_forming, total.duplicate_checkins,
      total.duplicate_sync_dones, total.repeated_skips, total.skipped_steps, total.sync_dones_ahead,
      total.reconnects, total.multi_item_batches);
  if (seeds.size() < kSeeds) return;  // a single seed need not cover every case
  // The runs must have exercised every kind of input they claim to.
  EXPECT_GT(total.calls, seeds.size() * kSteps);
  EXPECT_GT(total.checkins_while_forming, 0u);
  EXPECT_GT(total.duplicate_checkins, 0u);
  EXPECT_GT(total.duplicate_sync_dones, 0u);
  EXPECT_GT(total.repeated_skips, 0u);
  EXPECT_GT(total.skipped_steps, 0u);
  EXPECT_GT(total.sync_dones_ahead, 0u);
  EXPECT_GT(total.reconnects, 0u);
  EXPECT_GT(total.multi_item_batches, 0u);
}

}  // namespace
}  // namespace psync::core

// Simulate and Shrink; contract: simulation.h.
#include "tests/simulation/simulation.h"

#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/random_plan.h"
#include "server/owner/coordinator.h"
#include "tests/simulation/network.h"
#include "tests/simulation/ownership_checker.h"
#include "tests/simulation/rank_checker.h"
#include "tests/simulation/sim_coordinator.h"
#include "tests/simulation/sim_etcd.h"
#include "tests/simulation/sim_rank.h"
#include "tests/simulation/world.h"

namespace psync::simulation {
namespace {

v1::JoinRequest JoinRequestOf(const core::RankPlan& plan) {
  v1::JoinRequest r;
  r.set_job_id(plan.job_id);
  r.set_world_size(plan.world_size);
  r.set_rank(plan.rank);
  r.set_num_chunks(plan.num_chunks);
  r.set_first_step(plan.first_step);
  r.set_incarnation(plan.incarnation);
  for (const core::ChunkPart& part : plan.chunks) {
    v1::ChunkPlan* c = r.add_chunks();
    c->set_chunk(part.chunk);
    for (const std::string& o : part.optimizers) c->add_optimizers(o);
    for (const core::GroupDecl& g : part.groups) {
      v1::SyncGroup* group = c->add_groups();
      group->set_name(g.name);
      for (core::RankId rank : g.ranks) group->add_ranks(rank);
    }
  }
  return r;
}

RankSetup SetupOf(const core::testing::RandomPlan& plan, core::RankId rank) {
  RankSetup s;
  s.join = JoinRequestOf(plan.plans[rank]);
  for (const core::ChunkPart& part : plan.plans[rank].chunks) {
    for (const std::string& o : part.optimizers) s.items.emplace_back(part.chunk, o);
    for (const core::GroupDecl& g : part.groups) s.groups[part.chunk].push_back(g.name);
  }
  s.syncs = plan.synced[rank];
  s.skipped = plan.skipped;
  s.end_step = plan.first_step + plan.steps;
  return s;
}

// At the end, every coordinator that holds the job holds no more steps of it than its history
// window, and its audit agrees with what the ranks saw: no
// double release, checksum mismatch, early or repeated sync (the ranks' checks found none), and one
// release counted per (generation, step, chunk) it sent directives of at its epoch, besides
// resumed ones (a rebuilt job's release of what every member had synced sends no directive) and
// ones decided while every member was away in a generation that was then aborted.
void CheckEndState(const std::string& job, uint64_t history_steps,
                   const std::vector<std::unique_ptr<SimCoordinator>>& all, RankChecker* checker) {
  for (const auto& c : all) {
    if (!c->up()) continue;
    uint64_t epoch = 0;
    if (c->replica() != nullptr) {
      const std::optional<uint64_t> owned = c->replica()->OwnedEpoch(job);
      if (!owned.has_value()) continue;
      epoch = *owned;
    }
    // Memory bounded: once every rank finished, the job holds no more than the history window.
    absl::StatusOr<server::JobStatusView> status = c->owner()->GetJobStatus(job);
    if (status.ok() && status->snapshot.steps_held > history_steps + 1) {
      checker->Fail(absl::StrCat(c->address(), " holds ", status->snapshot.steps_held,
                                 " steps of the finished job, more than its history of ",
                                 history_steps, " + 1"));
    }
    const std::optional<observe::AuditTotals> audit = c->owner()->AuditTotalsAt(job, epoch);
    if (!audit.has_value()) continue;
    const size_t sent = c->ReleasedAt(epoch);
    // Releases decided while every member was away, whose generation was aborted before any came
    // back: counted, never sent, synced by nobody.
    size_t undelivered = 0;
    if (absl::StatusOr<std::vector<observe::SyncAudit>> records = c->owner()->Audit(job);
        records.ok()) {
      for (const observe::SyncAudit& a : *records) {
        undelivered +=
            a.syncs_done == 0 && !a.resumed && !c->Sent(epoch, a.generation, a.step, a.chunk);
      }
    }
    if (audit->double_releases + audit->checksum_mismatches + audit->early_syncs +
                audit->repeated_syncs >
            0 ||
        audit->released < sent || audit->released > sent + audit->resumed + undelivered) {
      checker->Fail(absl::StrCat(
          c->address(), "'s audit (epoch ", epoch, ") disagrees with the ranks: ", audit->released,
          " released (", audit->resumed, " of them resumed, ", undelivered,
          " sent to no rank) against ", sent, " sent, ", audit->double_releases,
          " double releases, ", audit->checksum_mismatches, " checksum mismatches, ",
          audit->early_syncs, " early and ", audit->repeated_syncs, " repeated syncs"));
    }
  }
}

}  // namespace

SimulationResult Simulate(const SimulationOptions& options) {
  SimulationResult result;
  std::mt19937 plan_rng(static_cast<uint32_t>(MixSeed(options.seed, 0)));
  const core::testing::RandomPlan plan = core::testing::MakeRandomPlan(plan_rng, options.steps);
  result.plan = plan.description;

  World world(options.seed, options.trace);
  Network network(&world, NetworkOptions());
  server::CoordinatorOptions coordinator_options;
  coordinator_options.tracker.history_steps = plan.history_steps;
  // A rank that stays away is reported lost, but the run is not aborted for it: ranks here never
  // restart, so an abort could only end the run.
  coordinator_options.lost_rank_abort_after = absl::Hours(24);
  RankChecker checker(&world, plan.expected, plan.skipped, plan.first_step,
                      plan.first_step + plan.steps);
  std::optional<SimEtcd> etcd;
  std::optional<OwnershipChecker> ownership;
  std::vector<std::unique_ptr<SimCoordinator>> coordinators;
  if (options.replicas == 0) {
    coordinators.push_back(std::make_unique<SimCoordinator>(&world, &network, coordinator_options));
  } else {
    etcd.emplace(&world);
    ownership.emplace(&*etcd, &checker);
    for (uint32_t i = 1; i <= options.replicas; ++i) {
      ReplicaSetup setup;
      setup.etcd = &*etcd;
      setup.replica.ownership.self = absl::StrCat("replica-", i);
      setup.replica.ownership.lease_ttl = absl::Seconds(2);
      setup.replica.ownership.margin = absl::Milliseconds(500);
      setup.wire = &*ownership;
      setup.index = i;
      coordinators.push_back(
          std::make_unique<SimCoordinator>(&world, &network, coordinator_options, setup));
    }
  }
  std::vector<SimCoordinator*> targets;
  for (auto& c : coordinators) {
    c->MergeLikeAnAgent(options.agent_window, options.ranks_per_node);
    targets.push_back(c.get());
  }
  std::vector<std::unique_ptr<SimRank>> ranks;
  for (core::RankId r = 0; r < plan.world_size; ++r) {
    ranks.push_back(std::make_unique<SimRank>(&world, targets, &checker, SetupOf(plan, r)));
  }

  Rng fault_rng = world.RngFor(world.NewOrigin());
  result.faults = options.faults.has_value()
                      ? *options.faults
                      : DrawFaults(fault_rng, plan.world_size, options.replicas, options.rates);
  const uint64_t fault_origin = world.NewOrigin();
  for (const Fault& f : result.faults) {
    world.At(world.start() + f.at, fault_origin, [&, f] {
      world.Trace(absl::StrCat("fault: ", f.ToString()));
      SimRank& rank = *ranks[f.rank % ranks.size()];
      SimCoordinator& process =
          *coordinators[f.replica == 0 ? 0 : (f.replica - 1) % coordinators.size()];
      switch (f.kind) {
        case FaultKind::kCutConnection:
          if (rank.connection() != 0) network.Cut(rank.connection(), "fault");
          break;
        case FaultKind::kStallConnection:
          if (rank.connection() != 0) network.Stall(rank.connection(), f.direction, f.length);
          break;
        case FaultKind::kPauseRank:
          rank.Pause(f.length);
          break;
        case FaultKind::kCrashCoordinator:
          process.Crash();
          world.After(f.length, fault_origin, [&process] { process.Restart(); });
          break;
        case FaultKind::kRestartRank:
          rank.RestartProcess();
          break;
        case FaultKind::kPauseReplica:
          process.Pause(f.length);
          break;
        case FaultKind::kPartitionEtcd:
          if (etcd.has_value()) etcd->Partition(process.replica()->etcd_link(), f.length);
          break;
        case FaultKind::kSlowEtcd:
          if (etcd.has_value()) etcd->Slow(process.replica()->etcd_link(), f.extra, f.length);
          break;
      }
    });
  }
  // With replicas, a reader asks a random one for the job's status every 10-60 ms.
  const uint64_t reader = world.NewOrigin();
  Rng reader_rng = world.RngFor(reader);
  const std::string job = plan.plans[0].job_id;
  std::function<void()> read = [&] {
    coordinators[reader_rng.Below(coordinators.size())]->Read(job);
    world.After(reader_rng.Between(absl::Milliseconds(10), absl::Milliseconds(60)), reader, read);
  };
  if (options.replicas > 0) world.After(absl::Milliseconds(10), reader, read);

  for (auto& rank : ranks) rank->Start();
  auto all_finished = [&] {
    for (const auto& rank : ranks) {
      if (!rank->finished()) return false;
    }
    return true;
  };
  absl::Duration faults_end = options.rates.window;
  for (const Fault& f : result.faults) faults_end = std::max(faults_end, f.at + f.length);
  const absl::Time deadline = world.start() + faults_end + options.settle;
  auto broken = [&]() -> std::string {
    for (const auto& c : coordinators) {
      if (!c->broken().empty()) return c->broken();
    }
    return "";
  };
  while (checker.first_violation().ok() && broken().empty() && !all_finished() &&
         world.RunNext(deadline)) {
  }
  if (checker.first_violation().ok() && !broken().empty()) checker.Fail(broken());
  if (checker.first_violation().ok() && !all_finished()) {
    std::vector<std::string> stuck;
    for (const auto& rank : ranks) {
      if (!rank->finished()) stuck.push_back(rank->Describe());
    }
    checker.Fail(absl::StrCat("the run did not finish within ",
                              absl::FormatDuration(options.settle),
                              " after the faults stopped:\n  ", absl::StrJoin(stuck, "\n  ")));
  }
  if (checker.first_violation().ok()) {
    CheckEndState(job, plan.history_steps, coordinators, &checker);
  }
  result.status = checker.CheckComplete(plan.world_size);
  result.safety = checker.first_is_safety();
  result.trace_hash = world.trace_hash();
  result.trace = world.trace();
  result.simulated = world.now() - world.start();
  result.events = world.events_run();
  result.handed_out = checker.handed_out();
  result.repeated_arrivals = checker.repeated_arrivals();
  result.messages = network.messages_sent();
  result.cuts = network.cuts();
  for (const auto& c : coordinators) {
    result.crashes += c->crashes();
    result.agent_batches += c->agent_batches();
    result.agent_batch_messages += c->agent_batch_messages();
    if (c->replica() != nullptr) {
      result.lease_lapses += c->replica()->lapses();
      result.claims += c->replica()->claims();
    }
  }
  if (ownership.has_value()) {
    result.releases_checked = ownership->releases_checked();
    result.reads_checked = ownership->reads_checked();
  }
  return result;
}

SimulationOptions Shrink(const SimulationOptions& failing) {
  SimulationOptions best = failing;
  best.trace = false;
  if (!best.faults.has_value()) best.faults = Simulate(best).faults;
  for (size_t i = best.faults->size(); i-- > 0;) {
    std::vector<Fault> without = *best.faults;
    without.erase(without.begin() + static_cast<std::ptrdiff_t>(i));
    SimulationOptions fewer = best;
    fewer.faults = std::move(without);
    if (!Simulate(fewer).status.ok()) best = std::move(fewer);
  }
  best.trace = failing.trace;
  return best;
}

}  // namespace psync::simulation

// The deterministic simulation in CI: a fixed budget of seeds runs clean, a seed replays bit for
// bit, scripted faults have exactly their effect, and every negative control is caught.
#include "tests/simulation/simulation.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "serve/injected_faults.h"
#include "tests/simulation/negative_controls.h"

namespace psync::simulation {
namespace {

// Seeds 1..kSeeds of the CI budget (tools/simulate runs more).
constexpr uint64_t kSeeds = 1000;

// The sums of the counters of seeds 1..kSeeds run with `base`.
struct Totals {
  bool all_clean = true;
  uint64_t handed_out = 0;
  uint64_t cuts = 0;
  uint64_t repeated = 0;
  uint64_t crashes = 0;
  uint64_t lapses = 0;
  uint64_t claims = 0;
  uint64_t releases = 0;
  uint64_t reads = 0;
  uint64_t agent_batches = 0;
  uint64_t agent_batch_messages = 0;
};

// Runs seeds 1..kSeeds with `base`; each must finish clean (the first that does not is reported
// with the command that replays it: `flags` are base's tools/simulate flags).
Totals RunSeeds(SimulationOptions base, const std::string& flags) {
  Totals t;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    base.seed = seed;
    const SimulationResult r = Simulate(base);
    if (!r.status.ok()) {
      ADD_FAILURE() << "seed " << seed << ": " << r.status.message() << "\nreplay: tools/simulate "
                    << flags << " --seed=" << seed << " --trace";
      t.all_clean = false;
      return t;
    }
    t.handed_out += r.handed_out;
    t.cuts += r.cuts;
    t.repeated += r.repeated_arrivals;
    t.crashes += r.crashes;
    t.lapses += r.lease_lapses;
    t.claims += r.claims;
    t.releases += r.releases_checked;
    t.reads += r.reads_checked;
    t.agent_batches += r.agent_batches;
    t.agent_batch_messages += r.agent_batch_messages;
  }
  return t;
}

// Cuts, stalls and pauses, no coordinator crash: every seed runs to the end with every invariant.
TEST(SimulationTest, SeedsWithoutCoordinatorCrashesRunClean) {
  SimulationOptions options;
  options.rates.max_crashes = 0;
  const Totals t = RunSeeds(options, "--max_crashes=0");
  ASSERT_TRUE(t.all_clean);
  EXPECT_EQ(t.crashes, 0u);
  // The faults the seeds draw are exercised, not only drawn.
  EXPECT_GT(t.handed_out, 0u);
  EXPECT_GT(t.cuts, kSeeds);
  EXPECT_GT(t.repeated, 0u) << "no directive was ever re-sent: reconnects are not exercised";
}

// With coordinator crashes too (up to two per seed, also in a row): every seed runs to the end with
// every invariant, its ranks resuming their runs.
TEST(SimulationTest, SeedsWithCoordinatorCrashesRunClean) {
  const Totals t = RunSeeds(SimulationOptions(), "");
  ASSERT_TRUE(t.all_clean);
  EXPECT_GT(t.crashes, kSeeds / 3);
}

// The ranks behind a node agent: their messages merged by the agent's code into AgentBatches over
// 5 ms and applied a batch at once (Coordinator::ApplyBatch, grouped check-ins), with coordinator
// crashes and every other fault: every seed runs clean, and the batches do merge messages.
TEST(SimulationTest, SeedsBehindAnAgentRunClean) {
  SimulationOptions options;
  options.agent_window = absl::Milliseconds(5);
  const Totals t = RunSeeds(options, "--agent_window_ms=5");
  ASSERT_TRUE(t.all_clean);
  EXPECT_GT(t.crashes, kSeeds / 3);
  EXPECT_GT(t.agent_batches, kSeeds * 10);
  EXPECT_GT(t.agent_batch_messages, 2 * t.agent_batches) << "the batches hardly merge";
}

// The same through a relay: nodes of 2 ranks, each merged by its own agent, the nodes' batches
// joined by the relay's code (agent/batch_parts.h) into one.
TEST(SimulationTest, SeedsBehindARelayRunClean) {
  SimulationOptions options;
  options.agent_window = absl::Milliseconds(5);
  options.ranks_per_node = 2;
  const Totals t = RunSeeds(options, "--agent_window_ms=5 --ranks_per_node=2");
  ASSERT_TRUE(t.all_clean);
  EXPECT_GT(t.agent_batches, kSeeds * 10);
  EXPECT_GT(t.agent_batch_messages, 2 * t.agent_batches) << "the batches hardly merge";
}

// Against three coordinator replicas on a simulated etcd, with replica crashes and pauses, etcd
// partitions and slowdowns and rank restarts besides the other faults: every seed runs clean,
// every release and read judged against etcd, and leases lapse and jobs move.
TEST(SimulationTest, SeedsAgainstReplicasRunClean) {
  SimulationOptions options;
  options.replicas = 3;
  const Totals t = RunSeeds(options, "--replicas=3");
  ASSERT_TRUE(t.all_clean);
  EXPECT_GT(t.lapses, kSeeds / 3);
  EXPECT_GT(t.claims, kSeeds + kSeeds / 5);  // one claim per seed, and takeovers
  EXPECT_GT(t.releases, kSeeds * 10);
  EXPECT_GT(t.reads, kSeeds * 10);
}

// Each replica in turn is paused past its lease (3 s, TTL 2 s): the run survives every time, and
// the pause of the owner lapses its lease and moves the job.
TEST(SimulationTest, AReplicaPausedPastItsLeaseIsTakenOverFrom) {
  uint64_t lapses = 0;
  uint64_t claims = 0;
  for (uint32_t replica = 1; replica <= 3; ++replica) {
    SimulationOptions options;
    options.seed = 3;
    options.replicas = 3;
    Fault pause;
    pause.kind = FaultKind::kPauseReplica;
    pause.replica = replica;
    pause.at = absl::Milliseconds(60);
    pause.length = absl::Seconds(3);
    options.faults = std::vector<Fault>{pause};
    const SimulationResult r = Simulate(options);
    ASSERT_TRUE(r.status.ok()) << "replica-" << replica << ": " << r.status;
    lapses += r.lease_lapses;
    claims += r.claims;
  }
  EXPECT_GE(lapses, 1u);  // at least the owner's (a run may end before another pause does)
  EXPECT_EQ(claims, 4u);  // one per run, and the one takeover from the paused owner
}

// Seed 6247 against replicas: rank 0's process restarted (its join aborted generation 1), the other
// ranks missed the Abort, and the owner crashed. The new owner rebuilt the job from all of their
// resumes and rank 0 waited at step 2 while the others were at step 13, until a resume named the
// abort its run began after (Resume.restarted_after): now the others' runs start over with it.
TEST(SimulationTest, RunsThatMissedAnAbortStartOverAtTheNewOwner) {
  SimulationOptions options;
  options.seed = 6247;
  options.replicas = 3;
  options.trace = true;
  const SimulationResult r = Simulate(options);
  ASSERT_TRUE(r.status.ok()) << r.status;
  size_t started_over = 0;
  for (const std::string& line : r.trace) {
    if (absl::StrContains(line, "resumes a run that began after generation 1 was aborted") &&
        absl::StrContains(line, "restarts as run")) {
      ++started_over;
    }
  }
  EXPECT_EQ(started_over, 2u);  // ranks 1 and 2
}

// Seed 26855 against replicas: the preferred replica's etcd answered 0.98 s late while the ranks
// first joined, so its claim timed out after etcd had created the job's key under its lease. Its
// view then showed the key as its own under "a lapsed lease" and refused every Join until that
// lease expired, which it never did, since the replica kept it alive: the job never started. Now
// the Join claims again and serves the key it gets back.
TEST(SimulationTest, AClaimAnsweredTooLateIsServedUnderTheSameLease) {
  SimulationOptions options;
  options.seed = 26855;
  options.replicas = 3;
  options.trace = true;
  const SimulationResult r = Simulate(options);
  ASSERT_TRUE(r.status.ok()) << r.status;
  size_t claims = 0;
  for (const std::string& line : r.trace) {
    EXPECT_FALSE(absl::StrContains(line, "held by a lapsed lease")) << line;
    if (absl::StrContains(line, "claimed job 'job' at epoch")) ++claims;
  }
  EXPECT_EQ(claims, 1u);
}

// Seed 25044 against replicas, one rank and one retained step: the rank's skip vote of step 11
// lost its answer with a cut connection after steps 11 and 12 were skipped. Re-sent after the
// resume, it was refused OUT_OF_RANGE ("before the oldest retained step 12"), which a check-in or
// SyncDone in its place is not: it is a late repeat, answered OK.
TEST(SimulationTest, ASkipVoteRepeatedAfterItsStepLeftTheHistoryIsALateRepeat) {
  SimulationOptions options;
  options.seed = 25044;
  options.replicas = 3;
  const SimulationResult r = Simulate(options);
  EXPECT_TRUE(r.status.ok()) << r.status;
}

TEST(SimulationTest, ASeedReplaysBitForBit) {
  SimulationOptions options;
  options.seed = 7;
  options.trace = true;
  const SimulationResult a = Simulate(options);
  const SimulationResult b = Simulate(options);
  ASSERT_TRUE(a.status.ok()) << a.status;
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.events, b.events);
  options.seed = 8;
  EXPECT_NE(Simulate(options).trace_hash, a.trace_hash);
}

TEST(SimulationTest, NoFaultsNoCutsAndEverySyncOnce) {
  SimulationOptions options;
  options.seed = 3;
  options.faults = std::vector<Fault>();
  const SimulationResult r = Simulate(options);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.cuts, 0u);
  EXPECT_EQ(r.crashes, 0u);
  EXPECT_EQ(r.repeated_arrivals, 0u);
  EXPECT_GT(r.handed_out, 0u);
}

TEST(SimulationTest, ACoordinatorCrashIsSurvivedByResuming) {
  SimulationOptions options;
  options.seed = 3;
  Fault crash;
  crash.kind = FaultKind::kCrashCoordinator;
  crash.at = absl::Milliseconds(60);
  crash.length = absl::Milliseconds(300);
  options.faults = std::vector<Fault>{crash};
  const SimulationResult clean = [&] {
    SimulationOptions none = options;
    none.faults = std::vector<Fault>();
    return Simulate(none);
  }();
  const SimulationResult r = Simulate(options);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.crashes, 1u);
  // Every rank's connection to the crashed coordinator was cut, and every sync still ran once
  // (the checker counts them): the same number as without the crash.
  EXPECT_GE(r.cuts, 1u);
  EXPECT_EQ(r.handed_out, clean.handed_out);
}

TEST(SimulationTest, ShrinkKeepsOnlyTheFaultsThatMatter) {
  // RunNegativeControl turns the switch on for its seeds and off again; the shrinking runs with it
  // on too.
  const ControlOutcome caught = RunNegativeControl(NegativeControls()[2], 1, SimulationOptions());
  ASSERT_TRUE(caught.caught);
  serve::Injected().accept_repeated_directives.store(true);
  SimulationOptions failing;
  failing.seed = caught.seed;
  const SimulationOptions shortest = Shrink(failing);
  const SimulationResult r = Simulate(shortest);
  serve::Injected().accept_repeated_directives.store(false);
  EXPECT_FALSE(r.status.ok());
  ASSERT_TRUE(shortest.faults.has_value());
  EXPECT_LE(shortest.faults->size(), Simulate(failing).faults.size());
  EXPECT_GE(shortest.faults->size(), 1u) << "a repeated directive needs a reconnect";
}

class NegativeControlTest : public ::testing::TestWithParam<int> {};

TEST_P(NegativeControlTest, IsCaughtWithinItsBudget) {
  const NegativeControl control = std::move(NegativeControls()[GetParam()]);
  const ControlOutcome outcome = RunNegativeControl(control, 1, SimulationOptions());
  EXPECT_TRUE(outcome.caught) << control.name << " (" << control.bug << ") not caught in "
                              << outcome.seeds << " seeds";
  EXPECT_FALSE(control.flag->load()) << "the switch is left off";
}

INSTANTIATE_TEST_SUITE_P(Controls, NegativeControlTest,
                         ::testing::Range(0, static_cast<int>(NegativeControls().size())),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return NegativeControls()[info.param].name;
                         });

}  // namespace
}  // namespace psync::simulation

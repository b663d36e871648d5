// Coordinator-restart recovery in the core: ranks re-join a tracker that knows nothing, each with a
// Resume (its step, check-ins and executed syncs); the tracker rebuilds the same decisions and
// sends directives only to members that have not executed the sync.
#include <variant>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/job_tracker.h"

namespace psync::core {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

// W=2; chunk 0 dense only; chunk 1 dense + expert (rank 0's expert and rank 1's expert, E=2).
RankPlan Plan(RankId rank, std::optional<ResumeState> resume) {
  RankPlan p;
  p.job_id = "j";
  p.world_size = 2;
  p.rank = rank;
  p.num_chunks = 2;
  p.incarnation = absl::StrCat("inc", rank);
  p.chunks = {ChunkPart{0, {"dense"}, {GroupDecl{"dp", {0, 1}}}},
              ChunkPart{1,
                        {"dense", "expert"},
                        {GroupDecl{"dp", {0, 1}}, GroupDecl{absl::StrCat("edp", rank), {rank}}}}};
  p.resume = std::move(resume);
  return p;
}

// (rank, step, chunk) of every directive in `d`.
std::vector<std::tuple<RankId, Step, ChunkId>> Directives(const Decisions& d) {
  std::vector<std::tuple<RankId, Step, ChunkId>> out;
  for (const Delivery& delivery : d.deliveries) {
    if (const auto* s = std::get_if<SyncDirective>(delivery.notice.get())) {
      out.emplace_back(delivery.rank, s->step, s->chunk);
    }
  }
  return out;
}

const absl::Time kNow = absl::UnixEpoch() + absl::Hours(1);

TEST(RecoveryTest, SameStepReleasesWhatWasSyncedOnlyToRanksThatDidNot) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ResumeState r0{3, 5, {{0, "dense"}, {1, "dense"}, {1, "expert"}}, {0}};
  ResumeState r1{3, 5, {{0, "dense"}, {1, "dense"}}, {}};
  auto j0 = tracker.Join(Plan(0, r0), kNow, &d);
  ASSERT_TRUE(j0.ok()) << j0.status();
  EXPECT_EQ(j0->generation, 4u) << "continues the generation numbering";
  EXPECT_EQ(j0->next_step, 5u);
  EXPECT_TRUE(Directives(d).empty()) << "nothing before the plan is complete";
  Decisions last;
  ASSERT_TRUE(tracker.Join(Plan(1, r1), kNow, &last).ok());
  // Chunk 0 was synced by rank 0 before the restart: only rank 1 gets its directive. Chunk 1 waits
  // for rank 1's expert optimizer.
  EXPECT_THAT(Directives(last), ElementsAre(std::make_tuple(1u, 5u, 0u)));
  // That release is marked resumed (rank 0 synced it before): the audit does not count it as a
  // second sync. Chunk 1's later release, of check-ins made here, is not.
  std::vector<bool> resumed;
  for (const Event& e : last.events) {
    if (e.kind == EventKind::kRelease) resumed.push_back(e.resumed);
  }
  EXPECT_THAT(resumed, ElementsAre(true));
  JobSnapshot snap = tracker.Snapshot(kNow);
  EXPECT_EQ(snap.chunks[1].state, "WAITING");
  ASSERT_EQ(snap.chunks[1].missing.size(), 1u);
  EXPECT_EQ(snap.chunks[1].missing[0], (Contributor{1, "expert"}));

  Decisions staged;
  StagedItem expert{5, 1, "expert", std::nullopt};
  ASSERT_TRUE(tracker.Stage(1, 4, {&expert, 1}, kNow, &staged).ok());
  EXPECT_THAT(Directives(staged),
              UnorderedElementsAre(std::make_tuple(0u, 5u, 1u), std::make_tuple(1u, 5u, 1u)));
  for (const Event& e : staged.events) {
    if (e.kind == EventKind::kRelease) {
      EXPECT_FALSE(e.resumed) << e.detail;
    }
  }

  Decisions done;
  SyncDoneItem c0{5, 0, {}};
  SyncDoneItem c1{5, 1, {}};
  ASSERT_TRUE(tracker.SyncDone(1, 4, {&c0, 1}, kNow, &done).ok());
  ASSERT_TRUE(tracker.SyncDone(1, 4, {&c1, 1}, kNow, &done).ok());
  ASSERT_TRUE(tracker.SyncDone(0, 4, {&c1, 1}, kNow, &done).ok());
  EXPECT_EQ(tracker.rank_step(0), 6u);
  EXPECT_EQ(tracker.rank_step(1), 6u);
}

// An owner asking for releases to a chunk's members as a whole still gets a resumed release member
// by member: only the members that had not synced it are named.
TEST(RecoveryTest, AResumedReleaseNamesItsRanksWhenTheOwnerAsksForWholeChunks) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  d.deliver_to_members_whole = true;
  ResumeState r0{3, 5, {{0, "dense"}, {1, "dense"}, {1, "expert"}}, {0}};
  ResumeState r1{3, 5, {{0, "dense"}, {1, "dense"}}, {}};
  ASSERT_TRUE(tracker.Join(Plan(0, r0), kNow, &d).ok());
  ASSERT_TRUE(tracker.Join(Plan(1, r1), kNow, &d).ok());
  ASSERT_EQ(d.deliveries.size(), 1u);
  EXPECT_FALSE(d.deliveries[0].members_of.has_value());
  EXPECT_THAT(Directives(d), ElementsAre(std::make_tuple(1u, 5u, 0u)));
  // Chunk 1, released of check-ins made here, goes to its members as a whole.
  Decisions staged;
  staged.deliver_to_members_whole = true;
  StagedItem expert{5, 1, "expert", std::nullopt};
  ASSERT_TRUE(tracker.Stage(1, 4, {&expert, 1}, kNow, &staged).ok());
  ASSERT_EQ(staged.deliveries.size(), 1u);
  EXPECT_EQ(staged.deliveries[0].members_of, std::optional<ChunkId>(1));
  EXPECT_EQ(std::get<SyncDirective>(*staged.deliveries[0].notice).chunk, 1u);
}

TEST(RecoveryTest, RankAheadCountsAsStagedAndSyncedForTheStepItFinished) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  // Rank 0 finished step 5 and staged chunk 0 of step 6. Rank 1 synced chunk 0 of step 5 but its
  // directive for chunk 1 was lost with the coordinator.
  ResumeState r0{2, 6, {{0, "dense"}}, {}};
  ResumeState r1{2, 5, {{0, "dense"}, {1, "dense"}, {1, "expert"}}, {0}};
  ASSERT_TRUE(tracker.Join(Plan(0, r0), kNow, &d).ok());
  Decisions last;
  ASSERT_TRUE(tracker.Join(Plan(1, r1), kNow, &last).ok());
  EXPECT_THAT(Directives(last), ElementsAre(std::make_tuple(1u, 5u, 1u)))
      << "rank 0 already executed step 5; only rank 1 needs chunk 1";
  EXPECT_EQ(tracker.rank_step(1), 5u);

  Decisions done;
  SyncDoneItem c1{5, 1, {}};
  ASSERT_TRUE(tracker.SyncDone(1, 3, {&c1, 1}, kNow, &done).ok());
  EXPECT_EQ(tracker.rank_step(1), 6u);
  // Step 6 chunk 0 waits for rank 1 only.
  JobSnapshot snap = tracker.Snapshot(kNow);
  EXPECT_EQ(snap.chunks[0].step, 6u);
  ASSERT_EQ(snap.chunks[0].missing.size(), 1u);
  EXPECT_EQ(snap.chunks[0].missing[0].rank, 1u);
}

TEST(RecoveryTest, AReleasedChunkIsNotEarlyWhenItsSyncDoneComesBeforeTheOtherRanksResume) {
  JobTracker tracker("j", TrackerOptions());
  // Rank 0 had the directive of step 5 chunk 0 when the coordinator died; it executes the sync and
  // reports it while rank 1 has not re-joined yet. Rank 1 had staged chunk 0 and not synced.
  ResumeState r0{7, 5, {{0, "dense"}, {1, "dense"}, {1, "expert"}}, {}};
  r0.released_chunks = {0};
  Decisions d;
  auto j0 = tracker.Join(Plan(0, r0), kNow, &d);
  ASSERT_TRUE(j0.ok()) << j0.status();
  EXPECT_TRUE(j0->resumed);
  EXPECT_EQ(j0->generation, 8u);
  // Another rank's check-in of step 6 exists already (as after a resume one step ahead).
  SyncDoneItem c0{5, 0, {GroupChecksum{"dp", 42}}};
  Decisions early;
  ASSERT_TRUE(tracker.SyncDone(0, 8, {&c0, 1}, kNow, &early).ok())
      << "the release happened before the restart";
  EXPECT_EQ(tracker.rank_step(0), 5u) << "chunk 1 of step 5 is not synced yet";
  for (const Event& e : early.events) EXPECT_NE(e.kind, EventKind::kViolation) << e.detail;
  // The SyncDone of the last chunk it syncs (chunk 1 was synced before the restart): rank 0 is
  // done with step 5 and may check in for step 6 while rank 1 has not re-joined.
  ResumeState r2{7, 5, {{0, "dense"}, {1, "dense"}, {1, "expert"}}, {1}};
  r2.released_chunks = {0};
  JobTracker second("j", TrackerOptions());
  Decisions d2;
  ASSERT_TRUE(second.Join(Plan(0, r2), kNow, &d2).ok());
  EXPECT_EQ(second.rank_step(0), 5u);
  ASSERT_TRUE(second.SyncDone(0, 8, {&c0, 1}, kNow, &d2).ok());
  EXPECT_EQ(second.rank_step(0), 6u);
  StagedItem next{6, 0, "dense", std::nullopt};
  EXPECT_TRUE(second.Stage(0, 8, {&next, 1}, kNow, &d2).ok());
  // A chunk nobody re-announced is still refused before its release.
  SyncDoneItem c1{5, 1, {}};
  Decisions refused;
  EXPECT_EQ(tracker.SyncDone(0, 8, {&c1, 1}, kNow, &refused).code(),
            absl::StatusCode::kFailedPrecondition);

  ResumeState r1{7, 5, {{0, "dense"}, {1, "dense"}}, {}};
  Decisions last;
  auto j1 = tracker.Join(Plan(1, r1), kNow, &last);
  ASSERT_TRUE(j1.ok()) << j1.status();
  EXPECT_TRUE(j1->resumed);
  EXPECT_EQ(j1->generation, 8u) << "the generation the first resuming rank opened";
  // Chunk 0 goes to rank 1 only: rank 0 reported its SyncDone already.
  EXPECT_THAT(Directives(last), ElementsAre(std::make_tuple(1u, 5u, 0u)));
  Decisions done;
  SyncDoneItem c0_r1{5, 0, {GroupChecksum{"dp", 42}}};
  ASSERT_TRUE(tracker.SyncDone(1, 8, {&c0_r1, 1}, kNow, &done).ok());
  for (const Event& e : done.events) EXPECT_NE(e.kind, EventKind::kViolation) << e.detail;
}

TEST(RecoveryTest, ARankThatSyncedEveryChunkMayCheckInForTheNextStepWhileOthersRejoin) {
  JobTracker tracker("j", TrackerOptions());
  ResumeState r0{2, 5, {{0, "dense"}, {1, "dense"}, {1, "expert"}}, {0, 1}};
  Decisions d;
  auto j0 = tracker.Join(Plan(0, r0), kNow, &d);
  ASSERT_TRUE(j0.ok()) << j0.status();
  EXPECT_EQ(j0->next_step, 6u);
  StagedItem next{6, 0, "dense", std::nullopt};
  Decisions staged;
  EXPECT_TRUE(tracker.Stage(0, 3, {&next, 1}, kNow, &staged).ok());
  // Rank 1 had synced chunk 0 only: it stays at step 5 and gets chunk 1 once released.
  ResumeState r1{2, 5, {{0, "dense"}, {1, "dense"}}, {0}};
  Decisions last;
  ASSERT_TRUE(tracker.Join(Plan(1, r1), kNow, &last).ok());
  EXPECT_EQ(tracker.rank_step(1), 5u);
  EXPECT_THAT(Directives(last), ElementsAre(std::make_tuple(1u, 5u, 1u)));
}

// A new owner first sees a rank that joins fresh (it opens generation 1), then ranks resuming
// generation 3 of the old owner: the numbering continues above 3 and never repeats a generation a
// rank was in; the fresh rank is aborted into it and joins again.
// A rebuilt job in which one rank is still at a skipped step (its vote sent) while the other
// resumed well past it, having seen that step skipped: the skip moves the lagging rank on and
// leaves the other where it is.
TEST(RecoveryTest, ASkipInARebuiltJobNeverMovesARankBack) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ResumeState r0{3, 9, {}, {}};
  r0.skipped_steps = {0};
  ResumeState r1{3, 0, {}, {}};
  r1.skip_reason = "found_inf";
  ASSERT_TRUE(tracker.Join(Plan(0, r0), kNow, &d).ok());
  auto lagging = tracker.Join(Plan(1, r1), kNow, &d);
  ASSERT_TRUE(lagging.ok()) << lagging.status();
  EXPECT_EQ(tracker.rank_step(1), 1u) << "step 0 skipped: rank 0, past it, counts as its voter";
  EXPECT_EQ(tracker.rank_step(0), 9u) << "never moved back";
  // Rank 0's check-in of its own step is taken.
  const StagedItem own{9, 0, "dense", std::nullopt};
  Decisions staged;
  EXPECT_TRUE(tracker.Stage(0, lagging->generation, {&own, 1}, kNow, &staged).ok());
}

// A rank whose process started again joins a generation rebuilt from the others' resumes: it is
// told to start at the step they are at, not at first_step (it could not catch up alone).
TEST(RecoveryTest, AFreshJoinerOfARebuiltJobStartsWhereTheResumedRanksAre) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ResumeState r0{3, 9, {{0, "dense"}}, {}};
  ASSERT_TRUE(tracker.Join(Plan(0, r0), kNow, &d).ok());
  Decisions last;
  auto fresh = tracker.Join(Plan(1, std::nullopt), kNow, &last);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->next_step, 9u);
  EXPECT_FALSE(fresh->resumed);
  // Its check-in completes chunk 0 of step 9 with rank 0's resumed one: both get the directive.
  const StagedItem dense{9, 0, "dense", std::nullopt};
  Decisions staged;
  ASSERT_TRUE(tracker.Stage(1, fresh->generation, {&dense, 1}, kNow, &staged).ok());
  EXPECT_THAT(Directives(staged),
              UnorderedElementsAre(std::make_tuple(0u, 9u, 0u), std::make_tuple(1u, 9u, 0u)));
  // Step 8 is not known here. The resumed rank's run includes it (its resume says it finished it):
  // a SyncDone of it is a late repeat of one whose Ack the old coordinator's crash lost, answered
  // OK. The fresh joiner's run starts at step 9: its step 8 never was.
  const SyncDoneItem late{8, 0, {GroupChecksum{"dp", 42}}};
  Decisions repeat;
  EXPECT_TRUE(tracker.SyncDone(0, fresh->generation, {&late, 1}, kNow, &repeat).ok());
  EXPECT_TRUE(repeat.deliveries.empty());
  const StagedItem before_run{8, 0, "dense", std::nullopt};
  const absl::Status refused = tracker.Stage(1, fresh->generation, {&before_run, 1}, kNow, &repeat);
  EXPECT_EQ(refused.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(refused.message(), "items[0].step 8 is before the oldest retained step 9");
  // Without resumes (a new generation from fresh joins) first_step stands.
  JobTracker plain("j", TrackerOptions());
  ASSERT_TRUE(plain.Join(Plan(0, std::nullopt), kNow, &d).ok());
  EXPECT_EQ(plain.Join(Plan(1, std::nullopt), kNow, &d)->next_step, 0u);
}

// A rank that missed the Abort of its generation (here: another rank restarted) resumes it: the
// tracker that aborted it refuses ABORTED, changing nothing, and the rank joins again afresh. A
// coordinator that never knew the generation (restarted) takes the same resume.
TEST(RecoveryTest, AResumeOfAGenerationThisTrackerAbortedIsRefusedAborted) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ASSERT_TRUE(tracker.Join(Plan(0, std::nullopt), kNow, &d).ok());
  ASSERT_TRUE(tracker.Join(Plan(1, std::nullopt), kNow, &d).ok());
  RankPlan restarted = Plan(0, std::nullopt);
  restarted.incarnation = "inc0-again";
  ASSERT_EQ(tracker.Join(restarted, kNow, &d)->generation, 2u);
  const ResumeState missed{1, 3, {{0, "dense"}}, {}};
  Decisions refused;
  auto late = tracker.Join(Plan(1, missed), kNow, &refused);
  ASSERT_EQ(late.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(late.status().message()),
              ::testing::HasSubstr("generation 1 was aborted (rank 0 restarted"));
  EXPECT_TRUE(refused.deliveries.empty());
  EXPECT_EQ(tracker.generation(), 2u);
  auto again = tracker.Join(Plan(1, std::nullopt), kNow, &d);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->generation, 2u);
  EXPECT_EQ(again->next_step, 0u);
  JobTracker restarted_coordinator("j", TrackerOptions());
  auto resumed = restarted_coordinator.Join(Plan(1, missed), kNow, &d);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->generation, 2u);
}

TEST(RecoveryTest, AResumeOfANewerGenerationLiftsAFreshForming) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  auto fresh = tracker.Join(Plan(1, std::nullopt), kNow, &d);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->generation, 1u);
  Decisions resumed;
  auto r0 = tracker.Join(Plan(0, ResumeState{3, 5, {{0, "dense"}}, {}}), kNow, &resumed);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ(r0->generation, 4u);
  ASSERT_EQ(resumed.deliveries.size(), 1u);
  EXPECT_EQ(resumed.deliveries[0].rank, 1u);
  const auto* abort = std::get_if<AbortNotice>(resumed.deliveries[0].notice.get());
  ASSERT_NE(abort, nullptr);
  EXPECT_EQ(abort->generation, 1u);
  EXPECT_EQ(tracker.CheckGeneration(1).code(), absl::StatusCode::kFailedPrecondition);
  auto again = tracker.Join(Plan(1, std::nullopt), kNow, &d);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->generation, 4u);
  // An older resume merges into the newer generation.
  JobTracker other("j", TrackerOptions());
  ASSERT_EQ(other.Join(Plan(0, ResumeState{3, 5, {}, {}}), kNow, &d)->generation, 4u);
  ASSERT_EQ(other.Join(Plan(1, ResumeState{2, 5, {}, {}}), kNow, &d)->generation, 4u);
}

TEST(RecoveryTest, AJoinWithoutResumeIsNotResumed) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  auto j0 = tracker.Join(Plan(0, std::nullopt), kNow, &d);
  ASSERT_TRUE(j0.ok()) << j0.status();
  EXPECT_FALSE(j0->resumed);
  EXPECT_EQ(j0->generation, 1u);
}

// Found by the deterministic simulation: rank 1 voted to skip step 5 and the old coordinator
// acknowledged it; rank 0 had seen the step skipped (it resumes at step 6). Without the vote in
// rank 1's resume, the new coordinator waited for it forever.
TEST(RecoveryTest, ASkipVoteInAResumeSkipsTheStepWithTheRanksPastIt) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ResumeState r0{2, 6, {}, {}};
  ResumeState r1{2, 5, {}, {}};
  r1.skip_reason = "found_inf";
  ASSERT_TRUE(tracker.Join(Plan(0, r0), kNow, &d).ok());
  Decisions last;
  ASSERT_TRUE(tracker.Join(Plan(1, r1), kNow, &last).ok());
  std::vector<std::pair<RankId, Step>> skipped;
  for (const Delivery& delivery : last.deliveries) {
    if (const auto* s = std::get_if<StepSkipped>(delivery.notice.get())) {
      skipped.emplace_back(delivery.rank, s->step);
    }
  }
  EXPECT_THAT(skipped, UnorderedElementsAre(std::make_pair(0u, 5u), std::make_pair(1u, 5u)));
  EXPECT_EQ(tracker.rank_step(1), 6u);
}

// Found by the deterministic simulation (seed 51): rank 1 syncs chunk 0 without staging in it. Its
// directive of step 5 was lost with the old coordinator; rank 0, the only contributor, is past
// step 5. The new coordinator releases step 5 to rank 1 (and only to it), not never.
TEST(RecoveryTest, AMemberThatDoesNotStageGetsTheStepTheContributorsFinished) {
  auto plan = [](RankId rank, ResumeState resume) {
    RankPlan p;
    p.job_id = "j";
    p.world_size = 2;
    p.rank = rank;
    p.num_chunks = 1;
    p.incarnation = absl::StrCat("inc", rank);
    p.chunks = {
        ChunkPart{0,
                  rank == 0 ? std::vector<std::string>{"dense"} : std::vector<std::string>{},
                  {GroupDecl{"dp", {0, 1}}}}};
    p.resume = std::move(resume);
    return p;
  };
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ASSERT_TRUE(tracker.Join(plan(0, ResumeState{2, 6, {}, {}}), kNow, &d).ok());
  Decisions last;
  ASSERT_TRUE(tracker.Join(plan(1, ResumeState{2, 5, {}, {}}), kNow, &last).ok());
  EXPECT_THAT(Directives(last), ElementsAre(std::make_tuple(1u, 5u, 0u)));
}

// Found by the simulation (seed 1808): rank 1 executed step 6's chunk 0 ahead of its own step 5 and
// its SyncDone was unanswered; the resume names the release, so the SyncDone is not early.
TEST(RecoveryTest, ASyncDoneOfAReleaseAheadIsAccepted) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ResumeState r1{2, 5, {{0, "dense"}, {1, "dense"}, {1, "expert"}}, {0, 1}};
  r1.released_ahead = {{6, 0}};
  ASSERT_TRUE(tracker.Join(Plan(0, ResumeState{2, 5, {}, {}}), kNow, &d).ok());
  ASSERT_TRUE(tracker.Join(Plan(1, r1), kNow, &d).ok());
  SyncDoneItem ahead{6, 0, {}};
  Decisions done;
  EXPECT_TRUE(tracker.SyncDone(1, 3, {&ahead, 1}, kNow, &done).ok());
}

// Found by the simulation (seed 585): a generation still forming from resumes is renumbered by a
// rank resuming from a newer one; its ranks are told to re-join (their runs continue), not to
// restart.
TEST(RecoveryTest, RenumberingAFormingRebuiltGenerationAsksItsRanksToRejoin) {
  JobTracker tracker("j", TrackerOptions());
  Decisions first;
  ASSERT_TRUE(tracker.Join(Plan(0, ResumeState{1, 5, {}, {}}), kNow, &first).ok());
  EXPECT_EQ(tracker.generation(), 2u);
  Decisions second;
  absl::StatusOr<JoinResult> r = tracker.Join(Plan(1, ResumeState{2, 5, {}, {}}), kNow, &second);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->generation, 3u);
  ASSERT_EQ(second.deliveries.size(), 1u);
  const auto* abort = std::get_if<AbortNotice>(second.deliveries[0].notice.get());
  ASSERT_NE(abort, nullptr);
  EXPECT_EQ(second.deliveries[0].rank, 0u);
  EXPECT_EQ(abort->generation, 2u);
  EXPECT_TRUE(abort->rejoin);
  // Rank 0 re-joins with the same resume and continues in generation 3.
  Decisions again;
  absl::StatusOr<JoinResult> rejoined =
      tracker.Join(Plan(0, ResumeState{2, 5, {}, {}}), kNow, &again);
  ASSERT_TRUE(rejoined.ok());
  EXPECT_EQ(rejoined->generation, 3u);
  EXPECT_TRUE(rejoined->resumed);
}

// Found by the simulation (seed 459): a resumed Join whose answer was lost is repeated; the
// tracker knows the incarnation (a reconnect) and answers resumed again, so the client continues.
TEST(RecoveryTest, AReconnectAfterALostResumedAnswerIsResumed) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  ASSERT_TRUE(tracker.Join(Plan(0, ResumeState{1, 5, {}, {}}), kNow, &d).ok());
  absl::StatusOr<JoinResult> again = tracker.Join(Plan(0, ResumeState{1, 5, {}, {}}), kNow, &d);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->reconnect);
  EXPECT_TRUE(again->resumed);
  EXPECT_EQ(again->generation, 2u);
}

TEST(RecoveryTest, AResumeWithASkipVoteAndCheckInsIsRefused) {
  ResumeState r{2, 5, {{0, "dense"}}, {}};
  r.skip_reason = "found_inf";
  const absl::Status s = ValidateRankPlan(Plan(0, r), PlanLimits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "resume.skip_reason a rank that voted to skip step 5 staged nothing in it, but "
            "resume.staged has 1 check-ins");
}

TEST(RecoveryTest, ResumeIsValidatedAgainstThePlan) {
  JobTracker tracker("j", TrackerOptions());
  RankPlan bad = Plan(0, ResumeState{1, 5, {{0, "expert"}}, {}});
  absl::Status s = ValidateRankPlan(bad, PlanLimits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "resume.staged[0] chunk 0 optimizer 'expert' is not declared in this plan");
  RankPlan early = Plan(0, ResumeState{1, 2, {}, {}});
  early.first_step = 3;
  EXPECT_EQ(ValidateRankPlan(early, PlanLimits()).message(),
            "resume.step 2 is before first_step 3");
  ResumeState released{1, 5, {}, {}};
  released.released_chunks = {0, 9};
  EXPECT_EQ(ValidateRankPlan(Plan(0, released), PlanLimits()).message(),
            "resume.released_chunks[1] chunk 9 is not a chunk of this plan");
  ResumeState after{2, 5, {}, {}};
  after.restarted_after = 2;
  s = ValidateRankPlan(Plan(0, after), PlanLimits());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "resume.restarted_after 2 is not before resume.generation 2");
  after.restarted_after = 1;
  EXPECT_TRUE(ValidateRankPlan(Plan(0, after), PlanLimits()).ok());
}

ResumeState ResumeAfter(uint64_t generation, Step step, uint64_t restarted_after) {
  ResumeState r{generation, step, {}, {}};
  r.restarted_after = restarted_after;
  return r;
}

// A join answers with the latest generation the tracker knows was aborted: 0 before any abort,
// the aborted generation to the rank whose restart ended it and to every later joiner.
TEST(RecoveryTest, AJoinNamesTheLatestAbortedGeneration) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  EXPECT_EQ(tracker.Join(Plan(0, std::nullopt), kNow, &d)->restarted_after, 0u);
  EXPECT_EQ(tracker.Join(Plan(1, std::nullopt), kNow, &d)->restarted_after, 0u);
  RankPlan restarted = Plan(0, std::nullopt);
  restarted.incarnation = "inc0-again";
  auto again = tracker.Join(restarted, kNow, &d);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->generation, 2u);
  EXPECT_EQ(again->restarted_after, 1u);
  EXPECT_EQ(tracker.Join(Plan(1, std::nullopt), kNow, &d)->restarted_after, 1u);
  EXPECT_EQ(tracker.Join(restarted, kNow, &d)->restarted_after, 1u);  // a reconnect
}

// Found by the deterministic simulation, seed 6247 against replicas: rank 0's process restarted
// (its join aborted generation 1 and opened 2), rank 1 missed the Abort, and the owner crashed. The
// new owner rebuilt generation 2 from rank 1's resume of generation 1; rank 0's resume says its
// run began after generation 1 was aborted, so rank 1's run is ended: it gets an AbortNotice to
// start over (not to re-join with its resume), its resume is refused from then on, and it joins
// afresh at rank 0's step.
TEST(RecoveryTest, AResumeOfARunAfterAnUnknownAbortEndsTheRunsRebuiltBeforeIt) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  auto stale = tracker.Join(Plan(1, ResumeAfter(1, 13, 0)), kNow, &d);
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_EQ(stale->generation, 2u);
  EXPECT_TRUE(stale->resumed);
  Decisions lifted;
  auto r0 = tracker.Join(Plan(0, ResumeAfter(2, 0, 1)), kNow, &lifted);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ(r0->generation, 3u);
  EXPECT_TRUE(r0->resumed);
  EXPECT_EQ(r0->restarted_after, 1u);
  ASSERT_EQ(lifted.deliveries.size(), 1u);
  EXPECT_EQ(lifted.deliveries[0].rank, 1u);
  const auto* abort = std::get_if<AbortNotice>(lifted.deliveries[0].notice.get());
  ASSERT_NE(abort, nullptr);
  EXPECT_EQ(abort->generation, 2u);
  EXPECT_FALSE(abort->rejoin);
  EXPECT_EQ(abort->reason,
            "rank 0 resumes a run that began after generation 1 was aborted; the runs of "
            "generation 2 began before it and start over; join generation 3");
  // Rank 1 missed that Abort too: its resume (of generation 2 now) is refused, changing nothing.
  Decisions refused;
  auto late = tracker.Join(Plan(1, ResumeAfter(2, 13, 0)), kNow, &refused);
  ASSERT_EQ(late.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(late.status().message(),
            "job 'j': rank 1's run began before generation 1 was aborted (rank 0's run began "
            "after it; resume.restarted_after is 0); join again without a resume, from "
            "generation 3");
  EXPECT_TRUE(refused.deliveries.empty());
  EXPECT_EQ(tracker.generation(), 3u);
  auto fresh = tracker.Join(Plan(1, std::nullopt), kNow, &d);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_EQ(fresh->generation, 3u);
  EXPECT_EQ(fresh->next_step, 0u);
  EXPECT_EQ(fresh->restarted_after, 1u);
  EXPECT_EQ(tracker.state(), JobState::kRunning);
}

// The same resumes in the other order: the run that began after the abort comes first, and the
// resume of the aborted generation is refused.
TEST(RecoveryTest, AResumeOfARunBeforeALearnedAbortIsRefused) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  auto r0 = tracker.Join(Plan(0, ResumeAfter(2, 0, 1)), kNow, &d);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ(r0->generation, 3u);
  EXPECT_EQ(r0->restarted_after, 1u);
  auto late = tracker.Join(Plan(1, ResumeAfter(1, 13, 0)), kNow, &d);
  ASSERT_EQ(late.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(std::string(late.status().message()),
              ::testing::HasSubstr("generation 1 was aborted (rank 0's run began after it)"));
  EXPECT_EQ(tracker.Join(Plan(1, std::nullopt), kNow, &d)->generation, 3u);
}

// Runs that all began after the same abort (every rank joined again after it) resume together
// when the job moves: nothing is refused or aborted.
TEST(RecoveryTest, ResumesOfRunsAfterTheSameAbortResumeTogether) {
  JobTracker tracker("j", TrackerOptions());
  Decisions d;
  auto r1 = tracker.Join(Plan(1, ResumeAfter(2, 7, 1)), kNow, &d);
  ASSERT_TRUE(r1.ok()) << r1.status();
  Decisions second;
  auto r0 = tracker.Join(Plan(0, ResumeAfter(2, 7, 1)), kNow, &second);
  ASSERT_TRUE(r0.ok()) << r0.status();
  EXPECT_EQ(r1->generation, 3u);
  EXPECT_EQ(r0->generation, 3u);
  EXPECT_TRUE(r0->resumed);
  for (const Delivery& delivery : second.deliveries) {
    EXPECT_EQ(std::get_if<AbortNotice>(delivery.notice.get()), nullptr);
  }
  EXPECT_EQ(tracker.state(), JobState::kRunning);
}

}  // namespace
}  // namespace psync::core

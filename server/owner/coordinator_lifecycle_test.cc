// Coordinator: how jobs end and go away. EndJob, every rank leaving finished, idle eviction, the
// bounded history of finished jobs, --max_jobs counting live jobs only, and the exact status of
// every message for a job that has ended. Fake sinks and a FakeClock; nothing sleeps.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/owner/coordinator.h"
#include "server/owner/fake_sinks.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::server::testing::CallLog;
using ::psync::server::testing::DenseDone;
using ::psync::server::testing::DensePlan;
using ::psync::server::testing::FakeSink;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Records every event it is handed.
class EventRecorder final : public EventSink {
 public:
  void OnEvents(const std::vector<core::Event>& events) override {
    for (const core::Event& e : events) {
      kinds.push_back(core::EventKindName(e.kind));
      details.push_back(e.detail);
    }
  }
  std::vector<std::string> kinds;
  std::vector<std::string> details;
};

class LifecycleTest : public ::testing::Test {
 protected:
  LifecycleTest() { Restart(CoordinatorOptions()); }
  ~LifecycleTest() override { coordinator_->RemoveEventSink(&events_); }

  void Restart(CoordinatorOptions options) {
    if (coordinator_ != nullptr) coordinator_->RemoveEventSink(&events_);
    coordinator_ = std::make_unique<Coordinator>(std::move(options), &clock_);
    coordinator_->AddEventSink(&events_, nullptr);
  }

  // Joins both ranks of a 2-rank, 1-chunk job `job`; returns their session ids.
  std::vector<std::string> JoinAll(const std::string& job) {
    std::vector<std::string> ids;
    for (core::RankId r = 0; r < 2; ++r) {
      absl::StatusOr<core::JoinResult> joined = coordinator_->Join(DensePlan(job, r, 2, 1));
      EXPECT_TRUE(joined.ok()) << joined.status();
      ids.push_back(joined.ok() ? joined->session_id : "");
    }
    return ids;
  }
  std::shared_ptr<FakeSink> Attach(const std::string& job, core::RankId rank,
                                   const std::string& session_id, const std::string& name) {
    auto sink = std::make_shared<FakeSink>(name, &log_);
    EXPECT_TRUE(coordinator_->Attach(job, rank, 1, session_id, sink).ok());
    return sink;
  }
  // One whole step of a 2-rank, 1-chunk job: both stage, both report SyncDone.
  void RunStep(const std::string& job, core::Step step) {
    for (core::RankId r = 0; r < 2; ++r) {
      ASSERT_TRUE(coordinator_->Stage(job, r, 1, {Item(step, 0, "dense")}).ok());
    }
    for (core::RankId r = 0; r < 2; ++r) {
      ASSERT_TRUE(coordinator_->SyncDone(job, r, 1, DenseDone(step, {0})).ok());
    }
  }
  std::vector<std::string> JobIds(std::vector<std::string> states) {
    std::vector<std::string> ids;
    for (const JobStatusView& v : coordinator_->ListJobs(states)) ids.push_back(v.snapshot.job_id);
    return ids;
  }

  serve::FakeClock clock_;
  CallLog log_;
  EventRecorder events_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(LifecycleTest, EndJobClosesItsSessionsAndKeepsItsFinalStatusInTheHistory) {
  const std::vector<std::string> ids = JoinAll("job");
  auto a = Attach("job", 0, ids[0], "a");
  auto b = Attach("job", 1, ids[1], "b");
  RunStep("job", 0);
  log_.Take();

  absl::StatusOr<EndJobResult> ended = coordinator_->EndJob("job", "training complete", "");
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_FALSE(ended->already_ended);
  EXPECT_EQ(JobStateText(ended->status), "ENDED");
  EXPECT_EQ(ended->status.end.reason, "training complete");
  EXPECT_EQ(ended->status.counters.releases, 1u);
  EXPECT_EQ(ended->status.counters.syncs_done, 2u);
  EXPECT_THAT(log_.Take(),
              ::testing::UnorderedElementsAre(
                  "a close FAILED_PRECONDITION: job_id 'job' has ended: training complete",
                  "b close FAILED_PRECONDITION: job_id 'job' has ended: training complete"));
  EXPECT_EQ(coordinator_->live_jobs(), 0u);
  EXPECT_EQ(events_.kinds.back(), "job_ended");
  EXPECT_EQ(events_.details.back(), "training complete");

  // Status, audit and the job list still answer for it, as it was when it ended.
  absl::StatusOr<JobStatusView> view = coordinator_->GetJobStatus("job");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(JobStateText(*view), "ENDED");
  EXPECT_EQ(view->counters.releases, 1u);
  absl::StatusOr<std::vector<observe::SyncAudit>> audit = coordinator_->Audit("job");
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ((*audit)[0].releases, 1u);
  EXPECT_THAT(JobIds({"ENDED"}), ElementsAre("job"));
  EXPECT_THAT(JobIds({"RUNNING"}), IsEmpty());
}

TEST_F(LifecycleTest, EveryMessageForAnEndedJobIsFailedPreconditionAndNothingIsRecreated) {
  const std::vector<std::string> ids = JoinAll("job");
  ASSERT_TRUE(coordinator_->EndJob("job", "done", "").ok());
  log_.Take();

  const absl::Status stage = coordinator_->Stage("job", 0, 1, {Item(0, 0, "dense")});
  EXPECT_EQ(stage.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stage.message()), HasSubstr("job_id 'job' has ended at "));
  EXPECT_THAT(std::string(stage.message()), HasSubstr("(done); it takes no more messages"));
  EXPECT_EQ(coordinator_->SyncDone("job", 0, 1, DenseDone(0, {0})).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_->Skip("job", 0, 1, 0, "found_inf").code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_->Leave("job", 0, 1, true).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_->CheckGeneration("job", 1, 0, ids[0]).code(),
            absl::StatusCode::kFailedPrecondition);
  auto sink = std::make_shared<FakeSink>("late", &log_);
  EXPECT_EQ(coordinator_->Attach("job", 0, 1, ids[0], sink).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<core::JoinResult> join = coordinator_->Join(DensePlan("job", 0, 2, 1));
  EXPECT_EQ(join.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_->live_jobs(), 0u);  // never silently created again

  // Ending it again is OK and changes nothing.
  absl::StatusOr<EndJobResult> again = coordinator_->EndJob("job", "other reason", "");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_ended);
  EXPECT_EQ(again->status.end.reason, "done");
  EXPECT_THAT(JobIds({}), ElementsAre("job"));
  EXPECT_THAT(log_.Take(), IsEmpty());
}

TEST_F(LifecycleTest, EndJobRefusesBadInputWithThePreciseStatusAndChangesNothing) {
  JoinAll("job");
  EXPECT_EQ(coordinator_->EndJob("", "x", "").status().code(), absl::StatusCode::kInvalidArgument);
  const absl::Status long_reason = coordinator_->EndJob("job", std::string(257, 'r'), "").status();
  EXPECT_EQ(long_reason.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(long_reason.message(), "reason is 257 bytes; at most 256");
  const absl::Status unknown = coordinator_->EndJob("nope", "", "").status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(unknown.message(), "job_id 'nope' is not known");
  EXPECT_EQ(coordinator_->live_jobs(), 1u);
  EXPECT_THAT(JobIds({"FORMING", "RUNNING"}), ElementsAre("job"));
}

// The id of an unknown job is the client's text: its rejection's event keeps a bounded copy.
TEST_F(LifecycleTest, ARejectionOfAHugeUnknownJobIdRecordsABoundedEvent) {
  const std::string huge(1 << 20, 'j');
  EXPECT_EQ(coordinator_->Stage(huge, 0, 1, {Item(0, 0, "dense")}).code(),
            absl::StatusCode::kNotFound);
  ASSERT_EQ(events_.kinds.back(), "rejected");
  EXPECT_LE(events_.details.back().size(), 1100u);
  EXPECT_THAT(events_.details.back(), HasSubstr("more bytes)"));
}

TEST_F(LifecycleTest, EndJobWithJobTokensNeedsTheJobsToken) {
  CoordinatorOptions options;
  options.job_tokens = {{"job", "s3cret"}};
  Restart(options);
  for (core::RankId r = 0; r < 2; ++r) {
    core::RankPlan plan = DensePlan("job", r, 2, 1);
    plan.token = "s3cret";
    ASSERT_TRUE(coordinator_->Join(plan).ok());
  }
  EXPECT_EQ(coordinator_->EndJob("job", "", "wrong").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(coordinator_->EndJob("other", "", "s3cret").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(coordinator_->live_jobs(), 1u);
  EXPECT_EQ(coordinator_->GetJobStatus("job")->counters.rejected, 1u);
  absl::StatusOr<EndJobResult> ended = coordinator_->EndJob("job", "", "s3cret");
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_EQ(ended->status.end.reason, "ended by EndJob");
}

TEST_F(LifecycleTest, TheJobEndsWhenEveryRankLeftFinishedAndNoFinishedRankIsCut) {
  const std::vector<std::string> ids = JoinAll("job");
  auto a = Attach("job", 0, ids[0], "a");
  auto b = Attach("job", 1, ids[1], "b");
  RunStep("job", 0);
  log_.Take();

  // A stale or future generation, or a rank that never joined, is refused and counted.
  const absl::Status stale = coordinator_->Leave("job", 0, 0, true);
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stale.message(), "leave.generation 0 is stale: job 'job' is at generation 1");
  EXPECT_EQ(coordinator_->Leave("job", 0, 2, true).message(),
            "leave.generation 2 is not issued yet: job 'job' is at generation 1");
  EXPECT_EQ(coordinator_->Leave("job", 5, 1, true).message(), "rank 5 has not joined generation 1");
  EXPECT_EQ(coordinator_->GetJobStatus("job")->counters.rejected, 3u);

  // Leaving without `finished` changes nothing.
  ASSERT_TRUE(coordinator_->Leave("job", 0, 1, false).ok());
  ASSERT_TRUE(coordinator_->Leave("job", 0, 1, true).ok());
  EXPECT_EQ(coordinator_->live_jobs(), 1u);
  // Rank 0 finished and went away: it is never reported lost, however long it stays away.
  coordinator_->Detach("job", 0, a.get());
  clock_.Advance(absl::Minutes(5));
  EXPECT_THAT(coordinator_->EnforceLiveness(), IsEmpty());
  EXPECT_THAT(coordinator_->GetJobStatus("job")->lost_ranks, IsEmpty());

  ASSERT_TRUE(coordinator_->Leave("job", 1, 1, true).ok());
  EXPECT_EQ(coordinator_->live_jobs(), 0u);
  absl::StatusOr<JobStatusView> view = coordinator_->GetJobStatus("job");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(JobStateText(*view), "ENDED");
  EXPECT_EQ(view->end.reason, "every rank finished");
  // The finished ranks' sessions are not closed under them: they close them themselves.
  EXPECT_THAT(log_.Take(), IsEmpty());
}

// A node agent's batch carries its ranks' leaves: the job ends at the last one, and the batch's
// later messages are answered as messages for an ended job.
TEST_F(LifecycleTest, LeavesInANodeAgentsBatchEndTheJobMidBatch) {
  JoinAll("job");
  const std::vector<core::StagedItem> item = {Item(0, 0, "dense")};
  std::vector<RankMessage> batch(4);
  batch[0].rank = 0;
  batch[0].kind = RankMessage::Kind::kLeave;
  batch[0].leave_finished = true;
  batch[1].rank = 1;
  batch[1].kind = RankMessage::Kind::kLeave;
  batch[1].leave_finished = true;
  batch[2].rank = 1;
  batch[2].kind = RankMessage::Kind::kStaged;
  batch[2].staged = item;
  batch[3] = batch[1];
  const std::vector<absl::Status> statuses = coordinator_->ApplyBatch("job", 1, batch);
  ASSERT_EQ(statuses.size(), 4u);
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_TRUE(statuses[1].ok()) << statuses[1];
  EXPECT_EQ(statuses[2].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(statuses[2].message()), HasSubstr("job_id 'job' has ended at"));
  EXPECT_EQ(statuses[3].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(coordinator_->live_jobs(), 0u);
  EXPECT_EQ(coordinator_->GetJobStatus("job")->end.reason, "every rank finished");
}

// A node agent's batch is recorded in order, each message's events after the last one's and a
// rejection right after the events of the message it rejects; each is counted once.
TEST_F(LifecycleTest, ANodeAgentsBatchRecordsEachMessagesEventsInOrderAndCountsThemOnce) {
  JoinAll("job");
  auto sink = Attach("job", 0, coordinator_->Join(DensePlan("job", 0, 2, 1))->session_id, "r0");
  const size_t before = events_.kinds.size();
  // A RankMessage is a view: its items live here.
  const std::vector<core::StagedItem> first = {Item(0, 0, "dense", 7)};
  const std::vector<core::StagedItem> conflicting = {Item(0, 0, "dense", 8)};
  const std::vector<core::StagedItem> completing = {Item(0, 0, "dense", 9)};
  const std::vector<core::SyncDoneItem> done = DenseDone(0, {0});
  std::vector<RankMessage> batch(5);
  batch[0].rank = 0;
  batch[0].kind = RankMessage::Kind::kStaged;
  batch[0].staged = first;
  batch[1] = batch[0];
  batch[1].staged = conflicting;  // a conflicting duplicate: rejected
  batch[2].rank = 1;
  batch[2].kind = RankMessage::Kind::kStaged;
  batch[2].staged = completing;  // completes the chunk: released
  batch[3].rank = 0;
  batch[3].kind = RankMessage::Kind::kSyncDone;
  batch[3].sync_done = done;
  batch[4] = batch[0];  // a duplicate of the first: accepted, counted as one
  const std::vector<absl::Status> statuses = coordinator_->ApplyBatch("job", 1, batch);
  ASSERT_EQ(statuses.size(), 5u);
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(statuses[2].ok()) << statuses[2];
  EXPECT_TRUE(statuses[3].ok()) << statuses[3];
  EXPECT_TRUE(statuses[4].ok()) << statuses[4];
  const std::vector<std::string> kinds(events_.kinds.begin() + before, events_.kinds.end());
  EXPECT_THAT(kinds, ElementsAre("checkin", "violation", "rejected", "checkin", "release",
                                 "sync_done", "duplicate"));
  const JobCounters counters = coordinator_->GetJobStatus("job")->counters;
  EXPECT_EQ(counters.checkins, 2u);
  EXPECT_EQ(counters.duplicate_checkins, 1u);
  EXPECT_EQ(counters.releases, 1u);
  EXPECT_EQ(counters.syncs_done, 1u);
  EXPECT_EQ(counters.violations, 1u);
  EXPECT_EQ(counters.rejected, 1u);
  // The release reached rank 0's session once.
  EXPECT_THAT(log_.Take(), ElementsAre("r0 directive g1 s0 c0 seq1"));
}

TEST_F(LifecycleTest, AJobWithoutSessionsOrMessagesIsEvictedAfterTheIdleTtlAndMayStartAgain) {
  CoordinatorOptions options;
  options.job_idle_ttl = absl::Minutes(15);
  options.rank_lease = absl::Hours(1);  // keep the lost-rank abort out of this test
  options.lost_rank_abort_after = absl::Hours(2);
  Restart(options);
  const std::vector<std::string> ids = JoinAll("idle");
  const std::vector<std::string> busy_ids = JoinAll("busy");
  auto busy = Attach("busy", 0, busy_ids[0], "b0");

  clock_.Advance(absl::Minutes(14));
  ASSERT_TRUE(coordinator_->Stage("idle", 0, 1, {Item(0, 0, "dense")}).ok());  // a message
  clock_.Advance(absl::Minutes(14));
  coordinator_->EnforceLiveness();  // reports the chunk rank 1 never staged: a stall, no eviction
  EXPECT_EQ(coordinator_->live_jobs(), 2u);

  clock_.Advance(absl::Minutes(1));  // 15 minutes since the last message
  const std::vector<core::Event> found = coordinator_->EnforceLiveness();
  ASSERT_EQ(found.size(), 1u);  // what the server's inspector logs
  EXPECT_EQ(found[0].kind, core::EventKind::kJobEvicted);
  EXPECT_EQ(found[0].job_id.str(), "idle");
  EXPECT_EQ(coordinator_->live_jobs(), 1u);  // a job with a session is never evicted
  absl::StatusOr<JobStatusView> view = coordinator_->GetJobStatus("idle");
  ASSERT_TRUE(view.ok());
  EXPECT_EQ(JobStateText(*view), "EVICTED");
  EXPECT_EQ(view->end.reason, "no session and no message for 15m (job_idle_ttl 15m)");
  EXPECT_EQ(events_.kinds.back(), "job_evicted");
  const absl::Status late = coordinator_->Stage("idle", 1, 1, {Item(0, 0, "dense")});
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(late.message()), HasSubstr("was evicted at"));
  EXPECT_THAT(std::string(late.message()), HasSubstr("Join to start it again"));

  // An evicted job's ranks may start it again by joining: a new job, the old one in the history.
  ASSERT_TRUE(coordinator_->Join(DensePlan("idle", 0, 2, 1)).ok());
  EXPECT_EQ(coordinator_->live_jobs(), 2u);
  EXPECT_EQ(JobStateText(*coordinator_->GetJobStatus("idle")), "FORMING");
  EXPECT_THAT(JobIds({"EVICTED"}), IsEmpty());  // listed once, as its live run
  EXPECT_THAT(JobIds({"FORMING"}), ElementsAre("idle"));
}

// A detached rank is reported lost once its lease ran out, the ones due in rank order, each
// once; the job aborts once one has been gone lost_rank_abort_after, and a shorter abort wait
// than the lease aborts before any rank is reported lost.
TEST_F(LifecycleTest, DetachedRanksAreLostPastTheirLeaseInRankOrderAndAbortTheJobLater) {
  CoordinatorOptions options;
  options.rank_lease = absl::Seconds(10);
  options.lost_rank_abort_after = absl::Seconds(30);
  Restart(options);
  std::vector<std::string> ids;
  for (core::RankId r = 0; r < 4; ++r) {
    absl::StatusOr<core::JoinResult> joined = coordinator_->Join(DensePlan("job", r, 4, 1));
    ASSERT_TRUE(joined.ok()) << joined.status();
    ids.push_back(joined->session_id);
  }
  std::vector<std::shared_ptr<FakeSink>> sinks;
  for (core::RankId r = 0; r < 4; ++r) {
    sinks.push_back(std::make_shared<FakeSink>(absl::StrCat("r", r), &log_));
    ASSERT_TRUE(coordinator_->Attach("job", r, 1, ids[r], sinks.back()).ok());
  }
  // Ranks 3 and 1 leave at 0 s, rank 2 at 5 s; rank 0 stays.
  coordinator_->Detach("job", 3, sinks[3].get());
  coordinator_->Detach("job", 1, sinks[1].get());
  clock_.Advance(absl::Seconds(5));
  coordinator_->Detach("job", 2, sinks[2].get());
  clock_.Advance(absl::Seconds(4));
  EXPECT_THAT(coordinator_->EnforceLiveness(), IsEmpty());
  clock_.Advance(absl::Seconds(1));  // 10 s: ranks 1 and 3 are due, in rank order
  const auto lost_ranks = [](const std::vector<core::Event>& found) {
    std::vector<core::RankId> ranks;
    for (const core::Event& e : found) {
      EXPECT_EQ(e.kind, core::EventKind::kRankLost);
      ranks.push_back(*e.rank);
    }
    return ranks;
  };
  EXPECT_THAT(lost_ranks(coordinator_->EnforceLiveness()), ElementsAre(1, 3));
  EXPECT_THAT(coordinator_->EnforceLiveness(), IsEmpty()) << "each reported once";
  clock_.Advance(absl::Seconds(5));
  EXPECT_THAT(lost_ranks(coordinator_->EnforceLiveness()), ElementsAre(2));
  clock_.Advance(absl::Seconds(14));
  coordinator_->EnforceLiveness();
  EXPECT_EQ(JobStateText(*coordinator_->GetJobStatus("job")), "DEGRADED");  // lost, not aborted
  clock_.Advance(absl::Seconds(1));                                         // rank 1 gone 30 s
  coordinator_->EnforceLiveness();
  EXPECT_EQ(JobStateText(*coordinator_->GetJobStatus("job")), "ABORTED");
  EXPECT_EQ(coordinator_->GetJobStatus("job")->snapshot.abort_reason,
            "rank 1 lost: no session for 30s");

  // An abort wait shorter than the lease: the job aborts with no rank reported lost.
  options.rank_lease = absl::Seconds(10);
  options.lost_rank_abort_after = absl::Seconds(3);
  Restart(options);
  ids.clear();
  for (core::RankId r = 0; r < 2; ++r) {
    absl::StatusOr<core::JoinResult> joined = coordinator_->Join(DensePlan("short", r, 2, 1));
    ASSERT_TRUE(joined.ok()) << joined.status();
    ids.push_back(joined->session_id);
  }
  auto kept = std::make_shared<FakeSink>("s0", &log_);
  ASSERT_TRUE(coordinator_->Attach("short", 0, 1, ids[0], kept).ok());
  auto gone = std::make_shared<FakeSink>("s1", &log_);
  ASSERT_TRUE(coordinator_->Attach("short", 1, 1, ids[1], gone).ok());
  coordinator_->Detach("short", 1, gone.get());
  clock_.Advance(absl::Seconds(3));
  EXPECT_THAT(coordinator_->EnforceLiveness(), IsEmpty());
  EXPECT_EQ(JobStateText(*coordinator_->GetJobStatus("short")), "ABORTED");
  EXPECT_EQ(coordinator_->GetJobStatus("short")->snapshot.abort_reason,
            "rank 1 lost: no session for 3s");
}

// ListJobs names a job id once: a job evicted and joined again is its live run only (not also
// its evicted run from the history), and once that run ends, its end only. The history holds one
// record per id, so the restarted job takes one place in it.
TEST_F(LifecycleTest, AnEvictedJobJoinedAgainIsListedOnceAsItsCurrentRun) {
  CoordinatorOptions options;
  options.job_idle_ttl = absl::Minutes(15);
  options.rank_lease = absl::Hours(1);
  options.lost_rank_abort_after = absl::Hours(2);
  options.finished_jobs_kept = 2;
  Restart(options);
  JoinAll("other");
  ASSERT_TRUE(coordinator_->EndJob("other", "done", "").ok());
  JoinAll("job");
  clock_.Advance(absl::Minutes(15));
  ASSERT_EQ(coordinator_->EnforceLiveness().size(), 1u);  // "job" evicted
  EXPECT_THAT(JobIds({}), ElementsAre("other", "job"));
  EXPECT_THAT(JobIds({"EVICTED"}), ElementsAre("job"));

  // Joined again: one line, the live run, in the live part of the list (sorted, before the
  // history); the EVICTED filter no longer finds it.
  JoinAll("job");
  JoinAll("new");
  const std::vector<JobStatusView> listed = coordinator_->ListJobs();
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].snapshot.job_id, "job");
  EXPECT_EQ(JobStateText(listed[0]), "RUNNING");
  EXPECT_EQ(listed[0].end.kind, JobEndKind::kLive);
  EXPECT_EQ(listed[1].snapshot.job_id, "new");
  EXPECT_EQ(listed[2].snapshot.job_id, "other");
  EXPECT_EQ(JobStateText(listed[2]), "ENDED");
  EXPECT_THAT(JobIds({"EVICTED"}), IsEmpty());
  EXPECT_THAT(JobIds({"RUNNING"}), ElementsAre("job", "new"));
  EXPECT_THAT(JobIds({"RUNNING", "EVICTED"}), ElementsAre("job", "new"));

  // The second run ends: one line again, its end, with its reason.
  ASSERT_TRUE(coordinator_->EndJob("job", "second run done", "").ok());
  EXPECT_THAT(JobIds({}), ElementsAre("new", "other", "job"));
  EXPECT_THAT(JobIds({"ENDED"}), ElementsAre("other", "job"));
  EXPECT_THAT(JobIds({"EVICTED"}), IsEmpty());
  const std::vector<JobStatusView> ended = coordinator_->ListJobs({"ENDED"});
  ASSERT_EQ(ended.size(), 2u);
  EXPECT_EQ(ended[1].end.reason, "second run done");
  EXPECT_EQ(coordinator_->GetJobStatus("job")->end.reason, "second run done");
}

TEST_F(LifecycleTest, MaxJobsCountsLiveJobsAndTheHistoryKeepsExactlyTheLastN) {
  CoordinatorOptions options;
  options.max_jobs = 2;
  options.finished_jobs_kept = 3;
  Restart(options);
  JoinAll("j0");
  JoinAll("j1");
  absl::StatusOr<core::JoinResult> refused = coordinator_->Join(DensePlan("j2", 0, 2, 1));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  for (int i = 2; i < 8; ++i) {
    const std::string ended = "j" + std::to_string(i - 2);
    ASSERT_TRUE(coordinator_->EndJob(ended, "", "").ok());
    JoinAll("j" + std::to_string(i));  // room again: ended jobs do not count
  }
  EXPECT_EQ(coordinator_->live_jobs(), 2u);
  EXPECT_THAT(JobIds({}), ElementsAre("j6", "j7", "j3", "j4", "j5"));
  EXPECT_THAT(JobIds({"ENDED"}), ElementsAre("j3", "j4", "j5"));
  EXPECT_EQ(coordinator_->GetJobStatus("j2").status().code(), absl::StatusCode::kNotFound);
  // Once out of the history the id is free again.
  EXPECT_TRUE(coordinator_->EndJob("j6", "", "").ok());
  EXPECT_TRUE(coordinator_->Join(DensePlan("j0", 0, 2, 1)).ok());
}

}  // namespace
}  // namespace psync::server

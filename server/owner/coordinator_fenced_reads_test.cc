// Coordinator: reads (status, chunk, audit, trace; the gRPC and HTTP APIs call these) follow the
// same fence as releases. A replica answers for a job only while its gate serves the job at the
// epoch its state was built at; otherwise UNAVAILABLE, with the owner's redirect when known and,
// for a job it still holds, what it last knew, named as such. NOT_FOUND only when the gate knows
// no replica owns the job. The audit adds the parts the job's earlier owners published.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "server/owner/coordinator.h"
#include "server/owner/fake_sinks.h"
#include "wire/not_served.h"

namespace psync::server {
namespace {

using ::psync::core::testing::Item;
using ::psync::server::testing::DensePlan;

// Serves every message at epoch 7; answers reads with `query` (settable).
class QueryGate final : public JobGate {
 public:
  absl::StatusOr<uint64_t> AdmitJoin(const std::string&) override { return 7; }
  absl::StatusOr<uint64_t> AdmitMessage(const std::string&) override { return 7; }
  absl::StatusOr<uint64_t> AdmitQuery(const std::string&) override { return query; }
  std::vector<std::string> EarlierOwnerAudits(const std::string&) override { return earlier; }
  void JobEnded(const std::string& job) override { ended.push_back(job); }
  absl::StatusOr<uint64_t> query = 7;
  std::vector<std::string> earlier;
  std::vector<std::string> ended;
};

class CoordinatorFencedReadsTest : public ::testing::Test {
 protected:
  CoordinatorFencedReadsTest() {
    options_.gate = &gate_;
    coordinator_ = std::make_unique<Coordinator>(options_, &clock_);
    for (core::RankId r = 0; r < 2; ++r) {
      EXPECT_TRUE(coordinator_->Join(DensePlan("job", r, 2, 1)).ok());
    }
    EXPECT_TRUE(coordinator_->Stage("job", 0, 1, {Item(0, 0, "dense")}).ok());
  }
  // Every read of `job` answers `code`; returns GetJobStatus's status.
  absl::Status ExpectEveryReadIs(const std::string& job, absl::StatusCode code) {
    absl::Duration deadline;
    EXPECT_EQ(coordinator_->GetChunkStatus(job, 0, 0, &deadline).status().code(), code);
    EXPECT_EQ(coordinator_->Audit(job).status().code(), code);
    EXPECT_EQ(coordinator_->Trace(job, 0, 10).status().code(), code);
    absl::Status status = coordinator_->GetJobStatus(job).status();
    EXPECT_EQ(status.code(), code) << status;
    return status;
  }

  serve::FakeClock clock_;
  QueryGate gate_;
  CoordinatorOptions options_;
  std::unique_ptr<Coordinator> coordinator_;
};

TEST_F(CoordinatorFencedReadsTest, ServedAtItsEpochTheJobIsAnswered) {
  ExpectEveryReadIs("job", absl::StatusCode::kOk).IgnoreError();
  EXPECT_EQ(coordinator_->GetJobStatus("job")->counters.checkins, 1u);
}

TEST_F(CoordinatorFencedReadsTest, AReplicaThatCannotTellSaysUnavailableWithWhatItLastKnew) {
  gate_.query = wire::NotServedHere(
      "replica 'a:1': this replica holds no etcd lease now: it cannot "
      "tell who owns job 'job'",
      "", 0);
  const absl::Status status = ExpectEveryReadIs("job", absl::StatusCode::kUnavailable);
  EXPECT_EQ(status.message(),
            "replica 'a:1': this replica holds no etcd lease now: it cannot tell who owns job "
            "'job' (last known here, not current: RUNNING, generation 1, ownership epoch 7)");
  ASSERT_TRUE(wire::RedirectOf(status).has_value());
  EXPECT_EQ(wire::RedirectOf(status)->owner, "");
  // A job this replica never held is not declared unknown either: it cannot tell.
  ExpectEveryReadIs("elsewhere", absl::StatusCode::kUnavailable).IgnoreError();
}

TEST_F(CoordinatorFencedReadsTest, AnotherOwnerIsARedirectNotAStaleAnswer) {
  gate_.query =
      wire::NotServedHere("job 'job' is owned by replica 'b:1' (epoch 9): connect there", "b:1", 9);
  const absl::Status status = ExpectEveryReadIs("job", absl::StatusCode::kUnavailable);
  ASSERT_TRUE(wire::RedirectOf(status).has_value());
  EXPECT_EQ(wire::RedirectOf(status)->owner, "b:1");
  EXPECT_EQ(wire::RedirectOf(status)->epoch, 9u);
}

TEST_F(CoordinatorFencedReadsTest, ServedAtAnotherEpochTheOldStateIsNotAnswered) {
  gate_.query = uint64_t{8};  // the job was lost and claimed again here; this state is epoch 7's
  const absl::Status status = ExpectEveryReadIs("job", absl::StatusCode::kUnavailable);
  EXPECT_NE(status.message().find("changed owner"), absl::string_view::npos) << status;
}

TEST_F(CoordinatorFencedReadsTest, NotFoundOnlyWhenNoReplicaOwnsTheJob) {
  gate_.query = absl::NotFoundError("job 'elsewhere' is not owned by any replica");
  ExpectEveryReadIs("elsewhere", absl::StatusCode::kNotFound).IgnoreError();
}

TEST_F(CoordinatorFencedReadsTest, TheEarlierOwnersPartsAreAnsweredAndKeptWhenTheJobEnds) {
  gate_.earlier = {"a's part"};
  std::vector<std::string> earlier;
  ASSERT_TRUE(coordinator_->Audit("job", &earlier).ok());
  EXPECT_EQ(earlier, std::vector<std::string>{"a's part"});
  // What this replica publishes as its own part: only at the epoch it holds the job at.
  EXPECT_TRUE(coordinator_->AuditTotalsAt("job", 7).has_value());
  EXPECT_FALSE(coordinator_->AuditTotalsAt("job", 8).has_value());

  ASSERT_TRUE(coordinator_->EndJob("job", "done", "").ok());
  EXPECT_EQ(gate_.ended, std::vector<std::string>{"job"});
  gate_.earlier.clear();  // the gate forgot them (deleted from etcd)
  earlier.clear();
  ASSERT_TRUE(coordinator_->Audit("job", &earlier).ok());
  EXPECT_EQ(earlier, std::vector<std::string>{"a's part"});  // the history kept them
  EXPECT_FALSE(coordinator_->AuditTotalsAt("job", 7).has_value());
}

// Serves every message at epoch 7 until `Refuse`; the first message admitted after `HoldNext`
// waits inside its admission (the job's lock held, as a check-in that passed the fence just before
// the replica gave the job up) until `Let go`.
class HoldingGate final : public JobGate {
 public:
  absl::StatusOr<uint64_t> AdmitJoin(const std::string&) override { return 7; }
  absl::StatusOr<uint64_t> AdmitMessage(const std::string&) override {
    if (refused_) return wire::NotServedHere("replica 'a:1' stopped serving job 'job'", "", 0);
    if (hold_.exchange(false)) {
      held.Notify();
      let_go.WaitForNotification();
    }
    return 7;
  }
  absl::StatusOr<uint64_t> AdmitQuery(const std::string&) override { return 7; }
  void HoldNext() { hold_ = true; }
  void Refuse() { refused_ = true; }
  absl::Notification held;
  absl::Notification let_go;

 private:
  std::atomic<bool> hold_{false};
  std::atomic<bool> refused_{false};
};

TEST(CoordinatorLastWordTest, CountsTheReleaseOfAMessageAdmittedBeforeTheJobWasGivenUp) {
  serve::FakeClock clock;
  HoldingGate gate;
  CoordinatorOptions options;
  options.gate = &gate;
  Coordinator coordinator(options, &clock);
  for (core::RankId r = 0; r < 2; ++r)
    ASSERT_TRUE(coordinator.Join(DensePlan("job", r, 2, 1)).ok());
  ASSERT_TRUE(coordinator.Stage("job", 0, 1, {Item(0, 0, "dense")}).ok());

  gate.HoldNext();
  std::thread last_checkin([&] {
    // Completes (step 0, chunk 0): released by this coordinator, admitted before the refusal.
    EXPECT_TRUE(coordinator.Stage("job", 1, 1, {Item(0, 0, "dense")}).ok());
  });
  gate.held.WaitForNotification();
  gate.Refuse();  // the replica gave the job up: its last word is read now
  std::optional<observe::AuditTotals> last_word;
  absl::Notification read;
  std::thread reader([&] {
    last_word = coordinator.AuditTotalsAt("job", 7);
    read.Notify();
  });
  // The read waits for the message being applied: it cannot answer while it is held.
  EXPECT_FALSE(read.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  gate.let_go.Notify();
  last_checkin.join();
  reader.join();
  ASSERT_TRUE(last_word.has_value());
  EXPECT_EQ(last_word->released, 1u);
  // Nothing is decided here any more.
  EXPECT_EQ(coordinator.Stage("job", 0, 1, {Item(1, 0, "dense")}).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(coordinator.AuditTotalsAt("job", 7)->released, 1u);
}

}  // namespace
}  // namespace psync::server

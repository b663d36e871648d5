#include "worker/async_link.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

// Records reports; the report named `fail_on` is refused; reports block while `gate` is closed
// (`entered` is notified when the first report reaches the link).
class RecordingLink final : public CoordinatorLink {
 public:
  absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer) override {
    return Record(absl::StrCat("staged ", step, " ", chunk, " ", optimizer));
  }
  absl::Status ReportStagedBatch(const std::vector<psync::v1::Staged>& items) override {
    std::string what = "batch";
    for (const psync::v1::Staged& item : items) {
      absl::StrAppend(&what, " [", item.step(), " ", item.chunk(), " ", item.optimizer(), "]");
    }
    return Record(what);
  }
  absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                              std::vector<psync::v1::GroupChecksum> checksums,
                              uint32_t executions) override {
    return Record(
        absl::StrCat("done ", step, " ", chunk, " x", executions, " c", checksums.size()));
  }
  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Duration) override {
    Record(absl::StrCat("wait ", step, " ", chunk)).IgnoreError();
    if (!directive_status.ok()) return directive_status;
    psync::v1::SyncDirective d;
    d.set_step(step);
    d.set_chunk(chunk);
    return d;
  }

  std::vector<std::string> log() {
    absl::MutexLock lock(&mu_);
    return log_;
  }

  std::string fail_on;
  absl::Status directive_status = absl::OkStatus();
  absl::Notification gate;
  absl::Notification entered;

 private:
  absl::Status Record(std::string what) {
    {
      absl::MutexLock lock(&mu_);
      if (!entered.HasBeenNotified()) entered.Notify();
    }
    gate.WaitForNotification();
    absl::MutexLock lock(&mu_);
    log_.push_back(what);
    if (what == fail_on) return absl::FailedPreconditionError("refused");
    return absl::OkStatus();
  }

  absl::Mutex mu_;
  std::vector<std::string> log_ ABSL_GUARDED_BY(mu_);
};

TEST(AsyncLinkTest, ReportsReturnAtOnceAndAreSentInOrder) {
  RecordingLink inner;
  AsyncLink link(&inner);
  // The wrapped link blocks, yet the reports return.
  EXPECT_TRUE(link.ReportStaged(0, 0, "dense").ok());
  inner.entered.WaitForNotification();  // the sender holds the first check-in
  EXPECT_TRUE(link.ReportStaged(0, 1, "dense").ok());
  EXPECT_TRUE(link.ReportStaged(0, 0, "expert").ok());
  EXPECT_TRUE(link.ReportStaged(0, 1, "expert").ok());
  psync::v1::GroupChecksum checksum;
  checksum.set_group("dp");
  EXPECT_TRUE(link.ReportSyncDone(0, 0, {checksum}, 1).ok());
  EXPECT_TRUE(link.ReportStaged(1, 0, "dense").ok());
  inner.gate.Notify();
  EXPECT_TRUE(link.Flush().ok());
  // The check-ins queued behind the first one went out as one batch; the SyncDone is not merged
  // and the check-in after it is not moved before it.
  EXPECT_EQ(inner.log(),
            (std::vector<std::string>{"staged 0 0 dense",
                                      "batch [0 1 dense] [0 0 expert] [0 1 expert]",
                                      "done 0 0 x1 c1", "staged 1 0 dense"}));
}

TEST(AsyncLinkTest, TheFirstRefusalIsReturnedFromThenOn) {
  RecordingLink inner;
  inner.fail_on = "staged 0 1 dense";
  AsyncLink link(&inner);
  EXPECT_TRUE(link.ReportStaged(0, 0, "dense").ok());
  inner.entered.WaitForNotification();
  EXPECT_TRUE(link.ReportStaged(0, 1, "dense").ok());
  inner.gate.Notify();
  const absl::Status flushed = link.Flush();
  EXPECT_EQ(flushed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(flushed.message().find("Staged of step 0 chunk 1 dense: refused"), std::string::npos)
      << flushed;
  EXPECT_EQ(link.ReportStaged(0, 2, "dense").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(link.WaitForDirective(0, 0, absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Nothing after the refusal was sent.
  EXPECT_EQ(inner.log().size(), 2u);
}

TEST(AsyncLinkTest, WaitForDirectivePassesThrough) {
  RecordingLink inner;
  inner.gate.Notify();
  AsyncLink link(&inner);
  absl::StatusOr<psync::v1::SyncDirective> d = link.WaitForDirective(3, 1, absl::Seconds(1));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->step(), 3u);
  inner.directive_status = absl::DeadlineExceededError("late");
  EXPECT_EQ(link.WaitForDirective(3, 2, absl::Seconds(1)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(AsyncLinkTest, DestructorDeliversWhatIsQueued) {
  RecordingLink inner;
  {
    AsyncLink link(&inner);
    EXPECT_TRUE(link.ReportStaged(0, 0, "dense").ok());
    inner.gate.Notify();
  }
  EXPECT_EQ(inner.log(), (std::vector<std::string>{"staged 0 0 dense"}));
}

}  // namespace
}  // namespace worker
}  // namespace psync

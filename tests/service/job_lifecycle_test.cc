// Thousands of short jobs, one after another, through one coordinator over real gRPC: half end by
// EndJob, half are abandoned and evicted after --job_idle_ttl. Every job is accepted (live jobs,
// not every job ever seen, count against --max_jobs), the live job map empties, the history holds
// exactly the last --finished_jobs_kept jobs with their final state, and the process's memory
// stays flat from the first thousand jobs on. Time is a FakeClock: eviction is exact.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync::testing {
namespace {

// --config=tsan undefines __SANITIZE_THREAD__ (see .bazelrc) and defines _GLIBCXX_TSAN.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || defined(_GLIBCXX_TSAN)
// Sanitizers keep freed memory in quarantine or shadow (RSS says nothing) and run ~10x slower.
constexpr int kJobs = 1000;
constexpr bool kCheckMemory = false;
#else
constexpr int kJobs = 5000;
constexpr bool kCheckMemory = true;
#endif
constexpr int kKept = 256;
constexpr int kSteps = 3;

// Resident set size of this process in KiB (/proc/self/status VmRSS).
int64_t RssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      int64_t kib = 0;
      std::string number = line.substr(6);
      number.erase(number.find("kB"));
      if (absl::SimpleAtoi(number, &kib)) return kib;
    }
  }
  return -1;
}

class JobLifecycleTest : public ServiceFixture {
 protected:
  void SetUp() override {
    server::CoordinatorOptions options;
    options.max_jobs = 8;
    options.finished_jobs_kept = kKept;
    options.job_idle_ttl = absl::Minutes(1);
    options.event_log_capacity = 4096;  // full after a few hundred jobs: flat from then on
    StartServer(options);
  }

  grpc::Status EndJob(const std::string& job, const std::string& reason) {
    grpc::ClientContext context;
    v1::EndJobRequest request;
    request.set_job_id(job);
    request.set_reason(reason);
    v1::EndJobResponse response;
    return stub_->EndJob(&context, request, &response);
  }

  std::vector<v1::JobSummary> ListJobs(std::vector<std::string> states) {
    grpc::ClientContext context;
    v1::ListJobsRequest request;
    for (const std::string& s : states) request.add_states(s);
    v1::ListJobsResponse response;
    grpc::Status s = stub_->ListJobs(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return {response.jobs().begin(), response.jobs().end()};
  }

  // One job of 2 ranks and 1 chunk runs kSteps steps, then ends (EndJob) or is abandoned (its
  // sessions end, the clock passes the idle TTL, the inspector evicts it). False on a failure.
  bool RunJob(int index) {
    const std::string job = absl::StrFormat("job-%05d", index);
    std::vector<std::unique_ptr<RawSession>> ranks;
    uint64_t generation = 0;
    for (uint32_t r = 0; r < 2; ++r) {
      v1::JoinResponse joined;
      ranks.push_back(JoinAndAttach(MakeJoin(job, 2, r, 1), &joined));
      generation = joined.generation();
    }
    for (uint64_t step = 0; step < kSteps; ++step) {
      for (auto& rank : ranks) {
        grpc::Status s = rank->Stage(generation, step, 0, "dense");
        if (!s.ok()) return ADD_FAILURE() << job << " stage: " << s.error_message(), false;
      }
      for (auto& rank : ranks) {
        v1::SessionDown notice;
        if (!rank->ReadNotice(&notice) || notice.directive().step() != step) {
          return ADD_FAILURE() << job << ": no directive for step " << step, false;
        }
        grpc::Status s = rank->SyncDone(generation, step, 0);
        if (!s.ok()) return ADD_FAILURE() << job << " sync_done: " << s.error_message(), false;
      }
    }
    if (index % 2 == 0) {
      grpc::Status s = EndJob(job, "training complete");
      if (!s.ok()) return ADD_FAILURE() << job << " EndJob: " << s.error_message(), false;
      for (auto& rank : ranks) {
        // The coordinator ended the stream, naming the job as ended.
        grpc::Status end = rank->Finish();
        if (end.error_code() != grpc::StatusCode::FAILED_PRECONDITION) {
          return ADD_FAILURE() << job << " session end: " << end.error_message(), false;
        }
      }
    } else {
      for (auto& rank : ranks) {
        if (grpc::Status end = rank->Finish(); !end.ok()) {
          return ADD_FAILURE() << job << " session end: " << end.error_message(), false;
        }
      }
      clock_.Advance(absl::Seconds(61));
      server_->coordinator().EnforceLiveness();
    }
    return true;
  }
};

TEST_F(JobLifecycleTest, ThousandsOfShortJobsEndOrAreEvictedAndOnlyTheLastNAreKept) {
  int64_t rss_after_warmup = 0;
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(RunJob(i)) << "job " << i;
    // The job left: nothing live accumulates.
    ASSERT_EQ(server_->coordinator().live_jobs(), 0u) << "after job " << i;
    if (i + 1 == 1000) rss_after_warmup = RssKiB();
  }
  const int64_t rss_end = RssKiB();

  EXPECT_THAT(ListJobs({"FORMING", "RUNNING", "DEGRADED", "ABORTED"}), ::testing::IsEmpty());
  const std::vector<v1::JobSummary> finished = ListJobs({});
  ASSERT_EQ(finished.size(), static_cast<size_t>(kKept));
  for (int k = 0; k < kKept; ++k) {
    const int index = kJobs - kKept + k;
    EXPECT_EQ(finished[k].job_id(), absl::StrFormat("job-%05d", index));
    EXPECT_EQ(finished[k].state(), index % 2 == 0 ? "ENDED" : "EVICTED");
    EXPECT_EQ(finished[k].end_reason(),
              index % 2 == 0 ? "training complete"
                             : "no session and no message for 1m1s (job_idle_ttl 1m)");
  }
  EXPECT_EQ(ListJobs({"ENDED"}).size(), static_cast<size_t>(kKept / 2));
  // The final status of a kept job answers with its counters; an older one is forgotten.
  const v1::JobStatus last = JobStatus(absl::StrFormat("job-%05d", kJobs - 1));
  EXPECT_EQ(last.counters().releases(), static_cast<uint64_t>(kSteps));
  EXPECT_EQ(last.counters().syncs_done(), static_cast<uint64_t>(2 * kSteps));
  grpc::ClientContext context;
  v1::GetJobStatusRequest forgotten;
  forgotten.set_job_id("job-00000");
  v1::JobStatus ignored;
  EXPECT_EQ(stub_->GetJobStatus(&context, forgotten, &ignored).error_code(),
            grpc::StatusCode::NOT_FOUND);

  if (kCheckMemory) {
    // 4,000 jobs after the first 1,000: a leak of 1 KiB per job would show as 4 MiB.
    RecordProperty("rss_after_1000_jobs_kib", rss_after_warmup);
    RecordProperty("rss_end_kib", rss_end);
    EXPECT_LT(rss_end - rss_after_warmup, 2048)
        << "RSS after 1000 jobs " << rss_after_warmup << " KiB, after " << kJobs << ": " << rss_end;
  }
}

// ListJobs over gRPC: an evicted job joined again is one line, its live run; `states` names any
// case; an unknown name is INVALID_ARGUMENT naming the entry and the allowed values.
TEST_F(JobLifecycleTest, ListJobsNamesAJobOnceAndReadsStatesInAnyCase) {
  ASSERT_TRUE(RunJob(0));  // ends: job-00000 ENDED
  ASSERT_TRUE(RunJob(1));  // evicted: job-00001 EVICTED
  v1::JoinResponse joined;
  std::vector<std::unique_ptr<RawSession>> ranks;
  for (uint32_t r = 0; r < 2; ++r) {
    ranks.push_back(JoinAndAttach(MakeJoin("job-00001", 2, r, 1), &joined));
  }
  auto ids_and_states = [](const std::vector<v1::JobSummary>& jobs) {
    std::vector<std::string> out;
    for (const v1::JobSummary& job : jobs) out.push_back(job.job_id() + " " + job.state());
    return out;
  };
  EXPECT_THAT(ids_and_states(ListJobs({})),
              ::testing::ElementsAre("job-00001 RUNNING", "job-00000 ENDED"));
  EXPECT_THAT(ListJobs({"EVICTED"}), ::testing::IsEmpty());
  EXPECT_THAT(ids_and_states(ListJobs({"running"})), ::testing::ElementsAre("job-00001 RUNNING"));
  EXPECT_THAT(ids_and_states(ListJobs({"Ended", "rUnNiNg"})),
              ::testing::ElementsAre("job-00001 RUNNING", "job-00000 ENDED"));
  EXPECT_THAT(ListJobs({"evicted", "forming"}), ::testing::IsEmpty());

  for (const char* bad : {"DONE", "run", "RUNNING "}) {
    grpc::ClientContext context;
    v1::ListJobsRequest request;
    request.add_states("ended");
    request.add_states(bad);
    v1::ListJobsResponse response;
    const grpc::Status refused = stub_->ListJobs(&context, request, &response);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_EQ(refused.error_message(),
              absl::StrCat("states[1]: '", bad,
                           "' is not a job state (FORMING, RUNNING, DEGRADED, ABORTED, ENDED, "
                           "EVICTED, in any case)"));
    EXPECT_EQ(response.jobs_size(), 0);
  }
}

}  // namespace
}  // namespace psync::testing

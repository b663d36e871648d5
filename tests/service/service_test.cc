// The service over real gRPC: a full step end to end, exactly-once delivery, status reporting, and
// isolation between jobs.
#include <memory>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync::testing {
namespace {

using ::testing::HasSubstr;

class ServiceTest : public ServiceFixture {
 protected:
  v1::JoinResponse Join(const v1::JoinRequest& request) {
    grpc::ClientContext context;
    v1::JoinResponse response;
    grpc::Status s = stub_->Join(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  std::unique_ptr<RawSession> Attach(const std::string& job, uint32_t rank,
                                     const v1::JoinResponse& joined) {
    auto session = std::make_unique<RawSession>(stub_.get());
    grpc::Status s = session->Attach(job, rank, joined.generation(), joined.session_id());
    EXPECT_TRUE(s.ok()) << s.error_message();
    return session;
  }

  v1::JobStatus Status(const std::string& job) { return JobStatus(job); }
};

TEST_F(ServiceTest, ChunkIsReleasedOnceToEveryMemberAfterAllContributors) {
  v1::JoinResponse j0 = Join(MakeJoin("j", 2, 0, 1, {0}, 2));
  v1::JoinResponse j1 = Join(MakeJoin("j", 2, 1, 1, {0}, 2));
  ASSERT_EQ(j0.generation(), j1.generation());
  auto s0 = Attach("j", 0, j0);
  auto s1 = Attach("j", 1, j1);

  ASSERT_TRUE(s0->Stage(j0.generation(), 0, 0, "dense").ok());
  ASSERT_TRUE(s0->Stage(j0.generation(), 0, 0, "expert").ok());
  ASSERT_TRUE(s1->Stage(j1.generation(), 0, 0, "dense").ok());
  clock_.Advance(absl::Milliseconds(3));
  v1::JobStatus waiting = Status("j");
  ASSERT_EQ(waiting.chunks_size(), 1);
  EXPECT_EQ(waiting.chunks(0).state(), "WAITING");
  ASSERT_EQ(waiting.chunks(0).missing_size(), 1);
  EXPECT_EQ(waiting.chunks(0).missing(0).rank(), 1u);
  EXPECT_EQ(waiting.chunks(0).missing(0).optimizer(), "expert");
  EXPECT_EQ(waiting.chunks(0).waiting_micros(), 3000);
  EXPECT_TRUE(s0->notices().empty()) << "no directive before the last contributor";

  ASSERT_TRUE(s1->Stage(j1.generation(), 0, 0, "expert").ok());
  for (RawSession* s : {s0.get(), s1.get()}) {
    v1::SessionDown notice;
    ASSERT_TRUE(s->ReadNotice(&notice));
    ASSERT_TRUE(notice.has_directive());
    EXPECT_EQ(notice.directive().step(), 0u);
    EXPECT_EQ(notice.directive().chunk(), 0u);
    EXPECT_EQ(notice.directive().sequence(), 1u);
    EXPECT_EQ(notice.directive().last_rank(), 1u);
    EXPECT_EQ(notice.directive().last_optimizer(), "expert");
    EXPECT_EQ(notice.directive().wait_micros(), 3000);
    EXPECT_EQ(notice.directive().released_unix_micros(), absl::ToUnixMicros(clock_.Now()));
  }
  // A duplicate after release is answered OK and releases nothing more.
  ASSERT_TRUE(s1->Stage(j1.generation(), 0, 0, "expert").ok());
  EXPECT_EQ(Status("j").counters().releases(), 1u);

  ASSERT_TRUE(s0->SyncDone(j0.generation(), 0, 0).ok());
  ASSERT_TRUE(s1->SyncDone(j1.generation(), 0, 0).ok());
  v1::JobStatus done = Status("j");
  EXPECT_EQ(done.min_rank_step(), 1u);
  EXPECT_EQ(done.chunks(0).step(), 1u);
  EXPECT_EQ(done.chunks(0).state(), "IDLE");
  EXPECT_EQ(done.counters().checkins(), 4u);
  EXPECT_EQ(done.counters().duplicate_checkins(), 1u);
  EXPECT_EQ(done.counters().syncs_done(), 2u);
  EXPECT_EQ(done.counters().violations(), 0u);

  EXPECT_TRUE(s0->Finish().ok());
  EXPECT_TRUE(s1->Finish().ok());
  // Exactly one directive per rank for the whole run.
  EXPECT_EQ(s0->notices().size(), 1u);
  EXPECT_EQ(s1->notices().size(), 1u);
}

TEST_F(ServiceTest, ReattachingRankReceivesItsPendingDirective) {
  v1::JoinResponse j0 = Join(MakeJoin("j", 2, 0, 1));
  v1::JoinResponse j1 = Join(MakeJoin("j", 2, 1, 1));
  auto s0 = Attach("j", 0, j0);
  ASSERT_TRUE(s0->Stage(j0.generation(), 0, 0, "dense").ok());
  {
    auto s1 = Attach("j", 1, j1);
    ASSERT_TRUE(s1->Stage(j1.generation(), 0, 0, "dense").ok());
    EXPECT_TRUE(s1->Finish().ok());  // leaves before reporting SyncDone
  }
  // The same incarnation joins again (a reconnect) and attaches: the directive is re-sent once.
  v1::JoinResponse again = Join(MakeJoin("j", 2, 1, 1));
  EXPECT_EQ(again.generation(), j1.generation());
  EXPECT_EQ(again.session_id(), j1.session_id());
  auto s1 = Attach("j", 1, again);
  v1::SessionDown notice;
  ASSERT_TRUE(s1->ReadNotice(&notice));
  ASSERT_TRUE(notice.has_directive());
  EXPECT_EQ(notice.directive().sequence(), 1u);
  ASSERT_TRUE(s1->SyncDone(j1.generation(), 0, 0).ok());
  EXPECT_EQ(Status("j").counters().releases(), 1u);
}

TEST_F(ServiceTest, RestartedRankStartsANewGenerationAndOthersAreAborted) {
  v1::JoinResponse j0 = Join(MakeJoin("j", 2, 0, 1));
  v1::JoinResponse j1 = Join(MakeJoin("j", 2, 1, 1));
  auto s0 = Attach("j", 0, j0);
  v1::JoinRequest restarted = MakeJoin("j", 2, 1, 1);
  restarted.set_incarnation("inc-1-after-restart");
  v1::JoinResponse j1b = Join(restarted);
  EXPECT_EQ(j1b.generation(), j0.generation() + 1);
  v1::SessionDown notice;
  ASSERT_TRUE(s0->ReadNotice(&notice));
  ASSERT_TRUE(notice.has_abort());
  EXPECT_EQ(notice.abort().generation(), j0.generation());
  EXPECT_THAT(notice.abort().reason(), HasSubstr("rank 1 restarted"));
  grpc::Status stale = s0->Stage(j0.generation(), 0, 0, "dense");
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(Status("j").state(), "FORMING");
}

TEST_F(ServiceTest, JobsAreIsolated) {
  v1::JoinResponse a0 = Join(MakeJoin("a", 2, 0, 1));
  v1::JoinResponse a1 = Join(MakeJoin("a", 2, 1, 1));
  v1::JoinResponse b0 = Join(MakeJoin("b", 2, 0, 1));
  v1::JoinResponse b1 = Join(MakeJoin("b", 2, 1, 1));
  auto sa0 = Attach("a", 0, a0);
  auto sa1 = Attach("a", 1, a1);
  auto sb0 = Attach("b", 0, b0);
  ASSERT_TRUE(sa0->Stage(a0.generation(), 0, 0, "dense").ok());
  ASSERT_TRUE(sb0->Stage(b0.generation(), 0, 0, "dense").ok());
  // Rank 1 of job a completes job a's chunk; job b still waits for its rank 1.
  ASSERT_TRUE(sa1->Stage(a1.generation(), 0, 0, "dense").ok());
  EXPECT_EQ(Status("a").counters().releases(), 1u);
  EXPECT_EQ(Status("b").counters().releases(), 0u);
  EXPECT_EQ(Status("b").chunks(0).missing_size(), 1);
  // Bad input in job b does not touch job a.
  EXPECT_EQ(sb0->Stage(b0.generation(), 0, 5, "dense").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Status("a").counters().rejected(), 0u);
  EXPECT_EQ(Status("b").counters().rejected(), 1u);

  grpc::ClientContext context;
  v1::ListJobsResponse jobs;
  ASSERT_TRUE(stub_->ListJobs(&context, v1::ListJobsRequest(), &jobs).ok());
  ASSERT_EQ(jobs.jobs_size(), 2);
  EXPECT_EQ(jobs.jobs(0).job_id(), "a");
  EXPECT_EQ(jobs.jobs(1).job_id(), "b");
  EXPECT_EQ(jobs.jobs(0).state(), "RUNNING");
}

TEST_F(ServiceTest, KvGetWaitsForTheKeyOverGrpc) {
  v1::JoinResponse j0 = Join(MakeJoin("j", 2, 0, 1));
  // A parked KvGet (async) completes when another caller sets the key.
  grpc::ClientContext get_context;
  get_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  const v1::KvGetRequest get = MakeKvGet("j", j0.generation(), "nccl/dp", /*wait=*/true);
  v1::KvGetResponse got;
  grpc::Status get_status;
  absl::Notification got_it;
  stub_->async()->KvGet(&get_context, &get, &got, [&](grpc::Status s) {
    get_status = s;
    got_it.Notify();
  });
  grpc::ClientContext set_context;
  v1::KvSetRequest set = MakeKvSet("j", j0.generation(), "nccl/dp", "unique-id-bytes");
  v1::KvSetResponse set_response;
  ASSERT_TRUE(stub_->KvSet(&set_context, set, &set_response).ok());
  got_it.WaitForNotification();
  ASSERT_TRUE(get_status.ok()) << get_status.error_message();
  ASSERT_EQ(got.values_size(), 1);
  EXPECT_EQ(got.values(0), "unique-id-bytes");

  // A stale generation is refused.
  grpc::ClientContext stale_context;
  set.set_generation(j0.generation() + 1);
  grpc::Status stale = stub_->KvSet(&stale_context, set, &set_response);
  EXPECT_EQ(stale.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
}

// A rendezvous call for a job that has ended is refused and counted as a rejection, like every
// other late message of an ended job (docs/reliability.md, "Job lifecycle").
TEST_F(ServiceTest, ARendezvousCallForAnEndedJobIsRefusedAndCounted) {
  v1::JoinResponse j0 = Join(MakeJoin("j", 1, 0, 1));
  {
    grpc::ClientContext context;
    v1::EndJobRequest request;
    request.set_job_id("j");
    v1::EndJobResponse response;
    ASSERT_TRUE(stub_->EndJob(&context, request, &response).ok());
  }
  auto rejections = [&] {
    uint64_t next = 0;
    size_t n = 0;
    for (const core::Event& e : server_->coordinator().EventsSince(0, &next)) {
      n += e.kind == core::EventKind::kRejected && e.job_id.str() == "j";
    }
    return n;
  };
  const size_t before = rejections();
  grpc::ClientContext context;
  v1::KvSetResponse response;
  const grpc::Status late =
      stub_->KvSet(&context, MakeKvSet("j", j0.generation(), "nccl/dp", "x"), &response);
  EXPECT_EQ(late.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(late.error_message(), "has ended")) << late.error_message();
  EXPECT_EQ(rejections(), before + 1);
}

TEST_F(ServiceTest, KvGetWaitEndsAtTheCallDeadline) {
  v1::JoinResponse j0 = Join(MakeJoin("j", 2, 0, 1));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  const v1::KvGetRequest get = MakeKvGet("j", j0.generation(), "never", /*wait=*/true);
  v1::KvGetResponse got;
  EXPECT_EQ(stub_->KvGet(&context, get, &got).error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_F(ServiceTest, HealthServiceReportsServing) {
  grpc::ClientContext context;
  grpc::GenericStub generic(channel_);
  // The default health service answers on grpc.health.v1.Health/Check; an empty request asks for
  // the server's overall health. Serialized HealthCheckResponse{status: SERVING} is 0x08 0x01.
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                    &response, [&](grpc::Status s) {
                      status = s;
                      done.Notify();
                    });
  done.WaitForNotification();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));
}

}  // namespace
}  // namespace psync::testing

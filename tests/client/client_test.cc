// Tests of psync::Client against a real coordinator (in-process gRPC server on a free port), and,
// for reconnects, through a TCP proxy that can break the connection.
#include "client/client.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/testing/tcp_proxy.h"
#include "client/testing/wait_until.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/test_server.h"

namespace psync {
namespace {

using ::psync::server::TestServer;
using ::psync::testing::TcpProxy;

// Every rank stages `optimizers` for every chunk and syncs every chunk in group "dp" (all ranks).
psync::v1::JoinRequest DensePlan(const std::string& job, uint32_t world_size, uint32_t rank,
                                 uint32_t num_chunks,
                                 const std::vector<std::string>& optimizers = {"dense"}) {
  psync::v1::JoinRequest plan;
  plan.set_job_id(job);
  plan.set_world_size(world_size);
  plan.set_rank(rank);
  plan.set_num_chunks(num_chunks);
  for (uint32_t c = 0; c < num_chunks; ++c) {
    psync::v1::ChunkPlan* chunk = plan.add_chunks();
    chunk->set_chunk(c);
    for (const std::string& o : optimizers) chunk->add_optimizers(o);
    psync::v1::SyncGroup* group = chunk->add_groups();
    group->set_name("dp");
    for (uint32_t r = 0; r < world_size; ++r) group->add_ranks(r);
  }
  return plan;
}

std::vector<psync::v1::GroupChecksum> DpChecksum(uint64_t value) {
  psync::v1::GroupChecksum c;
  c.set_group("dp");
  c.set_checksum(value);
  return {c};
}

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  ClientOptions Options(psync::v1::JoinRequest plan, const std::string& target = "") {
    ClientOptions options;
    options.target = target.empty() ? server_->target() : target;
    options.plan = std::move(plan);
    options.call_timeout = absl::Seconds(10);
    // A ping unanswered for 2 s (the default) on a starved host would break a healthy Session and
    // add a reconnect the tests count; the keepalive test sets its own.
    options.keepalive = absl::Seconds(10);
    return options;
  }

  std::unique_ptr<Client> MustConnect(ClientOptions options) {
    auto client = Client::Connect(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::unique_ptr<TestServer> server_;
};

TEST_F(ClientTest, ConnectJoinsAndAttaches) {
  psync::v1::JoinRequest plan = DensePlan("connect", 1, 0, 1);
  plan.set_first_step(7);
  auto client = MustConnect(Options(plan));
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->generation(), 1u);
  EXPECT_EQ(client->next_step(), 7u);
  EXPECT_FALSE(client->session_id().empty());
  EXPECT_EQ(client->incarnation().size(), 32u);  // filled in with a random id
  EXPECT_TRUE(client->connected());
  EXPECT_EQ(client->rank(), 0u);
  EXPECT_EQ(client->job_id(), "connect");
}

TEST_F(ClientTest, ConnectPassesJoinErrorsThrough) {
  psync::v1::JoinRequest plan = DensePlan("bad", 2, 0, 1);
  plan.set_world_size(0);
  auto client = Client::Connect(Options(plan));
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << client.status();

  ClientOptions options = Options(DensePlan("bad", 1, 0, 1));
  options.target.clear();
  EXPECT_EQ(Client::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Options(DensePlan("bad", 1, 0, 1));
  options.call_timeout = absl::ZeroDuration();
  EXPECT_EQ(Client::Connect(options).status().code(), absl::StatusCode::kInvalidArgument);
}

// Finish is Leave{finished} plus Close: once both ranks finished the job has ended, and a client
// of an ended job gets the coordinator's FAILED_PRECONDITION naming it as ended.
TEST_F(ClientTest, FinishOfEveryRankEndsTheJob) {
  auto a = MustConnect(Options(DensePlan("finish", 2, 0, 1)));
  auto b = MustConnect(Options(DensePlan("finish", 2, 1, 1)));
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_TRUE(a->Finish().ok());
  EXPECT_EQ(a->ReportStaged(0, 0, "dense").code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(b->Finish().ok());
  absl::StatusOr<server::JobStatusView> view = server_->coordinator().GetJobStatus("finish");
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(server::JobStateText(*view), "ENDED");
  auto late = Client::Connect(Options(DensePlan("finish", 2, 0, 1)));
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(late.status().message()),
              ::testing::HasSubstr("job_id 'finish' has ended"));
}

TEST_F(ClientTest, ConnectToNothingIsUnavailable) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  (*proxy)->SetRefusing(true);
  ClientOptions options = Options(DensePlan("nothing", 1, 0, 1), (*proxy)->target());
  options.call_timeout = absl::Milliseconds(300);
  auto client = Client::Connect(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable) << client.status();
}

TEST_F(ClientTest, StagedReleasesTheDirectiveExactlyOnce) {
  auto client = MustConnect(Options(DensePlan("once", 1, 0, 2, {"dense", "expert"})));
  ASSERT_NE(client, nullptr);
  std::vector<psync::v1::SessionDown> seen;
  absl::Mutex seen_mu;
  client->SetNoticeHandler([&](const psync::v1::SessionDown& down) {
    absl::MutexLock lock(&seen_mu);
    seen.push_back(down);
  });

  EXPECT_TRUE(client->ReportStaged(0, 0, "dense", 0x1234).ok());
  // Chunk 0 still misses its expert optimizer.
  EXPECT_EQ(client->WaitForDirective(0, 0, absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  std::vector<psync::v1::Staged> batch(3);
  batch[0].set_step(0), batch[0].set_chunk(0), batch[0].set_optimizer("expert");
  batch[1].set_step(0), batch[1].set_chunk(1), batch[1].set_optimizer("dense");
  batch[2].set_step(0), batch[2].set_chunk(1), batch[2].set_optimizer("expert");
  ASSERT_TRUE(client->ReportStagedBatch(batch).ok());

  absl::StatusOr<psync::v1::SyncDirective> d0 = client->WaitForDirective(0, 0, absl::Seconds(10));
  ASSERT_TRUE(d0.ok()) << d0.status();
  EXPECT_EQ(d0->generation(), 1u);
  EXPECT_EQ(d0->step(), 0u);
  EXPECT_EQ(d0->chunk(), 0u);
  EXPECT_EQ(d0->last_optimizer(), "expert");
  absl::StatusOr<psync::v1::SyncDirective> d1 = client->WaitForDirective(0, 1, absl::Seconds(10));
  ASSERT_TRUE(d1.ok()) << d1.status();
  EXPECT_NE(d0->sequence(), d1->sequence());
  // Handed out once.
  EXPECT_EQ(client->WaitForDirective(0, 0, absl::Milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  // An identical repeat of a check-in is answered OK and releases nothing again.
  EXPECT_TRUE(client->ReportStaged(0, 0, "dense", 0x1234).ok());
  EXPECT_TRUE(client->ReportSyncDone(0, 0, DpChecksum(42)).ok());
  EXPECT_TRUE(client->ReportSyncDone(0, 1, DpChecksum(43)).ok());
  EXPECT_TRUE(client->ReportSyncDone(0, 1, DpChecksum(43)).ok());  // duplicate: same decision

  const ClientStats stats = client->stats();
  EXPECT_EQ(stats.directives_received, 2u);
  EXPECT_EQ(stats.duplicate_directives_dropped, 0u);
  absl::MutexLock lock(&seen_mu);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen[0].has_directive());
  EXPECT_TRUE(seen[1].has_directive());
}

// Collects the statuses AckCallbacks are called with, and on which thread.
class AckLog {
 public:
  AckCallback Callback() {
    return [this](absl::Status status) {
      absl::MutexLock lock(&mu_);
      statuses_.push_back(std::move(status));
      threads_.push_back(std::this_thread::get_id());
    };
  }
  // Waits until `n` callbacks ran; returns their statuses in order.
  std::vector<absl::Status> Await(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return statuses_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return statuses_;
  }
  std::vector<std::thread::id> threads() {
    absl::MutexLock lock(&mu_);
    return threads_;
  }

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> statuses_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ClientTest, AsynchronousCallsAnswerThroughTheirCallbacks) {
  auto client = MustConnect(Options(DensePlan("async", 1, 0, 2, {"dense", "expert"})));
  ASSERT_NE(client, nullptr);
  AckLog log;
  auto staged = [](uint64_t step, uint32_t chunk, const std::string& optimizer) {
    psync::v1::Staged s;
    s.set_step(step);
    s.set_chunk(chunk);
    s.set_optimizer(optimizer);
    return std::vector<psync::v1::Staged>{s};
  };
  // Queued back to back without waiting; answered in order, each exactly once.
  client->ReportStagedAsync(staged(0, 0, "dense"), log.Callback());
  client->ReportStagedAsync(staged(0, 0, "expert"), log.Callback());
  client->ReportStagedAsync(staged(0, 0, "moe"), log.Callback());  // not in the plan
  client->ReportStagedAsync(staged(0, 1, "dense"), log.Callback());
  client->ReportStagedAsync(staged(0, 1, "expert"), log.Callback());
  std::vector<absl::Status> answers = log.Await(5);
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_TRUE(answers[0].ok()) << answers[0];
  EXPECT_TRUE(answers[1].ok()) << answers[1];
  EXPECT_EQ(answers[2].code(), absl::StatusCode::kInvalidArgument) << answers[2];
  EXPECT_TRUE(answers[3].ok()) << answers[3];
  EXPECT_TRUE(answers[4].ok()) << answers[4];
  // Acks are delivered by the client's reader thread, not by the caller.
  for (std::thread::id id : log.threads()) EXPECT_NE(id, std::this_thread::get_id());

  ASSERT_TRUE(client->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  ASSERT_TRUE(client->WaitForDirective(0, 1, absl::Seconds(10)).ok());
  client->ReportSyncDoneAsync(0, 0, DpChecksum(7), 1, log.Callback());
  client->ReportSyncDoneAsync(0, 1, DpChecksum(8), 1, log.Callback());
  answers = log.Await(7);
  ASSERT_EQ(answers.size(), 7u);
  EXPECT_TRUE(answers[5].ok()) << answers[5];
  EXPECT_TRUE(answers[6].ok()) << answers[6];
  auto status = server_->coordinator().GetJobStatus("async");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->counters.violations, 0u);

  // After Close(): refused on the calling thread, before the call returns.
  client->Close();
  AckLog closed;
  client->SkipStepAsync(1, "found_inf", closed.Callback());
  ASSERT_EQ(closed.threads().size(), 1u);
  EXPECT_EQ(closed.threads()[0], std::this_thread::get_id());
  EXPECT_EQ(closed.Await(1)[0].code(), absl::StatusCode::kFailedPrecondition);
}

// A coordinator whose lazy acks never flush on their own (--lazy_ack_delay=1h): an asynchronous
// call is answered only by a later message, so each step below is decided by what is sent, not
// by timing.
class LazyAckTest : public ClientTest {
 protected:
  void SetUp() override {
    server::ServerOptions options;
    options.streams.lazy_ack_delay = absl::Hours(1);
    auto server = TestServer::Start(std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
};

std::vector<psync::v1::Staged> StagedItem(uint64_t step, uint32_t chunk,
                                          const std::string& optimizer) {
  psync::v1::Staged s;
  s.set_step(step);
  s.set_chunk(chunk);
  s.set_optimizer(optimizer);
  return {s};
}

TEST_F(LazyAckTest, AcceptedAsynchronousReportsAreAnsweredByLaterMessagesInRequestOrder) {
  auto client = MustConnect(Options(DensePlan("lazy", 1, 0, 2, {"dense", "expert"})));
  ASSERT_NE(client, nullptr);
  AckLog log;
  // Accepted lazily: nothing answers it yet (the flush is an hour away).
  client->ReportStagedAsync(StagedItem(0, 0, "dense"), log.Callback());
  // Completes chunk 0: its directive carries both answers, this one's included.
  client->ReportStagedAsync(StagedItem(0, 0, "expert"), log.Callback());
  ASSERT_TRUE(client->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  std::vector<absl::Status> answers = log.Await(2);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_TRUE(answers[0].ok() && answers[1].ok()) << answers[0] << " " << answers[1];
  // A lazy SyncDone stays unanswered until the next message; a refusal is answered at once, and
  // the lazy answer below it comes first.
  client->ReportSyncDoneAsync(0, 0, DpChecksum(7), 1, log.Callback());
  client->ReportStagedAsync(StagedItem(0, 1, "moe"), log.Callback());  // not in the plan
  answers = log.Await(4);
  ASSERT_EQ(answers.size(), 4u);
  EXPECT_TRUE(answers[2].ok()) << answers[2];
  EXPECT_EQ(answers[3].code(), absl::StatusCode::kInvalidArgument) << answers[3];
  // A blocking call is acked at once and carries the lazy answers queued before it.
  client->ReportStagedAsync(StagedItem(0, 1, "dense"), log.Callback());
  EXPECT_TRUE(client->ReportStaged(0, 1, "expert").ok());
  answers = log.Await(5);
  ASSERT_EQ(answers.size(), 5u);
  EXPECT_TRUE(answers[4].ok()) << answers[4];
  auto status = server_->coordinator().GetJobStatus("lazy");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->counters.violations, 0u);
  client->Close();
}

TEST_F(LazyAckTest, AClientWithoutLazyAcksIsAnsweredAtOnce) {
  ClientOptions options = Options(DensePlan("eager", 1, 0, 1, {"dense", "expert"}));
  options.lazy_acks = false;
  auto client = MustConnect(std::move(options));
  ASSERT_NE(client, nullptr);
  AckLog log;
  client->ReportStagedAsync(StagedItem(0, 0, "dense"), log.Callback());
  std::vector<absl::Status> answers = log.Await(1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].ok()) << answers[0];
  client->Close();
}

TEST_F(ClientTest, CloseCompletesUnansweredAsynchronousCallsWithCancelled) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  auto client = MustConnect(Options(DensePlan("async-close", 1, 0, 1), (*proxy)->target()));
  ASSERT_NE(client, nullptr);
  // The coordinator is out of reach: the check-in is queued and never answered.
  (*proxy)->SetRefusing(true);
  (*proxy)->BreakConnections();
  AckLog log;
  psync::v1::Staged s;
  s.set_step(0);
  s.set_chunk(0);
  s.set_optimizer("dense");
  client->ReportStagedAsync({s}, log.Callback());
  client->Close();
  std::vector<absl::Status> answers = log.Await(1);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].code(), absl::StatusCode::kCancelled) << answers[0];
}

TEST_F(ClientTest, RepeatedSyncIsReportedToTheCoordinator) {
  auto client = MustConnect(Options(DensePlan("executions", 1, 0, 1)));
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->ReportStaged(0, 0, "dense").ok());
  ASSERT_TRUE(client->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  ASSERT_TRUE(client->ReportSyncDone(0, 0, DpChecksum(5), /*executions=*/2).ok());
  auto status = server_->coordinator().GetJobStatus("executions");
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->counters.violations, 1u);
}

TEST_F(ClientTest, BadInputGetsTheExactCode) {
  auto client = MustConnect(Options(DensePlan("bad-input", 1, 0, 2)));
  ASSERT_NE(client, nullptr);

  absl::Status s = client->ReportStaged(0, 0, "expert");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("optimizer 'expert'"), std::string::npos) << s;

  s = client->ReportStaged(0, 9, "dense");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("chunk 9 out of range [0, 2)"), std::string::npos) << s;

  s = client->ReportStaged(1, 0, "dense");  // step 0 not finished
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  s = client->ReportStaged(5, 0, "dense");
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;

  s = client->ReportSyncDone(0, 0, DpChecksum(1));  // before the directive
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  psync::v1::GroupChecksum not_mine;
  not_mine.set_group("edp0");
  s = client->ReportSyncDone(0, 0, {not_mine});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("group 'edp0'"), std::string::npos) << s;

  EXPECT_EQ(client->ReportStagedBatch({}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->SkipStep(0, std::string(300, 'x')).code(), absl::StatusCode::kInvalidArgument);

  // A conflicting duplicate: same check-in, another checksum.
  ASSERT_TRUE(client->ReportStaged(0, 0, "dense", 1).ok());
  s = client->ReportStaged(0, 0, "dense", 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;

  // Rejections changed nothing: the session still works and chunk 1 releases normally.
  ASSERT_TRUE(client->ReportStaged(0, 1, "dense").ok());
  EXPECT_TRUE(client->WaitForDirective(0, 1, absl::Seconds(10)).ok());
  EXPECT_TRUE(client->connected());
}

TEST_F(ClientTest, WaitForDirectiveTimesOutWhileAContributorIsMissing) {
  auto rank0 = MustConnect(Options(DensePlan("missing", 2, 0, 1)));
  auto rank1 = MustConnect(Options(DensePlan("missing", 2, 1, 1)));
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);
  ASSERT_TRUE(rank0->ReportStaged(0, 0, "dense").ok());
  const absl::Time start = absl::Now();
  absl::StatusOr<psync::v1::SyncDirective> d =
      rank0->WaitForDirective(0, 0, absl::Milliseconds(100));
  EXPECT_EQ(d.status().code(), absl::StatusCode::kDeadlineExceeded) << d.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(100));

  ASSERT_TRUE(rank1->ReportStaged(0, 0, "dense").ok());
  absl::StatusOr<psync::v1::SyncDirective> d0 = rank0->WaitForDirective(0, 0, absl::Seconds(10));
  absl::StatusOr<psync::v1::SyncDirective> d1 = rank1->WaitForDirective(0, 0, absl::Seconds(10));
  ASSERT_TRUE(d0.ok()) << d0.status();
  ASSERT_TRUE(d1.ok()) << d1.status();
  EXPECT_EQ(d0->sequence(), d1->sequence());
  EXPECT_EQ(d0->last_rank(), 1u);
}

TEST_F(ClientTest, ConcurrentOptimizersShareOneClient) {
  constexpr uint32_t kChunks = 16;
  auto client = MustConnect(Options(DensePlan("concurrent", 1, 0, kChunks, {"dense", "expert"})));
  ASSERT_NE(client, nullptr);
  std::vector<std::thread> optimizers;
  std::atomic<int> failures{0};
  for (const char* name : {"dense", "expert"}) {
    optimizers.emplace_back([&, name] {
      for (uint32_t c = 0; c < kChunks; ++c) {
        if (!client->ReportStaged(0, c, name).ok()) ++failures;
      }
    });
  }
  for (auto& t : optimizers) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (uint32_t c = 0; c < kChunks; ++c) {
    EXPECT_TRUE(client->WaitForDirective(0, c, absl::Seconds(10)).ok()) << c;
  }
  EXPECT_EQ(client->stats().directives_received, kChunks);
}

TEST_F(ClientTest, SkipAndAbortNotices) {
  auto rank0 = MustConnect(Options(DensePlan("skip", 2, 0, 1)));
  auto rank1 = MustConnect(Options(DensePlan("skip", 2, 1, 1)));
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);
  ASSERT_TRUE(rank0->SkipStep(0, "found_inf").ok());
  EXPECT_EQ(rank0->WaitForStepSkipped(0, absl::Milliseconds(20)).code(),
            absl::StatusCode::kDeadlineExceeded);
  ASSERT_TRUE(rank0->SkipStep(0, "found_inf").ok());  // duplicate vote
  ASSERT_TRUE(rank1->SkipStep(0, "found_inf").ok());
  EXPECT_TRUE(rank0->WaitForStepSkipped(0, absl::Seconds(10)).ok());
  EXPECT_TRUE(rank1->WaitForStepSkipped(0, absl::Seconds(10)).ok());

  // Step 1: rank 0 skips, rank 1 stages: the generation is aborted.
  ASSERT_TRUE(rank0->SkipStep(1, "grad_norm").ok());
  absl::Status staged = rank1->ReportStaged(1, 0, "dense");
  EXPECT_EQ(staged.code(), absl::StatusCode::kAborted) << staged;
  absl::Status waited = rank0->WaitForDirective(1, 0, absl::Seconds(10)).status();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_NE(waited.message().find("skip disagreement at step 1"), std::string::npos) << waited;
  EXPECT_EQ(rank1->WaitForStepSkipped(1, absl::Seconds(10)).code(), absl::StatusCode::kAborted);
}

TEST_F(ClientTest, ANewerSessionSupersedesWithoutRetry) {
  psync::v1::JoinRequest plan = DensePlan("supersede", 1, 0, 1);
  plan.set_incarnation("same-process");
  auto first = MustConnect(Options(plan));
  ASSERT_NE(first, nullptr);
  auto second = MustConnect(Options(plan));
  ASSERT_NE(second, nullptr);
  absl::Status waited = first->WaitForDirective(0, 0, absl::Seconds(10)).status();
  EXPECT_EQ(waited.code(), absl::StatusCode::kAborted) << waited;
  EXPECT_NE(waited.message().find("superseded"), std::string::npos) << waited;
  EXPECT_EQ(first->ReportStaged(0, 0, "dense").code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(first->connected());
  // The newer session works.
  ASSERT_TRUE(second->ReportStaged(0, 0, "dense").ok());
  EXPECT_TRUE(second->WaitForDirective(0, 0, absl::Seconds(10)).ok());
}

TEST_F(ClientTest, CloseEndsWaitsAndCalls) {
  auto client = MustConnect(Options(DensePlan("close", 2, 0, 1)));
  ASSERT_NE(client, nullptr);
  absl::Status waited;
  std::thread waiter(
      [&] { waited = client->WaitForDirective(0, 0, absl::InfiniteDuration()).status(); });
  client->Close();
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled) << waited;
  EXPECT_EQ(client->ReportStaged(0, 0, "dense").code(), absl::StatusCode::kFailedPrecondition);
  client->Close();  // idempotent
}

TEST_F(ClientTest, ReconnectResendsAndDropsTheRepeatedDirective) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ClientOptions options = Options(DensePlan("reconnect", 1, 0, 2), (*proxy)->target());
  options.backoff.initial = absl::Milliseconds(5);
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  const std::string session = client->session_id();

  ASSERT_TRUE(client->ReportStaged(0, 0, "dense").ok());
  absl::StatusOr<psync::v1::SyncDirective> d = client->WaitForDirective(0, 0, absl::Seconds(10));
  ASSERT_TRUE(d.ok()) << d.status();

  // The network drops. Chunk 0 is released but has no SyncDone yet, so the coordinator sends its
  // directive again on the new Session; the client must drop it.
  (*proxy)->BreakConnections();
  // Sent on the broken stream or after it: either way answered on the new Session, after the
  // repeated directive (the coordinator writes the attach Ack and pending notices first).
  ASSERT_TRUE(client->ReportStaged(0, 1, "dense").ok());
  ClientStats stats = client->stats();
  EXPECT_EQ(stats.reconnects, 1u);
  EXPECT_EQ(stats.duplicate_directives_dropped, 1u);
  // The coordinator queues a release's directives before the Ack of the check-in that caused it.
  EXPECT_EQ(stats.directives_received, 2u);
  EXPECT_EQ(client->session_id(), session);

  EXPECT_TRUE(client->WaitForDirective(0, 1, absl::Seconds(10)).ok());
  EXPECT_EQ(client->WaitForDirective(0, 0, absl::Milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(client->ReportSyncDone(0, 0, DpChecksum(1)).ok());
  EXPECT_TRUE(client->ReportSyncDone(0, 1, DpChecksum(2)).ok());
  EXPECT_GE((*proxy)->connections_accepted(), 2);
}

// A rank whose reader stalls (its notice handler blocks) while it keeps sending: the coordinator's
// queue of answers for it goes over the bound, the Session is ended with RESOURCE_EXHAUSTED, and
// the client reconnects, re-attaches, gets its pending directive again (dropped as a repeat) and
// has every call answered: the overflow costs a reconnect, never the client.
TEST_F(ClientTest, AStreamEndedForOverflowReconnectsAndReattaches) {
  server::ServerOptions server_options;
  server_options.streams.queue_bytes = 1;  // anything queued behind a write is over
  server_options.streams.overflow_deadline = absl::Milliseconds(50);
  auto bounded = TestServer::Start(server_options);
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  ClientOptions options = Options(DensePlan("overflow", 2, 0, 1), (*bounded)->target());
  options.backoff.initial = absl::Milliseconds(5);
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);
  auto other = MustConnect(Options(DensePlan("overflow", 2, 1, 1), (*bounded)->target()));
  ASSERT_NE(other, nullptr);
  absl::Notification in_handler, let_go;
  client->SetNoticeHandler([&](const psync::v1::SessionDown& notice) {
    if (in_handler.HasBeenNotified()) return;
    in_handler.Notify();
    let_go.WaitForNotification();  // the reader thread stalls here
  });
  ASSERT_TRUE(client->ReportStaged(0, 0, "dense").ok());
  ASSERT_TRUE(other->ReportStaged(0, 0, "dense").ok());
  in_handler.WaitForNotification();  // rank 0's directive arrived; its reader is stuck

  // Check-ins of an undeclared optimizer: refused with a message quoting the name (cut to 1 KiB).
  // Enough answers to fill the client's HTTP/2 receive window (which BDP probing may have grown
  // to several MiB) and then the coordinator's queue.
  constexpr int kCalls = 20000;
  std::atomic<int> answered{0};
  for (int i = 0; i < kCalls; ++i) {
    psync::v1::Staged item;
    item.set_step(1);
    item.set_chunk(0);
    item.set_optimizer(absl::StrCat(i, std::string(1100, 'x')));
    client->ReportStagedAsync({item}, [&](absl::Status s) {
      EXPECT_FALSE(s.ok());
      answered.fetch_add(1);
    });
  }
  const absl::Time give_up = absl::Now() + absl::Minutes(1);
  while ((*bounded)->stream_counters().overflows.load() == 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GE((*bounded)->stream_counters().overflows.load(), 1u);
  let_go.Notify();

  // The client comes back: its calls are answered on the new stream, and it works.
  EXPECT_TRUE(client->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  ASSERT_TRUE(client->ReportSyncDone(0, 0, DpChecksum(1)).ok());
  EXPECT_TRUE(other->ReportSyncDone(0, 0, DpChecksum(1)).ok());
  while (answered.load() < kCalls && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(answered.load(), kCalls);
  const ClientStats stats = client->stats();
  EXPECT_GE(stats.reconnects, 1u);
  EXPECT_EQ(stats.directives_received, 1u);
  EXPECT_TRUE(client->connected());
}

TEST_F(ClientTest, StepSkippedDecidedWhileDisconnectedIsResentOnAttach) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ClientOptions options = Options(DensePlan("skip-away", 2, 0, 1), (*proxy)->target());
  options.backoff.initial = absl::Milliseconds(5);
  options.backoff.max = absl::Milliseconds(20);
  auto rank0 = MustConnect(options);
  auto rank1 = MustConnect(Options(DensePlan("skip-away", 2, 1, 1)));
  ASSERT_NE(rank0, nullptr);
  ASSERT_NE(rank1, nullptr);

  ASSERT_TRUE(rank0->SkipStep(0, "found_inf").ok());
  // Rank 0 loses the coordinator and cannot reconnect while the step is skipped: its StepSkipped
  // is lost with the stream, and the coordinator sends it again when rank 0 attaches anew.
  (*proxy)->SetRefusing(true);
  (*proxy)->BreakConnections();
  ASSERT_TRUE(rank1->SkipStep(0, "found_inf").ok());
  EXPECT_TRUE(rank1->WaitForStepSkipped(0, absl::Seconds(10)).ok());
  (*proxy)->SetRefusing(false);

  absl::Status skipped = rank0->WaitForStepSkipped(0, absl::Seconds(10));
  EXPECT_TRUE(skipped.ok()) << skipped;
  const ClientStats stats = rank0->stats();
  EXPECT_GE(stats.reconnects, 1u);
  // The job goes on: step 1 releases for both.
  ASSERT_TRUE(rank0->ReportStaged(1, 0, "dense").ok());
  ASSERT_TRUE(rank1->ReportStaged(1, 0, "dense").ok());
  EXPECT_TRUE(rank0->WaitForDirective(1, 0, absl::Seconds(10)).ok());
  EXPECT_TRUE(rank1->WaitForDirective(1, 0, absl::Seconds(10)).ok());
}

TEST_F(ClientTest, KeepaliveFindsAHalfOpenConnection) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ClientOptions options = Options(DensePlan("half-open", 1, 0, 1), (*proxy)->target());
  options.keepalive = absl::Seconds(1);  // the coordinator permits one ping per second
  options.backoff.initial = absl::Milliseconds(5);
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);

  // Nothing passes any more, and nothing tells the client: only unanswered pings can.
  (*proxy)->BlackholeConnections();
  absl::Status s = client->ReportStaged(0, 0, "dense");
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(client->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  EXPECT_EQ(client->stats().reconnects, 1u);
  EXPECT_EQ(client->stats().messages_resent, 1u);
}

TEST_F(ClientTest, CallFailsUnavailableWhenReconnectDoesNotSucceedInTime) {
  auto proxy = TcpProxy::Start(server_->target());
  ASSERT_TRUE(proxy.ok()) << proxy.status();
  ClientOptions options = Options(DensePlan("down", 1, 0, 1), (*proxy)->target());
  // Also the budget of the first connect and of each reconnect's Join: long enough for a busy host.
  options.call_timeout = absl::Seconds(2);
  options.backoff.initial = absl::Milliseconds(5);
  options.backoff.max = absl::Milliseconds(20);
  auto client = MustConnect(options);
  ASSERT_NE(client, nullptr);

  (*proxy)->SetRefusing(true);
  (*proxy)->BreakConnections();
  // Once the client has seen its Session end, a call waits for a reconnect that cannot succeed.
  ASSERT_TRUE(testing::WaitUntil([&] { return !client->connected(); }));
  absl::Status s = client->ReportStaged(0, 0, "dense");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;

  // The coordinator is reachable again: the client reconnects and the next call goes through.
  (*proxy)->SetRefusing(false);
  ASSERT_TRUE(testing::WaitUntil([&] { return client->connected(); }));
  absl::Status again = client->ReportStaged(0, 0, "dense");
  EXPECT_TRUE(again.ok()) << again;
  EXPECT_TRUE(client->WaitForDirective(0, 0, absl::Seconds(10)).ok());
  EXPECT_GE(client->stats().reconnects, 1u);
}

}  // namespace
}  // namespace psync

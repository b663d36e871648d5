// Lazy acks on the wire (SessionUp.lazy_ack, SessionDown.acked_through), against a coordinator
// whose lazy acks never flush on their own (--lazy_ack_delay=1h), so what arrives is decided by
// what is sent, not by timing: an accepted lazy check-in is answered on the next message the rank
// is sent (here the directive of the chunk that a later check-in completes), or, at the latest,
// by the stream's close; a refused lazy message gets an Ack of its own that no earlier message's
// acked_through covers; a message without lazy_ack gets its Ack at once. A zero delay acks
// everything at once, and a negative one is refused naming the flag.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/coordinator_server.h"
#include "server/test_server.h"
#include "tests/service/raw_session.h"
#include "tests/service/service_fixture.h"

namespace psync {
namespace {

std::string Frame(uint64_t id, const v1::JoinResponse& joined, const std::string& optimizer,
                  bool lazy) {
  v1::SessionUp up;
  up.set_request_id(id);
  up.set_lazy_ack(lazy);
  v1::StagedBatch* staged = up.mutable_staged();
  staged->set_generation(joined.generation());
  v1::Staged* item = staged->add_items();
  item->set_step(0);
  item->set_chunk(0);
  item->set_optimizer(optimizer);
  return up.SerializeAsString();
}

// Joins rank 0 of a one-rank job whose chunk 0 has optimizers dense and expert, then runs one
// Session: attach (request 1) and `frames`, then half-closes.
testing::RawOutcome RunJob(server::TestServer& server, const std::string& job,
                           const std::vector<std::pair<std::string, bool>>& staged) {
  auto channel = grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials());
  auto stub = v1::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  v1::JoinResponse joined;
  EXPECT_TRUE(stub->Join(&context, testing::MakeJoin(job, 1, 0, 1, {0}), &joined).ok());
  std::vector<std::string> frames = {testing::AttachMessage(job, 0, joined).SerializeAsString()};
  uint64_t id = 2;
  for (const auto& [optimizer, lazy] : staged)
    frames.push_back(Frame(id++, joined, optimizer, lazy));
  return testing::RunRawSession(channel.get(), frames);
}

TEST(LazyAckTest, AnAcceptedLazyCheckInRidesOnTheNextMessageTheRankIsSent) {
  auto server = testing::StartWithLazyAckDelay(absl::Hours(1));
  ASSERT_NE(server, nullptr);
  // 2 (lazy): accepted, nothing sent; 3 (not lazy) completes chunk 0: its directive carries 2's
  // answer, then 3's own Ack follows.
  testing::RawOutcome out = RunJob(*server, "wire", {{"dense", true}, {"expert", false}});
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.down.size(), 3u);
  EXPECT_EQ(out.down[0].ack().request_id(), 1u);
  EXPECT_EQ(out.down[0].acked_through(), 0u);
  EXPECT_TRUE(out.down[1].has_directive());
  EXPECT_EQ(out.down[1].acked_through(), 2u);
  EXPECT_EQ(out.down[2].ack().request_id(), 3u);
  EXPECT_EQ(out.down[2].ack().code(), 0);
}

TEST(LazyAckTest, ACompletingLazyCheckInIsAnsweredByItsOwnDirective) {
  auto server = testing::StartWithLazyAckDelay(absl::Hours(1));
  ASSERT_NE(server, nullptr);
  testing::RawOutcome out = RunJob(*server, "own", {{"dense", true}, {"expert", true}});
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  // The attach's Ack, then the directive answering both check-ins: no Ack of their own.
  ASSERT_EQ(out.down.size(), 2u);
  EXPECT_TRUE(out.down[1].has_directive());
  EXPECT_EQ(out.down[1].acked_through(), 3u);
}

TEST(LazyAckTest, ARefusedLazyMessageIsAckedAtOnceAndNotCoveredBeforeIt) {
  auto server = testing::StartWithLazyAckDelay(absl::Hours(1));
  ASSERT_NE(server, nullptr);
  // 2 accepted (lazy), 3 refused (an optimizer not in the plan), 4 accepted (lazy); the close
  // answers what is still pending.
  testing::RawOutcome out =
      RunJob(*server, "refused", {{"dense", true}, {"moe", true}, {"dense", true}});
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_GE(out.down.size(), 2u);
  // 3's Ack comes with 2's answer (below it) and no message before it covers 3.
  size_t refusal = 0;
  for (size_t i = 1; i < out.down.size(); ++i) {
    if (out.down[i].has_ack() && out.down[i].ack().request_id() == 3) refusal = i;
  }
  ASSERT_NE(refusal, 0u);
  EXPECT_EQ(out.down[refusal].ack().code(), static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT));
  for (size_t i = 0; i < refusal; ++i) EXPECT_LT(out.down[i].acked_through(), 3u) << i;
  EXPECT_GE(out.down[refusal].acked_through(), 2u);
  // 4 (a duplicate of 2, accepted) is answered by the end of the stream.
  EXPECT_EQ(out.down.back().acked_through(), 4u);
}

TEST(LazyAckTest, AZeroDelayAcksEveryMessageAtOnce) {
  auto server = testing::StartWithLazyAckDelay(absl::ZeroDuration());
  ASSERT_NE(server, nullptr);
  testing::RawOutcome out = RunJob(*server, "eager", {{"dense", true}, {"expert", true}});
  EXPECT_TRUE(out.status.ok()) << out.status.error_message();
  std::vector<uint64_t> acks;
  for (const v1::SessionDown& d : out.down) {
    if (d.has_ack()) acks.push_back(d.ack().request_id());
    EXPECT_EQ(d.acked_through(), 0u);
  }
  EXPECT_EQ(acks, (std::vector<uint64_t>{1, 2, 3}));
}

TEST(LazyAckTest, ANegativeDelayIsRefusedNamingTheFlag) {
  server::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.streams.lazy_ack_delay = absl::Milliseconds(-1);
  auto server = server::CoordinatorServer::Start(std::move(options));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(server.status().message(),
            "lazy_ack_delay: -1ms must not be negative (0 acks every message at once)");
}

}  // namespace
}  // namespace psync

#include "worker/coordinator_kv_store.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/test_server.h"
#include "worker/collective/collective_factory.h"

namespace psync {
namespace worker {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

class CoordinatorKvStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<server::TestServer>> server = server::TestServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    stub_ = psync::v1::Coordinator::NewStub(channel_);
    // The job exists once a rank joined: a 2-rank job with one dense chunk.
    for (uint32_t rank = 0; rank < 2; ++rank) {
      psync::v1::JoinRequest request;
      request.set_job_id("kv");
      request.set_world_size(2);
      request.set_rank(rank);
      request.set_num_chunks(1);
      request.set_incarnation(absl::StrCat("rank", rank));
      psync::v1::ChunkPlan* chunk = request.add_chunks();
      chunk->set_chunk(0);
      chunk->add_optimizers("dense");
      psync::v1::SyncGroup* dp = chunk->add_groups();
      dp->set_name("dp");
      dp->add_ranks(0);
      dp->add_ranks(1);
      psync::v1::JoinResponse response;
      grpc::ClientContext context;
      grpc::Status status = stub_->Join(&context, request, &response);
      ASSERT_TRUE(status.ok()) << status.error_message();
      generation_ = response.generation();
    }
  }

  std::unique_ptr<server::TestServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<psync::v1::Coordinator::Stub> stub_;
  uint64_t generation_ = 0;
};

TEST_F(CoordinatorKvStoreTest, SetThenGetReturnsTheValueBytes) {
  CoordinatorKvStore store(channel_, "kv", generation_);
  const std::string value("a\0b", 3);
  ASSERT_TRUE(store.Set("key", value).ok());
  absl::StatusOr<std::string> got = store.Get("key");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, value);
  ASSERT_TRUE(store.Set("key", "replaced").ok());
  EXPECT_EQ(*store.Get("key"), "replaced");
}

TEST_F(CoordinatorKvStoreTest, GetOfAMissingKeyIsNotFoundAndDoesNotWait) {
  CoordinatorKvStore store(channel_, "kv", generation_);
  EXPECT_EQ(store.Get("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CoordinatorKvStoreTest, WaitReturnsOnceAnotherStoreSetsTheKeys) {
  CoordinatorKvStore waiter(channel_, "kv", generation_);
  CoordinatorKvStore setter(channel_, "kv", generation_);
  absl::Status waited = absl::UnknownError("not run");
  std::thread thread([&] { waited = waiter.Wait({"a", "b"}, kTimeout); });
  ASSERT_TRUE(setter.Set("a", "1").ok());
  ASSERT_TRUE(setter.Set("b", "2").ok());
  thread.join();
  EXPECT_TRUE(waited.ok()) << waited;
  EXPECT_EQ(*waiter.Get("b"), "2");
}

TEST_F(CoordinatorKvStoreTest, WaitForMoreKeysThanOneCallCarries) {
  CoordinatorKvStore store(channel_, "kv", generation_);
  std::vector<std::string> keys;
  for (int i = 0; i < 150; ++i) {
    keys.push_back(absl::StrCat("k", i));
    ASSERT_TRUE(store.Set(keys.back(), "v").ok());
  }
  EXPECT_TRUE(store.Wait(keys, kTimeout).ok());
  EXPECT_TRUE(store.Wait({}, kTimeout).ok());
}

TEST_F(CoordinatorKvStoreTest, WaitTimesOutNamingTheMissingKeys) {
  CoordinatorKvStore store(channel_, "kv", generation_);
  absl::Status status = store.Wait({"never"}, absl::Milliseconds(200));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_NE(status.message().find("never"), std::string::npos) << status;
}

TEST_F(CoordinatorKvStoreTest, UnknownJobAndStaleGenerationKeepTheCoordinatorsCodes) {
  CoordinatorKvStore unknown(channel_, "no-such-job", generation_);
  EXPECT_EQ(unknown.Set("k", "v").code(), absl::StatusCode::kNotFound);
  CoordinatorKvStore other(channel_, "kv", generation_ + 7);
  EXPECT_EQ(other.Set("k", "v").code(), absl::StatusCode::kFailedPrecondition);
  CoordinatorKvStore store(channel_, "kv", generation_);
  EXPECT_EQ(store.Set("", "v").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(CoordinatorKvStoreTest, GlooGroupRendezvousesThroughTheCoordinator) {
  absl::StatusOr<std::unique_ptr<CollectiveFactory>> factory = MakeCollectiveFactory("gloo");
  ASSERT_TRUE(factory.ok()) << factory.status();
  std::vector<absl::Status> statuses(2, absl::UnknownError("not run"));
  std::vector<std::vector<uint32_t>> gathered(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      CoordinatorKvStore store(channel_, "kv", generation_);
      absl::StatusOr<std::unique_ptr<Collective>> group =
          (*factory)->Create("g.dp", rank, 2, &store, kTimeout);
      if (!group.ok()) {
        statuses[rank] = group.status();
        return;
      }
      const uint32_t mine = 100 + rank;
      gathered[rank].assign(2, 0);
      statuses[rank] = (*group)->AllGather(&mine, gathered[rank].data(), sizeof(mine));
    });
  }
  for (std::thread& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_TRUE(statuses[rank].ok()) << "rank " << rank << ": " << statuses[rank];
    EXPECT_EQ(gathered[rank], (std::vector<uint32_t>{100, 101}));
  }
}

}  // namespace
}  // namespace worker
}  // namespace psync

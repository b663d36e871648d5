#include "worker/collective/gloo_collective.h"

#include <signal.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/collective/in_memory_kv_store.h"

namespace psync {
namespace worker {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);
// Short timeout for the tests in which a peer is missing. It is also the budget of the group's
// rendezvous there, which must succeed on a busy host.
constexpr absl::Duration kShortTimeout = absl::Seconds(5);

// Runs fn(rank) for rank in [0, n) on n threads and returns their statuses.
std::vector<absl::Status> RunRanks(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> statuses(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&statuses, &fn, rank] { statuses[rank] = fn(rank); });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

void ExpectAllOk(const std::vector<absl::Status>& statuses) {
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << "rank " << i << ": " << statuses[i];
  }
}

// The byte rank `rank` contributes at position `i` of an all-gather.
uint8_t GatherByte(int rank, size_t i) { return static_cast<uint8_t>(rank * 37 + i * 11 + 1); }

// Creates group `group` of `size` ranks as `rank`, then all-gathers each
// of `bytes_per_rank_list` in turn, checking every gathered byte.
absl::Status GatherAndCheck(CollectiveFactory& factory, KeyValueStore& store,
                            const std::string& group, int rank, int size,
                            const std::vector<size_t>& bytes_per_rank_list) {
  absl::StatusOr<std::unique_ptr<Collective>> collective =
      factory.Create(group, rank, size, &store, kTimeout);
  if (!collective.ok()) return collective.status();
  if ((*collective)->rank() != rank || (*collective)->size() != size) {
    return absl::InternalError("wrong rank() or size()");
  }
  for (size_t bytes : bytes_per_rank_list) {
    std::vector<uint8_t> send(bytes);
    for (size_t i = 0; i < bytes; ++i) send[i] = GatherByte(rank, i);
    std::vector<uint8_t> recv(bytes * size, 0);
    absl::Status status = (*collective)->AllGather(send.data(), recv.data(), bytes);
    if (!status.ok()) return status;
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < bytes; ++i) {
        if (recv[r * bytes + i] != GatherByte(r, i)) {
          return absl::InternalError(absl::StrCat("group ", group, " rank ", rank, ": byte ", i,
                                                  " of rank ", r, " is ", recv[r * bytes + i],
                                                  ", want ", GatherByte(r, i)));
        }
      }
    }
  }
  return absl::OkStatus();
}

// Creates the group and reduce-scatters `count_per_rank` floats where rank r
// sends send[k] = r * 1000 + k; every value is an integer below 2^24, so the
// fp32 sums are exact: recv[j] = 1000 * sum(r) + size * (rank * count + j).
absl::Status ReduceScatterAndCheck(CollectiveFactory& factory, KeyValueStore& store,
                                   const std::string& group, int rank, int size,
                                   const std::vector<size_t>& counts) {
  absl::StatusOr<std::unique_ptr<Collective>> collective =
      factory.Create(group, rank, size, &store, kTimeout);
  if (!collective.ok()) return collective.status();
  for (size_t count : counts) {
    std::vector<float> send(count * size);
    for (size_t k = 0; k < send.size(); ++k) {
      send[k] = static_cast<float>(rank * 1000 + k);
    }
    const std::vector<float> send_copy = send;
    std::vector<float> recv(count, -1.0f);
    absl::Status status = (*collective)->ReduceScatterSum(send.data(), recv.data(), count);
    if (!status.ok()) return status;
    if (send != send_copy) return absl::InternalError("send was modified");
    const double rank_sum = size * (size - 1) / 2.0;
    for (size_t j = 0; j < count; ++j) {
      const double want = 1000.0 * rank_sum + static_cast<double>(size) * (rank * count + j);
      if (recv[j] != want) {
        return absl::InternalError(
            absl::StrCat("rank ", rank, " recv[", j, "] = ", recv[j], ", want ", want));
      }
    }
  }
  return absl::OkStatus();
}

TEST(GlooCollectiveTest, FactoryNamesItsBackend) {
  EXPECT_EQ(NewGlooCollectiveFactory()->backend(), "gloo");
}

TEST(GlooCollectiveTest, CreateIgnoresSigpipe) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  ASSERT_TRUE(factory->Create("solo", 0, 1, &store, kTimeout).ok());
  struct sigaction current;
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &current), 0);
  EXPECT_EQ(current.sa_handler, SIG_IGN);
}

TEST(GlooCollectiveTest, AllGatherFourRanks) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  ExpectAllOk(RunRanks(4, [&](int rank) {
    // 1 MiB + 3 crosses Gloo's segment boundaries and is not a multiple of 4.
    return GatherAndCheck(*factory, store, "dp", rank, 4, {1, 5, 4096, (1 << 20) + 3});
  }));
}

TEST(GlooCollectiveTest, ReduceScatterSumFourRanks) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  ExpectAllOk(RunRanks(4, [&](int rank) {
    return ReduceScatterAndCheck(*factory, store, "dp", rank, 4, {1, 3, 1000, 70001});
  }));
}

TEST(GlooCollectiveTest, ThreeRanksNotAPowerOfTwo) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  ExpectAllOk(RunRanks(3, [&](int rank) {
    absl::Status status = GatherAndCheck(*factory, store, "ag3", rank, 3, {7, 1000});
    if (!status.ok()) return status;
    return ReduceScatterAndCheck(*factory, store, "rs3", rank, 3, {7, 1000});
  }));
}

TEST(GlooCollectiveTest, SingleRankGroup) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  EXPECT_TRUE(GatherAndCheck(*factory, store, "solo-ag", 0, 1, {1, 9}).ok());
  EXPECT_TRUE(ReduceScatterAndCheck(*factory, store, "solo-rs", 0, 1, {1, 9}).ok());
}

TEST(GlooCollectiveTest, SynchronizeIsOkWithNothingInFlight) {
  InMemoryKeyValueStore store;
  auto collective = NewGlooCollectiveFactory()->Create("sync", 0, 1, &store, kTimeout);
  ASSERT_TRUE(collective.ok()) << collective.status();
  EXPECT_TRUE((*collective)->Synchronize().ok());
  std::vector<uint8_t> send(16, 3), recv(16);
  ASSERT_TRUE((*collective)->AllGather(send.data(), recv.data(), 16).ok());
  EXPECT_TRUE((*collective)->Synchronize().ok());
  EXPECT_EQ(recv, send);
}

TEST(GlooCollectiveTest, ZeroSizedOperationsAreNoOps) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  ExpectAllOk(RunRanks(2, [&](int rank) -> absl::Status {
    auto collective = factory->Create("g", rank, 2, &store, kTimeout);
    if (!collective.ok()) return collective.status();
    absl::Status status = (*collective)->AllGather(nullptr, nullptr, 0);
    if (!status.ok()) return status;
    status = (*collective)->ReduceScatterSum(nullptr, nullptr, 0);
    if (!status.ok()) return status;
    // The group still works after them.
    uint8_t send = static_cast<uint8_t>(rank);
    uint8_t recv[2] = {9, 9};
    status = (*collective)->AllGather(&send, recv, 1);
    if (!status.ok()) return status;
    if (recv[0] != 0 || recv[1] != 1) return absl::InternalError("bad bytes");
    return absl::OkStatus();
  }));
}

// The dense group of all ranks and two expert groups, {0, 2} and {1, 3}, all
// rendezvous on one store at the same time. Both expert groups have a rank 0
// and a rank 1, so their keys would collide without the per-group prefix.
TEST(GlooCollectiveTest, GroupsShareOneStoreConcurrently) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  ExpectAllOk(RunRanks(4, [&](int global_rank) -> absl::Status {
    const std::string expert_group = absl::StrCat("ep", global_rank % 2);
    const int expert_rank = global_rank / 2;
    absl::Status dense;
    std::thread dense_thread([&] {
      dense = ReduceScatterAndCheck(*factory, store, "dp", global_rank, 4, {5, 333});
    });
    absl::Status expert = GatherAndCheck(*factory, store, expert_group, expert_rank, 2, {3, 65537});
    if (expert.ok()) {
      expert = ReduceScatterAndCheck(*factory, store, expert_group + "-rs", expert_rank, 2, {4});
    }
    dense_thread.join();
    return dense.ok() ? expert : dense;
  }));
}

TEST(GlooCollectiveTest, ExpertGroupsGatherTheirOwnData) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  // Each expert group gathers the global ranks of its members: {0, 2} must
  // see exactly 0 and 2, {1, 3} exactly 1 and 3.
  ExpectAllOk(RunRanks(4, [&](int global_rank) -> absl::Status {
    auto collective =
        factory->Create(absl::StrCat("ep", global_rank % 2), global_rank / 2, 2, &store, kTimeout);
    if (!collective.ok()) return collective.status();
    const int32_t send = global_rank;
    int32_t recv[2] = {-1, -1};
    absl::Status status = (*collective)->AllGather(&send, recv, sizeof(int32_t));
    if (!status.ok()) return status;
    const int first = global_rank % 2;
    if (recv[0] != first || recv[1] != first + 2) {
      return absl::InternalError(
          absl::StrCat("rank ", global_rank, " got ", recv[0], ",", recv[1]));
    }
    return absl::OkStatus();
  }));
}

TEST(GlooCollectiveTest, MissingPeerFailsRendezvousWithinTimeout) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  // Ranks 0..2 of a group of 4 arrive; rank 3 never does.
  std::vector<absl::Status> statuses = RunRanks(
      3, [&](int rank) { return factory->Create("dp", rank, 4, &store, kShortTimeout).status(); });
  for (const absl::Status& status : statuses) {
    EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  }
}

TEST(GlooCollectiveTest, SilentPeerFailsOperationWithinTimeout) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  absl::Notification rank0_done;
  absl::Status rank1_create, rank1_late;
  std::thread rank1([&] {
    // Joins the group, but issues its all-gather only after rank 0 gave up.
    auto collective = factory->Create("dp", 1, 2, &store, kShortTimeout);
    rank1_create = collective.status();
    if (!collective.ok()) return;
    rank0_done.WaitForNotification();
    std::vector<uint8_t> send(64, 2), recv(128);
    rank1_late = (*collective)->AllGather(send.data(), recv.data(), 64);
  });
  auto collective = factory->Create("dp", 0, 2, &store, kShortTimeout);
  ASSERT_TRUE(collective.ok()) << collective.status();
  std::vector<uint8_t> send(64, 1), recv(128);
  absl::Status first = (*collective)->AllGather(send.data(), recv.data(), 64);
  absl::Status second = (*collective)->AllGather(send.data(), recv.data(), 64);
  absl::Status synchronized = (*collective)->Synchronize();
  rank0_done.Notify();
  rank1.join();
  EXPECT_TRUE(rank1_create.ok()) << rank1_create;
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  // The group is unusable after a failure and says so.
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition) << second;
  EXPECT_EQ(synchronized.code(), absl::StatusCode::kFailedPrecondition) << synchronized;
  // Rank 0 closed its connections when it failed, so the late rank 1 finds
  // the group broken instead of waiting for its own timeout.
  EXPECT_EQ(rank1_late.code(), absl::StatusCode::kUnavailable) << rank1_late;
}

TEST(GlooCollectiveTest, DepartedPeerFailsOperation) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  absl::Notification rank0_joined;
  absl::Status rank1_status;
  std::thread rank1([&] {
    // Joins the group, then leaves (its connections close) once rank 0 has
    // joined too.
    auto collective = factory->Create("dp", 1, 2, &store, kShortTimeout);
    rank1_status = collective.status();
    rank0_joined.WaitForNotification();
  });
  auto collective = factory->Create("dp", 0, 2, &store, kShortTimeout);
  rank0_joined.Notify();
  rank1.join();
  ASSERT_TRUE(collective.ok()) << collective.status();
  ASSERT_TRUE(rank1_status.ok()) << rank1_status;
  std::vector<float> send(1000, 1.0f), recv(500);
  absl::Status status = (*collective)->ReduceScatterSum(send.data(), recv.data(), 500);
  EXPECT_TRUE(status.code() == absl::StatusCode::kUnavailable ||
              status.code() == absl::StatusCode::kDeadlineExceeded)
      << status;
}

TEST(GlooCollectiveTest, BadArgumentsAreInvalidAndLeaveGroupUsable) {
  auto factory = NewGlooCollectiveFactory();
  InMemoryKeyValueStore store;
  EXPECT_EQ(factory->Create("a/b", 0, 2, &store, kTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(factory->Create("g", 2, 2, &store, kTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(factory->Create("g", 0, 2, nullptr, kTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(factory->Create("g", 0, 2, &store, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.size(), 0);

  ExpectAllOk(RunRanks(2, [&](int rank) -> absl::Status {
    auto collective = factory->Create("g", rank, 2, &store, kTimeout);
    if (!collective.ok()) return collective.status();
    float value = 1.0f;
    if ((*collective)->ReduceScatterSum(&value, nullptr, 1).code() !=
        absl::StatusCode::kInvalidArgument) {
      return absl::InternalError("null recv accepted");
    }
    if ((*collective)->AllGather(nullptr, &value, 1).code() != absl::StatusCode::kInvalidArgument) {
      return absl::InternalError("null send accepted");
    }
    float send[2] = {1.0f, 2.0f};
    float recv = 0;
    absl::Status status = (*collective)->ReduceScatterSum(send, &recv, 1);
    if (!status.ok()) return status;
    if (recv != 2.0f * (rank + 1)) return absl::InternalError("bad sum");
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace worker
}  // namespace psync

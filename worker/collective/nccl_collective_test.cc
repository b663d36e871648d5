// Built only with --config=cuda. With devices it runs real groups, one rank per
// device, as threads of this process. Without one, the device cases fail (a CUDA
// build that ran nothing does not pass) and NoDeviceIsFailedPrecondition checks
// the clean failure (the one case a machine with a device cannot run).
#include "worker/collective/nccl_collective.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "worker/collective/in_memory_kv_store.h"

namespace psync {
namespace worker {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(60);
constexpr absl::Duration kShortTimeout = absl::Seconds(2);

int DeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

// Device memory holding a copy of `host`, freed on destruction.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (cudaMalloc(&ptr_, count * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  T* get() const { return static_cast<T*>(ptr_); }
  bool CopyFrom(const std::vector<T>& host) {
    return cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice) ==
           cudaSuccess;
  }
  std::vector<T> ToHost() const {
    std::vector<T> host(count_);
    cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  void* ptr_ = nullptr;
  size_t count_;
};

// Runs fn(rank) for rank in [0, n) on n threads, rank r on device r.
std::vector<absl::Status> RunRanksOnDevices(int n, const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> statuses(n, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank) {
    threads.emplace_back([&statuses, &fn, rank] {
      if (cudaSetDevice(rank) != cudaSuccess) {
        statuses[rank] = absl::InternalError("cudaSetDevice failed");
        return;
      }
      statuses[rank] = fn(rank);
    });
  }
  for (std::thread& t : threads) t.join();
  return statuses;
}

TEST(NcclCollectiveTest, FactoryNamesItsBackend) {
  EXPECT_EQ(NewNcclCollectiveFactory()->backend(), "nccl");
}

TEST(NcclCollectiveTest, BadArgumentsAreInvalidBeforeTouchingTheGpu) {
  auto factory = NewNcclCollectiveFactory();
  InMemoryKeyValueStore store;
  EXPECT_EQ(factory->Create("", 0, 1, &store, kTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(factory->Create("g", 1, 1, &store, kTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(factory->Create("g", 0, 1, nullptr, kTimeout).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.size(), 0);
}

TEST(NcclCollectiveTest, NoDeviceIsFailedPrecondition) {
  if (DeviceCount() > 0) GTEST_SKIP() << "this machine has a CUDA device";
  InMemoryKeyValueStore store;
  auto collective = NewNcclCollectiveFactory()->Create("g", 0, 1, &store, kTimeout);
  EXPECT_EQ(collective.status().code(), absl::StatusCode::kFailedPrecondition)
      << collective.status();
}

TEST(NcclCollectiveTest, AllGatherAndReduceScatterOnEveryDevice) {
  const int size = std::min(DeviceCount(), 8);
  ASSERT_GT(size, 0) << "no CUDA device (a --config=cuda test needs one)";
  auto factory = NewNcclCollectiveFactory();
  InMemoryKeyValueStore store;
  std::vector<absl::Status> statuses = RunRanksOnDevices(size, [&](int rank) -> absl::Status {
    auto collective = factory->Create("dp", rank, size, &store, kTimeout);
    if (!collective.ok()) return collective.status();

    constexpr size_t kBytes = 1001;
    std::vector<uint8_t> send_bytes(kBytes);
    for (size_t i = 0; i < kBytes; ++i) {
      send_bytes[i] = static_cast<uint8_t>(rank * 31 + i);
    }
    DeviceBuffer<uint8_t> send(kBytes), recv(kBytes * size);
    if (!send.CopyFrom(send_bytes)) return absl::InternalError("copy");
    absl::Status status = (*collective)->AllGather(send.get(), recv.get(), kBytes);
    if (!status.ok()) return status;
    const std::vector<uint8_t> gathered = recv.ToHost();
    for (int r = 0; r < size; ++r) {
      for (size_t i = 0; i < kBytes; ++i) {
        if (gathered[r * kBytes + i] != static_cast<uint8_t>(r * 31 + i)) {
          return absl::InternalError(absl::StrCat("gather byte ", i, " of rank ", r));
        }
      }
    }

    constexpr size_t kCount = 777;
    std::vector<float> send_floats(kCount * size);
    for (size_t k = 0; k < send_floats.size(); ++k) {
      send_floats[k] = static_cast<float>(rank * 1000 + k);
    }
    DeviceBuffer<float> fsend(kCount * size), frecv(kCount);
    if (!fsend.CopyFrom(send_floats)) return absl::InternalError("copy");
    status = (*collective)->ReduceScatterSum(fsend.get(), frecv.get(), kCount);
    if (!status.ok()) return status;
    const std::vector<float> sums = frecv.ToHost();
    const double rank_sum = size * (size - 1) / 2.0;
    for (size_t j = 0; j < kCount; ++j) {
      const double want = 1000.0 * rank_sum + static_cast<double>(size) * (rank * kCount + j);
      if (sums[j] != want) {
        return absl::InternalError(absl::StrCat("recv[", j, "] = ", sums[j], ", want ", want));
      }
    }
    return absl::OkStatus();
  });
  for (const absl::Status& status : statuses) {
    EXPECT_TRUE(status.ok()) << status;
  }
}

TEST(NcclCollectiveTest, MissingPeerFailsRendezvousWithinTimeout) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device (a --config=cuda test needs one)";
  InMemoryKeyValueStore store;
  // Rank 0 of a group of 2 arrives; rank 1 never does.
  auto collective = NewNcclCollectiveFactory()->Create("dp", 0, 2, &store, kShortTimeout);
  EXPECT_EQ(collective.status().code(), absl::StatusCode::kDeadlineExceeded) << collective.status();
}

TEST(NcclCollectiveTest, MissingUniqueIdFailsRendezvousWithinTimeout) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device (a --config=cuda test needs one)";
  InMemoryKeyValueStore store;
  // Rank 1 arrives; rank 0, which publishes the unique id, never does.
  auto collective = NewNcclCollectiveFactory()->Create("dp", 1, 2, &store, kShortTimeout);
  EXPECT_EQ(collective.status().code(), absl::StatusCode::kDeadlineExceeded) << collective.status();
}

TEST(NcclCollectiveTest, EnqueueOnlyNeedsAStream) {
  NcclOptions options;
  options.enqueue_only = true;
  InMemoryKeyValueStore store;
  auto collective = NewNcclCollectiveFactory(options)->Create("g", 0, 1, &store, kTimeout);
  EXPECT_EQ(collective.status().code(), absl::StatusCode::kInvalidArgument) << collective.status();
  EXPECT_EQ(store.size(), 0);
}

// A stream each rank owns, destroyed at the end of the scope.
class Stream {
 public:
  Stream() {
    if (cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) != cudaSuccess) {
      stream_ = nullptr;
    }
  }
  ~Stream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

NcclOptions EnqueueOnly(cudaStream_t stream) {
  NcclOptions options;
  options.stream = stream;
  options.enqueue_only = true;
  return options;
}

TEST(NcclCollectiveTest, EnqueueOnlyOperationsBackToBackThenSynchronize) {
  const int size = std::min(DeviceCount(), 8);
  ASSERT_GT(size, 0) << "no CUDA device (a --config=cuda test needs one)";
  InMemoryKeyValueStore store;
  std::vector<absl::Status> statuses = RunRanksOnDevices(size, [&](int rank) -> absl::Status {
    Stream stream;
    if (stream.get() == nullptr) return absl::InternalError("cudaStreamCreate");
    auto collective = NewNcclCollectiveFactory(EnqueueOnly(stream.get()))
                          ->Create("dp", rank, size, &store, kTimeout);
    if (!collective.ok()) return collective.status();

    // Three gathers into three buffers and a reduce-scatter, none waited for.
    constexpr int kRounds = 3;
    constexpr size_t kBytes = 4097;
    std::vector<std::unique_ptr<DeviceBuffer<uint8_t>>> sends, recvs;
    for (int round = 0; round < kRounds; ++round) {
      std::vector<uint8_t> bytes(kBytes);
      for (size_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>(rank * 31 + round + i);
      sends.push_back(std::make_unique<DeviceBuffer<uint8_t>>(kBytes));
      recvs.push_back(std::make_unique<DeviceBuffer<uint8_t>>(kBytes * size));
      if (!sends.back()->CopyFrom(bytes)) return absl::InternalError("copy");
    }
    constexpr size_t kCount = 777;
    std::vector<float> send_floats(kCount * size);
    for (size_t k = 0; k < send_floats.size(); ++k) {
      send_floats[k] = static_cast<float>(rank * 1000 + k);
    }
    DeviceBuffer<float> fsend(kCount * size), frecv(kCount);
    if (!fsend.CopyFrom(send_floats)) return absl::InternalError("copy");

    for (int round = 0; round < kRounds; ++round) {
      absl::Status status =
          (*collective)->AllGather(sends[round]->get(), recvs[round]->get(), kBytes);
      if (!status.ok()) return status;
    }
    absl::Status status = (*collective)->ReduceScatterSum(fsend.get(), frecv.get(), kCount);
    if (!status.ok()) return status;
    status = (*collective)->Synchronize();
    if (!status.ok()) return status;

    for (int round = 0; round < kRounds; ++round) {
      const std::vector<uint8_t> gathered = recvs[round]->ToHost();
      for (int r = 0; r < size; ++r) {
        for (size_t i = 0; i < kBytes; ++i) {
          if (gathered[r * kBytes + i] != static_cast<uint8_t>(r * 31 + round + i)) {
            return absl::InternalError(
                absl::StrCat("round ", round, ": gather byte ", i, " of rank ", r));
          }
        }
      }
    }
    const std::vector<float> sums = frecv.ToHost();
    const double rank_sum = size * (size - 1) / 2.0;
    for (size_t j = 0; j < kCount; ++j) {
      const double want = 1000.0 * rank_sum + static_cast<double>(size) * (rank * kCount + j);
      if (sums[j] != want) {
        return absl::InternalError(absl::StrCat("recv[", j, "] = ", sums[j], ", want ", want));
      }
    }
    return (*collective)->Synchronize();
  });
  for (const absl::Status& status : statuses) {
    EXPECT_TRUE(status.ok()) << status;
  }
}

// Holds `stream` until Release() (or, as a bound so that a failing test
// cannot hang, kHoldBound): a host function blocks the stream.
class StreamHold {
 public:
  explicit StreamHold(cudaStream_t stream) {
    ok_ = cudaLaunchHostFunc(stream, &StreamHold::Block, &released_) == cudaSuccess;
  }
  ~StreamHold() { Release(); }
  bool ok() const { return ok_; }
  void Release() {
    if (!released_.HasBeenNotified()) released_.Notify();
  }

 private:
  static constexpr absl::Duration kHoldBound = absl::Seconds(30);
  static void Block(void* released) {
    static_cast<absl::Notification*>(released)->WaitForNotificationWithTimeout(kHoldBound);
  }
  absl::Notification released_;
  bool ok_ = false;
};

TEST(NcclCollectiveTest, EnqueueOnlyOperationPastItsTimeoutIsDeadlineExceeded) {
  ASSERT_GT(DeviceCount(), 0) << "no CUDA device (a --config=cuda test needs one)";
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  Stream stream;
  ASSERT_NE(stream.get(), nullptr);
  InMemoryKeyValueStore store;
  auto collective = NewNcclCollectiveFactory(EnqueueOnly(stream.get()))
                        ->Create("stuck", 0, 1, &store, kShortTimeout);
  ASSERT_TRUE(collective.ok()) << collective.status();
  DeviceBuffer<uint8_t> send(64), recv(64);
  {
    // The gather is enqueued behind a stream that does not move: the call
    // returns at once, the watchdog fails the group after the timeout.
    StreamHold hold(stream.get());
    ASSERT_TRUE(hold.ok());
    EXPECT_TRUE((*collective)->AllGather(send.get(), recv.get(), 64).ok());
    EXPECT_EQ((*collective)->Synchronize().code(), absl::StatusCode::kDeadlineExceeded);
  }
  EXPECT_EQ((*collective)->AllGather(send.get(), recv.get(), 64).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*collective)->Synchronize().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cudaStreamSynchronize(stream.get()), cudaSuccess);
}

TEST(NcclCollectiveTest, EnqueueOnlyDeadPeerIsAnErrorNotAHang) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs 2 CUDA devices";
  constexpr absl::Duration kGroupTimeout = absl::Seconds(10);
  constexpr size_t kBytes = 1 << 20;
  InMemoryKeyValueStore store;
  absl::Notification rank0_done;
  std::vector<absl::Status> statuses = RunRanksOnDevices(2, [&](int rank) -> absl::Status {
    Stream stream;
    if (stream.get() == nullptr) return absl::InternalError("cudaStreamCreate");
    auto collective = NewNcclCollectiveFactory(EnqueueOnly(stream.get()))
                          ->Create("dead", rank, 2, &store, kGroupTimeout);
    if (!collective.ok()) return collective.status();
    DeviceBuffer<uint8_t> send(kBytes), recv(2 * kBytes);
    // One gather both ranks issue: the group works.
    absl::Status status = (*collective)->AllGather(send.get(), recv.get(), kBytes);
    if (status.ok()) status = (*collective)->Synchronize();
    if (!status.ok()) return status;
    if (rank == 1) {
      // Rank 1 stops issuing operations, as a dead peer would.
      rank0_done.WaitForNotification();
      return absl::OkStatus();
    }
    absl::Status enqueued = (*collective)->AllGather(send.get(), recv.get(), kBytes);
    absl::Status synced = (*collective)->Synchronize();
    absl::Status after = (*collective)->AllGather(send.get(), recv.get(), kBytes);
    rank0_done.Notify();
    if (!enqueued.ok()) return absl::InternalError(absl::StrCat("enqueue: ", enqueued.ToString()));
    if (synced.code() != absl::StatusCode::kDeadlineExceeded) {
      return absl::InternalError(absl::StrCat("Synchronize: ", synced.ToString()));
    }
    if (after.code() != absl::StatusCode::kFailedPrecondition) {
      return absl::InternalError(absl::StrCat("after: ", after.ToString()));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_TRUE(statuses[1].ok()) << statuses[1];
}

}  // namespace
}  // namespace worker
}  // namespace psync

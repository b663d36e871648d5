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

}  // namespace
}  // namespace worker
}  // namespace psync

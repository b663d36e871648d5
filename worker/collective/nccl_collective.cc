#include "worker/collective/nccl_collective.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "worker/collective/group_args.h"

namespace psync {
namespace worker {
namespace {

constexpr absl::string_view kBackend = "nccl";
constexpr absl::string_view kUniqueIdKey = "unique_id";
// A waiting rank spins (yielding the CPU between checks) for the first kSpinFor, which covers a
// chunk all-gather, then checks every kPollInterval. Sleeping from the start cost 60-100 us per
// call (the kernel's timer slack), a third of a 16 MiB all-gather on NVLink.
constexpr absl::Duration kSpinFor = absl::Milliseconds(5);
constexpr absl::Duration kPollInterval = absl::Microseconds(20);

// Yields while spinning, sleeps afterwards.
void Pause(absl::Time started) {
  if (absl::Now() - started < kSpinFor) {
    std::this_thread::yield();
  } else {
    absl::SleepFor(kPollInterval);
  }
}

absl::StatusCode NcclCode(ncclResult_t result) {
  switch (result) {
    case ncclSystemError:
    case ncclRemoteError:
      return absl::StatusCode::kUnavailable;
    case ncclInvalidArgument:
    case ncclInvalidUsage:
      return absl::StatusCode::kInvalidArgument;
    default:
      return absl::StatusCode::kInternal;
  }
}

absl::Status NcclStatus(absl::string_view what, ncclResult_t result, ncclComm_t comm) {
  const char* detail = ncclGetLastError(comm);
  return absl::Status(NcclCode(result),
                      absl::StrCat(what, ": ", ncclGetErrorString(result),
                                   detail != nullptr && *detail != '\0' ? " (" : "",
                                   detail != nullptr ? detail : "",
                                   detail != nullptr && *detail != '\0' ? ")" : ""));
}

absl::Status CudaStatus(absl::string_view what, cudaError_t error) {
  const absl::StatusCode code = (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver)
                                    ? absl::StatusCode::kFailedPrecondition
                                    : absl::StatusCode::kInternal;
  return absl::Status(
      code, absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error)));
}

absl::Status TimedOut(absl::string_view what, absl::Duration timeout) {
  return absl::DeadlineExceededError(
      absl::StrCat(what, ": not finished within ", absl::FormatDuration(timeout),
                   "; a peer is gone or did not issue the same operation"));
}

// Waits until `comm` has no NCCL call in progress. Non-OK when NCCL reports
// an error or `deadline` passes first.
absl::Status WaitForComm(ncclComm_t comm, absl::Time deadline, absl::Duration timeout,
                         absl::string_view what) {
  const absl::Time started = absl::Now();
  for (;;) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) return NcclStatus(what, result, comm);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclStatus(what, state, comm);
    if (absl::Now() >= deadline) return TimedOut(what, timeout);
    Pause(started);
  }
}

// Waits until all work on `stream` has finished. Non-OK when CUDA or the
// communicator reports an error or `deadline` passes first.
absl::Status WaitForStream(ncclComm_t comm, cudaStream_t stream, absl::Time deadline,
                           absl::Duration timeout, absl::string_view what) {
  const absl::Time started = absl::Now();
  for (;;) {
    const cudaError_t error = cudaStreamQuery(stream);
    if (error == cudaSuccess) return absl::OkStatus();
    if (error != cudaErrorNotReady) return CudaStatus(what, error);
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm, &state);
    if (result != ncclSuccess) return NcclStatus(what, result, comm);
    if (state != ncclSuccess && state != ncclInProgress) {
      return NcclStatus(what, state, comm);
    }
    if (absl::Now() >= deadline) return TimedOut(what, timeout);
    Pause(started);
  }
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(std::string group, int rank, int size, ncclComm_t comm, cudaStream_t stream,
                 bool owns_stream, absl::Duration timeout)
      : group_(std::move(group)),
        rank_(rank),
        size_(size),
        stream_(stream),
        owns_stream_(owns_stream),
        timeout_(timeout),
        comm_(comm) {}

  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  ~NcclCollective() override {
    absl::MutexLock lock(&mu_);
    if (comm_ != nullptr) {
      // Flush what was issued (bounded by the timeout), then free; abort
      // when the flush fails so that destruction never hangs.
      const ncclResult_t result = ncclCommFinalize(comm_);
      const bool flushed = (result == ncclSuccess || result == ncclInProgress) &&
                           WaitForComm(comm_, absl::Now() + timeout_, timeout_, "finalize").ok();
      if (flushed) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
      comm_ = nullptr;
    }
    if (owns_stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status DoAllGather(const void* send, void* recv, size_t bytes_per_rank) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return Run("AllGather", [&](ncclComm_t comm) {
      return ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm, stream_);
    });
  }

  absl::Status DoReduceScatterSum(const float* send, float* recv, size_t count_per_rank) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return Run("ReduceScatterSum", [&](ncclComm_t comm) {
      return ncclReduceScatter(send, recv, count_per_rank, ncclFloat32, ncclSum, comm, stream_);
    });
  }

 private:
  // Enqueues one operation with `enqueue(comm)` and waits for it to finish.
  template <typename Enqueue>
  absl::Status Run(absl::string_view op, Enqueue enqueue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!broken_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("nccl group \"", group_,
                       "\" is unusable after an earlier error; "
                       "create it again under a new name. First error: ",
                       broken_.ToString()));
    }
    const std::string what =
        absl::StrCat("nccl ", op, " in group \"", group_, "\" (rank ", rank_, " of ", size_, ")");
    const absl::Time deadline = absl::Now() + timeout_;
    const ncclResult_t result = enqueue(comm_);
    if (result == ncclInvalidArgument || result == ncclInvalidUsage) {
      // Rejected before anything was enqueued: the group stays usable.
      return NcclStatus(what, result, comm_);
    }
    if (result != ncclSuccess && result != ncclInProgress) {
      return Fail(NcclStatus(what, result, comm_));
    }
    absl::Status status = WaitForComm(comm_, deadline, timeout_, what);
    if (status.ok()) {
      status = WaitForStream(comm_, stream_, deadline, timeout_, what);
    }
    if (!status.ok()) return Fail(std::move(status));
    return absl::OkStatus();
  }

  // Records `status` as the group's first error and aborts the
  // communicator, which also ends its kernels still waiting on peers.
  absl::Status Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    broken_ = status;
    if (comm_ != nullptr) {
      ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    return status;
  }

  // Constant after construction.
  const std::string group_;
  const int rank_;
  const int size_;
  const cudaStream_t stream_;
  const bool owns_stream_;
  const absl::Duration timeout_;

  // State below is protected by mu_, held for the whole of each operation.
  absl::Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);  // Null once aborted.
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
};

class NcclCollectiveFactory final : public CollectiveFactory {
 public:
  explicit NcclCollectiveFactory(NcclOptions options) : options_(options) {}

  absl::string_view backend() const override { return kBackend; }

  absl::StatusOr<std::unique_ptr<Collective>> DoCreate(absl::string_view group, int rank, int size,
                                                       KeyValueStore* store,
                                                       absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    const std::string what =
        absl::StrCat("forming nccl group \"", group, "\" (rank ", rank, " of ", size, ")");

    int devices = 0;
    const cudaError_t error = cudaGetDeviceCount(&devices);
    if (error != cudaSuccess) return CudaStatus(what, error);
    if (devices == 0) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": no CUDA device"));
    }

    absl::StatusOr<ncclUniqueId> id = ExchangeUniqueId(what, group, rank, store, deadline);
    if (!id.ok()) return id.status();

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t result = ncclCommInitRankConfig(&comm, size, *id, rank, &config);
    if (result != ncclSuccess && result != ncclInProgress) {
      absl::Status status = NcclStatus(what, result, comm);
      if (comm != nullptr) ncclCommAbort(comm);
      return status;
    }
    absl::Status status = WaitForComm(comm, deadline, timeout, what);
    if (!status.ok()) {
      ncclCommAbort(comm);
      return status;
    }

    cudaStream_t stream = options_.stream;
    const bool owns_stream = stream == nullptr;
    if (owns_stream) {
      const cudaError_t stream_error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      if (stream_error != cudaSuccess) {
        ncclCommAbort(comm);
        return CudaStatus(what, stream_error);
      }
    }
    return std::unique_ptr<Collective>(
        new NcclCollective(std::string(group), rank, size, comm, stream, owns_stream, timeout));
  }

 private:
  // Rank 0 creates the group's unique id and publishes it; the other ranks
  // wait for it until `deadline`.
  static absl::StatusOr<ncclUniqueId> ExchangeUniqueId(absl::string_view what,
                                                       absl::string_view group, int rank,
                                                       KeyValueStore* store, absl::Time deadline) {
    const std::string key = absl::StrCat(GroupKeyPrefix(kBackend, group), kUniqueIdKey);
    ncclUniqueId id;
    if (rank == 0) {
      const ncclResult_t result = ncclGetUniqueId(&id);
      if (result != ncclSuccess) return NcclStatus(what, result, nullptr);
      absl::Status status = store->Set(key, absl::string_view(id.internal, sizeof(id.internal)));
      if (!status.ok()) {
        return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
      }
      return id;
    }
    absl::Status status =
        store->Wait({key}, std::max(deadline - absl::Now(), absl::ZeroDuration()));
    absl::StatusOr<std::string> value =
        status.ok() ? store->Get(key) : absl::StatusOr<std::string>(status);
    if (!value.ok()) {
      return absl::Status(value.status().code(),
                          absl::StrCat(what, ": ", value.status().message()));
    }
    if (value->size() != sizeof(id.internal)) {
      return absl::InternalError(absl::StrCat(what, ": the unique id under \"", key, "\" has ",
                                              value->size(), " bytes, want ", sizeof(id.internal)));
    }
    value->copy(id.internal, sizeof(id.internal));
    return id;
  }

  // Constant after construction.
  const NcclOptions options_;
};

}  // namespace

std::unique_ptr<CollectiveFactory> NewNcclCollectiveFactory(NcclOptions options) {
  return std::make_unique<NcclCollectiveFactory>(options);
}

}  // namespace worker
}  // namespace psync

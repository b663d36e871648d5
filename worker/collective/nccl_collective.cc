#include "worker/collective/nccl_collective.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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
                 bool owns_stream, absl::Duration timeout, int device, bool enqueue_only,
                 absl::Duration watchdog_interval)
      : group_(std::move(group)),
        rank_(rank),
        size_(size),
        stream_(stream),
        owns_stream_(owns_stream),
        timeout_(timeout),
        device_(device),
        enqueue_only_(enqueue_only),
        watchdog_interval_(watchdog_interval),
        comm_(comm) {
    if (enqueue_only_) watchdog_ = std::thread([this] { Watchdog(); });
  }

  NcclCollective(const NcclCollective&) = delete;
  NcclCollective& operator=(const NcclCollective&) = delete;

  ~NcclCollective() override {
    if (watchdog_.joinable()) {
      // Let what is in flight finish (or fail, bounded by the timeout) before
      // the watchdog stops.
      WaitInFlight();
      {
        absl::MutexLock lock(&mu_);
        stopping_ = true;
      }
      watchdog_.join();
    }
    AbortFailed();
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
    for (const InFlight& op : in_flight_) cudaEventDestroy(op.done);
    for (cudaEvent_t event : free_events_) cudaEventDestroy(event);
    if (owns_stream_) cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status DoAllGather(const void* send, void* recv, size_t bytes_per_rank) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      status = Run("AllGather", [&](ncclComm_t comm) {
        return ncclAllGather(send, recv, bytes_per_rank, ncclUint8, comm, stream_);
      });
    }
    AbortFailed();
    return status;
  }

  absl::Status DoReduceScatterSum(const float* send, float* recv, size_t count_per_rank) override
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::Status status;
    {
      absl::MutexLock lock(&mu_);
      status = Run("ReduceScatterSum", [&](ncclComm_t comm) {
        return ncclReduceScatter(send, recv, count_per_rank, ncclFloat32, ncclSum, comm, stream_);
      });
    }
    AbortFailed();
    return status;
  }

  absl::Status Synchronize() override ABSL_LOCKS_EXCLUDED(mu_) {
    WaitInFlight();
    absl::MutexLock lock(&mu_);
    return broken_.ok() ? absl::OkStatus() : ReportBroken();
  }

 private:
  // An enqueue_only operation that has not been seen to finish yet.
  struct InFlight {
    cudaEvent_t done;  // Recorded on stream_ right after the operation.
    absl::Time deadline;
    std::string what;
  };

  // Enqueues one operation with `enqueue(comm)` and, unless enqueue_only_,
  // waits for it to finish.
  template <typename Enqueue>
  absl::Status Run(absl::string_view op, Enqueue enqueue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!broken_.ok()) return ReportBroken();
    std::string what =
        absl::StrCat("nccl ", op, " in group \"", group_, "\" (rank ", rank_, " of ", size_, ")");
    const absl::Time deadline = absl::Now() + timeout_;
    const ncclResult_t result = enqueue(comm_);
    if (result == ncclInvalidArgument || result == ncclInvalidUsage) {
      // Rejected before anything was enqueued: the group stays usable.
      return NcclStatus(what, result, comm_);
    }
    if (result != ncclSuccess && result != ncclInProgress) {
      return FailAndReport(NcclStatus(what, result, comm_));
    }
    // The enqueue itself (it may set up connections on first use).
    absl::Status status = WaitForComm(comm_, deadline, timeout_, what);
    if (!status.ok()) return FailAndReport(std::move(status));
    if (enqueue_only_) {
      cudaEvent_t done = nullptr;
      if (!free_events_.empty()) {
        done = free_events_.back();
        free_events_.pop_back();
      } else if (const cudaError_t error = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
                 error != cudaSuccess) {
        return FailAndReport(CudaStatus(what, error));
      }
      if (const cudaError_t error = cudaEventRecord(done, stream_); error != cudaSuccess) {
        cudaEventDestroy(done);
        return FailAndReport(CudaStatus(what, error));
      }
      in_flight_.push_back(InFlight{done, deadline, std::move(what)});
      return absl::OkStatus();
    }
    status = WaitForStream(comm_, stream_, deadline, timeout_, what);
    if (!status.ok()) return FailAndReport(std::move(status));
    return absl::OkStatus();
  }

  // Retires the operations in flight that have finished, oldest first, and
  // fails the group when one failed, NCCL reports an error, or the oldest
  // unfinished one is past its deadline. Returns whether any is in flight.
  bool CheckInFlight() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!in_flight_.empty()) {
      InFlight& oldest = in_flight_.front();
      const cudaError_t error = cudaEventQuery(oldest.done);
      if (error == cudaErrorNotReady) break;
      if (error != cudaSuccess) {
        Fail(CudaStatus(oldest.what, error));
        return false;
      }
      free_events_.push_back(oldest.done);
      in_flight_.pop_front();
    }
    if (in_flight_.empty()) return false;
    ncclResult_t state = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm_, &state);
    if (result != ncclSuccess) {
      Fail(NcclStatus(in_flight_.front().what, result, comm_));
    } else if (state != ncclSuccess && state != ncclInProgress) {
      Fail(NcclStatus(in_flight_.front().what, state, comm_));
    } else if (absl::Now() >= in_flight_.front().deadline) {
      Fail(TimedOut(in_flight_.front().what, timeout_));
    }
    return !in_flight_.empty();
  }

  // Waits until nothing is in flight: every operation finished or the group
  // failed (which the deadline of each operation bounds). A failure found
  // here is aborted by the watchdog (or the destructor), so that the caller
  // learns the error without waiting for the abort.
  void WaitInFlight() ABSL_LOCKS_EXCLUDED(mu_) {
    const absl::Time started = absl::Now();
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (!CheckInFlight()) return;
      }
      Pause(started);
    }
  }

  // The watchdog of an enqueue_only group: checks the operations in flight
  // every watchdog_interval_ until the destructor stops it.
  void Watchdog() ABSL_LOCKS_EXCLUDED(mu_) {
    cudaSetDevice(device_);
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), watchdog_interval_)) return;
        CheckInFlight();
      }
      AbortFailed();
    }
  }

  // Records `status` as the group's first error and hands the communicator
  // to AbortFailed(), which every path that can fail calls after releasing
  // mu_: the abort ends the communicator's kernels still waiting on peers,
  // and may itself wait for the GPU, which must not keep callers from
  // learning the error. Operations in flight are dropped (their events are
  // destroyed once done).
  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    broken_ = std::move(status);
    if (comm_ != nullptr) {
      to_abort_ = comm_;
      comm_ = nullptr;
    }
    for (const InFlight& op : in_flight_) cudaEventDestroy(op.done);
    in_flight_.clear();
  }

  // Aborts the communicator Fail() set aside, if any: exactly one caller
  // takes it. Called after each operation, by the watchdog after each check,
  // and by the destructor once the watchdog has stopped, so no abort is under
  // way when the destructor returns.
  void AbortFailed() ABSL_LOCKS_EXCLUDED(mu_) {
    ncclComm_t comm = nullptr;
    {
      absl::MutexLock lock(&mu_);
      comm = std::exchange(to_abort_, nullptr);
    }
    if (comm != nullptr) ncclCommAbort(comm);
  }

  absl::Status FailAndReport(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Fail(std::move(status));
    return ReportBroken();
  }

  // The group's first error as itself the first time a caller sees it, as
  // FAILED_PRECONDITION quoting it afterwards.
  absl::Status ReportBroken() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!broken_reported_) {
      broken_reported_ = true;
      return broken_;
    }
    return absl::FailedPreconditionError(
        absl::StrCat("nccl group \"", group_,
                     "\" is unusable after an earlier error; "
                     "create it again under a new name. First error: ",
                     broken_.ToString()));
  }

  // Constant after construction.
  const std::string group_;
  const int rank_;
  const int size_;
  const cudaStream_t stream_;
  const bool owns_stream_;
  const absl::Duration timeout_;
  const int device_;
  const bool enqueue_only_;
  const absl::Duration watchdog_interval_;

  // State below is protected by mu_, held for the whole of each operation's
  // enqueue (and, without enqueue_only_, its wait) and of each watchdog check.
  absl::Mutex mu_;
  ncclComm_t comm_ ABSL_GUARDED_BY(mu_);                // Null once the group has failed.
  ncclComm_t to_abort_ ABSL_GUARDED_BY(mu_) = nullptr;  // Set by Fail().
  absl::Status broken_ ABSL_GUARDED_BY(mu_);
  bool broken_reported_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<InFlight> in_flight_ ABSL_GUARDED_BY(mu_);  // Oldest first.
  std::vector<cudaEvent_t> free_events_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Runs Watchdog() when enqueue_only_; joined by the destructor.
  std::thread watchdog_;
};

class NcclCollectiveFactory final : public CollectiveFactory {
 public:
  explicit NcclCollectiveFactory(NcclOptions options) : options_(options) {}

  absl::string_view backend() const override { return kBackend; }

  absl::StatusOr<std::unique_ptr<Collective>> DoCreate(absl::string_view group, int rank, int size,
                                                       KeyValueStore* store,
                                                       absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    if (options_.enqueue_only && options_.stream == nullptr) {
      return absl::InvalidArgumentError(
          "NcclOptions::enqueue_only needs NcclOptions::stream: the caller orders its use of the "
          "results on that stream");
    }
    if (options_.watchdog_interval <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError("NcclOptions::watchdog_interval must be positive");
    }
    const std::string what =
        absl::StrCat("forming nccl group \"", group, "\" (rank ", rank, " of ", size, ")");

    int devices = 0;
    const cudaError_t error = cudaGetDeviceCount(&devices);
    if (error != cudaSuccess) return CudaStatus(what, error);
    if (devices == 0) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": no CUDA device"));
    }
    int device = 0;
    if (const cudaError_t device_error = cudaGetDevice(&device); device_error != cudaSuccess) {
      return CudaStatus(what, device_error);
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
        new NcclCollective(std::string(group), rank, size, comm, stream, owns_stream, timeout,
                           device, options_.enqueue_only, options_.watchdog_interval));
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

// The NCCL collective backend: groups of GPU ranks, one CUDA device per rank.
// Built only with --define=cuda=1 (--config=cuda); other code reaches it
// through MakeCollectiveFactory("nccl") in collective_factory.h.
//
// Buffers are CUDA device pointers on the device that was current on the
// calling thread when Create() ran; call cudaSetDevice() first. AllGather
// moves raw bytes (ncclUint8), so bf16, fp8 or any other encoding gathers
// as is; ReduceScatterSum is ncclReduceScatter in fp32 with ncclSum.
//
// Rendezvous: the group's rank 0 creates the ncclUniqueId and publishes it in
// the KeyValueStore under "collective/nccl/<group>/unique_id"; the other ranks
// wait for it there, then all call ncclCommInitRankConfig.
//
// Streams: operations are enqueued on NcclOptions::stream when it is set
// (the caller owns it and keeps it alive while the group exists), otherwise
// on a non-blocking stream each Collective creates and destroys.
//
// Completion, by default (NcclOptions::enqueue_only false): each call waits
// until its operation has finished on the stream, so returning OK means `recv`
// holds the result, as with Gloo. Work the caller queued earlier on the same
// stream is waited for too. The calling thread polls ncclCommGetAsyncError()
// and cudaStreamQuery() until the operation finishes, NCCL reports an error,
// or the group's timeout passes.
//
// Completion with NcclOptions::enqueue_only (needs NcclOptions::stream): a
// call returns OK once its operation is enqueued on the stream, without
// waiting for it, as torch.distributed's NCCL backend does. Work the caller
// enqueues later on the same stream sees the result; the caller keeps `send`
// and `recv` alive and untouched until then, and learns whether the
// operation succeeded from Synchronize() (collective.h) or from a later call.
// A watchdog thread per group checks the operations in flight every
// NcclOptions::watchdog_interval: an operation still unfinished when the
// group's timeout has passed since it was enqueued, or an error NCCL or CUDA
// reports, makes the watchdog abort the communicator, so a dead peer is an
// error within about timeout + watchdog_interval, never a hang; the abort
// also ends the stuck kernel, so a caller blocked in cudaStreamSynchronize()
// on the stream is released. The next Synchronize() or operation returns
// that error (DEADLINE_EXCEEDED, UNAVAILABLE or INTERNAL as below); every
// later one FAILED_PRECONDITION.
//
// Timeouts: communicators are created non-blocking (config.blocking = 0). On
// timeout or error the communicator is aborted (ncclCommAbort), which also
// frees the GPU from the stuck kernel, and the call returns
// DEADLINE_EXCEEDED (timeout), UNAVAILABLE (NCCL system or remote error) or
// INTERNAL (CUDA or NCCL internal error). Limitation: without enqueue_only, a
// rank waits for its operation's completion by polling at a fine interval,
// costing one host thread per group while an operation runs.
//
// Thread-safety, ownership and errors: see collective.h. The factory is
// thread-safe.
#ifndef PSYNC_WORKER_COLLECTIVE_NCCL_COLLECTIVE_H_
#define PSYNC_WORKER_COLLECTIVE_NCCL_COLLECTIVE_H_

#include <memory>

#include "absl/time/time.h"
#include "worker/collective/collective.h"

// cudaStream_t is `CUstream_st*`; declared here so that callers need not
// include the CUDA headers.
struct CUstream_st;

namespace psync {
namespace worker {

struct NcclOptions {
  // Stream the operations run on; null: each Collective owns a stream.
  CUstream_st* stream = nullptr;
  // Return once an operation is enqueued instead of when it has finished
  // (see "Completion" above). Needs `stream`: Create() refuses it without
  // one with INVALID_ARGUMENT.
  bool enqueue_only = false;
  // How often the watchdog of an enqueue_only group checks its operations.
  absl::Duration watchdog_interval = absl::Milliseconds(10);
};

// Returns a factory for NCCL groups configured by `options`. Creating the
// factory touches no GPU; Create() does.
std::unique_ptr<CollectiveFactory> NewNcclCollectiveFactory(NcclOptions options = NcclOptions());

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COLLECTIVE_NCCL_COLLECTIVE_H_

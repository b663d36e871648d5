// allgather_bench: bus bandwidth of psync's NCCL all-gather (worker/collective, the path a chunk's
// param sync takes) between the GPUs of one host, one thread per GPU, at several sizes.
//
//   allgather_bench [--ranks N] [--iters K] [--sizes_mib 1,4,16,64,256] [--enqueue_only]
//
// Each size: warm-up, then K timed all-gathers; prints the median time and the bus bandwidth
// (size_per_rank * (N - 1) / time, the nccl-tests convention) in GB/s. By default each call waits
// for its gather (the collective's own completion poll); with --enqueue_only the group enqueues on
// a stream of the benchmark's (NcclOptions::enqueue_only, the watchdog detects dead peers) and each
// timed call is followed by cudaStreamSynchronize, as torch_allgather.py does with
// torch.cuda.synchronize(). Built with --config=cuda.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "worker/collective/in_memory_kv_store.h"
#include "worker/collective/nccl_collective.h"

ABSL_FLAG(int, ranks, 2, "GPUs (one rank each)");
ABSL_FLAG(int, iters, 20, "timed all-gathers per size");
ABSL_FLAG(bool, enqueue_only, false,
          "enqueue without waiting (NcclOptions::enqueue_only); synchronize the stream per call");
ABSL_FLAG(std::string, sizes_mib, "1,4,16,64,256", "bytes per rank, MiB, comma-separated");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_ranks);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::vector<size_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes_mib), ',')) {
    sizes.push_back(static_cast<size_t>(std::stoul(std::string(s))) << 20);
  }
  const bool enqueue_only = absl::GetFlag(FLAGS_enqueue_only);
  psync::worker::InMemoryKeyValueStore store;
  std::vector<std::vector<double>> seconds(sizes.size(), std::vector<double>(iters));
  // Host time inside the AllGather call alone (the whole time unless --enqueue_only).
  std::vector<std::vector<double>> call_seconds(sizes.size(), std::vector<double>(iters));
  std::vector<int> failures(n, 0);
  absl::Barrier* start = new absl::Barrier(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      cudaStream_t stream = nullptr;
      psync::worker::NcclOptions options;
      if (enqueue_only) {
        cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
        options.stream = stream;
        options.enqueue_only = true;
      }
      auto group = psync::worker::NewNcclCollectiveFactory(options)->Create("bench", r, n, &store,
                                                                            absl::Seconds(60));
      if (!group.ok()) {
        std::fprintf(stderr, "rank %d: %s\n", r, group.status().ToString().c_str());
        failures[r] = 1;
        return;
      }
      for (size_t i = 0; i < sizes.size(); ++i) {
        void* send = nullptr;
        void* recv = nullptr;
        cudaMalloc(&send, sizes[i]);
        cudaMalloc(&recv, sizes[i] * n);
        cudaMemset(send, r + 1, sizes[i]);
        cudaDeviceSynchronize();
        // The stream synchronization of --enqueue_only (a no-op otherwise: the call waited).
        auto finish = [&] {
          if (stream != nullptr) cudaStreamSynchronize(stream);
        };
        for (int w = 0; w < 3; ++w) {
          (void)(*group)->AllGather(send, recv, sizes[i]);
          finish();
        }
        for (int k = 0; k < iters; ++k) {
          const auto t0 = std::chrono::steady_clock::now();
          absl::Status s = (*group)->AllGather(send, recv, sizes[i]);
          const auto called = std::chrono::steady_clock::now();
          finish();
          const auto t1 = std::chrono::steady_clock::now();
          if (!s.ok()) failures[r] = 1;
          if (r == 0) {
            seconds[i][k] = std::chrono::duration<double>(t1 - t0).count();
            call_seconds[i][k] = std::chrono::duration<double>(called - t0).count();
          }
        }
        if (!(*group)->Synchronize().ok()) failures[r] = 1;
        // Check: every rank's block holds its fill byte.
        std::vector<unsigned char> host(sizes[i] * n);
        cudaMemcpy(host.data(), recv, host.size(), cudaMemcpyDeviceToHost);
        for (int q = 0; q < n; ++q) {
          if (host[q * sizes[i]] != q + 1 || host[(q + 1) * sizes[i] - 1] != q + 1) failures[r] = 1;
        }
        cudaFree(send);
        cudaFree(recv);
      }
      group->reset();
      if (stream != nullptr) cudaStreamDestroy(stream);
    });
  }
  for (auto& t : threads) t.join();
  for (int f : failures) {
    if (f) {
      std::fprintf(stderr, "allgather_bench: FAILED (see above)\n");
      return 1;
    }
  }
  std::printf("%12s %12s %12s %12s\n", "MiB/rank", "median_us", "busbw_GB/s", "call_us");
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::sort(seconds[i].begin(), seconds[i].end());
    std::sort(call_seconds[i].begin(), call_seconds[i].end());
    const double t = seconds[i][iters / 2];
    std::printf("%12zu %12.1f %12.1f %12.1f\n", sizes[i] >> 20, t * 1e6,
                sizes[i] * double(n - 1) / t / 1e9, call_seconds[i][iters / 2] * 1e6);
  }
  return 0;
}

// allgather_bench: bus bandwidth of psync's NCCL all-gather (worker/collective, the path a chunk's
// param sync takes) between the GPUs of one host, one thread per GPU, at several sizes.
//
//   allgather_bench [--ranks N] [--iters K] [--sizes_mib 1,4,16,64,256]
//
// Each size: warm-up, then K timed all-gathers; prints the median time and the bus bandwidth
// (size_per_rank * (N - 1) / time, the nccl-tests convention) in GB/s. Built with --config=cuda.
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
ABSL_FLAG(std::string, sizes_mib, "1,4,16,64,256", "bytes per rank, MiB, comma-separated");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_ranks);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::vector<size_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes_mib), ',')) {
    sizes.push_back(static_cast<size_t>(std::stoul(std::string(s))) << 20);
  }
  psync::worker::InMemoryKeyValueStore store;
  auto factory = psync::worker::NewNcclCollectiveFactory();
  std::vector<std::vector<double>> seconds(sizes.size(), std::vector<double>(iters));
  std::vector<int> failures(n, 0);
  absl::Barrier* start = new absl::Barrier(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      auto group = factory->Create("bench", r, n, &store, absl::Seconds(60));
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
        for (int w = 0; w < 3; ++w) (void)(*group)->AllGather(send, recv, sizes[i]);
        for (int k = 0; k < iters; ++k) {
          const auto t0 = std::chrono::steady_clock::now();
          absl::Status s = (*group)->AllGather(send, recv, sizes[i]);
          const auto t1 = std::chrono::steady_clock::now();
          if (!s.ok()) failures[r] = 1;
          if (r == 0) seconds[i][k] = std::chrono::duration<double>(t1 - t0).count();
        }
        // Check: every rank's block holds its fill byte.
        std::vector<unsigned char> host(sizes[i] * n);
        cudaMemcpy(host.data(), recv, host.size(), cudaMemcpyDeviceToHost);
        for (int q = 0; q < n; ++q) {
          if (host[q * sizes[i]] != q + 1 || host[(q + 1) * sizes[i] - 1] != q + 1) failures[r] = 1;
        }
        cudaFree(send);
        cudaFree(recv);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int f : failures) {
    if (f) {
      std::fprintf(stderr, "allgather_bench: FAILED (see above)\n");
      return 1;
    }
  }
  std::printf("%12s %12s %12s\n", "MiB/rank", "median_us", "busbw_GB/s");
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::sort(seconds[i].begin(), seconds[i].end());
    const double t = seconds[i][iters / 2];
    std::printf("%12zu %12.1f %12.1f\n", sizes[i] >> 20, t * 1e6,
                sizes[i] * double(n - 1) / t / 1e9);
  }
  return 0;
}

// allgather_bench: bus bandwidth of psync's NCCL all-gather (worker/collective, the path a chunk's
// param sync takes) between the GPUs of one host, one thread per GPU, at several sizes.
//
//   allgather_bench [--ranks N] [--iters K] [--sizes_mib 1,4,16,64,256] [--enqueue_only]
//                   [--rank R --store_dir DIR]
//
// By default the N ranks are threads of this process. With --rank, this process is rank R alone
// (on GPU R), one process per GPU as torch_allgather.py runs; the processes of a run find each
// other through files in DIR (empty at the start, shared by them), and rank 0 prints.
//
// Each size: warm-up, then K timed all-gathers; prints the median time and the bus bandwidth
// (size_per_rank * (N - 1) / time, the nccl-tests convention) in GB/s. By default each call waits
// for its gather (the collective's own completion poll); with --enqueue_only the group enqueues on
// a stream of the benchmark's (NcclOptions::enqueue_only, the watchdog detects dead peers) and each
// timed call is followed by cudaStreamSynchronize, as torch_allgather.py does with
// torch.cuda.synchronize(). Built with --config=cuda.
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "worker/collective/in_memory_kv_store.h"
#include "worker/collective/nccl_collective.h"

ABSL_FLAG(int, ranks, 2, "GPUs (one rank each)");
ABSL_FLAG(int, iters, 20, "timed all-gathers per size");
ABSL_FLAG(bool, enqueue_only, false,
          "enqueue without waiting (NcclOptions::enqueue_only); synchronize the stream per call");
ABSL_FLAG(int, rank, -1, "this process's rank alone (one process per GPU); -1: all, as threads");
ABSL_FLAG(std::string, store_dir, "", "with --rank: the folder the ranks rendezvous through");
ABSL_FLAG(std::string, sizes_mib, "1,4,16,64,256", "bytes per rank, MiB, comma-separated");

namespace {

// The ranks' rendezvous through files in one folder: a key is a file (written to a temporary name,
// then renamed, so a reader sees all of it or nothing).
class FileKeyValueStore final : public psync::worker::KeyValueStore {
 public:
  explicit FileKeyValueStore(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    const std::string path = Path(key);
    const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), value.size());
      if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot rename ", tmp));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(absl::string_view key) override {
    std::ifstream in(Path(key), std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("no key ", key));
    std::ostringstream value;
    value << in.rdbuf();
    return value.str();
  }

  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    for (;;) {
      bool all = true;
      for (const std::string& key : keys) all = all && std::ifstream(Path(key)).good();
      if (all) return absl::OkStatus();
      if (absl::Now() >= deadline) return absl::DeadlineExceededError("keys missing");
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

 private:
  std::string Path(absl::string_view key) const {
    return absl::StrCat(dir_, "/", absl::StrReplaceAll(key, {{"/", "%"}}));
  }

  const std::string dir_;
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int n = absl::GetFlag(FLAGS_ranks);
  const int iters = absl::GetFlag(FLAGS_iters);
  std::vector<size_t> sizes;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes_mib), ',')) {
    sizes.push_back(static_cast<size_t>(std::stoul(std::string(s))) << 20);
  }
  const bool enqueue_only = absl::GetFlag(FLAGS_enqueue_only);
  const int only_rank = absl::GetFlag(FLAGS_rank);
  if (only_rank >= n || (only_rank >= 0 && absl::GetFlag(FLAGS_store_dir).empty())) {
    std::fprintf(stderr, "allgather_bench: --rank needs --store_dir and must be below --ranks\n");
    return 2;
  }
  psync::worker::InMemoryKeyValueStore memory_store;
  FileKeyValueStore file_store(absl::GetFlag(FLAGS_store_dir));
  psync::worker::KeyValueStore& store =
      only_rank >= 0 ? static_cast<psync::worker::KeyValueStore&>(file_store) : memory_store;
  std::vector<std::vector<double>> seconds(sizes.size(), std::vector<double>(iters));
  // Host time inside the AllGather call alone (the whole time unless --enqueue_only).
  std::vector<std::vector<double>> call_seconds(sizes.size(), std::vector<double>(iters));
  std::vector<int> failures(n, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    if (only_rank >= 0 && r != only_rank) continue;
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
  if (only_rank > 0) return 0;  // Rank 0 prints.
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

// Two ranks in two processes (fork) form a Gloo group through a store kept
// as files in the test's temporary directory, then all-gather and
// reduce-scatter across the process boundary.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "worker/collective/gloo_collective.h"
#include "worker/collective/kv_store.h"

namespace psync {
namespace worker {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);

// A KeyValueStore shared by processes through one directory: each key is a
// file named by the key's hex encoding, written to a temporary name and
// renamed into place, so readers see whole values only. Wait() polls.
class DirectoryKeyValueStore final : public KeyValueStore {
 public:
  explicit DirectoryKeyValueStore(std::string dir) : dir_(std::move(dir)) {}

  absl::Status Set(absl::string_view key, absl::string_view value) override {
    const std::string path = PathOf(key);
    const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      out.write(value.data(), value.size());
      if (!out.good()) return absl::UnavailableError("write " + tmp);
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      return absl::UnavailableError("rename " + tmp);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> Get(absl::string_view key) override {
    std::ifstream in(PathOf(key), std::ios::binary);
    if (!in) return absl::NotFoundError(absl::StrCat("key ", key));
    std::ostringstream value;
    value << in.rdbuf();
    return value.str();
  }

  absl::Status Wait(absl::Span<const std::string> keys, absl::Duration timeout) override {
    const absl::Time deadline = absl::Now() + timeout;
    for (const std::string& key : keys) {
      struct stat st;
      while (stat(PathOf(key).c_str(), &st) != 0) {
        if (absl::Now() >= deadline) {
          return absl::DeadlineExceededError(absl::StrCat("key ", key));
        }
        absl::SleepFor(absl::Milliseconds(1));
      }
    }
    return absl::OkStatus();
  }

 private:
  std::string PathOf(absl::string_view key) const {
    return absl::StrCat(dir_, "/", absl::BytesToHexString(key));
  }

  const std::string dir_;
};

// One rank's work; returns the process exit code (0: all checks passed).
int RunRank(const std::string& dir, int rank) {
  DirectoryKeyValueStore store(dir);
  auto collective = NewGlooCollectiveFactory()->Create("dp", rank, 2, &store, kTimeout);
  if (!collective.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, collective.status().ToString().c_str());
    return 1;
  }
  std::vector<uint8_t> send(100000, static_cast<uint8_t>(rank + 1));
  std::vector<uint8_t> recv(2 * send.size());
  absl::Status status = (*collective)->AllGather(send.data(), recv.data(), send.size());
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
    return 2;
  }
  for (size_t i = 0; i < recv.size(); ++i) {
    if (recv[i] != (i < send.size() ? 1 : 2)) return 3;
  }
  std::vector<float> grads(2 * 1000);
  for (size_t k = 0; k < grads.size(); ++k) grads[k] = rank * 10000.0f + k;
  std::vector<float> sums(1000);
  status = (*collective)->ReduceScatterSum(grads.data(), sums.data(), 1000);
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
    return 4;
  }
  for (size_t j = 0; j < sums.size(); ++j) {
    if (sums[j] != 10000.0f + 2.0f * (rank * 1000 + j)) return 5;
  }
  return 0;
}

TEST(GlooCollectiveMultiprocessTest, TwoProcessesGatherAndReduce) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_NE(tmp, nullptr);
  const std::string dir = absl::StrCat(tmp, "/store");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);

  std::vector<pid_t> children;
  for (int rank = 0; rank < 2; ++rank) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) _exit(RunRank(dir, rank));
    children.push_back(pid);
  }
  for (int rank = 0; rank < 2; ++rank) {
    int wstatus = 0;
    ASSERT_EQ(waitpid(children[rank], &wstatus, 0), children[rank]);
    ASSERT_TRUE(WIFEXITED(wstatus)) << "rank " << rank;
    EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "rank " << rank;
  }
}

}  // namespace
}  // namespace worker
}  // namespace psync

// Chaos test with real processes on loopback: a psync-coordinator process and 32 chaos_rank
// processes train 200 steps (4 chunks, 2 optimizers per rank and chunk, random delays, check-ins
// in random order, some sent twice) while the test kills 5 ranks (kill -9; each comes back as a
// new process: a new incarnation, so the generation is aborted and every rank joins again) and
// kills the coordinator 3 times (kill -9, no state on disk; a fresh one comes back on the same
// port and the ranks resume).
//
// The verdict comes from the ranks' own audit logs (see chaos_rank.cc), not from the coordinator:
//  * no early sync: every directive a rank received came after every contributor of the chunk
//    logged its check-in for that step in that segment (one host clock, CLOCK_MONOTONIC);
//  * no double sync: a rank executes each (step, chunk) at most once per segment;
//  * every (segment, step) was either completed by every rank or its segment was aborted on every
//    rank that took part (an abort line, or the rank was the one killed);
//  * every rank finished the run.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/chaos/spawn.h"
#include "tests/chaos/verdict.h"
#include "tests/worker/processes.h"

namespace psync {
namespace {

constexpr uint32_t kRanks = 32;
constexpr uint32_t kChunks = 4;
constexpr uint64_t kSteps = 200;
const std::vector<uint64_t> kRankKillSteps = {15, 35, 55, 75, 95};
const std::vector<uint64_t> kCoordinatorKillSteps = {45, 110, 150};

using chaos::KillAndReap;
using chaos::MonotonicNanos;
using chaos::ProcessLog;
using chaos::ReadFile;
using chaos::Spawn;
using chaos::WaitForPort;

// Kills and reaps the processes still running when the test returns, a failed ASSERT included.
struct KillOnReturn {
  std::vector<pid_t>* pids;
  pid_t* coordinator;
  ~KillOnReturn() {
    for (pid_t& p : *pids) {
      if (p > 0) KillAndReap(p);
      p = -1;
    }
    if (*coordinator > 0) KillAndReap(*coordinator);
    *coordinator = -1;
  }
};

TEST(ChaosTest, RankKillsAndCoordinatorRestartsNeverSyncEarlyOrTwice) {
  const absl::Time deadline = absl::Now() + chaos::RunBudget(absl::Seconds(600));
  const std::string coordinator = testing::Runfile("server/psync-coordinator");
  const std::string rank_binary = testing::Runfile("tests/chaos/chaos_rank");
  const std::string dir = testing::TempPath("chaos");
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", dir).c_str()), 0);

  // The coordinator; restarts come back on the same port.
  int restarts = 0;
  auto start_coordinator = [&](const std::string& listen) {
    const std::string port_file = absl::StrCat(dir, "/port.", restarts);
    pid_t pid =
        Spawn({coordinator, "--listen=" + listen, "--port_file=" + port_file, "--http_listen="},
              absl::StrCat(dir, "/coordinator.", restarts, ".log"));
    ++restarts;
    return std::make_pair(pid, WaitForPort(port_file));
  };
  auto [first_pid, port] = start_coordinator("127.0.0.1:0");
  pid_t coordinator_pid = first_pid;
  std::vector<pid_t> pids(kRanks, -1);
  KillOnReturn kill_on_return{&pids, &coordinator_pid};
  ASSERT_GT(coordinator_pid, 0);
  ASSERT_GT(port, 0);
  const std::string target = absl::StrCat("127.0.0.1:", port);

  std::vector<ProcessLog> logs;
  std::vector<size_t> log_of(kRanks);  // rank -> index into logs of its current process
  auto start_rank = [&](uint32_t rank) {
    const std::string log = absl::StrCat(dir, "/rank", rank, ".", logs.size(), ".log");
    pids[rank] = Spawn({rank_binary, "--target=" + target, absl::StrCat("--rank=", rank),
                        absl::StrCat("--world_size=", kRanks), absl::StrCat("--chunks=", kChunks),
                        absl::StrCat("--steps=", kSteps), "--log=" + log},
                       log + ".stderr");
    log_of[rank] = logs.size();
    logs.push_back(ProcessLog{rank, false, log});
  };
  for (uint32_t r = 0; r < kRanks; ++r) start_rank(r);

  auto progress = [&]() { return chaos::Progress(logs); };

  std::mt19937 rng(7);
  size_t next_rank_kill = 0, next_coordinator_kill = 0;
  std::vector<std::pair<int64_t, int64_t>> coordinator_outages;  // (kill, back up) times
  auto all_exited = [&]() {
    for (uint32_t r = 0; r < kRanks; ++r) {
      if (pids[r] > 0) {
        int status;
        if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
          EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
              << "rank " << r << " exited with status " << status << "; its errors:\n"
              << ReadFile(logs[log_of[r]].path + ".stderr").substr(0, 2000);
          pids[r] = -1;
        }
      }
    }
    for (pid_t p : pids) {
      if (p > 0) return false;
    }
    return true;
  };
  while (!all_exited() && absl::Now() < deadline) {
    const uint64_t done = progress();
    if (next_rank_kill < kRankKillSteps.size() && done >= kRankKillSteps[next_rank_kill]) {
      const uint32_t victim = rng() % kRanks;
      if (pids[victim] > 0) {
        KillAndReap(pids[victim]);
        logs[log_of[victim]].killed = true;
        start_rank(victim);
        ++next_rank_kill;
      }
    }
    if (next_coordinator_kill < kCoordinatorKillSteps.size() &&
        done >= kCoordinatorKillSteps[next_coordinator_kill]) {
      const int64_t killed_at = MonotonicNanos();
      KillAndReap(coordinator_pid);
      auto [pid, back_port] = start_coordinator(target);
      coordinator_pid = pid;
      ASSERT_EQ(back_port, port);
      coordinator_outages.emplace_back(killed_at, MonotonicNanos());
      ++next_coordinator_kill;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (pid_t& p : pids) {
    if (p > 0) KillAndReap(p);
    p = -1;
  }
  KillAndReap(coordinator_pid);
  coordinator_pid = -1;
  ASSERT_EQ(next_rank_kill, kRankKillSteps.size());
  ASSERT_EQ(next_coordinator_kill, kCoordinatorKillSteps.size());

  // ---- The verdict, from the ranks' logs only (verdict.h).
  const chaos::Verdict v = chaos::Judge(logs, kRanks, kChunks, kSteps);
  for (const std::string& problem : v.problems) ADD_FAILURE() << problem;
  const auto& directives = v.directives;
  const uint64_t syncs = v.syncs, double_syncs = v.double_syncs, resumes = v.resumes,
                 aborts = v.aborts, early_syncs = v.early_syncs;
  const uint64_t steps_completed = v.steps_completed, steps_aborted = v.steps_aborted,
                 steps_unsettled = v.steps_unsettled;
  const std::set<uint32_t>& finished = v.finished;
  std::printf(
      "chaos: %u ranks x %llu steps x %u chunks x 2 optimizers; faults injected: %zu rank kills, "
      "%zu coordinator kill -9 restarts\n",
      kRanks, static_cast<unsigned long long>(kSteps), kChunks, kRankKillSteps.size(),
      kCoordinatorKillSteps.size());
  std::printf(
      "chaos: rank processes %zu, segments %zu, rank aborts seen %llu, client resumes %llu, "
      "syncs executed %llu, directives %zu\n",
      logs.size(), v.segments, static_cast<unsigned long long>(aborts),
      static_cast<unsigned long long>(resumes), static_cast<unsigned long long>(syncs),
      directives.size());
  std::printf(
      "chaos: (segment, step)s completed on every rank %llu, aborted on every rank %llu, "
      "neither %llu; early syncs %llu, double syncs %llu; ranks finished %zu/%u\n",
      static_cast<unsigned long long>(steps_completed),
      static_cast<unsigned long long>(steps_aborted),
      static_cast<unsigned long long>(steps_unsettled),
      static_cast<unsigned long long>(early_syncs), static_cast<unsigned long long>(double_syncs),
      finished.size(), kRanks);
  for (const auto& [killed_at, back_at] : coordinator_outages) {
    int64_t first_release = 0;
    for (const chaos::Verdict::Directive& d : directives) {
      if (d.t > back_at && (first_release == 0 || d.t < first_release)) first_release = d.t;
    }
    std::printf(
        "chaos: coordinator restart: back up %.1f ms after kill -9, first release %.1f ms "
        "after kill -9\n",
        (back_at - killed_at) / 1e6, (first_release - killed_at) / 1e6);
  }
  EXPECT_EQ(early_syncs, 0u);
  EXPECT_EQ(double_syncs, 0u);
  EXPECT_EQ(steps_unsettled, 0u);
  EXPECT_EQ(finished.size(), kRanks);
  EXPECT_EQ(logs.size(), kRanks + kRankKillSteps.size());
  EXPECT_GT(resumes, 0u) << "coordinator restarts are survived by resuming, not by aborting";
  const std::vector<uint64_t>& never_done = v.never_done;
  EXPECT_TRUE(never_done.empty()) << "steps no segment completed on every rank: "
                                  << absl::StrJoin(never_done, ",");
}

}  // namespace
}  // namespace psync

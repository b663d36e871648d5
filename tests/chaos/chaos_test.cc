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
#include "tests/worker/processes.h"

extern char** environ;

namespace psync {
namespace {

constexpr uint32_t kRanks = 32;
constexpr uint32_t kChunks = 4;
constexpr uint64_t kSteps = 200;
const std::vector<uint64_t> kRankKillSteps = {15, 35, 55, 75, 95};
const std::vector<uint64_t> kCoordinatorKillSteps = {45, 110, 150};

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& output) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int WaitForPort(const std::string& port_file) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < deadline) {
    int port = 0;
    std::string text = ReadFile(port_file);
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) && port > 0) return port;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return 0;
}

// One rank process's audit log.
struct ProcessLog {
  uint32_t rank = 0;
  bool killed = false;  // by the test
  std::string path;
};

uint64_t U(const std::string& s) {
  uint64_t v = 0;
  EXPECT_TRUE(absl::SimpleAtoi(s, &v)) << s;
  return v;
}

TEST(ChaosTest, RankKillsAndCoordinatorRestartsNeverSyncEarlyOrTwice) {
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
  auto [coordinator_pid, port] = start_coordinator("127.0.0.1:0");
  ASSERT_GT(coordinator_pid, 0);
  ASSERT_GT(port, 0);
  const std::string target = absl::StrCat("127.0.0.1:", port);

  std::vector<ProcessLog> logs;
  std::vector<pid_t> pids(kRanks, -1);
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

  // Highest step any rank completed so far (from the logs).
  auto progress = [&]() {
    uint64_t best = 0;
    for (const ProcessLog& p : logs) {
      std::string text = ReadFile(p.path);
      size_t at = text.rfind("\ncomplete ");
      if (at == std::string::npos) continue;
      std::vector<std::string> f =
          absl::StrSplit(text.substr(at + 1, text.find('\n', at + 1) - at - 1), ' ');
      if (f.size() == 3) best = std::max(best, U(f[2]));
    }
    return best;
  };

  std::mt19937 rng(7);
  size_t next_rank_kill = 0, next_coordinator_kill = 0;
  std::vector<std::pair<int64_t, int64_t>> coordinator_outages;  // (kill, back up) times
  const absl::Time deadline = absl::Now() + absl::Seconds(600);
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
      ASSERT_EQ(back_port, port);
      coordinator_pid = pid;
      coordinator_outages.emplace_back(killed_at, MonotonicNanos());
      ++next_coordinator_kill;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (pid_t p : pids) {
    if (p > 0) KillAndReap(p);
  }
  KillAndReap(coordinator_pid);
  ASSERT_EQ(next_rank_kill, kRankKillSteps.size());
  ASSERT_EQ(next_coordinator_kill, kCoordinatorKillSteps.size());

  // ---- The verdict, from the ranks' logs only.
  // (segment, step, chunk, rank, optimizer) -> time staged (earliest)
  std::map<std::tuple<uint64_t, uint64_t, uint32_t, uint32_t, std::string>, int64_t> staged;
  struct Directive {
    uint64_t segment, step;
    uint32_t chunk, rank;
    int64_t t;
  };
  std::vector<Directive> directives;
  std::map<std::pair<uint64_t, uint64_t>, std::set<uint32_t>> completed;  // (segment, step)
  std::map<uint64_t, std::set<size_t>> in_segment;                        // segment -> processes
  std::map<uint64_t, std::set<size_t>> aborted_by;                        // segment -> processes
  std::set<std::pair<uint64_t, uint64_t>> active;                         // (segment, step)
  // A killed process may have finished a step without logging it: (segment, step) -> rank ->
  // chunks it synced there.
  std::map<std::pair<uint64_t, uint64_t>, std::map<uint32_t, std::set<uint64_t>>> killed_syncs;
  uint64_t syncs = 0, double_syncs = 0, resumes = 0, aborts = 0;
  std::set<uint32_t> finished;
  for (size_t i = 0; i < logs.size(); ++i) {
    const ProcessLog& p = logs[i];
    std::set<std::tuple<uint64_t, uint64_t, uint32_t>> executed;  // (segment, step, chunk)
    for (absl::string_view line : absl::StrSplit(ReadFile(p.path), '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      const std::string& kind = f[0];
      if (kind == "staged" && f.size() == 6) {
        auto key = std::make_tuple(U(f[1]), U(f[3]), static_cast<uint32_t>(U(f[4])), p.rank, f[5]);
        const int64_t t = static_cast<int64_t>(U(f[2]));
        auto [it, fresh] = staged.emplace(key, t);
        if (!fresh) it->second = std::min(it->second, t);
        in_segment[U(f[1])].insert(i);
        active.emplace(U(f[1]), U(f[3]));
      } else if (kind == "directive" && f.size() == 5) {
        directives.push_back({U(f[1]), U(f[3]), static_cast<uint32_t>(U(f[4])), p.rank,
                              static_cast<int64_t>(U(f[2]))});
      } else if (kind == "sync" && f.size() == 4) {
        ++syncs;
        if (p.killed) killed_syncs[{U(f[1]), U(f[2])}][p.rank].insert(U(f[3]));
        if (!executed.emplace(U(f[1]), U(f[2]), static_cast<uint32_t>(U(f[3]))).second) {
          ++double_syncs;
        }
      } else if (kind == "complete" && f.size() == 3) {
        completed[{U(f[1]), U(f[2])}].insert(p.rank);
        if (U(f[2]) == kSteps - 1) finished.insert(p.rank);
      } else if (kind == "abort" && f.size() >= 2) {
        ++aborts;
        aborted_by[U(f[1])].insert(i);
      } else if (kind == "exit" && f.size() == 2) {
        resumes += U(f[1]);
      }
    }
  }
  uint64_t early_syncs = 0;
  for (const Directive& d : directives) {
    for (uint32_t r = 0; r < kRanks; ++r) {
      for (const char* optimizer : {"dense", "expert"}) {
        auto it = staged.find({d.segment, d.step, d.chunk, r, optimizer});
        if (it == staged.end() || it->second > d.t) {
          ++early_syncs;
          ADD_FAILURE() << "early: rank " << d.rank << " got step " << d.step << " chunk "
                        << d.chunk << " (segment " << d.segment << ") before rank " << r << " "
                        << optimizer << " staged";
        }
      }
    }
  }
  uint64_t steps_completed = 0, steps_aborted = 0, steps_unsettled = 0;
  std::set<uint64_t> done_steps;  // steps some segment completed on every rank
  for (const auto& [segment, step] : active) {
    auto c = completed.find({segment, step});
    std::set<uint32_t> finished_here = c != completed.end() ? c->second : std::set<uint32_t>();
    for (const auto& [rank, chunks] : killed_syncs[{segment, step}]) {
      if (chunks.size() == kChunks)
        finished_here.insert(rank);  // synced all, killed before logging
    }
    if (finished_here.size() == kRanks) {
      ++steps_completed;
      done_steps.insert(step);
      continue;
    }
    bool everyone_aborted = true;
    for (size_t i : in_segment[segment]) {
      everyone_aborted = everyone_aborted && (aborted_by[segment].count(i) > 0 || logs[i].killed);
    }
    if (everyone_aborted) {
      ++steps_aborted;
    } else {
      ++steps_unsettled;
      ADD_FAILURE() << "segment " << segment << " step " << step
                    << " neither completed on every rank nor aborted on every rank";
    }
  }
  std::printf(
      "chaos: %u ranks x %llu steps x %u chunks x 2 optimizers; faults injected: %zu rank kills, "
      "%zu coordinator kill -9 restarts\n",
      kRanks, static_cast<unsigned long long>(kSteps), kChunks, kRankKillSteps.size(),
      kCoordinatorKillSteps.size());
  std::printf(
      "chaos: rank processes %zu, segments %zu, rank aborts seen %llu, client resumes %llu, "
      "syncs executed %llu, directives %zu\n",
      logs.size(), in_segment.size(), static_cast<unsigned long long>(aborts),
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
    for (const Directive& d : directives) {
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
  std::vector<uint64_t> never_done;
  for (uint64_t step = 0; step < kSteps; ++step) {
    if (done_steps.count(step) == 0) never_done.push_back(step);
  }
  EXPECT_TRUE(never_done.empty()) << "steps no segment completed on every rank: "
                                  << absl::StrJoin(never_done, ",");
  for (uint64_t step : never_done) {
    for (const auto& [key, ranks] : completed) {
      if (key.second == step) {
        std::printf("step %llu completed in segment %llu by %zu ranks\n",
                    static_cast<unsigned long long>(step),
                    static_cast<unsigned long long>(key.first), ranks.size());
      }
    }
  }
}

}  // namespace
}  // namespace psync

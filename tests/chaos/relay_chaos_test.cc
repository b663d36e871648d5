// Chaos through the relay tier, with real processes on loopback: a psync-coordinator, one
// psync-agent as the relay, 4 psync-agent node agents behind it and 32 chaos_rank processes, 8 per
// node agent (4 chunks, 2 optimizers per rank and chunk, random delays, check-ins in random order,
// some sent twice). While they train 150 steps the test kills, with kill -9:
//  * 3 ranks (each comes back as a new process: a new incarnation, so the generation is aborted
//    and every rank joins again);
//  * a node agent, twice (a new one comes back on the same port; its ranks' Sessions reconnect
//    to it and resume);
//  * the relay, twice (a new one comes back on the same port; the node agents reconnect to it and
//    attach their ranks again);
//  * the coordinator, once (a fresh one, no state on disk, comes back on the same port; the relay
//    attaches again, every attach is refused, and the ranks resume through both agents).
//
// The verdict comes from the ranks' own audit logs (tests/chaos/verdict.h), as in chaos_test: no
// early sync, no double sync, every (segment, step) completed or aborted on every rank, every rank
// finished.
#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/chaos/spawn.h"
#include "tests/chaos/verdict.h"
#include "tests/worker/processes.h"

namespace psync {
namespace {

constexpr uint32_t kRanks = 32;
constexpr uint32_t kNodeAgents = 4;
constexpr uint32_t kChunks = 4;
constexpr uint64_t kSteps = 150;

// What is killed once the job has completed a step.
enum class Victim { kRank, kNodeAgent, kRelay, kCoordinator };
struct Fault {
  uint64_t step;
  Victim victim;
};
const std::vector<Fault> kFaults = {
    {10, Victim::kRank},   {25, Victim::kNodeAgent},   {40, Victim::kRelay},
    {55, Victim::kRank},   {70, Victim::kCoordinator}, {90, Victim::kNodeAgent},
    {105, Victim::kRelay}, {120, Victim::kRank},
};

// A daemon that comes back on the port it first bound (psync-coordinator or psync-agent).
class Daemon {
 public:
  // `argv` without --listen and --port_file; its output goes to `dir`/`name`.N.log.
  Daemon(std::string dir, std::string name, std::vector<std::string> argv)
      : dir_(std::move(dir)), name_(std::move(name)), argv_(std::move(argv)) {}
  ~Daemon() { Stop(); }

  // Starts it (on a free port the first time, on the same port after); false when it did not
  // come up.
  bool Start() {
    const std::string port_file = absl::StrCat(dir_, "/", name_, ".", starts_, ".port");
    std::vector<std::string> argv = argv_;
    argv.push_back(absl::StrCat("--listen=127.0.0.1:", port_));
    argv.push_back("--port_file=" + port_file);
    pid_ = chaos::Spawn(argv, absl::StrCat(dir_, "/", name_, ".", starts_, ".log"));
    ++starts_;
    if (pid_ <= 0) return false;
    const int port = chaos::WaitForPort(port_file);
    if (port <= 0 || (port_ != 0 && port != port_)) return false;
    port_ = port;
    return true;
  }
  // kill -9 and a new process on the same port.
  bool Restart() {
    Stop();
    return Start();
  }
  void Stop() {
    if (pid_ > 0) chaos::KillAndReap(pid_);
    pid_ = -1;
  }
  std::string target() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  const std::string dir_;
  const std::string name_;
  const std::vector<std::string> argv_;
  pid_t pid_ = -1;
  int port_ = 0;
  int starts_ = 0;
};

TEST(RelayChaosTest, RankAgentRelayAndCoordinatorKillsNeverSyncEarlyOrTwice) {
  const absl::Time deadline = absl::Now() + chaos::RunBudget(absl::Seconds(600));
  const std::string agent_binary = testing::Runfile("agent/psync-agent");
  const std::string rank_binary = testing::Runfile("tests/chaos/chaos_rank");
  const std::string dir = testing::TempPath("relay_chaos");
  ASSERT_EQ(system(absl::StrCat("mkdir -p ", dir).c_str()), 0);

  Daemon coordinator(dir, "coordinator",
                     {testing::Runfile("server/psync-coordinator"), "--http_listen="});
  ASSERT_TRUE(coordinator.Start());
  Daemon relay(dir, "relay", {agent_binary, "--target=" + coordinator.target()});
  ASSERT_TRUE(relay.Start());
  std::vector<std::unique_ptr<Daemon>> nodes;
  for (uint32_t n = 0; n < kNodeAgents; ++n) {
    nodes.push_back(std::make_unique<Daemon>(
        dir, absl::StrCat("node", n),
        std::vector<std::string>{agent_binary, "--target=" + relay.target()}));
    ASSERT_TRUE(nodes.back()->Start()) << "node agent " << n;
  }

  std::vector<pid_t> pids(kRanks, -1);
  std::vector<chaos::ProcessLog> logs;
  std::vector<size_t> log_of(kRanks);  // rank -> index into logs of its current process
  const auto start_rank = [&](uint32_t rank) {
    const std::string log = absl::StrCat(dir, "/rank", rank, ".", logs.size(), ".log");
    pids[rank] = chaos::Spawn(
        {rank_binary, "--target=" + nodes[rank * kNodeAgents / kRanks]->target(),
         absl::StrCat("--rank=", rank), absl::StrCat("--world_size=", kRanks),
         absl::StrCat("--chunks=", kChunks), absl::StrCat("--steps=", kSteps), "--log=" + log},
        log + ".stderr");
    log_of[rank] = logs.size();
    logs.push_back(chaos::ProcessLog{rank, false, log});
  };
  for (uint32_t r = 0; r < kRanks; ++r) start_rank(r);

  std::mt19937 rng(11);
  size_t next_fault = 0;
  std::vector<bool> exited(kRanks, false);
  size_t running = kRanks;
  while (running > 0 && absl::Now() < deadline) {
    running = chaos::ReapExited(
        pids, &exited, [](size_t i) { return absl::StrCat("rank ", i); },
        [&](size_t i) { return chaos::ReadFile(logs[log_of[i]].path + ".stderr"); });
    if (next_fault < kFaults.size() && chaos::Progress(logs) >= kFaults[next_fault].step) {
      switch (kFaults[next_fault].victim) {
        case Victim::kRank: {
          const uint32_t victim = rng() % kRanks;
          if (exited[victim]) continue;  // finished already: pick another next time round
          chaos::KillAndReap(pids[victim]);
          logs[log_of[victim]].killed = true;
          start_rank(victim);
          break;
        }
        case Victim::kNodeAgent:
          ASSERT_TRUE(nodes[rng() % kNodeAgents]->Restart());
          break;
        case Victim::kRelay:
          ASSERT_TRUE(relay.Restart());
          break;
        case Victim::kCoordinator:
          ASSERT_TRUE(coordinator.Restart());
          break;
      }
      ++next_fault;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (size_t i = 0; i < pids.size(); ++i) {
    if (!exited[i]) chaos::KillAndReap(pids[i]);
  }
  ASSERT_EQ(next_fault, kFaults.size()) << "the run ended before every fault was injected";

  const chaos::Verdict v = chaos::Judge(logs, kRanks, kChunks, kSteps);
  std::printf("relay_chaos: %zu rank processes, %zu faults; %s\n", logs.size(), kFaults.size(),
              chaos::Summary(v, kRanks).c_str());
  chaos::ExpectClean(v, kRanks, "relay_chaos");
  EXPECT_EQ(logs.size(), kRanks + 3u);  // the three ranks killed came back as new processes
  EXPECT_GT(v.resumes, 0u) << "agent, relay and coordinator restarts are survived by resuming";
}

}  // namespace
}  // namespace psync

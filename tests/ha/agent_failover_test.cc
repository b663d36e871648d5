// A node agent in front of coordinator replicas, with real processes: etcd, 3 psync-coordinator
// replicas (--etcd, lease TTL 2 s), one psync-agent (in process) given all three addresses, and 2
// jobs of 8 chaos_rank processes each that know only the agent's address. While they train, the
// test kills job0's owner with kill -9 (it stays down). The agent's stream to it breaks and cannot
// reconnect: the agent ends the local Sessions it carried, moves the job to the next replica, which
// names the dead owner in its redirects until the owner's lease ends (the agent follows them, finds
// the owner unreachable, and answers the ranks a plain UNAVAILABLE), then claims the job; the
// ranks join again through the agent and resume there.
//
// The verdict, per job, comes from the ranks' own logs (tests/chaos/verdict.h): 0 early syncs,
// 0 double syncs, every (segment, step) completed or aborted on every rank, every rank finished;
// and the agent counted the replica lost, its rotations and the redirects it followed.
#include <sys/wait.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "gtest/gtest.h"
#include "tests/chaos/spawn.h"
#include "tests/chaos/verdict.h"
#include "tests/ha/etcd_process.h"
#include "tests/ha/replica_processes.h"
#include "tests/worker/processes.h"

namespace psync {
namespace {

constexpr int kReplicas = 3;
constexpr int kJobs = 2;
constexpr uint32_t kRanks = 8;
constexpr uint32_t kChunks = 2;
constexpr uint64_t kSteps = 60;
constexpr uint64_t kKillAtStep = 15;  // job0's owner dies once job0 completed this step
constexpr absl::Duration kTtl = absl::Seconds(2);

TEST(AgentFailoverTest, OwnerKilledBehindAnAgentNeverSyncsEarlyOrTwice) {
  const std::string rank_binary = testing::Runfile("tests/chaos/chaos_rank");
  const std::string dir = testing::TempPath("agent_failover");
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", dir).c_str()), 0);

  testing::EtcdProcess etcd(dir + "/etcd");
  ASSERT_TRUE(etcd.Start().ok());
  testing::ReplicaProcesses replicas(
      {testing::Runfile("server/psync-coordinator"), dir, etcd.endpoint(), kReplicas, kTtl});
  for (int i = 0; i < kReplicas; ++i) {
    ASSERT_TRUE(replicas.Start(i)) << "replica " << i << " did not start";
  }

  agent::AgentOptions options;
  options.target = replicas.targets();
  options.keepalive = absl::Seconds(1);
  auto started = agent::Agent::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<agent::Agent> agent = std::move(*started);

  std::vector<std::vector<chaos::ProcessLog>> logs(kJobs);
  std::vector<pid_t> rank_pids;
  for (int j = 0; j < kJobs; ++j) {
    for (uint32_t r = 0; r < kRanks; ++r) {
      const std::string log = absl::StrCat(dir, "/job", j, ".rank", r, ".log");
      rank_pids.push_back(chaos::Spawn(
          {rank_binary, "--target=" + agent->local_target(), absl::StrCat("--job=job", j),
           absl::StrCat("--rank=", r), absl::StrCat("--world_size=", kRanks),
           absl::StrCat("--chunks=", kChunks), absl::StrCat("--steps=", kSteps),
           "--max_delay_us=200", "--keepalive=1s", "--log=" + log},
          log + ".stderr"));
      logs[j].push_back(chaos::ProcessLog{r, false, log});
    }
  }

  std::string victim;
  int64_t killed_at = 0;
  // The test's own timeout less a minute for the verdict (a slow host takes longer, not fails).
  const absl::Time deadline = absl::Now() + chaos::RunBudget(absl::Seconds(120));
  std::vector<bool> exited(rank_pids.size(), false);
  size_t running = rank_pids.size();
  while (running > 0 && absl::Now() < deadline) {
    running = chaos::ReapExited(
        rank_pids, &exited,
        [&](size_t i) { return absl::StrCat("job ", i / kRanks, " rank ", i % kRanks); },
        [&](size_t i) { return chaos::ReadFile(logs[i / kRanks][i % kRanks].path + ".stderr"); });
    if (killed_at == 0 && chaos::Progress(logs[0]) >= kKillAtStep) {
      victim = replicas.Owner("job0");
      ASSERT_FALSE(victim.empty()) << "no replica names an owner of job0";
      ASSERT_GE(replicas.IndexOf(victim), 0) << victim;
      killed_at = chaos::MonotonicNanos();
      replicas.Kill(replicas.IndexOf(victim));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  for (size_t i = 0; i < rank_pids.size(); ++i) {
    if (!exited[i]) chaos::KillAndReap(rank_pids[i]);
  }
  const agent::AgentStats stats = agent->stats();
  agent->Shutdown();
  ASSERT_GT(killed_at, 0) << "job0 never reached step " << kKillAtStep;

  // ---- The verdict of every job, from its ranks' logs only.
  for (int j = 0; j < kJobs; ++j) {
    const chaos::Verdict v = chaos::Judge(logs[j], kRanks, kChunks, kSteps);
    const int64_t first = chaos::FirstDirectiveAfter(v, killed_at);
    std::printf("agent_failover: job%d: %s; first release %.0f ms after the kill\n", j,
                chaos::Summary(v, kRanks).c_str(), first > 0 ? (first - killed_at) / 1e6 : -1.0);
    chaos::ExpectClean(v, kRanks, absl::StrCat("job", j));
  }
  std::printf(
      "agent_failover: killed job0's owner %s; agent: %llu redirects, %llu rotations, %llu "
      "replicas lost, %llu local messages in %llu upstream batches\n",
      victim.c_str(), static_cast<unsigned long long>(stats.redirects),
      static_cast<unsigned long long>(stats.rotations),
      static_cast<unsigned long long>(stats.replicas_lost),
      static_cast<unsigned long long>(stats.local_messages),
      static_cast<unsigned long long>(stats.upstream_batches));
  // The stream to the dead owner could not reconnect while it carried job0's ranks.
  EXPECT_GE(stats.replicas_lost, 1u);
  // job0 moved off the dead owner's list entry; and again each time a redirect to it failed.
  EXPECT_GE(stats.rotations, 1u);
  // The survivors name the dead owner until its lease ends (TTL 2 s); the ranks join again within
  // their reconnect backoff (50 ms at first), so the agent follows at least one such redirect.
  EXPECT_GE(stats.redirects, 1u);
}

}  // namespace
}  // namespace psync

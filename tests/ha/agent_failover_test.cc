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
//
// Through a relay: the same, with the agent given the three addresses as a relay, and two node
// agents (in process) that know only the relay's address, each carrying 4 ranks of each job. The
// relay moves job0 as the agent above does; the node agents keep their one stream to the relay:
// they never see a redirect, a rotation, a lost replica or a reconnect.
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

// What the agents counted in one run.
struct Counted {
  agent::AgentStats front;               // the agent given the replicas (the relay, if any)
  std::vector<agent::AgentStats> nodes;  // the node agents behind the relay
};

// Runs the scenario; `node_agents` > 0 puts that many node agents behind the front agent, the
// ranks spread over them in equal blocks.
void KillJob0sOwner(const std::string& name, int node_agents, Counted* counted) {
  const std::string rank_binary = testing::Runfile("tests/chaos/chaos_rank");
  const std::string dir = testing::TempPath(name);
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
  std::vector<std::unique_ptr<agent::Agent>> nodes;
  for (int n = 0; n < node_agents; ++n) {
    agent::AgentOptions node;
    node.target = agent->local_target();
    node.keepalive = absl::Seconds(1);
    auto node_started = agent::Agent::Start(node);
    ASSERT_TRUE(node_started.ok()) << node_started.status();
    nodes.push_back(std::move(*node_started));
  }
  // Where rank r's process connects.
  const auto target_of = [&](uint32_t r) {
    return nodes.empty() ? agent->local_target() : nodes[r * nodes.size() / kRanks]->local_target();
  };

  std::vector<std::vector<chaos::ProcessLog>> logs(kJobs);
  std::vector<pid_t> rank_pids;
  for (int j = 0; j < kJobs; ++j) {
    for (uint32_t r = 0; r < kRanks; ++r) {
      const std::string log = absl::StrCat(dir, "/job", j, ".rank", r, ".log");
      rank_pids.push_back(
          chaos::Spawn({rank_binary, "--target=" + target_of(r), absl::StrCat("--job=job", j),
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
  for (const auto& node : nodes) {
    counted->nodes.push_back(node->stats());
    node->Shutdown();
  }
  counted->front = agent->stats();
  agent->Shutdown();
  ASSERT_GT(killed_at, 0) << "job0 never reached step " << kKillAtStep;

  // ---- The verdict of every job, from its ranks' logs only.
  for (int j = 0; j < kJobs; ++j) {
    const chaos::Verdict v = chaos::Judge(logs[j], kRanks, kChunks, kSteps);
    const int64_t first = chaos::FirstDirectiveAfter(v, killed_at);
    std::printf("%s: job%d: %s; first release %.0f ms after the kill\n", name.c_str(), j,
                chaos::Summary(v, kRanks).c_str(), first > 0 ? (first - killed_at) / 1e6 : -1.0);
    chaos::ExpectClean(v, kRanks, absl::StrCat("job", j));
  }
  const agent::AgentStats& stats = counted->front;
  std::printf(
      "%s: killed job0's owner %s; agent: %llu redirects, %llu rotations, %llu replicas lost, "
      "%llu local messages, %llu relayed attaches, %llu upstream batches\n",
      name.c_str(), victim.c_str(), static_cast<unsigned long long>(stats.redirects),
      static_cast<unsigned long long>(stats.rotations),
      static_cast<unsigned long long>(stats.replicas_lost),
      static_cast<unsigned long long>(stats.local_messages),
      static_cast<unsigned long long>(stats.relayed_attaches),
      static_cast<unsigned long long>(stats.upstream_batches));
}

void ExpectTheFrontAgentMovedJob0(const agent::AgentStats& stats) {
  // The stream to the dead owner could not reconnect while it carried job0's ranks.
  EXPECT_GE(stats.replicas_lost, 1u);
  // job0 moved off the dead owner's list entry; and again each time a redirect to it failed.
  EXPECT_GE(stats.rotations, 1u);
  // The survivors name the dead owner until its lease ends (TTL 2 s); the ranks join again within
  // their reconnect backoff (50 ms at first), so the agent follows at least one such redirect.
  EXPECT_GE(stats.redirects, 1u);
}

TEST(AgentFailoverTest, OwnerKilledBehindAnAgentNeverSyncsEarlyOrTwice) {
  Counted counted;
  KillJob0sOwner("agent_failover", /*node_agents=*/0, &counted);
  if (::testing::Test::HasFatalFailure()) return;
  ExpectTheFrontAgentMovedJob0(counted.front);
}

TEST(AgentFailoverTest, OwnerKilledBehindARelayNeverSyncsEarlyOrTwiceAndTheNodeAgentsStayBehindIt) {
  Counted counted;
  KillJob0sOwner("relay_failover", /*node_agents=*/2, &counted);
  if (::testing::Test::HasFatalFailure()) return;
  ExpectTheFrontAgentMovedJob0(counted.front);
  // Every rank's first attach came through the relay, and job0's 8 again after the kill.
  EXPECT_GE(counted.front.relayed_attaches, kJobs * kRanks + kRanks);
  EXPECT_EQ(counted.front.local_messages, 0u);  // no rank talks to the relay itself
  ASSERT_EQ(counted.nodes.size(), 2u);
  for (size_t n = 0; n < counted.nodes.size(); ++n) {
    const agent::AgentStats& node = counted.nodes[n];
    SCOPED_TRACE(absl::StrCat("node agent ", n));
    // Its one stream to the relay never broke, and no redirect or unreachable replica reached it:
    // it never left the relay for a replica.
    EXPECT_EQ(node.reconnects, 0u);
    EXPECT_EQ(node.redirects, 0u);
    EXPECT_EQ(node.rotations, 0u);
    EXPECT_EQ(node.replicas_lost, 0u);
    EXPECT_GT(node.local_messages, 0u);
  }
}

}  // namespace
}  // namespace psync

// Replica failover with real processes: etcd, 3 psync-coordinator replicas (--etcd, lease TTL 2 s)
// and 4 jobs of 16 chaos_rank processes each (4 chunks, dense + expert, 200 steps), which know
// every replica's address. While they train, the test kills a job's owner with kill -9 three
// times (a fresh process comes back at the same address), pauses an owner with SIGSTOP past its
// lease and resumes it with SIGCONT (it must release nothing once another replica owns its job),
// and restarts etcd once (kill -9, same data dir).
//
// The verdict, per job, comes from the ranks' own logs (tests/chaos/verdict.h): 0 early syncs,
// 0 double syncs, every (segment, step) completed or aborted on every rank, every rank finished.
// It prints the failover time of each fault: from the kill (or the SIGSTOP) to the first
// directive the job's ranks received after it, against the lease TTL.
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "tests/chaos/spawn.h"
#include "tests/chaos/verdict.h"
#include "tests/ha/etcd_process.h"
#include "tests/ha/replica_processes.h"
#include "tests/worker/processes.h"

namespace psync {
namespace {

constexpr int kReplicas = 3;
constexpr int kJobs = 4;
constexpr uint32_t kRanks = 16;
constexpr uint32_t kChunks = 4;
constexpr uint64_t kSteps = 200;
constexpr absl::Duration kTtl = absl::Seconds(2);
constexpr absl::Duration kPause = absl::Seconds(4);  // SIGSTOP this long: past the lease

enum class Fault { kKillOwner, kPauseOwner, kRestartEtcd };
struct Planned {
  Fault fault;
  int job;        // whose owner (or whose progress triggers it)
  uint64_t step;  // once that job completed this step
};
// Each fault fires once its job has completed its step, whatever the other jobs do, a paused
// owner included: a job slowed by a failover, or a pause of 4 s, must not hold another job's
// fault back until that job has finished (a job that never saw its fault has no failover to
// time). Each step leaves its job at least 100 steps to run after it, and the job's ranks wait
// kHoldAfter steps past it until the fault has fired: however long injecting the faults before it
// takes (on one core, seconds), the job cannot finish before its fault.
const std::vector<Planned> kPlan = {
    {Fault::kKillOwner, 0, 25},   {Fault::kKillOwner, 1, 50},  {Fault::kPauseOwner, 2, 60},
    {Fault::kRestartEtcd, 3, 40}, {Fault::kKillOwner, 3, 100},
};

constexpr uint64_t kHoldAfter = 5;

// Where `job`'s ranks look for the files that let them past their holds (chaos_rank --hold_dir).
std::string HoldDir(const std::string& dir, int job) {
  return absl::StrCat(dir, "/holds/job", job);
}

// Lets `job`'s ranks stage `step` (chaos_rank --hold_before_steps): creates its release file.
bool Release(const std::string& dir, int job, uint64_t step) {
  return std::ofstream(absl::StrCat(HoldDir(dir, job), "/release.", step)).good();
}

std::string FaultName(Fault f) {
  switch (f) {
    case Fault::kKillOwner:
      return "kill -9 of the owner";
    case Fault::kPauseOwner:
      return "SIGSTOP of the owner past its lease";
    case Fault::kRestartEtcd:
      return "etcd kill -9 and restart";
  }
  return "";
}

// The job's owner, asking again while no replica names one that is ours: between a lapsed lease
// and the next claim there is none, and a loaded replica may not answer ListReplicas within its
// deadline. Empty when none was named within `patience`.
// `between_polls` runs before each poll: the test's other timed actions (resuming a paused
// replica) must not wait for this one.
std::string AwaitOwner(const testing::ReplicaProcesses& replicas, const std::string& job,
                       absl::Duration patience, const std::function<void()>& between_polls) {
  const absl::Time give_up = absl::Now() + patience;
  for (;;) {
    between_polls();
    std::string owner = replicas.Owner(job);
    if ((!owner.empty() && replicas.IndexOf(owner) >= 0) || absl::Now() >= give_up) return owner;
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// The last `lines` lines of each replica's log in `dir` (its stderr, where it logs its claims,
// takeovers and lapsed leases), in name order: what a failure to name an owner is judged by.
std::string ReplicaLogTails(const std::string& dir, size_t lines) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (absl::StartsWith(name, "replica") && absl::EndsWith(name, ".log")) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const std::string& name : names) {
    const std::vector<std::string> all =
        absl::StrSplit(chaos::ReadFile(absl::StrCat(dir, "/", name)), '\n');
    const size_t from = all.size() > lines ? all.size() - lines : 0;
    absl::StrAppend(&out, "--- ", name, "\n",
                    absl::StrJoin(all.begin() + static_cast<ptrdiff_t>(from), all.end(), "\n"),
                    "\n");
  }
  return out;
}

// Kills and reaps the rank processes still running when the test returns, a failed ASSERT
// included (they would go on loading the machine for the tests after this one).
class RankReaper {
 public:
  RankReaper(const std::vector<pid_t>& pids, std::vector<bool>& exited)
      : pids_(pids), exited_(exited) {}
  ~RankReaper() { KillAll(); }
  void KillAll() {
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (!exited_[i] && pids_[i] > 0) chaos::KillAndReap(pids_[i]);
      exited_[i] = true;
    }
  }

 private:
  const std::vector<pid_t>& pids_;
  std::vector<bool>& exited_;
};

TEST(FailoverTest, OwnersKilledPausedAndEtcdRestartedNeverSyncEarlyOrTwice) {
  const absl::Time deadline = absl::Now() + chaos::RunBudget(absl::Seconds(800));
  const std::string coordinator = testing::Runfile("server/psync-coordinator");
  const std::string rank_binary = testing::Runfile("tests/chaos/chaos_rank");
  const std::string dir = testing::TempPath("failover");
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", dir).c_str()), 0);

  testing::EtcdProcess etcd(dir + "/etcd");
  ASSERT_TRUE(etcd.Start().ok());

  testing::ReplicaProcesses replicas({coordinator, dir, etcd.endpoint(), kReplicas, kTtl});
  for (int i = 0; i < kReplicas; ++i) {
    ASSERT_TRUE(replicas.Start(i)) << "replica " << i << " did not start";
  }
  const std::string targets = replicas.targets();

  std::vector<std::vector<chaos::ProcessLog>> logs(kJobs);
  std::vector<pid_t> rank_pids;
  std::vector<bool> exited(kJobs * kRanks, false);
  RankReaper reaper(rank_pids, exited);
  for (int j = 0; j < kJobs; ++j) {
    ASSERT_EQ(std::system(absl::StrCat("mkdir -p ", HoldDir(dir, j)).c_str()), 0);
    std::vector<std::string> holds;
    for (const Planned& p : kPlan) {
      if (p.job == j) holds.push_back(absl::StrCat(p.step + kHoldAfter));
    }
    for (uint32_t r = 0; r < kRanks; ++r) {
      const std::string log = absl::StrCat(dir, "/job", j, ".rank", r, ".log");
      rank_pids.push_back(chaos::Spawn(
          {rank_binary, "--target=" + targets, absl::StrCat("--job=job", j),
           absl::StrCat("--rank=", r), absl::StrCat("--world_size=", kRanks),
           absl::StrCat("--chunks=", kChunks), absl::StrCat("--steps=", kSteps),
           "--max_delay_us=200", "--keepalive=1s", "--log=" + log,
           "--hold_before_steps=" + absl::StrJoin(holds, ","), "--hold_dir=" + HoldDir(dir, j)},
          log + ".stderr"));
      ASSERT_GT(rank_pids.back(), 0) << "could not start " << rank_binary;
      logs[j].push_back(chaos::ProcessLog{r, false, log});
    }
  }

  struct Done {
    Planned planned;
    int64_t at = 0;  // CLOCK_MONOTONIC ns
    std::string replica;
  };
  std::vector<Done> done;
  std::vector<bool> fired(kPlan.size(), false);
  size_t next = 0;  // faults fired
  int paused = -1;
  absl::Time resume_at;
  // A paused owner gets SIGCONT once its pause is over, also while the test waits for another
  // job's owner: a replica left stopped for that wait (40 s) held its jobs' ranks on a connection
  // that did not answer, and the other replicas named no owner of them.
  const auto resume_if_due = [&] {
    if (paused >= 0 && absl::Now() >= resume_at) {
      kill(replicas.pid(paused), SIGCONT);
      paused = -1;
    }
  };
  size_t running = rank_pids.size();
  while (running > 0 && absl::Now() < deadline) {
    running = chaos::ReapExited(
        rank_pids, &exited,
        [&](size_t i) { return absl::StrCat("job ", i / kRanks, " rank ", i % kRanks); },
        [&](size_t i) { return chaos::ReadFile(logs[i / kRanks][i % kRanks].path + ".stderr"); });
    resume_if_due();
    size_t due = kPlan.size();
    for (size_t f = 0; f < kPlan.size(); ++f) {
      if (!fired[f] && chaos::Progress(logs[kPlan[f].job]) >= kPlan[f].step) {
        due = f;
        break;
      }
    }
    if (due < kPlan.size()) {
      fired[due] = true;
      const Planned& p = kPlan[due];
      const std::string job = absl::StrCat("job", p.job);
      Done d{p, 0, ""};
      // Once the fault is in (before what it broke is started again), the job's ranks may go past
      // it: their wait is not part of the failover time.
      const auto release = [&] { return Release(dir, p.job, p.step + kHoldAfter); };
      if (p.fault == Fault::kRestartEtcd) {
        d.at = chaos::MonotonicNanos();
        etcd.Kill();
        ASSERT_TRUE(release());
        ASSERT_TRUE(etcd.Start().ok());
      } else {
        d.replica = AwaitOwner(replicas, job, 20 * kTtl, resume_if_due);
        ASSERT_FALSE(d.replica.empty()) << "no replica named an owner of " << job << " within "
                                        << 20 * kTtl << "; their views now:\n"
                                        << replicas.Views() << "the replicas' logs end:\n"
                                        << ReplicaLogTails(dir, 40);
        const int victim = replicas.IndexOf(d.replica);
        ASSERT_GE(victim, 0) << d.replica;
        d.at = chaos::MonotonicNanos();
        if (p.fault == Fault::kKillOwner) {
          replicas.Kill(victim);  // a paused victim too: kill -9 needs no SIGCONT
          if (victim == paused) paused = -1;
          ASSERT_TRUE(release());
          ASSERT_TRUE(replicas.Start(victim));
        } else {
          kill(replicas.pid(victim), SIGSTOP);
          paused = victim;
          resume_at = absl::Now() + kPause;
          ASSERT_TRUE(release());
        }
      }
      done.push_back(d);
      ++next;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (paused >= 0) kill(replicas.pid(paused), SIGCONT);
  // ---- Each job's audit for the whole job, at its last owner (the job ended there).
  std::vector<v1::GetAuditResponse> audits(kJobs);
  std::vector<std::string> audited_at(kJobs);
  for (int j = 0; j < kJobs; ++j) {
    audited_at[j] = replicas.Owner(absl::StrCat("job", j));
    if (audited_at[j].empty()) continue;
    auto stub = v1::Coordinator::NewStub(
        grpc::CreateChannel(audited_at[j], grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::GetAuditRequest request;
    request.set_job_id(absl::StrCat("job", j));
    const grpc::Status s = stub->GetAudit(&context, request, &audits[j]);
    EXPECT_TRUE(s.ok()) << "GetAudit of job" << j << " at " << audited_at[j] << ": "
                        << s.error_message();
  }
  reaper.KillAll();
  for (int i = 0; i < kReplicas; ++i) replicas.Kill(i);
  etcd.Kill();
  ASSERT_EQ(next, kPlan.size()) << "not every fault was injected before the run ended";

  // ---- The verdict of every job, from its ranks' logs only.
  std::printf(
      "failover: %d replicas (lease TTL %s, margin 500ms), %d jobs x %u ranks x %llu steps x "
      "%u chunks x 2 optimizers\n",
      kReplicas, absl::FormatDuration(kTtl).c_str(), kJobs, kRanks,
      static_cast<unsigned long long>(kSteps), kChunks);
  std::vector<chaos::Verdict> verdicts;
  for (int j = 0; j < kJobs; ++j) {
    verdicts.push_back(chaos::Judge(logs[j], kRanks, kChunks, kSteps));
    const chaos::Verdict& v = verdicts.back();
    std::printf("failover: job%d: %s\n", j, chaos::Summary(v, kRanks).c_str());
    chaos::ExpectClean(v, kRanks, absl::StrCat("job", j));
    // The coordinators' side: no owner released a (step, chunk) twice or saw a sync early or
    // repeated. How much of the job the owners' parts cover is a figure: an owner killed outright
    // leaves its part as it last published it.
    if (audited_at[j].empty()) {  // no owner named: its last owner went after the job ended
      std::printf("failover: job%d: no replica names an owner any more: no audit to read\n", j);
      continue;
    }
    const v1::AuditTotals& t = audits[j].job_totals();
    EXPECT_EQ(t.double_releases(), 0u) << "job" << j;
    EXPECT_EQ(t.early_syncs(), 0u) << "job" << j;
    EXPECT_EQ(t.repeated_syncs(), 0u) << "job" << j;
    std::printf(
        "failover: job%d: audit at %s: %d earlier owner(s), the whole job released %llu of %llu "
        "(step, chunk)s (this owner %llu, resumed %llu)\n",
        j, audited_at[j].c_str(), audits[j].earlier_owners_size(),
        static_cast<unsigned long long>(t.released()),
        static_cast<unsigned long long>(kSteps * kChunks),
        static_cast<unsigned long long>(audits[j].totals().released()),
        static_cast<unsigned long long>(t.resumed()));
  }
  // ---- Failover times: fault -> the job's first directive after it.
  for (const Done& d : done) {
    const int64_t first = chaos::FirstDirectiveAfter(verdicts[d.planned.job], d.at);
    ASSERT_GT(first, 0) << FaultName(d.planned.fault) << ": job" << d.planned.job
                        << " released nothing afterwards";
    std::printf(
        "failover: %s of job%d%s at step %llu: first release %.0f ms after it (lease TTL "
        "%.0f ms)\n",
        FaultName(d.planned.fault).c_str(), d.planned.job,
        d.replica.empty() ? "" : absl::StrCat(" (", d.replica, ")").c_str(),
        static_cast<unsigned long long>(d.planned.step), (first - d.at) / 1e6,
        absl::ToDoubleMilliseconds(kTtl));
  }
}

}  // namespace
}  // namespace psync

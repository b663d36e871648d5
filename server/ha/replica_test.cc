// Replica over a fake etcd and a fake clock, driven by Tick(): the lease, claims, redirects, and
// what a replica partitioned from etcd does (stops serving at its deadline, hands its jobs to
// on_lost once) while another takes them over.
#include "server/ha/replica.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/ha/fake_etcd_client.h"
#include "wire/not_served.h"

namespace psync::server::ha {
namespace {

ReplicaOptions Options(const std::string& self) {
  ReplicaOptions o;
  o.ownership = {self, absl::Seconds(3), absl::Milliseconds(500)};
  o.log = false;
  return o;
}

// The job of the 100 named job0..job99 that `preferred` is preferred for among `replicas`.
std::string JobPreferredBy(const std::string& preferred, const std::vector<std::string>& replicas) {
  Ownership view(OwnershipOptions{preferred, absl::Seconds(3), absl::Milliseconds(500)});
  view.SetReplicas(replicas);
  for (int j = 0; j < 100; ++j) {
    const std::string job = "job" + std::to_string(j);
    if (view.Preferred(job) == preferred) return job;
  }
  return "";
}

// An etcd whose every reply arrives `latency` after the request was handled (etcd handles it at
// once: the renewal counts from the send time, the worst case for the lease). `during_reply`, when
// set, runs once the latency has passed and before the reply is returned: what the rest of the
// coordinator does meanwhile.
class SlowEtcd final : public EtcdClient {
 public:
  SlowEtcd(FakeEtcd* etcd, serve::FakeClock* clock) : etcd_(etcd), clock_(clock) {}
  absl::Duration latency = absl::ZeroDuration();
  std::function<void()> during_reply;

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override {
    return Reply(etcd_->GrantLease(ttl));
  }
  absl::StatusOr<absl::Duration> KeepAlive(int64_t lease) override {
    return Reply(etcd_->KeepAlive(lease));
  }
  absl::Status RevokeLease(int64_t lease) override { return Reply(etcd_->RevokeLease(lease)); }
  absl::StatusOr<KeyValue> CreateIfAbsent(const std::string& key, const std::string& value,
                                          int64_t lease) override {
    return Reply(etcd_->CreateIfAbsent(key, value, lease));
  }
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease) override {
    return Reply(etcd_->Put(key, value, lease));
  }
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key) override {
    return Reply(etcd_->Get(key));
  }
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(const std::string& prefix) override {
    return Reply(etcd_->GetPrefix(prefix));
  }
  absl::StatusOr<bool> DeleteIfCreatedAt(const std::string& key, int64_t revision) override {
    return Reply(etcd_->DeleteIfCreatedAt(key, revision));
  }
  absl::StatusOr<bool> PutIfCreatedAt(const std::string& key, const std::string& value,
                                      int64_t revision) override {
    return Reply(etcd_->PutIfCreatedAt(key, value, revision));
  }
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override {
    return Reply(etcd_->DeletePrefix(prefix));
  }

 private:
  template <typename T>
  T Reply(T answer) {
    clock_->Advance(latency);
    if (during_reply) during_reply();
    return answer;
  }
  FakeEtcd* const etcd_;
  serve::FakeClock* const clock_;
};

ReplicaOptions ShortLease(const std::string& self) {
  ReplicaOptions o;
  o.ownership = {self, absl::Seconds(2), absl::Milliseconds(500)};
  o.log = false;
  return o;
}

// Runs `replica`'s lease thread alone (as Start does, on a fake clock) until `until`.
void RunLeaseThread(Replica& replica, serve::FakeClock& clock, absl::Time until) {
  while (clock.Now() < until) {
    replica.KeepLease();
    const absl::Time next = replica.NextLeaseRound();
    if (next > clock.Now()) clock.Advance(next - clock.Now());
  }
}

class ReplicaTest : public ::testing::Test {
 protected:
  serve::FakeClock clock_{absl::FromUnixSeconds(1000)};
  FakeEtcd etcd_{&clock_};
};

TEST_F(ReplicaTest, FirstTickTakesALeaseAndRegisters) {
  Replica a(Options("a:1"), &etcd_, &clock_);
  EXPECT_FALSE(a.Describe().holding);
  absl::StatusOr<uint64_t> refused = a.AdmitJoin("job1");
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(wire::RedirectOf(refused.status()).has_value());
  EXPECT_EQ(wire::RedirectOf(refused.status())->owner, "");
  a.Tick();
  const ReplicaSnapshot s = a.Describe();
  EXPECT_TRUE(s.holding);
  EXPECT_EQ(s.replicas, std::vector<std::string>{"a:1"});
  const absl::StatusOr<std::optional<KeyValue>> key = etcd_.Get("/psync/replicas/a:1");
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ((*key)->lease, s.lease);
}

TEST_F(ReplicaTest, JoinClaimsThenMessagesAreServedAtTheClaimsEpoch) {
  Replica a(Options("a:1"), &etcd_, &clock_);
  a.Tick();
  const absl::StatusOr<uint64_t> epoch = a.AdmitJoin("job1");
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  EXPECT_EQ(*epoch, static_cast<uint64_t>((*etcd_.Get("/psync/jobs/job1"))->create_revision));
  EXPECT_EQ(*a.AdmitJoin("job1"), *epoch);  // no second claim
  EXPECT_EQ(*a.AdmitMessage("job1"), *epoch);
  // A message for a job nobody joined here is refused (the client joins first).
  EXPECT_EQ(a.AdmitMessage("job2").status().code(), absl::StatusCode::kUnavailable);
  const ReplicaSnapshot s = a.Describe();
  EXPECT_EQ(s.claims, 1u);
  EXPECT_EQ(s.takeovers, 0u);
  EXPECT_EQ(s.jobs_owned, 1u);
}

TEST_F(ReplicaTest, AJobPreferredByAnotherReplicaIsRedirectedThere) {
  Replica a(Options("a:1"), &etcd_, &clock_);
  Replica b(Options("b:1"), &etcd_, &clock_);
  a.Tick();
  b.Tick();
  a.Tick();  // a sees b
  const std::string job = JobPreferredBy("b:1", {"a:1", "b:1"});
  ASSERT_FALSE(job.empty());
  const absl::StatusOr<uint64_t> at_a = a.AdmitJoin(job);
  ASSERT_EQ(at_a.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(wire::RedirectOf(at_a.status())->owner, "b:1");
  // Nobody owns it yet: the redirect names the replica that should, not an owner at "epoch 0".
  EXPECT_EQ(at_a.status().message(), "job '" + job +
                                         "' is not owned yet; replica 'b:1' is to own it: join "
                                         "there");
}

TEST_F(ReplicaTest, PartitionedOwnerStopsAtItsDeadlineAndAnotherTakesOverAfterExpiry) {
  Replica a(Options("a:1"), &etcd_, &clock_);
  Replica b(Options("b:1"), &etcd_, &clock_);
  std::vector<std::vector<std::string>> lost_at_a;
  a.SetOnLost([&](const std::vector<std::string>& jobs) { lost_at_a.push_back(jobs); });
  a.Tick();
  b.Tick();
  a.Tick();
  b.Tick();
  const std::string job = JobPreferredBy("a:1", {"a:1", "b:1"});
  const absl::Time t0 = clock_.Now();
  const uint64_t epoch_a = *a.AdmitJoin(job);
  // b redirects to a, the replica preferred for the job, even before it saw a's claim (epoch
  // unknown: 0); once it has, at a's epoch.
  EXPECT_EQ(wire::RedirectOf(b.AdmitJoin(job).status())->epoch, 0u);
  b.Tick();
  const absl::StatusOr<uint64_t> at_b = b.AdmitJoin(job);
  ASSERT_FALSE(at_b.ok());
  EXPECT_EQ(wire::RedirectOf(at_b.status())->owner, "a:1");
  EXPECT_EQ(wire::RedirectOf(at_b.status())->epoch, epoch_a);

  // a loses etcd. Both tick every 500 ms; b keeps its lease.
  etcd_.SetReachable(false);
  absl::Time a_stopped = absl::InfiniteFuture();
  absl::Time b_took = absl::InfiniteFuture();
  uint64_t epoch_b = 0;
  for (int i = 0; i < 20 && b_took == absl::InfiniteFuture(); ++i) {
    clock_.Advance(absl::Milliseconds(500));
    a.Tick();
    if (a_stopped == absl::InfiniteFuture() && !a.AdmitMessage(job).ok()) a_stopped = clock_.Now();
    etcd_.SetReachable(true);
    b.Tick();
    if (absl::StatusOr<uint64_t> e = b.AdmitJoin(job); e.ok()) {
      b_took = clock_.Now();
      epoch_b = *e;
    }
    etcd_.SetReachable(false);
  }
  // a's lease was granted at t0 - 0 with TTL 3 s: a stops at t0 + 2.5 s, b can own it only once
  // the lease expired in etcd at t0 + 3 s.
  EXPECT_EQ(a_stopped, t0 + absl::Milliseconds(2500));
  EXPECT_EQ(b_took, t0 + absl::Seconds(3));
  EXPECT_GT(epoch_b, epoch_a);
  ASSERT_EQ(lost_at_a.size(), 1u);
  EXPECT_EQ(lost_at_a[0], std::vector<std::string>{job});
  const absl::StatusOr<uint64_t> at_a = a.AdmitMessage(job);
  EXPECT_EQ(at_a.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(b.Describe().takeovers, 1u);
  EXPECT_EQ(a.Describe().lease_lapses, 1u);

  // a reaches etcd again: a new lease, and it redirects the job to b at b's epoch.
  etcd_.SetReachable(true);
  a.Tick();
  a.Tick();
  EXPECT_TRUE(a.Describe().holding);
  const absl::StatusOr<uint64_t> again = a.AdmitJoin(job);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(wire::RedirectOf(again.status())->owner, "b:1");
  EXPECT_EQ(wire::RedirectOf(again.status())->epoch, epoch_b);
  EXPECT_EQ(lost_at_a.size(), 1u);
}

TEST_F(ReplicaTest, StopRevokesTheLeaseSoAnotherReplicaCanClaimAtOnce) {
  auto a = std::make_unique<Replica>(Options("a:1"), &etcd_, &clock_);
  Replica b(Options("b:1"), &etcd_, &clock_);
  a->Tick();
  b.Tick();
  a->Tick();
  const std::string job = JobPreferredBy("a:1", {"a:1", "b:1"});
  ASSERT_TRUE(a->AdmitJoin(job).ok());
  a->Stop();
  b.Tick();
  EXPECT_EQ(b.Describe().replicas, std::vector<std::string>{"b:1"});
  EXPECT_TRUE(b.AdmitJoin(job).ok());
}

// A drained owner's part of the job's audit (its last word, written as it stops) and the new
// owner's reading of it: the whole job's audit outlives the move.
TEST_F(ReplicaTest, ADrainedOwnersPartOfTheAuditReachesTheNextOwner) {
  auto a = std::make_unique<Replica>(Options("a:1"), &etcd_, &clock_);
  Replica b(Options("b:1"), &etcd_, &clock_);
  absl::flat_hash_map<std::string, std::string> held;  // what each replica's coordinator holds
  a->SetAuditSource(
      [&held](const std::string& job, uint64_t epoch) -> std::optional<std::string> {
        auto it = held.find(absl::StrCat("a ", job, " ", epoch));
        if (it == held.end()) return std::nullopt;
        return it->second;
      },
      [](const std::string&, uint64_t) { return "a released 0"; });
  a->Tick();
  b.Tick();
  a->Tick();
  const std::string job = JobPreferredBy("a:1", {"a:1", "b:1"});
  absl::StatusOr<uint64_t> epoch_a = a->AdmitJoin(job);
  ASSERT_TRUE(epoch_a.ok()) << epoch_a.status();
  EXPECT_EQ(etcd_.Get(absl::StrCat("/psync/audit/", job, "/", *epoch_a))->value().value,
            "a released 0");  // created by the claim
  held[absl::StrCat("a ", job, " ", *epoch_a)] = "a released 3";
  clock_.Advance(absl::Seconds(1));
  a->Tick();
  EXPECT_EQ(etcd_.Get(absl::StrCat("/psync/audit/", job, "/", *epoch_a))->value().value,
            "a released 3");
  held[absl::StrCat("a ", job, " ", *epoch_a)] = "a released 7";
  a->Stop();  // within the publish interval: only the last word says 7
  b.Tick();
  absl::StatusOr<uint64_t> epoch_b = b.AdmitJoin(job);
  ASSERT_TRUE(epoch_b.ok()) << epoch_b.status();
  EXPECT_GT(*epoch_b, *epoch_a);
  // Read at the claim: a job that ends before b's next publication still has a's part.
  EXPECT_EQ(b.EarlierOwnerAudits(job), std::vector<std::string>{"a released 7"});
  b.JobEnded(job);
  EXPECT_TRUE(b.EarlierOwnerAudits(job).empty());
  b.Tick();
  EXPECT_TRUE(etcd_.GetPrefix("/psync/audit/")->empty());
}

// etcd answering in 0.7 s, inside the tolerated 0.75 s of a 2 s TTL with a 0.5 s margin: the
// lease thread keeps the lease for a minute, and the job stays served.
TEST_F(ReplicaTest, SlowEtcdWithinTheToleratedLatencyKeepsTheLease) {
  ASSERT_EQ(ToleratedEtcdLatency(ShortLease("a:1").ownership), absl::Milliseconds(750));
  SlowEtcd slow(&etcd_, &clock_);
  Replica a(ShortLease("a:1"), &slow, &clock_);
  a.Tick();
  const absl::StatusOr<uint64_t> epoch = a.AdmitJoin("job1");
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  slow.latency = absl::Milliseconds(700);
  RunLeaseThread(a, clock_, clock_.Now() + absl::Minutes(1));
  EXPECT_EQ(a.Describe().lease_lapses, 0u);
  EXPECT_EQ(a.Describe().jobs_lost, 0u);
  EXPECT_EQ(*a.AdmitMessage("job1"), *epoch);
}

// Past the tolerated latency the same loop loses the lease: the bound is the real one.
TEST_F(ReplicaTest, SlowEtcdPastTheToleratedLatencyLapsesTheLease) {
  SlowEtcd slow(&etcd_, &clock_);
  Replica a(ShortLease("a:1"), &slow, &clock_);
  a.Tick();
  ASSERT_TRUE(a.AdmitJoin("job1").ok());
  slow.latency = absl::Milliseconds(800);
  RunLeaseThread(a, clock_, clock_.Now() + absl::Seconds(10));
  EXPECT_GE(a.Describe().lease_lapses, 1u);
  EXPECT_FALSE(a.AdmitMessage("job1").ok());
}

// Why the view is read on its own thread: one round that reads the view (two calls) between
// keepalives takes 2.1 s at 0.7 s a call and lets the 1.5 s deadline pass (the replicas that
// dropped their jobs every ~3 s under a 0.6-0.7 s etcd).
TEST_F(ReplicaTest, ReadingTheViewBetweenKeepalivesWouldLapseTheLease) {
  SlowEtcd slow(&etcd_, &clock_);
  Replica a(ShortLease("a:1"), &slow, &clock_);
  a.Tick();
  ASSERT_TRUE(a.AdmitJoin("job1").ok());
  slow.latency = absl::Milliseconds(700);
  for (int i = 0; i < 5; ++i) a.Tick();
  EXPECT_GE(a.Describe().lease_lapses, 1u);
}

// The lapsed lease is never revived: a message refused after the deadline stays refused when the
// keepalive sent before the deadline is answered after it, and the job is handed to on_lost.
TEST_F(ReplicaTest, AMessageRefusedAtTheDeadlineStaysRefusedAfterALateKeepalive) {
  SlowEtcd slow(&etcd_, &clock_);
  Replica a(ShortLease("a:1"), &slow, &clock_);
  std::vector<std::string> lost;
  a.SetOnLost([&](const std::vector<std::string>& jobs) {
    lost.insert(lost.end(), jobs.begin(), jobs.end());
  });
  a.Tick();
  const absl::Time granted = clock_.Now();
  ASSERT_TRUE(a.AdmitJoin("job1").ok());
  // The keepalive goes out at granted + 1.2 s (deadline: granted + 1.5 s) and is answered 0.6 s
  // later; a message arrives at granted + 1.8 s, while the answer is on its way.
  clock_.Advance(granted + absl::Milliseconds(1200) - clock_.Now());
  slow.latency = absl::Milliseconds(600);
  absl::Status during = absl::OkStatus();
  slow.during_reply = [&] { during = a.AdmitMessage("job1").status(); };
  a.KeepLease();
  slow.during_reply = nullptr;
  EXPECT_EQ(during.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(during.message().find(kLostReason), absl::string_view::npos) << during;
  // etcd renewed the lease, yet the replica does not serve the job again.
  const absl::StatusOr<uint64_t> after = a.AdmitMessage("job1");
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(lost, std::vector<std::string>{"job1"});
  EXPECT_EQ(a.Describe().lease_lapses, 1u);
  EXPECT_EQ(a.Describe().lease, 0);
}

}  // namespace
}  // namespace psync::server::ha

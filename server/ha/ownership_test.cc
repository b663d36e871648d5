// Ownership decisions and fencing, with a fake etcd (FakeEtcd) and a fake clock: exact routes,
// epochs and deadlines, and the fencing rule that a deposed owner stops serving before anyone
// else can own its job.
#include "server/ha/ownership.h"

#include "gtest/gtest.h"
#include "serve/clock.h"
#include "server/ha/fake_etcd_client.h"

namespace psync::server::ha {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(5);
constexpr absl::Duration kMargin = absl::Seconds(1);

OwnershipOptions Options(const std::string& self) { return {self, kTtl, kMargin}; }

// One replica: its Ownership, granted a lease on `etcd` now.
struct TestReplica {
  TestReplica(const std::string& self, FakeEtcd* etcd, serve::FakeClock* clock)
      : ownership(Options(self)), etcd(etcd), clock(clock) {
    const absl::Time sent = clock->Now();
    lease = *etcd->GrantLease(kTtl);
    ownership.LeaseGranted(lease, sent);
  }
  // Claims `job` as Replica does: the transaction, then the decision on its answer.
  Route Claim(const std::string& job) {
    absl::StatusOr<KeyValue> kv =
        etcd->CreateIfAbsent(kJobPrefix + job, ownership.options().self, ownership.lease());
    EXPECT_TRUE(kv.ok()) << kv.status();
    return ownership.ClaimAnswered(job, *kv, clock->Now());
  }
  void Refresh() {
    ownership.SetJobKeys(*etcd->GetPrefix(kJobPrefix), clock->Now());
    // Held in a variable: a range-for over *GetPrefix(...) would outlive the StatusOr it points
    // into.
    const absl::StatusOr<std::vector<KeyValue>> replica_keys = etcd->GetPrefix(kReplicaPrefix);
    ASSERT_TRUE(replica_keys.ok()) << replica_keys.status();
    std::vector<std::string> replicas;
    for (const KeyValue& kv : *replica_keys) replicas.push_back(kv.value);
    ownership.SetReplicas(replicas);
  }
  Ownership ownership;
  FakeEtcd* etcd;
  serve::FakeClock* clock;
  int64_t lease = 0;
};

class OwnershipTest : public ::testing::Test {
 protected:
  serve::FakeClock clock_{absl::FromUnixSeconds(1000)};
  FakeEtcd etcd_{&clock_};
};

TEST_F(OwnershipTest, LeaseDeadlineIsSendTimePlusTtlMinusMargin) {
  Ownership o(Options("a:1"));
  const absl::Time t0 = clock_.Now();
  EXPECT_FALSE(o.Holding(t0));
  o.LeaseGranted(7, t0);
  EXPECT_EQ(o.deadline(), t0 + absl::Seconds(4));
  EXPECT_TRUE(o.Holding(t0 + absl::Seconds(4) - absl::Nanoseconds(1)));
  EXPECT_FALSE(o.Holding(t0 + absl::Seconds(4)));
  // A keepalive sent at t0+1.5s renews from its send time, not from when the answer came.
  o.KeepAliveAnswered(7, t0 + absl::Milliseconds(1500), kTtl, t0 + absl::Seconds(3));
  EXPECT_EQ(o.deadline(), t0 + absl::Milliseconds(5500));
  // An older keepalive answered late never moves the deadline back.
  o.KeepAliveAnswered(7, t0 + absl::Seconds(1), kTtl, t0 + absl::Seconds(3));
  EXPECT_EQ(o.deadline(), t0 + absl::Milliseconds(5500));
  // Another lease's answer is ignored.
  o.KeepAliveAnswered(8, t0 + absl::Seconds(3), kTtl, t0 + absl::Seconds(3));
  EXPECT_EQ(o.deadline(), t0 + absl::Milliseconds(5500));
  EXPECT_EQ(o.NextKeepAlive(), t0 + absl::Milliseconds(1500) + kTtl / 3);
  EXPECT_EQ(o.lapses(), 0u);
  // A keepalive answered after the deadline does not revive the lease: it lapsed.
  o.KeepAliveAnswered(7, t0 + absl::Seconds(5), kTtl, t0 + absl::Seconds(6));
  EXPECT_EQ(o.lease(), 0);
  EXPECT_EQ(o.lapses(), 1u);
  EXPECT_FALSE(o.Holding(t0 + absl::Seconds(6)));
}

// The lease and the per-message check are one state: once a message saw the deadline pass, a
// keepalive that was sent before the deadline but answered after it (a slow etcd) does not bring
// the job back, and the job is handed over as lost.
TEST_F(OwnershipTest, ALapsedLeaseIsNeverRevivedByALateKeepaliveAnswer) {
  TestReplica a("a:1", &etcd_, &clock_);
  const absl::Time t0 = clock_.Now();
  a.Claim("job1");
  ASSERT_EQ(a.ownership.RouteMessage("job1", t0).kind, RouteKind::kServe);
  // A keepalive is sent at t0 + 3.5 s, before the deadline (t0 + 4 s); etcd answers it 0.6 s
  // later, after the deadline, renewing the lease there (etcd's lease has not expired yet).
  const absl::Time sent = t0 + absl::Milliseconds(3500);
  clock_.Advance(absl::Milliseconds(3500));
  const absl::StatusOr<absl::Duration> ttl = etcd_.KeepAlive(a.lease);
  ASSERT_TRUE(ttl.ok());
  clock_.Advance(absl::Milliseconds(600));
  // A message between the deadline and the answer is refused, with the one lost-job text.
  const Route refused = a.ownership.RouteMessage("job1", clock_.Now());
  EXPECT_EQ(refused.kind, RouteKind::kRefuse);
  EXPECT_EQ(refused.reason, a.ownership.LostText("job1"));
  a.ownership.KeepAliveAnswered(a.lease, sent, *ttl, clock_.Now());
  EXPECT_EQ(a.ownership.lease(), 0);
  EXPECT_FALSE(a.ownership.Owns("job1"));
  EXPECT_NE(a.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kServe);
  EXPECT_NE(a.ownership.RouteQuery("job1", clock_.Now()).kind, RouteKind::kServe);
  EXPECT_EQ(a.ownership.TakeLost(clock_.Now()), std::vector<std::string>{"job1"});
  EXPECT_EQ(a.ownership.lapses(), 1u);
  // The key stays in etcd (its lease lives there): it is this replica's lapsed lease, never
  // served again; only a new lease and a new claim (after the key expires) serve the job.
  a.Refresh();
  EXPECT_EQ(a.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kRefuse);
  EXPECT_EQ(a.ownership.RouteJoin("job1", clock_.Now()).kind, RouteKind::kRefuse);
}

// A keepalive answered before the deadline, by the same slow etcd, extends it.
TEST_F(OwnershipTest, AKeepaliveAnsweredBeforeTheDeadlineExtendsIt) {
  TestReplica a("a:1", &etcd_, &clock_);
  a.Claim("job1");
  clock_.Advance(absl::Milliseconds(3300));
  const absl::Time sent = clock_.Now();
  const absl::StatusOr<absl::Duration> ttl = etcd_.KeepAlive(a.lease);
  clock_.Advance(absl::Milliseconds(699));  // answered at t0 + 3.999 s
  a.ownership.KeepAliveAnswered(a.lease, sent, *ttl, clock_.Now());
  EXPECT_EQ(a.ownership.deadline(), sent + kTtl - kMargin);
  clock_.Advance(absl::Milliseconds(2));  // t0 + 4.001 s: past the first deadline, not the new one
  EXPECT_EQ(a.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kServe);
  EXPECT_EQ(a.ownership.lapses(), 0u);
}

TEST_F(OwnershipTest, ToleratedEtcdLatencyFollowsTheLeaseSettings) {
  EXPECT_EQ(ToleratedEtcdLatency({"a", absl::Seconds(5), absl::Seconds(1)}), absl::Seconds(2));
  EXPECT_EQ(ToleratedEtcdLatency({"a", absl::Seconds(2), absl::Milliseconds(500)}),
            absl::Milliseconds(750));
  // A large margin makes the first bound the smaller: 2 * 3 / 3 - 1.4 = 0.6 < (3 - 1.4) / 2.
  EXPECT_EQ(ToleratedEtcdLatency({"a", absl::Seconds(3), absl::Milliseconds(1400)}),
            absl::Milliseconds(600));
}

// Reads follow the same fence as releases: served only while the job is, a redirect only from a
// recent view of etcd, NOT_FOUND (kUnowned) only when a recent view shows no owner, and "cannot
// tell" otherwise.
TEST_F(OwnershipTest, QueriesAreFencedLikeMessages) {
  TestReplica a("a:1", &etcd_, &clock_);
  TestReplica b("b:1", &etcd_, &clock_);
  const uint64_t epoch = a.Claim("job1").epoch;
  // B has never read etcd: it cannot tell who owns anything.
  Route query = b.ownership.RouteQuery("job1", clock_.Now());
  EXPECT_EQ(query.kind, RouteKind::kRefuse);
  EXPECT_NE(query.reason.find("cannot tell who owns job 'job1'"), std::string::npos)
      << query.reason;
  b.Refresh();
  query = b.ownership.RouteQuery("job1", clock_.Now());
  EXPECT_EQ(query.kind, RouteKind::kRedirect);
  EXPECT_EQ(query.owner, "a:1");
  EXPECT_EQ(query.epoch, epoch);
  EXPECT_EQ(b.ownership.RouteQuery("job9", clock_.Now()).kind, RouteKind::kUnowned);
  EXPECT_EQ(a.ownership.RouteQuery("job1", clock_.Now()).kind, RouteKind::kServe);
  // B's view grows old (no read for a TTL): it no longer says where the job is, or that it is not.
  b.ownership.KeepAliveAnswered(b.lease, clock_.Now(), kTtl, clock_.Now());
  clock_.Advance(absl::Seconds(3));
  b.ownership.KeepAliveAnswered(b.lease, clock_.Now(), kTtl, clock_.Now());
  clock_.Advance(absl::Seconds(2));
  EXPECT_TRUE(b.ownership.Holding(clock_.Now()));
  EXPECT_EQ(b.ownership.RouteQuery("job1", clock_.Now()).kind, RouteKind::kRefuse);
  EXPECT_EQ(b.ownership.RouteQuery("job9", clock_.Now()).kind, RouteKind::kRefuse);
  // A, paused past its deadline, answers nothing for job1 as its owner.
  EXPECT_EQ(a.ownership.RouteQuery("job1", clock_.Now()).kind, RouteKind::kRefuse);
  EXPECT_EQ(a.ownership.lease(), 0);
}

TEST_F(OwnershipTest, ClaimServesWithTheKeysCreateRevisionAsEpoch) {
  TestReplica a("a:1", &etcd_, &clock_);
  Route join = a.ownership.RouteJoin("job1", clock_.Now());
  EXPECT_EQ(join.kind, RouteKind::kClaim);
  const Route claimed = a.Claim("job1");
  ASSERT_EQ(claimed.kind, RouteKind::kServe);
  const absl::StatusOr<std::optional<KeyValue>> key = etcd_.Get("/psync/jobs/job1");
  ASSERT_TRUE(key.ok() && key->has_value());
  EXPECT_EQ(claimed.epoch, static_cast<uint64_t>((*key)->create_revision));
  EXPECT_EQ((*key)->value, "a:1");
  EXPECT_EQ((*key)->lease, a.lease);
  join = a.ownership.RouteJoin("job1", clock_.Now());
  EXPECT_EQ(join.kind, RouteKind::kServe);
  EXPECT_EQ(join.epoch, claimed.epoch);
  const Route message = a.ownership.RouteMessage("job1", clock_.Now());
  EXPECT_EQ(message.kind, RouteKind::kServe);
  EXPECT_EQ(message.epoch, claimed.epoch);
}

// A claim whose call timed out after etcd applied it leaves the key under this replica's current
// lease, with no answer. Once the view shows that key, a Join claims again (not "a lapsed lease":
// nothing would ever expire it while the replica keeps its lease alive), and the transaction's
// answer, the existing key, is served at its epoch.
TEST_F(OwnershipTest, AClaimWhoseAnswerWasLostIsClaimedAgainUnderTheSameLease) {
  TestReplica a("a:1", &etcd_, &clock_);
  ASSERT_EQ(a.ownership.RouteJoin("job1", clock_.Now()).kind, RouteKind::kClaim);
  const absl::StatusOr<KeyValue> applied =
      etcd_.CreateIfAbsent(std::string(kJobPrefix) + "job1", "a:1", a.lease);  // answer lost
  ASSERT_TRUE(applied.ok()) << applied.status();
  a.Refresh();
  EXPECT_FALSE(a.ownership.Owns("job1"));
  const Route query = a.ownership.RouteQuery("job1", clock_.Now());
  EXPECT_EQ(query.kind, RouteKind::kRefuse);
  EXPECT_EQ(query.reason,
            "job 'job1' is claimed under this replica's lease but not served yet: its next join "
            "here serves it");
  ASSERT_EQ(a.ownership.RouteJoin("job1", clock_.Now()).kind, RouteKind::kClaim);
  const Route claimed = a.Claim("job1");
  ASSERT_EQ(claimed.kind, RouteKind::kServe);
  EXPECT_EQ(claimed.epoch, static_cast<uint64_t>(applied->create_revision));
  EXPECT_EQ(a.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kServe);
  EXPECT_EQ(a.ownership.lapses(), 0u);

  // The same key under a lease this replica no longer holds is still refused until it expires.
  TestReplica b("b:1", &etcd_, &clock_);
  ASSERT_TRUE(etcd_.CreateIfAbsent(std::string(kJobPrefix) + "job2", "b:1", b.lease).ok());
  b.ownership.Lapse();
  b.ownership.LeaseGranted(*etcd_.GrantLease(kTtl), clock_.Now());
  b.Refresh();
  const Route join = b.ownership.RouteJoin("job2", clock_.Now());
  EXPECT_EQ(join.kind, RouteKind::kRefuse);
  EXPECT_EQ(join.reason, "job 'job2' is held by a lapsed lease of this replica until it expires");
}

TEST_F(OwnershipTest, TwoReplicasRacingForAJobOneOwnsItTheOtherRedirects) {
  TestReplica a("a:1", &etcd_, &clock_);
  TestReplica b("b:1", &etcd_, &clock_);
  const Route first = a.Claim("job1");
  const Route second = b.Claim("job1");
  EXPECT_EQ(first.kind, RouteKind::kServe);
  EXPECT_EQ(second.kind, RouteKind::kRedirect);
  EXPECT_EQ(second.owner, "a:1");
  EXPECT_EQ(second.epoch, first.epoch);
  EXPECT_FALSE(b.ownership.Owns("job1"));
  EXPECT_EQ(b.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kRedirect);
  EXPECT_EQ(b.ownership.RouteJoin("job1", clock_.Now()).owner, "a:1");
}

TEST_F(OwnershipTest, PausedOwnerStopsServingBeforeAnotherReplicaCanOwnTheJob) {
  TestReplica a("a:1", &etcd_, &clock_);
  TestReplica b("b:1", &etcd_, &clock_);
  const absl::Time t0 = clock_.Now();
  const uint64_t epoch_a = a.Claim("job1").epoch;
  // A is paused (no keepalive) from t0. It serves until t0 + ttl - margin, and not a moment later.
  clock_.Advance(kTtl - kMargin - absl::Milliseconds(1));
  EXPECT_EQ(a.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kServe);
  // B keeps its own lease alive (A does not).
  const absl::Time sent = clock_.Now();
  b.ownership.KeepAliveAnswered(b.lease, sent, *etcd_.KeepAlive(b.lease), sent);
  // Meanwhile B cannot own it: A's key is there while A's lease lives.
  EXPECT_EQ(b.Claim("job1").kind, RouteKind::kRedirect);
  clock_.Advance(absl::Milliseconds(1));  // t0 + 4 s: A's own deadline
  const Route fenced = a.ownership.RouteMessage("job1", clock_.Now());
  EXPECT_EQ(fenced.kind, RouteKind::kRefuse);
  EXPECT_EQ(a.ownership.TakeLost(clock_.Now()), std::vector<std::string>{"job1"});
  EXPECT_EQ(a.ownership.lease(), 0);
  EXPECT_TRUE(a.ownership.TakeLost(clock_.Now()).empty());  // each loss once
  // Still no claim by B before A's lease expires in etcd at t0 + 5 s.
  clock_.Advance(kMargin - absl::Milliseconds(1));
  EXPECT_EQ(b.Claim("job1").kind, RouteKind::kRedirect);
  clock_.Advance(absl::Milliseconds(1));  // t0 + 5 s: A's lease expires in etcd
  const Route taken = b.Claim("job1");
  ASSERT_EQ(taken.kind, RouteKind::kServe);
  EXPECT_GT(taken.epoch, epoch_a);
  EXPECT_GE(clock_.Now() - t0, kTtl);
  // A resumes: it serves nothing of job1 and, once it sees etcd, redirects to B at B's epoch.
  EXPECT_EQ(a.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kRefuse);
  a.Refresh();
  const Route redirect = a.ownership.RouteMessage("job1", clock_.Now());
  EXPECT_EQ(redirect.kind, RouteKind::kRedirect);
  EXPECT_EQ(redirect.owner, "b:1");
  EXPECT_EQ(redirect.epoch, taken.epoch);
  // Without a lease A may not claim anything, even a job nobody owns.
  EXPECT_EQ(a.ownership.RouteJoin("job2", clock_.Now()).kind, RouteKind::kRefuse);
}

TEST_F(OwnershipTest, KeyGoneOrRecreatedMeansTheJobIsLost) {
  TestReplica a("a:1", &etcd_, &clock_);
  const uint64_t epoch = a.Claim("job1").epoch;
  a.Claim("job2");
  a.Refresh();
  EXPECT_TRUE(a.ownership.TakeLost(clock_.Now()).empty());
  ASSERT_TRUE(*etcd_.DeleteIfCreatedAt("/psync/jobs/job1", static_cast<int64_t>(epoch)));
  a.Refresh();
  EXPECT_EQ(a.ownership.TakeLost(clock_.Now()), std::vector<std::string>{"job1"});
  EXPECT_FALSE(a.ownership.Owns("job1"));
  EXPECT_TRUE(a.ownership.Owns("job2"));
  EXPECT_EQ(a.ownership.RouteMessage("job1", clock_.Now()).kind, RouteKind::kRefuse);
}

TEST_F(OwnershipTest, ClaimAnsweredForALapsedLeaseOfThisReplicaIsRefused) {
  TestReplica a("a:1", &etcd_, &clock_);
  a.Claim("job1");
  a.ownership.Lapse();
  const absl::Time sent = clock_.Now();
  const int64_t second = *etcd_.GrantLease(kTtl);
  a.ownership.LeaseGranted(second, sent);
  a.Refresh();  // the key still names a:1 under the first lease
  EXPECT_EQ(a.ownership.RouteJoin("job1", clock_.Now()).kind, RouteKind::kRefuse);
  EXPECT_EQ(a.Claim("job1").kind, RouteKind::kRefuse);
  EXPECT_EQ(a.ownership.TakeLost(clock_.Now()), std::vector<std::string>{"job1"});
}

TEST_F(OwnershipTest, UnownedJobsGoToThePreferredReplicaAndEveryReplicaAgrees) {
  std::vector<std::string> replicas = {"a:1", "b:1", "c:1"};
  std::vector<Ownership> views;
  for (const std::string& self : replicas) {
    views.emplace_back(Options(self));
    views.back().SetReplicas(replicas);
    views.back().LeaseGranted(1, clock_.Now());
  }
  std::map<std::string, int> owned;
  for (int j = 0; j < 300; ++j) {
    const std::string job = "job" + std::to_string(j);
    const std::string preferred = views[0].Preferred(job);
    int claims = 0;
    for (Ownership& view : views) {
      EXPECT_EQ(view.Preferred(job), preferred);
      const Route route = view.RouteJoin(job, clock_.Now());
      if (route.kind == RouteKind::kClaim) {
        ++claims;
        EXPECT_EQ(view.options().self, preferred);
      } else {
        EXPECT_EQ(route.kind, RouteKind::kRedirect);
        EXPECT_EQ(route.owner, preferred);
      }
    }
    EXPECT_EQ(claims, 1) << job;
    ++owned[preferred];
  }
  // Spread: each of the three replicas is preferred for a fair share of 300 jobs (the hash is
  // stable, so these counts are the same on every run and machine).
  for (const std::string& r : replicas) {
    EXPECT_GT(owned[r], 70) << r;
    EXPECT_LT(owned[r], 130) << r;
  }
}

TEST_F(OwnershipTest, StableHashIsFixed) {
  // FNV-1a with a final mix: the same value in every process (replicas must agree).
  EXPECT_EQ(StableHash(""), StableHash(""));
  EXPECT_NE(StableHash("job1\na:1"), StableHash("job1\nb:1"));
  EXPECT_EQ(StableHash("a"), StableHash(std::string("a")));
}

}  // namespace
}  // namespace psync::server::ha

#include "server/ha/replica.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "server/not_served.h"

namespace psync::server::ha {

Replica::Replica(ReplicaOptions options, EtcdClient* etcd, Clock* clock)
    : options_(std::move(options)), etcd_(etcd), clock_(clock), ownership_(options_.ownership) {}

Replica::~Replica() { Stop(); }

void Replica::Log(const std::string& line) const {
  if (options_.log)
    std::cerr << "psync: replica " << options_.ownership.self << ": " << line << "\n";
}

void Replica::Start() {
  thread_ = std::thread([this] {
    while (true) {
      Tick();
      absl::Duration wait = options_.poll_interval;
      {
        absl::MutexLock lock(&mu_);
        if (ownership_.lease() != 0) {
          wait = std::min(
              wait, std::max(absl::ZeroDuration(), ownership_.NextKeepAlive() - clock_->Now()));
        }
      }
      if (stop_.WaitForNotificationWithTimeout(wait)) return;
    }
  });
}

void Replica::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_.Notify();
  if (thread_.joinable()) thread_.join();
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    lease = ownership_.Lapse();
    ownership_.TakeLost(clock_->Now());
  }
  if (lease != 0) etcd_->RevokeLease(lease).IgnoreError();
}

void Replica::Tick() {
  const std::string& self = options_.ownership.self;
  int64_t lease = 0;
  bool keepalive_due = false;
  uint64_t claims_before = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    const absl::Time now = clock_->Now();
    if (ownership_.lease() != 0 && !ownership_.Holding(now)) {
      NoteLapsedLocked(ownership_.Lapse(), "passed its deadline");
    }
    lease = ownership_.lease();
    keepalive_due = lease != 0 && now >= ownership_.NextKeepAlive();
    claims_before = counters_.claims;
  }
  uint64_t errors = 0;
  if (lease == 0) {
    const absl::Time sent = clock_->Now();
    absl::StatusOr<int64_t> granted = etcd_->GrantLease(options_.ownership.lease_ttl);
    if (granted.ok() && etcd_->Put(kReplicaPrefix + self, self, *granted).ok()) {
      absl::MutexLock lock(&mu_);
      ownership_.LeaseGranted(*granted, sent);
      Log(absl::StrCat("holds etcd lease ", *granted));
    } else {
      ++errors;
      if (granted.ok()) etcd_->RevokeLease(*granted).IgnoreError();
    }
  } else if (keepalive_due) {
    const absl::Time sent = clock_->Now();
    absl::StatusOr<absl::Duration> ttl = etcd_->KeepAlive(lease);
    absl::MutexLock lock(&mu_);
    if (ttl.ok()) {
      ownership_.KeepAliveAnswered(lease, sent, *ttl);
    } else if (absl::IsNotFound(ttl.status()) && ownership_.lease() == lease) {
      NoteLapsedLocked(ownership_.Lapse(), "expired");
    } else {
      ++errors;
    }
  }
  absl::StatusOr<std::vector<KeyValue>> replicas = etcd_->GetPrefix(kReplicaPrefix);
  absl::StatusOr<std::vector<KeyValue>> jobs =
      replicas.ok() ? etcd_->GetPrefix(kJobPrefix) : replicas.status();
  std::vector<std::string> lost;
  {
    absl::MutexLock lock(&mu_);
    // A claim made while the listing was read may be missing from it: the view is refreshed
    // next round instead of taking that job for lost.
    if (replicas.ok() && jobs.ok() && counters_.claims == claims_before) {
      std::vector<std::string> addresses;
      for (const KeyValue& kv : *replicas) addresses.push_back(kv.value);
      ownership_.SetReplicas(std::move(addresses));
      ownership_.SetJobKeys(*jobs);
      for (const KeyValue& kv : *jobs) {
        if (kv.value != self) owned_elsewhere_.insert(kv.key.substr(sizeof(kJobPrefix) - 1));
      }
    } else if (!replicas.ok() || !jobs.ok()) {
      ++errors;
    }
    counters_.etcd_errors += errors;
    const int64_t lease_before = ownership_.lease();
    lost = ownership_.TakeLost(clock_->Now());
    if (lease_before != 0 && ownership_.lease() == 0) {
      NoteLapsedLocked(lease_before, "passed its deadline");
    }
    counters_.jobs_lost += lost.size();
  }
  for (const std::string& job : lost) Log(absl::StrCat("stopped serving job '", job, "'"));
  if (!lost.empty() && on_lost_) on_lost_(lost);
}

void Replica::NoteLapsedLocked(int64_t lease, absl::string_view why) {
  ++counters_.lease_lapses;
  Log(absl::StrCat("etcd lease ", lease, " ", why, ": serving nothing until a new one"));
}

absl::StatusOr<uint64_t> Replica::Answer(const std::string& job_id, const Route& route) const {
  switch (route.kind) {
    case RouteKind::kServe:
      return route.epoch;
    case RouteKind::kRedirect:
      return NotServedHere(absl::StrCat("job '", job_id, "' is owned by replica '", route.owner,
                                        "' (epoch ", route.epoch, "): connect there"),
                           route.owner, route.epoch);
    case RouteKind::kRefuse:
    case RouteKind::kClaim:
      break;
  }
  return NotServedHere(absl::StrCat("replica '", options_.ownership.self, "': ", route.reason), "",
                       0);
}

absl::StatusOr<uint64_t> Replica::AdmitJoin(const std::string& job_id) {
  int64_t lease = 0;
  {
    absl::MutexLock lock(&mu_);
    const Route route = ownership_.RouteJoin(job_id, clock_->Now());
    if (route.kind != RouteKind::kClaim) return Answer(job_id, route);
    lease = ownership_.lease();
  }
  absl::StatusOr<KeyValue> key =
      etcd_->CreateIfAbsent(kJobPrefix + job_id, options_.ownership.self, lease);
  absl::MutexLock lock(&mu_);
  if (!key.ok()) {
    ++counters_.etcd_errors;
    return NotServedHere(
        absl::StrCat("replica '", options_.ownership.self, "' could not claim job '", job_id,
                     "': ", key.status().message()),
        "", 0);
  }
  const bool owned_before = ownership_.Owns(job_id);  // a concurrent Join's claim got there first
  const Route route = ownership_.ClaimAnswered(job_id, *key, clock_->Now());
  if (route.kind == RouteKind::kServe && !owned_before) {
    ++counters_.claims;
    const bool takeover = owned_elsewhere_.erase(job_id) > 0;
    if (takeover) ++counters_.takeovers;
    Log(absl::StrCat(takeover ? "took over" : "claimed", " job '", job_id, "' at epoch ",
                     route.epoch));
  }
  return Answer(job_id, route);
}

absl::StatusOr<uint64_t> Replica::AdmitMessage(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  return Answer(job_id, ownership_.RouteMessage(job_id, clock_->Now()));
}

ReplicaSnapshot Replica::Describe() const {
  absl::MutexLock lock(&mu_);
  ReplicaSnapshot s = counters_;
  s.self = options_.ownership.self;
  s.replicas = ownership_.replicas();
  s.owners = ownership_.Owners();
  s.holding = ownership_.Holding(clock_->Now());
  s.lease = ownership_.lease();
  s.jobs_owned = 0;
  for (const JobOwner& o : s.owners) {
    if (ownership_.Owns(o.job)) ++s.jobs_owned;
  }
  return s;
}

}  // namespace psync::server::ha

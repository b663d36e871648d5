#include "server/ha/replica.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "server/ha/route_status.h"
#include "wire/not_served.h"

namespace psync::server::ha {

Replica::Replica(ReplicaOptions options, EtcdClient* etcd, serve::Clock* clock)
    : options_(std::move(options)),
      etcd_(etcd),
      clock_(clock),
      ledger_(options_.audit, etcd, clock),
      ownership_(options_.ownership) {}

Replica::~Replica() { Stop(); }

void Replica::Log(const std::string& line) const {
  if (options_.log)
    std::cerr << "psync: replica " << options_.ownership.self << ": " << line << "\n";
}

void Replica::Start() {
  lease_thread_ = std::thread([this] {
    while (true) {
      KeepLease();
      const absl::Duration wait = std::max(absl::ZeroDuration(), NextLeaseRound() - clock_->Now());
      if (stop_.WaitForNotificationWithTimeout(wait)) return;
    }
  });
  view_thread_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(options_.poll_interval)) RefreshView();
  });
}

void Replica::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stop_.Notify();
  if (lease_thread_.joinable()) lease_thread_.join();
  if (view_thread_.joinable()) view_thread_.join();
  int64_t lease = 0;
  std::vector<std::string> lost;
  {
    absl::MutexLock lock(&mu_);
    lease = ownership_.Lapse();
    lost = ownership_.TakeLost(clock_->Now());
  }
  for (const std::string& job : lost) ledger_.Lost(job);
  ledger_.FlushLastWords();
  if (lease != 0) etcd_->RevokeLease(lease).IgnoreError();
}

void Replica::Tick() {
  KeepLease();
  RefreshView();
}

absl::Time Replica::NextLeaseRound() const {
  absl::MutexLock lock(&mu_);
  if (ownership_.lease() == 0) return clock_->Now() + options_.poll_interval;
  return std::min(ownership_.NextKeepAlive(), ownership_.deadline());
}

void Replica::KeepLease() {
  const std::string& self = options_.ownership.self;
  int64_t lease = 0;
  bool keepalive_due = false;
  std::vector<std::string> lost;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    const absl::Time now = clock_->Now();
    ownership_.LapseIfPastDeadline(now);
    lost = TakeLostLocked("passed its deadline");
    lease = ownership_.lease();
    keepalive_due = lease != 0 && now >= ownership_.NextKeepAlive();
  }
  HandLost(lost);
  if (lease == 0) {
    const absl::Time sent = clock_->Now();
    absl::StatusOr<int64_t> granted = etcd_->GrantLease(options_.ownership.lease_ttl);
    if (granted.ok() && etcd_->Put(kReplicaPrefix + self, self, *granted).ok()) {
      absl::MutexLock lock(&mu_);
      ownership_.LeaseGranted(*granted, sent);
      Log(absl::StrCat("holds etcd lease ", *granted, " (tolerates etcd replies up to ",
                       absl::FormatDuration(ToleratedEtcdLatency(options_.ownership)), ")"));
    } else {
      if (granted.ok()) etcd_->RevokeLease(*granted).IgnoreError();
      absl::MutexLock lock(&mu_);
      ++counters_.etcd_errors;
    }
    return;
  }
  if (!keepalive_due) return;
  const absl::Time sent = clock_->Now();
  absl::StatusOr<absl::Duration> ttl = etcd_->KeepAlive(lease);
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    switch (ownership_.KeepAliveResult(lease, ttl, sent, now)) {
      case Ownership::KeepAliveOutcome::kAnswered:
        lost = TakeLostLocked(absl::StrCat("was renewed too late (keepalive answered after ",
                                           absl::FormatDuration(now - sent), ")"));
        break;
      case Ownership::KeepAliveOutcome::kExpired:
        lost = TakeLostLocked("expired");
        break;
      case Ownership::KeepAliveOutcome::kFailed:
        ++counters_.etcd_errors;
        lost = TakeLostLocked("passed its deadline");
        break;
    }
  }
  HandLost(lost);
}

void Replica::RefreshView() {
  const std::string& self = options_.ownership.self;
  uint64_t claims_before = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    claims_before = counters_.claims;
  }
  const absl::Time sent = clock_->Now();
  absl::StatusOr<std::vector<KeyValue>> replicas = etcd_->GetPrefix(kReplicaPrefix);
  absl::StatusOr<std::vector<KeyValue>> jobs =
      replicas.ok() ? etcd_->GetPrefix(kJobPrefix) : replicas.status();
  std::vector<std::string> lost;
  bool ledger_round = false;
  absl::flat_hash_map<std::string, uint64_t> owned;
  absl::flat_hash_set<std::string> jobs_with_owner;
  {
    absl::MutexLock lock(&mu_);
    // A claim made while the listing was read may be missing from it: the view is refreshed
    // next round instead of taking that job for lost.
    if (replicas.ok() && jobs.ok() && counters_.claims == claims_before) {
      std::vector<std::string> addresses;
      for (const KeyValue& kv : *replicas) addresses.push_back(kv.value);
      ownership_.SetReplicas(std::move(addresses));
      ownership_.SetJobKeys(*jobs, sent);
      for (const KeyValue& kv : *jobs) {
        std::string job = kv.key.substr(sizeof(kJobPrefix) - 1);
        if (kv.value != self) owned_elsewhere_.insert(job);
        jobs_with_owner.insert(std::move(job));
      }
      ledger_round = true;
    } else if (!replicas.ok() || !jobs.ok()) {
      ++counters_.etcd_errors;
    }
    ownership_.LapseIfPastDeadline(clock_->Now());
    lost = TakeLostLocked("passed its deadline");
    if (ledger_round) owned = ownership_.owned();
  }
  HandLost(lost);
  if (ledger_round) {
    const int failures = ledger_.Round(owned, jobs_with_owner);
    if (failures > 0) {
      absl::MutexLock lock(&mu_);
      counters_.etcd_errors += failures;
    }
  }
}

std::vector<std::string> Replica::TakeLostLocked(absl::string_view why) {
  if (ownership_.lapses() > counters_.lease_lapses) {
    counters_.lease_lapses = ownership_.lapses();
    Log(absl::StrCat("etcd lease ", why, ": serving nothing until a new one"));
  }
  std::vector<std::string> lost = ownership_.TakeLost(clock_->Now());
  counters_.jobs_lost += lost.size();
  return lost;
}

void Replica::HandLost(const std::vector<std::string>& lost) {
  if (lost.empty()) return;
  for (const std::string& job : lost) {
    Log(absl::StrCat("stopped serving job '", job, "'"));
    ledger_.Lost(job);  // its part of the audit, before the coordinator drops it
  }
  if (on_lost_) on_lost_(lost);
}

absl::StatusOr<uint64_t> Replica::Answer(const std::string& job_id, const Route& route) const {
  return RouteStatus(options_.ownership.self, job_id, route);
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
  bool claimed = false;
  uint64_t epoch = 0;
  absl::StatusOr<uint64_t> answer;
  {
    absl::MutexLock lock(&mu_);
    if (!key.ok()) {
      ++counters_.etcd_errors;
      return wire::NotServedHere(
          absl::StrCat("replica '", options_.ownership.self, "' could not claim job '", job_id,
                       "': ", key.status().message()),
          "", 0);
    }
    const bool owned_before = ownership_.Owns(job_id);  // a concurrent Join's claim came first
    const Route route = ownership_.ClaimAnswered(job_id, *key, clock_->Now());
    if (route.kind == RouteKind::kServe && !owned_before) {
      claimed = true;
      epoch = route.epoch;
      ++counters_.claims;
      const bool takeover = owned_elsewhere_.erase(job_id) > 0;
      if (takeover) ++counters_.takeovers;
      Log(absl::StrCat(takeover ? "took over" : "claimed", " job '", job_id, "' at epoch ",
                       route.epoch));
    }
    answer = Answer(job_id, route);
  }
  // This owner's part of the job's audit exists from now on; the earlier owners' are read.
  if (claimed) {
    if (const int failures = ledger_.Claimed(job_id, epoch); failures > 0) {
      absl::MutexLock lock(&mu_);
      counters_.etcd_errors += failures;
    }
  }
  return answer;
}

absl::StatusOr<uint64_t> Replica::AdmitMessage(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  return Answer(job_id, ownership_.RouteMessage(job_id, clock_->Now()));
}

absl::StatusOr<uint64_t> Replica::AdmitQuery(const std::string& job_id) {
  absl::MutexLock lock(&mu_);
  return Answer(job_id, ownership_.RouteQuery(job_id, clock_->Now()));
}

std::vector<std::string> Replica::EarlierOwnerAudits(const std::string& job_id) {
  uint64_t epoch = 0;
  {
    absl::MutexLock lock(&mu_);
    ownership_.Owns(job_id, &epoch);
  }
  return ledger_.Others(job_id, epoch);
}

void Replica::JobEnded(const std::string& job_id) { ledger_.Ended(job_id); }

ReplicaSnapshot Replica::Describe() const {
  absl::MutexLock lock(&mu_);
  ReplicaSnapshot s = counters_;
  s.lease_lapses = ownership_.lapses();
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

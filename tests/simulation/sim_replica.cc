// SimReplica; contract: sim_replica.h. Each round follows server/ha/replica.cc's KeepLease,
// RefreshView and AdmitJoin, with every etcd call made over the replica's SimEtcd link.
#include "tests/simulation/sim_replica.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/ha/route_status.h"
#include "wire/not_served.h"

namespace psync::simulation {

using server::ha::EtcdClient;
using server::ha::KeyValue;
using server::ha::Ownership;
using server::ha::Route;
using server::ha::RouteKind;

SimReplica::SimReplica(World* world, SimEtcd* etcd, SimReplicaOptions options,
                       const absl::Time* paused_until, LostCallback on_lost)
    : world_(world),
      etcd_(etcd),
      options_(std::move(options)),
      paused_until_(paused_until),
      on_lost_(std::move(on_lost)),
      origin_(world->NewOrigin()),
      link_(etcd->NewLink()) {}

void SimReplica::Start() {
  ++incarnation_;
  ownership_ = std::make_unique<Ownership>(options_.ownership);
  lapses_seen_ = 0;
  Run([this] { LeaseRound(); });
  After(options_.poll_interval, [this] { ViewRound(); });
}

void SimReplica::Crash() {
  ++incarnation_;
  ownership_.reset();
}

void SimReplica::Run(std::function<void()> fn) {
  if (ownership_ == nullptr) return;  // crashed
  const uint64_t incarnation = incarnation_;
  auto again = [this, incarnation, fn] {
    if (incarnation == incarnation_) Run(fn);
  };
  if (!world_->DeferWhilePaused(*paused_until_, origin_, again)) fn();
}

void SimReplica::After(absl::Duration delay, std::function<void()> fn) {
  const uint64_t incarnation = incarnation_;
  world_->After(delay, origin_, [this, incarnation, fn = std::move(fn)] {
    if (incarnation == incarnation_) Run(fn);
  });
}

template <typename T>
void SimReplica::Call(std::function<absl::StatusOr<T>(EtcdClient&)> op,
                      std::function<void(absl::StatusOr<T>)> done) {
  const uint64_t incarnation = incarnation_;
  // The etcd client's call timeout is the longest reply latency the lease tolerates.
  etcd_->Call<T>(link_, server::ha::ToleratedEtcdLatency(options_.ownership), std::move(op),
                 [this, incarnation, done = std::move(done)](absl::StatusOr<T> answer) {
                   if (incarnation != incarnation_) return;
                   Run([done, answer = std::move(answer)] { done(answer); });
                 });
}

void SimReplica::NextLeaseRound() {
  const Ownership& o = *ownership_;
  const absl::Time at = o.lease() == 0 ? world_->now() + options_.poll_interval
                                       : std::min(o.NextKeepAlive(), o.deadline());
  After(std::max(absl::ZeroDuration(), at - world_->now()), [this] { LeaseRound(); });
}

void SimReplica::LeaseRound() {
  Ownership& o = *ownership_;
  const absl::Time now = world_->now();
  o.LapseIfPastDeadline(now);
  HandLost("passed its deadline");
  const int64_t lease = o.lease();
  if (lease == 0) {
    const absl::Duration ttl = options_.ownership.lease_ttl;
    Call<int64_t>([ttl](EtcdClient& e) { return e.GrantLease(ttl); },
                  [this, sent = now](absl::StatusOr<int64_t> granted) {
                    if (!granted.ok()) {
                      NextLeaseRound();
                      return;
                    }
                    const int64_t id = *granted;
                    const std::string address = options_.ownership.self;
                    Call<bool>(
                        [address, id](EtcdClient& e) -> absl::StatusOr<bool> {
                          absl::Status put =
                              e.Put(server::ha::kReplicaPrefix + address, address, id);
                          if (!put.ok()) return put;
                          return true;
                        },
                        [this, sent, id](absl::StatusOr<bool> put) {
                          if (put.ok()) {
                            ownership_->LeaseGranted(id, sent);
                            world_->Trace(absl::StrCat(self(), ": holds etcd lease ", id));
                          }
                          NextLeaseRound();
                        });
                  });
    return;
  }
  if (now < o.NextKeepAlive()) {
    NextLeaseRound();
    return;
  }
  Call<absl::Duration>([lease](EtcdClient& e) { return e.KeepAlive(lease); },
                       [this, lease, sent = now](absl::StatusOr<absl::Duration> ttl) {
                         ownership_->KeepAliveResult(lease, ttl, sent, world_->now());
                         HandLost(ttl.ok() ? "was renewed too late" : "expired or was not renewed");
                         NextLeaseRound();
                       });
}

void SimReplica::ViewRound() {
  const uint64_t claims_before = claims_;
  const absl::Time sent = world_->now();
  auto finish = [this] {
    ownership_->LapseIfPastDeadline(world_->now());
    HandLost("passed its deadline");
    After(options_.poll_interval, [this] { ViewRound(); });
  };
  Call<std::vector<KeyValue>>(
      [](EtcdClient& e) { return e.GetPrefix(server::ha::kReplicaPrefix); },
      [this, claims_before, sent, finish](absl::StatusOr<std::vector<KeyValue>> replicas) {
        if (!replicas.ok()) {
          finish();
          return;
        }
        Call<std::vector<KeyValue>>(
            [](EtcdClient& e) { return e.GetPrefix(server::ha::kJobPrefix); },
            [this, claims_before, sent, finish,
             replicas = *replicas](absl::StatusOr<std::vector<KeyValue>> jobs) {
              // A claim made while the listing was read may be missing from it.
              if (jobs.ok() && claims_ == claims_before) {
                std::vector<std::string> addresses;
                for (const KeyValue& kv : replicas) addresses.push_back(kv.value);
                ownership_->SetReplicas(std::move(addresses));
                ownership_->SetJobKeys(*jobs, sent);
              }
              finish();
            });
      });
}

void SimReplica::HandLost(const char* why) {
  if (ownership_->lapses() > lapses_seen_) {
    lapses_ += ownership_->lapses() - lapses_seen_;
    lapses_seen_ = ownership_->lapses();
    world_->Trace(absl::StrCat(self(), ": etcd lease ", why, ": serving nothing"));
  }
  const std::vector<std::string> lost = ownership_->TakeLost(world_->now());
  if (lost.empty()) return;
  world_->Trace(absl::StrCat(self(), ": stopped serving ", absl::StrJoin(lost, ", ")));
  on_lost_(lost);
}

void SimReplica::BeforeJoin(const std::string& job, std::function<void()> done) {
  Run([this, job, done = std::move(done)] {
    const Route route = ownership_->RouteJoin(job, world_->now());
    if (route.kind != RouteKind::kClaim) {
      done();
      return;
    }
    const int64_t lease = ownership_->lease();
    const std::string address = options_.ownership.self;
    Call<KeyValue>(
        [job, address, lease](EtcdClient& e) {
          return e.CreateIfAbsent(server::ha::kJobPrefix + job, address, lease);
        },
        [this, job, done](absl::StatusOr<KeyValue> key) {
          if (key.ok()) {
            const bool owned_before = ownership_->Owns(job);
            const Route answered = ownership_->ClaimAnswered(job, *key, world_->now());
            if (answered.kind == RouteKind::kServe && !owned_before) {
              ++claims_;
              world_->Trace(
                  absl::StrCat(self(), ": claimed job '", job, "' at epoch ", answered.epoch));
            }
          }
          done();
        });
  });
}

std::optional<uint64_t> SimReplica::OwnedEpoch(const std::string& job) const {
  uint64_t epoch = 0;
  if (ownership_ == nullptr || !ownership_->Owns(job, &epoch)) return std::nullopt;
  return epoch;
}

absl::StatusOr<uint64_t> SimReplica::AdmitJoin(const std::string& job_id) {
  const Route route = ownership_->RouteJoin(job_id, world_->now());
  if (route.kind == RouteKind::kClaim) {  // BeforeJoin's claim failed
    return wire::NotServedHere(
        absl::StrCat("replica '", self(), "' could not claim job '", job_id, "'"), "", 0);
  }
  return server::ha::RouteStatus(self(), job_id, route);
}

absl::StatusOr<uint64_t> SimReplica::AdmitMessage(const std::string& job_id) {
  return server::ha::RouteStatus(self(), job_id, ownership_->RouteMessage(job_id, world_->now()));
}

absl::StatusOr<uint64_t> SimReplica::AdmitQuery(const std::string& job_id) {
  return server::ha::RouteStatus(self(), job_id, ownership_->RouteQuery(job_id, world_->now()));
}

}  // namespace psync::simulation

#include "server/ha/ownership.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "serve/injected_faults.h"

namespace psync::server::ha {

uint64_t StableHash(absl::string_view text) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  // FNV's low bits mix poorly for short inputs that differ at the end: finish with a mixer.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

absl::Duration ToleratedEtcdLatency(const OwnershipOptions& options) {
  return std::min(options.lease_ttl * 2 / 3 - options.margin,
                  (options.lease_ttl - options.margin) / 2);
}

Ownership::Ownership(OwnershipOptions options) : options_(std::move(options)) {}

void Ownership::LeaseGranted(int64_t lease, absl::Time sent) {
  lease_ = lease;
  last_sent_ = sent;
  deadline_ = sent + options_.lease_ttl - options_.margin;
}

void Ownership::KeepAliveAnswered(int64_t lease, absl::Time sent, absl::Duration ttl,
                                  absl::Time now) {
  if (lease == 0 || lease != lease_) return;
  // (Injected: the old rule, under which an answer sent before the deadline revived the lease.)
  const bool revive = serve::IsInjected(serve::Injected().revive_lapsed_lease);
  if (!revive && (LapseIfPastDeadline(now) != 0 || sent >= deadline_)) return;
  last_sent_ = std::max(last_sent_, sent);
  deadline_ = std::max(deadline_, sent + ttl - options_.margin);
}

Ownership::KeepAliveOutcome Ownership::KeepAliveResult(int64_t lease,
                                                       const absl::StatusOr<absl::Duration>& ttl,
                                                       absl::Time sent, absl::Time now) {
  if (ttl.ok()) {
    KeepAliveAnswered(lease, sent, *ttl, now);
    return KeepAliveOutcome::kAnswered;
  }
  if (absl::IsNotFound(ttl.status())) {
    if (lease_ == lease) Lapse();
    return KeepAliveOutcome::kExpired;
  }
  LapseIfPastDeadline(now);
  return KeepAliveOutcome::kFailed;
}

int64_t Ownership::Lapse() {
  const int64_t lapsed = lease_;
  if (lapsed != 0) ++lapses_;
  lease_ = 0;
  deadline_ = absl::InfinitePast();
  for (const auto& [job, epoch] : owned_) lost_.push_back(job);
  owned_.clear();
  return lapsed;
}

void Ownership::SetReplicas(std::vector<std::string> replicas) {
  std::sort(replicas.begin(), replicas.end());
  replicas.erase(std::unique(replicas.begin(), replicas.end()), replicas.end());
  replicas_ = std::move(replicas);
}

int64_t Ownership::LapseIfPastDeadline(absl::Time now) {
  if (lease_ == 0 || now < deadline_) return 0;
  // (Injected: the deadline no longer ends the lease for good.)
  if (serve::IsInjected(serve::Injected().skip_fencing) ||
      serve::IsInjected(serve::Injected().revive_lapsed_lease)) {
    return 0;
  }
  return Lapse();
}

void Ownership::SetJobKeys(const std::vector<KeyValue>& keys, absl::Time sent) {
  view_sent_ = std::max(view_sent_, sent);
  owners_.clear();
  for (const KeyValue& kv : keys) {
    if (!absl::StartsWith(kv.key, kJobPrefix)) continue;
    owners_[kv.key.substr(sizeof(kJobPrefix) - 1)] = {
        kv.value, static_cast<uint64_t>(kv.create_revision), kv.lease};
  }
  for (auto it = owned_.begin(); it != owned_.end();) {
    auto seen = owners_.find(it->first);
    if (seen == owners_.end() || seen->second.epoch != it->second) {
      lost_.push_back(it->first);
      owned_.erase(it++);
    } else {
      ++it;
    }
  }
}

Route Ownership::ClaimAnswered(const std::string& job, const KeyValue& key, absl::Time now) {
  LapseIfPastDeadline(now);
  const uint64_t epoch = static_cast<uint64_t>(key.create_revision);
  owners_[job] = {key.value, epoch, key.lease};
  // (Injected: a key of this replica's lapsed lease, an older epoch, taken as its own.)
  const bool any_lease = serve::IsInjected(serve::Injected().accept_stale_epoch);
  if (key.value == options_.self && (key.lease == lease_ || any_lease) && Holding(now)) {
    owned_[job] = epoch;
    return Route{RouteKind::kServe, epoch, options_.self, ""};
  }
  if (key.value == options_.self) {
    return Route{RouteKind::kRefuse, 0, "", LapsedLeaseText(job)};
  }
  return Route{RouteKind::kRedirect, epoch, key.value, ""};
}

Route Ownership::RouteJoin(const std::string& job, absl::Time now) {
  LapseIfPastDeadline(now);
  if (auto it = owned_.find(job); it != owned_.end() && ServesOwnedJob(now)) {
    return Route{RouteKind::kServe, it->second, options_.self, ""};
  }
  const auto seen = owners_.find(job);
  if (seen != owners_.end() && seen->second.owner != options_.self) {
    return Route{RouteKind::kRedirect, seen->second.epoch, seen->second.owner, ""};
  }
  if (!Holding(now)) {
    return Route{RouteKind::kRefuse, 0, "",
                 "this replica holds no etcd lease now (it cannot own jobs until it renews one)"};
  }
  if (seen != owners_.end() && seen->second.lease == lease_) {
    // This replica's key under the lease it holds: a claim whose answer never came (etcd applied
    // the transaction after the call timed out). Claiming again is answered with this key.
    return Route{RouteKind::kClaim, 0, "", ""};
  }
  if (seen != owners_.end()) {  // this replica's address, another (lapsed) lease
    // (Injected: claimed again, and the answer's stale key taken as this lease's.)
    if (serve::IsInjected(serve::Injected().accept_stale_epoch)) {
      return Route{RouteKind::kClaim, 0, "", ""};
    }
    return Route{RouteKind::kRefuse, 0, "", LapsedLeaseText(job)};
  }
  const std::string preferred = Preferred(job);
  if (preferred == options_.self) return Route{RouteKind::kClaim, 0, "", ""};
  return Route{RouteKind::kRedirect, 0, preferred, ""};
}

Route Ownership::RouteMessage(const std::string& job, absl::Time now) {
  LapseIfPastDeadline(now);
  if (auto it = owned_.find(job); it != owned_.end()) {
    if (!ServesOwnedJob(now)) return Route{RouteKind::kRefuse, 0, "", LostText(job)};
    return Route{RouteKind::kServe, it->second, options_.self, ""};
  }
  if (!lost_.empty() && std::find(lost_.begin(), lost_.end(), job) != lost_.end()) {
    return Route{RouteKind::kRefuse, 0, "", LostText(job)};
  }
  if (auto it = owners_.find(job); it != owners_.end() && it->second.owner != options_.self) {
    return Route{RouteKind::kRedirect, it->second.epoch, it->second.owner, ""};
  }
  return Route{RouteKind::kRefuse, 0, "",
               absl::StrCat("job '", job, "' is not owned by this replica: join again")};
}

Route Ownership::RouteQuery(const std::string& job, absl::Time now) {
  LapseIfPastDeadline(now);
  if (auto it = owned_.find(job); it != owned_.end()) {
    if (!Holding(now)) return Route{RouteKind::kRefuse, 0, "", LostText(job)};
    return Route{RouteKind::kServe, it->second, options_.self, ""};
  }
  if (lease_ == 0) {
    return Route{RouteKind::kRefuse, 0, "",
                 absl::StrCat("this replica holds no etcd lease now: it cannot tell who owns job '",
                              job, "'")};
  }
  if (now >= view_sent_ + options_.lease_ttl) {
    return Route{RouteKind::kRefuse, 0, "",
                 absl::StrCat("this replica has not read etcd since ", absl::FormatTime(view_sent_),
                              ": it cannot tell who owns job '", job, "'")};
  }
  const auto seen = owners_.find(job);
  if (seen != owners_.end() && seen->second.owner != options_.self) {
    return Route{RouteKind::kRedirect, seen->second.epoch, seen->second.owner, ""};
  }
  if (seen != owners_.end() && seen->second.lease == lease_) {
    return Route{RouteKind::kRefuse, 0, "",
                 absl::StrCat("job '", job,
                              "' is claimed under this replica's lease but not served yet: its "
                              "next join here serves it")};
  }
  if (seen != owners_.end()) {  // this replica's address under a lapsed lease, until it expires
    return Route{RouteKind::kRefuse, 0, "", LapsedLeaseText(job)};
  }
  return Route{RouteKind::kUnowned, 0, "", ""};
}

bool Ownership::ServesOwnedJob(absl::Time now) const {
  return Holding(now) || serve::IsInjected(serve::Injected().skip_fencing);
}

std::string Ownership::LapsedLeaseText(const std::string& job) {
  return absl::StrCat("job '", job, "' is held by a lapsed lease of this replica until it expires");
}

std::string Ownership::LostText(const std::string& job) const {
  return absl::StrCat("job '", job, "': ", kLostReason);
}

std::vector<std::string> Ownership::TakeLost(absl::Time now) {
  LapseIfPastDeadline(now);
  std::vector<std::string> lost;
  lost.swap(lost_);
  std::sort(lost.begin(), lost.end());
  lost.erase(std::unique(lost.begin(), lost.end()), lost.end());
  return lost;
}

void Ownership::Release(const std::string& job) {
  owned_.erase(job);
  owners_.erase(job);
}

std::vector<JobOwner> Ownership::Owners() const {
  std::vector<JobOwner> out;
  out.reserve(owners_.size());
  for (const auto& [job, key] : owners_) out.push_back({job, key.owner, key.epoch});
  return out;
}

bool Ownership::Owns(const std::string& job, uint64_t* epoch) const {
  auto it = owned_.find(job);
  if (it == owned_.end()) return false;
  if (epoch != nullptr) *epoch = it->second;
  return true;
}

std::string Ownership::Preferred(const std::string& job) const {
  std::string best = options_.self;
  uint64_t best_score = StableHash(absl::StrCat(job, "\n", options_.self));
  for (const std::string& replica : replicas_) {
    const uint64_t score = StableHash(absl::StrCat(job, "\n", replica));
    if (score > best_score || (score == best_score && replica < best)) {
      best = replica;
      best_score = score;
    }
  }
  return best;
}

}  // namespace psync::server::ha

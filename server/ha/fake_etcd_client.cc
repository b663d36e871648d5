#include "server/ha/fake_etcd_client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psync::server::ha {

absl::Status FakeEtcd::Enter() {
  ++calls_;
  const absl::Time now = clock_->Now();
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second.expires <= now) {
      const int64_t id = it->first;
      for (auto k = keys_.begin(); k != keys_.end();) {
        k = k->second.lease == id ? keys_.erase(k) : std::next(k);
      }
      leases_.erase(it++);
      ++revision_;
    } else {
      ++it;
    }
  }
  if (!reachable_) return absl::UnavailableError("fake etcd: unreachable");
  return absl::OkStatus();
}

absl::StatusOr<int64_t> FakeEtcd::GrantLease(absl::Duration ttl) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  const int64_t id = next_lease_++;
  leases_[id] = Lease{ttl, clock_->Now() + ttl};
  return id;
}

absl::StatusOr<absl::Duration> FakeEtcd::KeepAlive(int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  auto it = leases_.find(lease);
  if (it == leases_.end()) return absl::NotFoundError(absl::StrCat("lease ", lease, " expired"));
  it->second.expires = clock_->Now() + it->second.ttl;
  return it->second.ttl;
}

absl::Status FakeEtcd::RevokeLease(int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  if (leases_.erase(lease) == 0) return absl::OkStatus();
  for (auto k = keys_.begin(); k != keys_.end();) {
    k = k->second.lease == lease ? keys_.erase(k) : std::next(k);
  }
  ++revision_;
  return absl::OkStatus();
}

void FakeEtcd::HoldClaims(bool hold) {
  absl::MutexLock lock(&hold_mu_);
  hold_ = hold;
}

int FakeEtcd::claims_held() const {
  absl::MutexLock lock(&hold_mu_);
  return held_;
}

absl::StatusOr<KeyValue> FakeEtcd::CreateIfAbsent(const std::string& key, const std::string& value,
                                                  int64_t lease) {
  {
    absl::MutexLock hold(&hold_mu_);
    ++held_;
    hold_mu_.Await(absl::Condition(
        +[](bool* held) { return !*held; }, &hold_));
    --held_;
  }
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  if (auto it = keys_.find(key); it != keys_.end()) return it->second;
  if (lease != 0 && !leases_.contains(lease)) {
    return absl::NotFoundError("etcdserver: requested lease not found");
  }
  ++revision_;
  return keys_[key] = KeyValue{key, value, revision_, lease};
}

absl::Status FakeEtcd::Put(const std::string& key, const std::string& value, int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  if (lease != 0 && !leases_.contains(lease)) {
    return absl::NotFoundError("etcdserver: requested lease not found");
  }
  ++revision_;
  auto it = keys_.find(key);
  const int64_t created = it != keys_.end() ? it->second.create_revision : revision_;
  keys_[key] = KeyValue{key, value, created, lease};
  return absl::OkStatus();
}

absl::StatusOr<std::optional<KeyValue>> FakeEtcd::Get(const std::string& key) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  auto it = keys_.find(key);
  if (it == keys_.end()) return std::optional<KeyValue>();
  return std::optional<KeyValue>(it->second);
}

absl::StatusOr<std::vector<KeyValue>> FakeEtcd::GetPrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  std::vector<KeyValue> out;
  for (auto it = keys_.lower_bound(prefix);
       it != keys_.end() && absl::StartsWith(it->first, prefix); ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<bool> FakeEtcd::DeleteIfCreatedAt(const std::string& key, int64_t create_revision) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.create_revision != create_revision) return false;
  keys_.erase(it);
  ++revision_;
  return true;
}

absl::StatusOr<bool> FakeEtcd::PutIfCreatedAt(const std::string& key, const std::string& value,
                                              int64_t create_revision) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.create_revision != create_revision) return false;
  ++revision_;
  it->second.value = value;
  it->second.lease = 0;
  return true;
}

absl::StatusOr<int64_t> FakeEtcd::DeletePrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  if (auto st = Enter(); !st.ok()) return st;
  int64_t deleted = 0;
  for (auto it = keys_.lower_bound(prefix);
       it != keys_.end() && absl::StartsWith(it->first, prefix);) {
    it = keys_.erase(it);
    ++deleted;
  }
  if (deleted > 0) ++revision_;
  return deleted;
}

void FakeEtcd::SetReachable(bool reachable) {
  absl::MutexLock lock(&mu_);
  reachable_ = reachable;
}

int FakeEtcd::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

}  // namespace psync::server::ha

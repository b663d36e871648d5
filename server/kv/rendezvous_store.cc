#include "server/kv/rendezvous_store.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace psync::server {

absl::Status RendezvousStore::CheckKey(absl::string_view field, const std::string& key) const {
  if (key.empty() || key.size() > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be 1..", limits_.max_key_bytes,
                                                   " characters (got ", key.size(), ")"));
  }
  return absl::OkStatus();
}

bool RendezvousStore::Lookup(const std::string& job, uint64_t generation,
                             const std::vector<std::string>& keys, Values* out) const {
  auto scope = jobs_.find(job);
  if (scope == jobs_.end() || scope->second.generation != generation) return false;
  Values values;
  for (const std::string& key : keys) {
    auto it = scope->second.values.find(key);
    if (it == scope->second.values.end()) return false;
    values.push_back(it->second);
  }
  *out = std::move(values);
  return true;
}

absl::Status RendezvousStore::Set(const std::string& job, uint64_t generation, const Caller& caller,
                                  const std::string& key, std::string value) {
  if (auto s = CheckKey("key", key); !s.ok()) return s;
  if (value.size() > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value must be at most ", limits_.max_value_bytes, " bytes (got ", value.size(), ")"));
  }
  if (auto s = check_(job, generation, caller); !s.ok()) return s;
  std::vector<std::pair<Callback, Values>> ready;
  {
    absl::MutexLock lock(&mu_);
    Scope& scope = jobs_[job];
    if (scope.generation != generation) {  // a newer generation: older keys are meaningless
      scope.generation = generation;
      scope.values.clear();
    }
    if (!scope.values.contains(key) && scope.values.size() >= limits_.max_keys_per_job) {
      return absl::ResourceExhaustedError(
          absl::StrCat("job '", job, "' already holds ", limits_.max_keys_per_job, " keys"));
    }
    scope.values[key] = std::move(value);
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      Values values;
      if (it->second.job == job && Lookup(job, it->second.generation, it->second.keys, &values)) {
        ready.emplace_back(std::move(it->second.done), std::move(values));
        waiters_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (auto& [done, values] : ready) done(std::move(values));
  return absl::OkStatus();
}

uint64_t RendezvousStore::Get(const std::string& job, uint64_t generation, const Caller& caller,
                              const std::vector<std::string>& keys, bool wait, Callback done) {
  if (keys.empty() || keys.size() > limits_.max_keys_per_get) {
    done(absl::InvalidArgumentError(absl::StrCat("keys must have 1..", limits_.max_keys_per_get,
                                                 " entries (got ", keys.size(), ")")));
    return 0;
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    if (auto s = CheckKey(absl::StrCat("keys[", i, "]"), keys[i]); !s.ok()) {
      done(s);
      return 0;
    }
  }
  if (auto s = check_(job, generation, caller); !s.ok()) {
    done(s);
    return 0;
  }
  absl::StatusOr<Values> result;
  {
    absl::MutexLock lock(&mu_);
    Values values;
    if (Lookup(job, generation, keys, &values)) {
      result = std::move(values);
    } else if (wait) {
      const uint64_t id = next_waiter_++;
      waiters_.emplace(id, Waiter{job, generation, keys, std::move(done)});
      return id;
    } else {
      auto scope = jobs_.find(job);
      std::string missing = keys.front();
      for (const std::string& key : keys) {
        if (scope == jobs_.end() || scope->second.generation != generation ||
            !scope->second.values.contains(key)) {
          missing = key;
          break;
        }
      }
      result = absl::NotFoundError(absl::StrCat("key '", missing, "' is not set"));
    }
  }
  done(std::move(result));
  return 0;
}

void RendezvousStore::Cancel(uint64_t id, const absl::Status& status) {
  Callback done;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    done = std::move(it->second.done);
    waiters_.erase(it);
  }
  done(status);
}

size_t RendezvousStore::DropJob(const std::string& job, const absl::Status& status) {
  std::vector<Callback> parked;
  size_t dropped = 0;
  {
    absl::MutexLock lock(&mu_);
    if (auto it = jobs_.find(job); it != jobs_.end()) {
      dropped = it->second.values.size();
      jobs_.erase(it);
    }
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if (it->second.job == job) {
        parked.push_back(std::move(it->second.done));
        waiters_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (Callback& done : parked) done(status);
  return dropped;
}

}  // namespace psync::server

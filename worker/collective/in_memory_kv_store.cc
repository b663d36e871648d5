#include "worker/collective/in_memory_kv_store.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psync {
namespace worker {

absl::Status InMemoryKeyValueStore::Set(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&mu_);
  values_[key] = std::string(value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryKeyValueStore::Get(absl::string_view key) {
  absl::MutexLock lock(&mu_);
  auto it = values_.find(key);
  if (it == values_.end()) {
    return absl::NotFoundError(absl::StrCat("key \"", key, "\" is not set"));
  }
  return it->second;
}

absl::Status InMemoryKeyValueStore::Wait(absl::Span<const std::string> keys,
                                         absl::Duration timeout) {
  auto all_present = [this, keys]() {
    mu_.AssertReaderHeld();
    return AllPresent(keys);
  };
  absl::MutexLock lock(&mu_);
  if (mu_.AwaitWithTimeout(absl::Condition(&all_present), timeout)) {
    return absl::OkStatus();
  }
  std::vector<absl::string_view> missing;
  for (const std::string& key : keys) {
    if (!values_.contains(key)) missing.push_back(key);
  }
  return absl::DeadlineExceededError(
      absl::StrCat("timed out after ", absl::FormatDuration(timeout),
                   " waiting for key(s): ", absl::StrJoin(missing, ", ")));
}

size_t InMemoryKeyValueStore::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

bool InMemoryKeyValueStore::AllPresent(absl::Span<const std::string> keys) const {
  for (const std::string& key : keys) {
    if (!values_.contains(key)) return false;
  }
  return true;
}

}  // namespace worker
}  // namespace psync

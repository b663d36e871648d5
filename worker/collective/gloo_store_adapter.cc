#include "worker/collective/gloo_store_adapter.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "worker/collective/gloo_status.h"

namespace psync {
namespace worker {
namespace {

void ThrowIfError(absl::Status status) {
  if (!status.ok()) throw GlooStatusError(std::move(status));
}

}  // namespace

GlooStoreAdapter::GlooStoreAdapter(KeyValueStore* store, std::string prefix,
                                   absl::Duration default_timeout)
    : store_(store), prefix_(std::move(prefix)), default_timeout_(default_timeout) {}

void GlooStoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  ThrowIfError(
      store_->Set(absl::StrCat(prefix_, key), absl::string_view(data.data(), data.size())));
}

std::vector<char> GlooStoreAdapter::get(const std::string& key) {
  const std::string full_key = absl::StrCat(prefix_, key);
  ThrowIfError(store_->Wait({full_key}, default_timeout_));
  absl::StatusOr<std::string> value = store_->Get(full_key);
  ThrowIfError(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys) {
  ThrowIfError(store_->Wait(Prefixed(keys), default_timeout_));
}

void GlooStoreAdapter::wait(const std::vector<std::string>& keys,
                            const std::chrono::milliseconds& timeout) {
  // Gloo passes its context timeout here; zero means "no timeout" in Gloo,
  // which the adapter bounds by the default instead of waiting forever.
  const absl::Duration bound = timeout.count() > 0 ? absl::FromChrono(timeout) : default_timeout_;
  ThrowIfError(store_->Wait(Prefixed(keys), bound));
}

std::vector<std::string> GlooStoreAdapter::Prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const std::string& key : keys) {
    prefixed.push_back(absl::StrCat(prefix_, key));
  }
  return prefixed;
}

}  // namespace worker
}  // namespace psync

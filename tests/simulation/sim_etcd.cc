// SimEtcd; contract: sim_etcd.h.
#include "tests/simulation/sim_etcd.h"

#include <algorithm>

namespace psync::simulation {

size_t SimEtcd::NewLink() {
  const uint64_t origin = world_->NewOrigin();
  links_.emplace_back(world_->RngFor(origin), origin);
  return links_.size() - 1;
}

void SimEtcd::Slow(size_t link, absl::Duration extra, absl::Duration length) {
  Link& l = links_[link];
  l.slow_until = std::max(l.slow_until, world_->now() + length);
  l.extra = extra;
}

void SimEtcd::Partition(size_t link, absl::Duration length) {
  Link& l = links_[link];
  l.cut_until = std::max(l.cut_until, world_->now() + length);
}

absl::Duration SimEtcd::Delay(Link& link) {
  absl::Duration d = link.rng.Between(absl::Microseconds(100), absl::Milliseconds(2));
  if (world_->now() < link.slow_until) d += link.extra;
  return d;
}

std::optional<server::ha::KeyValue> SimEtcd::Truth(const std::string& key) {
  absl::StatusOr<std::optional<server::ha::KeyValue>> kv = store_.Get(key);
  return kv.ok() ? *kv : std::nullopt;
}

}  // namespace psync::simulation

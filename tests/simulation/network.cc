// Network; contract: network.h.
#include "tests/simulation/network.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psync::simulation {

uint64_t Network::Open(OnCut rank_cut, OnCut coordinator_cut) {
  const uint64_t id = world_->NewOrigin();
  Connection c(world_->RngFor(id));
  c.last_delivery[0] = c.last_delivery[1] = world_->now();
  c.on_cut[static_cast<int>(Direction::kUp)] = std::move(coordinator_cut);
  c.on_cut[static_cast<int>(Direction::kDown)] = std::move(rank_cut);
  connections_.emplace(id, std::move(c));
  return id;
}

bool Network::IsOpen(uint64_t connection) const {
  auto it = connections_.find(connection);
  return it != connections_.end() && it->second.open;
}

void Network::Send(uint64_t connection, Direction direction, std::function<void()> deliver) {
  auto it = connections_.find(connection);
  if (it == connections_.end() || !it->second.open) {
    ++dropped_;
    return;
  }
  Connection& c = it->second;
  ++sent_;
  absl::Duration delay = c.rng.Between(options_.min_delay, options_.max_delay);
  if (c.rng.Chance(options_.slow_message)) {
    delay += c.rng.Between(absl::ZeroDuration(), options_.max_slow_delay);
  }
  absl::Time& last = c.last_delivery[static_cast<int>(direction)];
  last = std::max(last, world_->now() + delay);
  world_->At(last, connection, [this, connection, deliver = std::move(deliver)] {
    if (!IsOpen(connection)) {
      ++dropped_;
      return;
    }
    deliver();
  });
}

void Network::Cut(uint64_t connection, const std::string& why) {
  auto it = connections_.find(connection);
  if (it == connections_.end() || !it->second.open) return;
  Connection& c = it->second;
  c.open = false;
  ++cuts_;
  world_->Trace(absl::StrCat("net: connection ", connection, " cut (", why, ")"));
  for (int end = 0; end < 2; ++end) {
    OnCut found_out = std::move(c.on_cut[end]);
    if (found_out == nullptr) continue;
    world_->At(world_->now() + c.rng.Between(absl::ZeroDuration(), options_.max_detection),
               connection,
               [connection, found_out = std::move(found_out)] { found_out(connection); });
  }
}

void Network::Stall(uint64_t connection, Direction direction, absl::Duration length) {
  auto it = connections_.find(connection);
  if (it == connections_.end() || !it->second.open) return;
  absl::Time& last = it->second.last_delivery[static_cast<int>(direction)];
  last = std::max(last, world_->now() + length);
  world_->Trace(absl::StrCat("net: connection ", connection,
                             direction == Direction::kUp ? " up" : " down", " stalled for ",
                             absl::FormatDuration(length)));
}

std::vector<uint64_t> Network::open_connections() const {
  std::vector<uint64_t> open;
  for (const auto& [id, c] : connections_) {
    if (c.open) open.push_back(id);
  }
  std::sort(open.begin(), open.end());
  return open;
}

}  // namespace psync::simulation

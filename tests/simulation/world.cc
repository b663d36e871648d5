// World and Rng; contract: world.h.
#include "tests/simulation/world.h"

#include <utility>

#include "absl/strings/str_format.h"

namespace psync::simulation {

uint64_t Rng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t Rng::Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }

bool Rng::Chance(double p) { return static_cast<double>(Next() >> 11) * 0x1.0p-53 < p; }

absl::Duration Rng::Between(absl::Duration lo, absl::Duration hi) {
  const int64_t lo_us = absl::ToInt64Microseconds(lo);
  const int64_t hi_us = absl::ToInt64Microseconds(hi);
  if (hi_us <= lo_us) return lo;
  return absl::Microseconds(lo_us + static_cast<int64_t>(Below(hi_us - lo_us + 1)));
}

uint64_t MixSeed(uint64_t a, uint64_t b) {
  Rng rng(a * 0x9e3779b97f4a7c15ull + b);
  rng.Next();
  return rng.Next();
}

World::World(uint64_t seed, bool keep_trace)
    : seed_(seed),
      keep_trace_(keep_trace),
      start_(absl::FromUnixSeconds(1'700'000'000)),
      clock_(start_) {}

bool World::Later::operator()(const Event& a, const Event& b) const {
  if (a.at != b.at) return a.at > b.at;
  if (a.origin != b.origin) return a.origin > b.origin;
  return a.count > b.count;
}

void World::At(absl::Time at, uint64_t origin, std::function<void()> fn) {
  if (at < now()) at = now();
  size_t slot;
  if (!free_functions_.empty()) {
    slot = free_functions_.back();
    free_functions_.pop_back();
    functions_[slot] = std::move(fn);
  } else {
    slot = functions_.size();
    functions_.push_back(std::move(fn));
  }
  queue_.push(Event{at, origin, ++counts_, slot});
}

bool World::RunNext(absl::Time until) {
  if (queue_.empty() || queue_.top().at > until) return false;
  const Event e = queue_.top();
  queue_.pop();
  if (e.at > now()) clock_.Advance(e.at - now());
  std::function<void()> fn = std::move(functions_[e.fn]);
  functions_[e.fn] = nullptr;
  free_functions_.push_back(e.fn);
  ++events_run_;
  // The schedule itself is part of the trace's hash: a replay runs the same events in the same
  // order.
  for (uint64_t v : {static_cast<uint64_t>(absl::ToInt64Microseconds(e.at - start_)), e.origin}) {
    trace_hash_ ^= v;
    trace_hash_ *= 1099511628211ull;
  }
  fn();
  return true;
}

void World::Trace(const std::string& line) {
  const std::string stamped =
      absl::StrFormat("%10.6f %s", absl::ToDoubleSeconds(now() - start_), line);
  for (unsigned char c : stamped) {
    trace_hash_ ^= c;
    trace_hash_ *= 1099511628211ull;
  }
  trace_hash_ ^= '\n';
  trace_hash_ *= 1099511628211ull;
  if (keep_trace_) trace_.push_back(stamped);
}

}  // namespace psync::simulation

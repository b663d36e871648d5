#include "serve/metrics/metric.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace psync::metrics {
namespace {

// std::atomic<double>::fetch_add is C++20; this is the usual CAS loop.
void AtomicAdd(std::atomic<double>* target, double delta) {
  double current = target->load(std::memory_order_relaxed);
  while (!target->compare_exchange_weak(current, current + delta, std::memory_order_relaxed)) {
  }
}

}  // namespace

void Counter::Add(double delta) {
  if (!(delta >= 0)) return;  // Negative or NaN.
  AtomicAdd(&value_, delta);
}

void Gauge::Add(double delta) { AtomicAdd(&value_, delta); }

std::vector<double> QueueWaitBuckets() {
  return {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01,
          0.02, 0.025,  0.05, 0.1,  0.25,   0.5,  1,    2.5,    5,    10};
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<uint64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    counts_[i].store(0, std::memory_order_relaxed);
  }
}

void Histogram::Observe(double value, uint64_t times) {
  if (std::isnan(value) || times == 0) return;
  size_t bucket =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  counts_[bucket].fetch_add(times, std::memory_order_relaxed);
  AtomicAdd(&sum_, value * static_cast<double>(times));
}

Histogram::Snapshot Histogram::Collect() const {
  Snapshot snapshot;
  snapshot.upper_bounds = upper_bounds_;
  snapshot.cumulative_counts.resize(upper_bounds_.size() + 1);
  uint64_t running = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    snapshot.cumulative_counts[i] = running;
  }
  snapshot.count = running;
  snapshot.sum = sum_.load(std::memory_order_relaxed);
  return snapshot;
}

std::function<void(absl::Duration)> SecondsObserver(Histogram* histogram) {
  if (histogram == nullptr) return nullptr;
  return [histogram](absl::Duration d) { histogram->Observe(absl::ToDoubleSeconds(d)); };
}

}  // namespace psync::metrics

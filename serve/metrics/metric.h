// The three metric kinds of psync::metrics: Counter, Gauge and Histogram.
//
// Each object is one time series (one child of a family in registry.h).
// Thread-safety: every method may be called concurrently from any thread;
// updates are lock-free atomics (relaxed ordering: a reader sees each value
// eventually, with no ordering against other memory). Objects are owned by
// their family and never move, so pointers to them stay valid for the
// registry's lifetime. No method fails; invalid updates are ignored as
// documented.

#ifndef PSYNC_SERVE_METRICS_METRIC_H_
#define PSYNC_SERVE_METRICS_METRIC_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/time/time.h"

namespace psync::metrics {

// A value that only goes up, e.g. check-ins received. Resets only when the
// process restarts.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Increment() { Add(1.0); }
  // Adds `delta`. A negative or NaN delta would break monotonicity and is
  // ignored.
  void Add(double delta);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// A value that goes up and down, e.g. contributors still missing.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  void Sub(double delta) { Add(-delta); }
  void Increment() { Add(1.0); }
  void Decrement() { Add(-1.0); }
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// Bucket bounds for a wait inside one process (a message in a queue, a handover between threads),
// in seconds: 10 us .. 10 s.
std::vector<double> QueueWaitBuckets();

// Counts observations in buckets with fixed upper bounds, e.g. the wait from
// a chunk's first check-in to its sync release, in seconds.
class Histogram {
 public:
  // A consistent-enough view for rendering. The count is the sum of the
  // bucket counts, so buckets and count always agree; the sum may trail
  // by observations in flight.
  struct Snapshot {
    std::vector<double> upper_bounds;         // Finite, increasing.
    std::vector<uint64_t> cumulative_counts;  // upper_bounds.size() + 1;
                                              // the last is the +Inf bucket.
    double sum = 0;
    uint64_t count = 0;
  };

  // `upper_bounds` must be finite and strictly increasing (the registry
  // checks); +Inf is implicit.
  explicit Histogram(std::vector<double> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  // Records `value` in the first bucket whose bound is >= value (bounds are
  // inclusive, as "le" says). NaN is ignored.
  void Observe(double value) { Observe(value, 1); }
  // Records `value` `times` times at once (e.g. the same wait of many ranks).
  void Observe(double value, uint64_t times);
  Snapshot Collect() const;

 private:
  const std::vector<double> upper_bounds_;
  // Per-bucket (not cumulative) counts; the last slot is the +Inf bucket.
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0.0};
};

// A callback that observes a duration into `histogram` in seconds (for the wait observers of
// serve/stream_writer.h and the coordinator's delivery); empty when `histogram` is null, so that
// nothing is timed. The histogram must outlive the callback.
std::function<void(absl::Duration)> SecondsObserver(Histogram* histogram);

}  // namespace psync::metrics

#endif  // PSYNC_SERVE_METRICS_METRIC_H_

// LatencySummary: percentiles of a set of durations, and their JSON form.
//
// Summarize() sorts a copy of the samples (nanoseconds) and picks nearest-rank percentiles: p50 is
// the smallest sample with at least half of the samples at or below it. An empty set gives
// count 0 and zeros. Json() renders {"count":..,"p50_us":..,"p90_us":..,"p99_us":..,"max_us":..,
// "mean_us":..} in microseconds with one decimal. Pure functions; thread-safe.
#ifndef PSYNC_BENCH_LATENCY_SUMMARY_H_
#define PSYNC_BENCH_LATENCY_SUMMARY_H_

#include <cstdint>
#include <string>
#include <vector>

namespace psync::bench {

struct LatencySummary {
  size_t count = 0;
  double p50_us = 0;
  double p90_us = 0;
  double p99_us = 0;
  double max_us = 0;
  double mean_us = 0;

  std::string Json() const;
};

LatencySummary Summarize(std::vector<int64_t> samples_ns);

}  // namespace psync::bench

#endif  // PSYNC_BENCH_LATENCY_SUMMARY_H_

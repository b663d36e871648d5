#include "bench/latency_summary.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace psync::bench {
namespace {

double Percentile(const std::vector<int64_t>& sorted, double p) {
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  const size_t index = rank == 0 ? 0 : rank - 1;
  return static_cast<double>(sorted[std::min(index, sorted.size() - 1)]) / 1000.0;
}

}  // namespace

LatencySummary Summarize(std::vector<int64_t> samples_ns) {
  LatencySummary s;
  if (samples_ns.empty()) return s;
  std::sort(samples_ns.begin(), samples_ns.end());
  s.count = samples_ns.size();
  s.p50_us = Percentile(samples_ns, 0.50);
  s.p90_us = Percentile(samples_ns, 0.90);
  s.p99_us = Percentile(samples_ns, 0.99);
  s.max_us = static_cast<double>(samples_ns.back()) / 1000.0;
  double total = 0;
  for (int64_t v : samples_ns) total += static_cast<double>(v);
  s.mean_us = total / static_cast<double>(samples_ns.size()) / 1000.0;
  return s;
}

std::string LatencySummary::Json() const {
  return absl::StrFormat(
      R"({"count":%d,"p50_us":%.1f,"p90_us":%.1f,"p99_us":%.1f,"max_us":%.1f,"mean_us":%.1f})",
      count, p50_us, p90_us, p99_us, max_us, mean_us);
}

}  // namespace psync::bench

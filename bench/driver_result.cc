#include "bench/driver_result.h"

#include <utility>

namespace psync::bench {

void SummarizeRun(const ReleaseRecords& records, uint32_t ranks, uint64_t warmup_steps,
                  const DriverCounters& counters, DriverResult* result) {
  ReleaseSummary summary = records.Summarize(ranks, warmup_steps);
  result->releases_complete = summary.complete;
  result->distinct_sequences = summary.distinct_sequences;
  result->release_latency_ns = std::move(summary.latency_ns);
  result->release_first_latency_ns = std::move(summary.first_latency_ns);
  result->release_times = std::move(summary.times);
  result->directives = counters.directives.load();
  result->duplicate_directives = counters.duplicate_directives.load();
  result->unexpected_directives = counters.unexpected_directives.load();
  result->sequence_mismatches = counters.sequence_mismatches.load();
  result->checkins_measured = counters.checkins_measured.load();
  result->messages_up = counters.messages_up.load();
  result->messages_down = counters.messages_down.load();
  result->acks = counters.acks.load();
}

}  // namespace psync::bench

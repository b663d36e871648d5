// SimReport: what a simulated job measured and which invariant violations it found, and
// FormatReport(), the human-readable table (one line per step, then totals and the verdict).
//
// Plain value types; thread-compatible.
#ifndef PSYNC_SIM_REPORT_H_
#define PSYNC_SIM_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "sim/sim_plan.h"

namespace psync::sim {

struct StepRow {
  uint64_t step = 0;
  bool skipped = false;
  // Chunks whose directive reached every member / chunks that should have been released.
  uint32_t chunks_released = 0;
  uint32_t chunks_expected = 0;
  // Release latency of a chunk: its last contributor's send -> its last member's directive
  // arrival. Median and maximum across the step's released chunks.
  absl::Duration latency_p50;
  absl::Duration latency_max;
  // The contributor whose first check-in of the step was sent last, and how long after the step's
  // first check-in it was sent.
  SimContributor slowest;
  absl::Duration slowest_lag;
};

struct SimReport {
  std::vector<StepRow> steps;
  uint64_t checkins_sent = 0;                 // first sends of (step, chunk, rank, optimizer)
  uint64_t duplicates_sent = 0;               // check-ins (and skip votes) sent again on purpose
  uint64_t skips_sent = 0;                    // first skip votes
  uint64_t directives_received = 0;           // deliveries past the clients' de-duplication
  uint64_t duplicate_directives_dropped = 0;  // summed client counters
  uint64_t reconnects = 0;                    // summed client counters
  uint64_t messages_resent = 0;               // summed client counters
  uint64_t releases = 0;                      // (step, chunk) delivered to every member
  uint64_t expected_releases = 0;             // member chunks x steps that were not skipped
  uint64_t skipped_steps = 0;
  std::vector<uint64_t> directives_per_rank;
  // Invariant violations found by the recorder: early release, duplicate or missing delivery,
  // inconsistent or reused sequence numbers, directives for skipped steps.
  std::vector<std::string> violations;
  // Calls of simulated ranks that failed (the run stops at the first).
  std::vector<std::string> errors;
  absl::Duration wall_time;

  // Every (step, chunk) was released exactly once to every member after all its contributors.
  bool ok() const { return violations.empty() && errors.empty() && releases == expected_releases; }
};

// One line per step, then totals, violations, errors and a final verdict line ("PASS: ..." or
// "FAIL: ...").
std::string FormatReport(const SimReport& report);

}  // namespace psync::sim

#endif  // PSYNC_SIM_REPORT_H_

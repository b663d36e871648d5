#include "sim/report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psync::sim {
namespace {

std::string Ms(absl::Duration d) { return absl::StrFormat("%.3f", absl::ToDoubleMilliseconds(d)); }

}  // namespace

std::string FormatReport(const SimReport& report) {
  std::string out = absl::StrFormat("%8s  %-8s  %9s  %11s  %11s  %-18s  %10s\n", "step", "state",
                                    "released", "p50_ms", "max_ms", "slowest", "lag_ms");
  for (const StepRow& row : report.steps) {
    if (row.skipped) {
      absl::StrAppendFormat(&out, "%8d  %-8s  %9s  %11s  %11s  %-18s  %10s\n", row.step, "skipped",
                            "-", "-", "-", "-", "-");
      continue;
    }
    absl::StrAppendFormat(&out, "%8d  %-8s  %9s  %11s  %11s  %-18s  %10s\n", row.step,
                          row.chunks_released == row.chunks_expected ? "synced" : "partial",
                          absl::StrCat(row.chunks_released, "/", row.chunks_expected),
                          Ms(row.latency_p50), Ms(row.latency_max),
                          absl::StrCat("r", row.slowest.rank, "/", row.slowest.optimizer),
                          Ms(row.slowest_lag));
  }
  absl::StrAppendFormat(&out,
                        "check-ins sent %d (+%d duplicates, %d skip votes); releases %d/%d; "
                        "directives received %d (duplicates dropped by clients %d); "
                        "reconnects %d (messages re-sent %d); skipped steps %d; wall %s\n",
                        report.checkins_sent, report.duplicates_sent, report.skips_sent,
                        report.releases, report.expected_releases, report.directives_received,
                        report.duplicate_directives_dropped, report.reconnects,
                        report.messages_resent, report.skipped_steps,
                        absl::FormatDuration(report.wall_time));
  for (const std::string& v : report.violations) absl::StrAppend(&out, "VIOLATION: ", v, "\n");
  for (const std::string& e : report.errors) absl::StrAppend(&out, "ERROR: ", e, "\n");
  if (report.ok()) {
    absl::StrAppend(&out, "PASS: every (step, chunk) was released exactly once to every member, ",
                    "after all its contributors\n");
  } else {
    absl::StrAppend(&out, "FAIL: ", report.violations.size(), " violations, ", report.errors.size(),
                    " errors, ", report.releases, "/", report.expected_releases, " releases\n");
  }
  return out;
}

}  // namespace psync::sim

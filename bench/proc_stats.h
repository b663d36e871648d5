// ProcStats: CPU time and memory of one process, and the machine's load, read from /proc.
//
// SampleProcess(pid) reads /proc/<pid>/stat (utime + stime, in clock ticks) and /proc/<pid>/status
// (VmRSS, VmHWM, Threads). CPU seconds are cumulative since the process started: take one sample
// before and one after the measured interval and subtract. VmHWM is the peak resident set since the
// process started. Errors: NOT_FOUND when the process is gone, INTERNAL when a file cannot be
// parsed. LoadAverage() reads /proc/loadavg (1, 5 and 15 minute averages). Thread-safe.
#ifndef PSYNC_BENCH_PROC_STATS_H_
#define PSYNC_BENCH_PROC_STATS_H_

#include <sys/types.h>

#include <array>
#include <cstdint>

#include "absl/status/statusor.h"

namespace psync::bench {

struct ProcSample {
  double cpu_seconds = 0;  // user + system, since the process started
  int64_t rss_bytes = 0;   // VmRSS
  int64_t hwm_bytes = 0;   // VmHWM (peak RSS)
  int threads = 0;
};

absl::StatusOr<ProcSample> SampleProcess(pid_t pid);

// {1 min, 5 min, 15 min}; zeros when /proc/loadavg cannot be read.
std::array<double, 3> LoadAverage();

}  // namespace psync::bench

#endif  // PSYNC_BENCH_PROC_STATS_H_

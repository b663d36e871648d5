// CpuBudget: how many CPUs this process may use, so that its thread pools (gRPC's pollers and
// executors, the coordinator's delivery helpers) are sized for the CPUs it is given rather than for
// the host's. A pod with a 2-CPU limit on a 128-core node sees 128 processors through sysconf();
// its CPU time is capped by the cgroup's CFS quota, and a process whose pools are sized for 128
// spends that time switching between threads and is throttled.
//
// The budget is the smallest of: the CPUs in the process's affinity mask (taskset, cpuset), and
// the CFS quota of every cgroup from the process's own up to the root (cgroup v2 `cpu.max`, v1
// `cpu.cfs_quota_us` / `cpu.cfs_period_us`), rounded up; at least 1. An explicit count (a daemon's
// --cpus) overrides both.
//
// Thread-safety: the functions are pure or read files; call them from main before threads start.
#ifndef PSYNC_SERVE_CPU_BUDGET_H_
#define PSYNC_SERVE_CPU_BUDGET_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psync::serve {

struct CpuBudget {
  int cpus = 1;                      // what pools are sized for: >= 1
  int affinity_cpus = 1;             // CPUs in the affinity mask
  std::optional<double> quota_cpus;  // the tightest cgroup CPU quota, in CPUs, if any
  std::string quota_source;          // the file that set quota_cpus, e.g. "/sys/fs/cgroup/cpu.max"
  bool overridden = false;           // cpus came from an explicit count

  // One line for the daemon's log: "4 CPUs (affinity 16, cgroup quota 3.5 from ...)".
  std::string ToString() const;
};

// The CPU quota a cgroup v2 `cpu.max` states ("max 100000" or "150000 100000"): nullopt when
// unlimited; INVALID_ARGUMENT for text that is neither.
absl::StatusOr<std::optional<double>> ParseCgroupV2CpuMax(absl::string_view text);

// The CPU quota of a cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`: nullopt when the quota
// is -1 (unlimited); INVALID_ARGUMENT for text that is not a count or a period of 0.
absl::StatusOr<std::optional<double>> ParseCgroupV1CpuQuota(absl::string_view quota_text,
                                                            absl::string_view period_text);

// The tightest CPU quota on the path from this process's cgroup to the root, read from
// `root`/proc/self/mountinfo, `root`/proc/self/cgroup and the cgroup files under their mount
// points (`root` is "/" on a host; a test passes a folder holding those files). Quota and source
// file, or nullopt when no cgroup on the path has one (or the files are not there).
std::optional<std::pair<double, std::string>> ReadCgroupCpuQuota(const std::string& root = "/");

// The CPUs in this process's affinity mask (sched_getaffinity), at least 1.
int AffinityCpus();

// The budget from its parts: `override_cpus` > 0 wins; otherwise min(affinity, ceil(quota)).
CpuBudget MakeCpuBudget(int affinity_cpus,
                        const std::optional<std::pair<double, std::string>>& quota,
                        int override_cpus);

// This process's budget: MakeCpuBudget(AffinityCpus(), ReadCgroupCpuQuota(), override_cpus).
CpuBudget DetectCpuBudget(int override_cpus);

}  // namespace psync::serve

#endif  // PSYNC_SERVE_CPU_BUDGET_H_

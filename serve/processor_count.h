// The processor count the libraries in a daemon's process size their thread pools by.
//
// gRPC (1.51) sizes its callback threads, executor and event engine by
// sysconf(_SC_NPROCESSORS_CONF), read once while its library loads (before main): the host's
// processors, whatever the process's affinity mask or cgroup quota. A binary that links this
// library answers sysconf(_SC_NPROCESSORS_CONF) and sysconf(_SC_NPROCESSORS_ONLN), for every
// library in the process, with its CPU budget: $PSYNC_CPUS when it is a positive count, else
// DetectCpuBudget (serve/cpu_budget.h: the affinity mask and the cgroup quota), computed at the
// first such call. Every other sysconf() name goes to the C library. Only the daemons and
// psync-bench link it (never libpsync_c.so, which lives in the users' processes).
//
// Thread-safety: sysconf() and ProcessorCount() from any thread, before main included.
#ifndef PSYNC_SERVE_PROCESSOR_COUNT_H_
#define PSYNC_SERVE_PROCESSOR_COUNT_H_

#include "serve/cpu_budget.h"

namespace psync::serve {

// The environment variable that overrides the detected budget (a daemon's --cpus sets it).
inline constexpr char kCpusEnvironmentVariable[] = "PSYNC_CPUS";

// This process's budget, fixed at the first call: DetectCpuBudget with $PSYNC_CPUS as the override
// (`overridden` when it was set).
const CpuBudget& ProcessCpuBudget();

// What sysconf(_SC_NPROCESSORS_CONF) answers in this process: ProcessCpuBudget().cpus, >= 1.
int ProcessorCount();

}  // namespace psync::serve

#endif  // PSYNC_SERVE_PROCESSOR_COUNT_H_

// The daemons' --cpus flag: each daemon's main calls UseCpuBudget() right after parsing its flags,
// so that gRPC's thread pools (through serve/processor_count.h) and the daemon's own are sized for
// the CPUs the process is given (its affinity mask and cgroup quota, or --cpus / $PSYNC_CPUS), not
// for the host's.
//
// Thread-safety: call once, from main, before the daemon starts threads of its own.
#ifndef PSYNC_SERVE_DAEMON_CPUS_H_
#define PSYNC_SERVE_DAEMON_CPUS_H_

#include "absl/strings/string_view.h"
#include "serve/cpu_budget.h"

namespace psync::serve {

// The budget in effect, written to stderr in one line prefixed by `daemon`. gRPC reads the
// processor count before main, so a --cpus other than that count sets $PSYNC_CPUS and executes the
// binary again with the same `argv` (same pid); this returns only once the count is --cpus.
CpuBudget UseCpuBudget(absl::string_view daemon, char** argv);

}  // namespace psync::serve

#endif  // PSYNC_SERVE_DAEMON_CPUS_H_

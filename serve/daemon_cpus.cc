#include "serve/daemon_cpus.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "serve/processor_count.h"

ABSL_FLAG(int, cpus, 0,
          "CPUs to size thread pools for (gRPC's and the daemon's own); 0: $PSYNC_CPUS if set, "
          "else the affinity mask and the cgroup CPU quota decide (the smaller, rounded up)");

namespace psync::serve {

CpuBudget UseCpuBudget(absl::string_view daemon, char** argv) {
  const int flag = absl::GetFlag(FLAGS_cpus);
  if (flag > 0 && ProcessorCount() != flag) {
    // gRPC has read the count already: start again with the count in the environment.
    // By the binary's own path (not /proc/self/exe), so its threads keep the binary's name.
    setenv(kCpusEnvironmentVariable, std::to_string(flag).c_str(), 1);
    char path[4096];
    const ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (length > 0) {
      path[length] = '\0';
      execv(path, argv);
    }
    std::cerr << daemon << ": cannot execute itself again with " << kCpusEnvironmentVariable << "="
              << flag << " (" << std::strerror(errno) << "); pools stay sized for "
              << ProcessorCount() << " CPUs\n";
  }
  const CpuBudget& budget = ProcessCpuBudget();
  std::cerr << daemon << ": thread pools sized for " << budget.ToString() << "\n";
  return budget;
}

}  // namespace psync::serve

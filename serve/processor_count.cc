#include "serve/processor_count.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "serve/cpu_budget.h"

// The C library's own sysconf, under the name glibc exports it by as well.
extern "C" long __sysconf(int name);  // NOLINT(readability/casting)

namespace psync::serve {

const CpuBudget& ProcessCpuBudget() {
  // Computed once, at the first call: gRPC's, while its library loads, so this uses nothing that
  // needs main to have started (no flags, no static objects of this binary).
  static const CpuBudget budget = [] {
    const char* text = std::getenv(kCpusEnvironmentVariable);
    int cpus = 0;
    if (text == nullptr || !absl::SimpleAtoi(text, &cpus) || cpus < 0) cpus = 0;
    return DetectCpuBudget(cpus);
  }();
  return budget;
}

int ProcessorCount() { return ProcessCpuBudget().cpus; }

}  // namespace psync::serve

// Interposes the C library's sysconf for the whole process: the executable's definition comes
// first in the dynamic linker's search, so libgpr's calls land here (the BUILD rule exports it).
extern "C" long sysconf(int name) {
  if (name == _SC_NPROCESSORS_CONF || name == _SC_NPROCESSORS_ONLN) {
    return psync::serve::ProcessorCount();
  }
  return __sysconf(name);
}

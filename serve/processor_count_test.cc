#include "serve/processor_count.h"

#include <unistd.h>

#include <cstdlib>

#include "grpc/support/cpu.h"
#include "gtest/gtest.h"
#include "serve/cpu_budget.h"

extern "C" long __sysconf(int name);

namespace psync::serve {
namespace {

// The BUILD rule runs this test twice: with PSYNC_CPUS=37 (a count no host of ours has, so the
// check cannot pass by accident) and without it (the detected budget).
TEST(ProcessorCountTest, SysconfAndGrpcAnswerTheBudget) {
  const char* cpus = std::getenv(kCpusEnvironmentVariable);
  const int expected = cpus != nullptr ? std::atoi(cpus) : DetectCpuBudget(0).cpus;
  EXPECT_EQ(sysconf(_SC_NPROCESSORS_CONF), expected);
  EXPECT_EQ(sysconf(_SC_NPROCESSORS_ONLN), expected);
  // What gRPC sized its pools by, read while libgrpc loaded.
  EXPECT_EQ(gpr_cpu_num_cores(), static_cast<unsigned>(expected));
  EXPECT_EQ(ProcessorCount(), expected);
}

TEST(ProcessorCountTest, OtherNamesGoToTheCLibrary) {
  EXPECT_EQ(sysconf(_SC_PAGESIZE), __sysconf(_SC_PAGESIZE));
  EXPECT_EQ(sysconf(_SC_OPEN_MAX), __sysconf(_SC_OPEN_MAX));
  EXPECT_EQ(sysconf(_SC_CLK_TCK), __sysconf(_SC_CLK_TCK));
}

}  // namespace
}  // namespace psync::serve

#include "worker/compute/backend_registry.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

TEST(BackendRegistryTest, MakesTheCpuBackend) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = MakeComputeBackend("cpu");
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->Name(), "cpu");
}

TEST(BackendRegistryTest, UnknownNamesListTheKnownOnes) {
  for (const char* name : {"", "CPU", "gpu", "cuda:", "cuda:x", "cuda:-1"}) {
    const absl::Status status = MakeComputeBackend(name).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_TRUE(absl::StrContains(status.message(), "cuda")) << status;
  }
}

TEST(BackendRegistryTest, CudaIsEitherUsableOrAFailedPrecondition) {
  const std::vector<std::string> compiled = CompiledComputeBackends();
  EXPECT_EQ(compiled.front(), "cpu");
  const bool cuda_compiled = compiled.size() == 2 && compiled[1] == "cuda";
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = MakeComputeBackend("cuda");
  if (backend.ok()) {
    EXPECT_TRUE(cuda_compiled);
    EXPECT_EQ((*backend)->Name(), "cuda:0");
  } else {
    // Without CUDA compiled in, or without a GPU: the caller must fix its setup, not retry.
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition) << backend.status();
    if (!cuda_compiled) {
      EXPECT_TRUE(absl::StrContains(backend.status().message(), "--config=cuda"));
    }
  }
  EXPECT_EQ(MakeComputeBackend("cuda:4096").status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace worker
}  // namespace psync

#include "worker/collective/nccl_backend.h"

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace psync {
namespace worker {
namespace {

TEST(NcclBackendTest, FactoryMatchesTheBuild) {
  auto factory = MakeNcclBackendFactory();
  if (NcclBackendBuiltIn()) {
    ASSERT_TRUE(factory.ok()) << factory.status();
    EXPECT_EQ((*factory)->backend(), "nccl");
  } else {
    EXPECT_EQ(factory.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_TRUE(absl::StrContains(factory.status().message(),
                                  "built without CUDA; rebuild with "
                                  "--config=cuda"))
        << factory.status();
  }
}

}  // namespace
}  // namespace worker
}  // namespace psync

#include "serve/cpu_budget.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace psync::serve {
namespace {

namespace fs = std::filesystem;

TEST(CgroupV2CpuMaxTest, QuotaOverPeriodOrUnlimited) {
  EXPECT_EQ(*ParseCgroupV2CpuMax("150000 100000\n"), 1.5);
  EXPECT_EQ(*ParseCgroupV2CpuMax("200000 100000"), 2.0);
  EXPECT_EQ(*ParseCgroupV2CpuMax("max 100000\n"), std::nullopt);
}

TEST(CgroupV2CpuMaxTest, MalformedTextIsInvalidArgumentNamingTheFile) {
  for (const char* text :
       {"", "max", "100000", "abc 100000", "100000 0", "-5 100000", "100000 100000 7"}) {
    absl::StatusOr<std::optional<double>> quota = ParseCgroupV2CpuMax(text);
    ASSERT_FALSE(quota.ok()) << text;
    EXPECT_EQ(quota.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(quota.status().message().find("cpu.max"), std::string::npos) << text;
  }
}

TEST(CgroupV1CpuQuotaTest, QuotaOverPeriodOrUnlimited) {
  EXPECT_EQ(*ParseCgroupV1CpuQuota("50000\n", "100000\n"), 0.5);
  EXPECT_EQ(*ParseCgroupV1CpuQuota("400000", "100000"), 4.0);
  EXPECT_EQ(*ParseCgroupV1CpuQuota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(ParseCgroupV1CpuQuota("x", "100000").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseCgroupV1CpuQuota("0", "100000").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status zero_period = ParseCgroupV1CpuQuota("5000", "0").status();
  EXPECT_EQ(zero_period.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(zero_period.message().find("cpu.cfs_period_us"), std::string::npos);
}

TEST(MakeCpuBudgetTest, TheSmallerOfAffinityAndTheQuotaRoundedUp) {
  EXPECT_EQ(MakeCpuBudget(16, std::nullopt, 0).cpus, 16);
  EXPECT_EQ(MakeCpuBudget(128, std::make_pair(2.0, "q"), 0).cpus, 2);
  EXPECT_EQ(MakeCpuBudget(128, std::make_pair(1.5, "q"), 0).cpus, 2);
  EXPECT_EQ(MakeCpuBudget(128, std::make_pair(0.2, "q"), 0).cpus, 1);
  EXPECT_EQ(MakeCpuBudget(4, std::make_pair(8.0, "q"), 0).cpus, 4);
  CpuBudget overridden = MakeCpuBudget(4, std::make_pair(8.0, "q"), 6);
  EXPECT_EQ(overridden.cpus, 6);
  EXPECT_TRUE(overridden.overridden);
  EXPECT_EQ(overridden.affinity_cpus, 4);
  EXPECT_EQ(MakeCpuBudget(128, std::make_pair(2.5, "/sys/fs/cgroup/cpu.max"), 0).ToString(),
            "3 CPUs (affinity 128, cgroup quota 2.50 from /sys/fs/cgroup/cpu.max)");
  EXPECT_EQ(MakeCpuBudget(1, std::nullopt, 0).ToString(),
            "1 CPU (affinity 1, no cgroup CPU quota)");
}

// A folder standing for "/": proc/self/{mountinfo,cgroup} and cgroup files under it.
class FakeRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/cpu_budget_testXXXXXX";
    root_ = mkdtemp(pattern);
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  std::string root_;
};

constexpr char kV2Mountinfo[] =
    "24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n";

TEST_F(FakeRoot, CgroupV2TheTightestQuotaFromTheProcessFolderToTheRoot) {
  Write("/proc/self/mountinfo", kV2Mountinfo);
  Write("/proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
  Write("/sys/fs/cgroup/cpu.max", "max 100000\n");
  Write("/sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
  Write("/sys/fs/cgroup/kubepods/pod1/cpu.max", "250000 100000\n");  // the pod's limit
  Write("/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max", "400000 100000\n");
  auto quota = ReadCgroupCpuQuota(root_);
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->first, 2.5);
  EXPECT_EQ(quota->second, "/sys/fs/cgroup/kubepods/pod1/cpu.max");
}

TEST_F(FakeRoot, CgroupV2UnlimitedEverywhereIsNoQuota) {
  Write("/proc/self/mountinfo", kV2Mountinfo);
  Write("/proc/self/cgroup", "0::/user.slice\n");
  Write("/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
  EXPECT_EQ(ReadCgroupCpuQuota(root_), std::nullopt);
}

TEST_F(FakeRoot, CgroupV2InsideAContainerItsOwnCgroupIsTheMount) {
  // With a cgroup namespace the process sees "/" and its own cgroup mounted at /sys/fs/cgroup.
  Write("/proc/self/mountinfo", kV2Mountinfo);
  Write("/proc/self/cgroup", "0::/\n");
  Write("/sys/fs/cgroup/cpu.max", "200000 100000\n");
  auto quota = ReadCgroupCpuQuota(root_);
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->first, 2.0);
}

TEST_F(FakeRoot, CgroupV1CpuControllerWithAMountRoot) {
  // A v1 "cpu,cpuacct" hierarchy mounted from the container's own folder (its mount root).
  Write("/proc/self/mountinfo",
        "30 25 0:26 /docker/abc /sys/fs/cgroup/cpu,cpuacct ro,nosuid - cgroup cgroup "
        "rw,cpu,cpuacct\n"
        "31 25 0:27 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n");
  Write("/proc/self/cgroup", "5:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n");
  Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
  Write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  Write("/sys/fs/cgroup/memory/cpu.cfs_quota_us", "10000\n");  // not a cpu hierarchy: ignored
  Write("/sys/fs/cgroup/memory/cpu.cfs_period_us", "100000\n");
  auto quota = ReadCgroupCpuQuota(root_);
  ASSERT_TRUE(quota.has_value());
  EXPECT_EQ(quota->first, 1.5);
  EXPECT_EQ(quota->second, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us");
}

TEST_F(FakeRoot, CgroupV1UnlimitedAndMalformedFilesAreNoQuota) {
  Write("/proc/self/mountinfo", "30 25 0:26 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
  Write("/proc/self/cgroup", "1:cpu:/a\n");
  Write("/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us", "-1\n");
  Write("/sys/fs/cgroup/cpu/a/cpu.cfs_period_us", "100000\n");
  Write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "garbage\n");
  Write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(ReadCgroupCpuQuota(root_), std::nullopt);
}

TEST_F(FakeRoot, NoProcFilesIsNoQuota) { EXPECT_EQ(ReadCgroupCpuQuota(root_), std::nullopt); }

TEST(AffinityCpusTest, CountsTheMask) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(AffinityCpus(), CPU_COUNT(&set));
  // Narrowed to one CPU, the budget is 1 whatever the host has.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) {
      CPU_SET(cpu, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(AffinityCpus(), 1);
  EXPECT_EQ(DetectCpuBudget(0).cpus, 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
}

}  // namespace
}  // namespace psync::serve

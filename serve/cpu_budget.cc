#include "serve/cpu_budget.h"

#include <sched.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace psync::serve {
namespace {

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A cgroup hierarchy that can hold a CPU quota: where it is mounted, and this process's folder in
// it.
struct CpuHierarchy {
  bool v2 = false;
  std::string mount_point;  // as the process sees it (without `root`)
  std::string mount_root;   // the hierarchy's path shown at the mount point
};

// The cgroup2 mount, and cgroup v1 mounts that carry the "cpu" controller, from mountinfo.
std::vector<CpuHierarchy> CpuHierarchies(absl::string_view mountinfo) {
  std::vector<CpuHierarchy> found;
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n', absl::SkipEmpty())) {
    // id parent major:minor root mount_point options [optional...] - fstype source super_options
    std::vector<absl::string_view> fields = absl::StrSplit(line, ' ', absl::SkipEmpty());
    size_t dash = 0;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash < 6 || dash + 1 >= fields.size()) continue;
    const absl::string_view fstype = fields[dash + 1];
    CpuHierarchy hierarchy{fstype == "cgroup2", std::string(fields[4]), std::string(fields[3])};
    if (fstype == "cgroup2") {
      found.push_back(hierarchy);
    } else if (fstype == "cgroup" && dash + 3 < fields.size()) {
      for (absl::string_view option : absl::StrSplit(fields[dash + 3], ',')) {
        if (option == "cpu") found.push_back(hierarchy);
      }
    }
  }
  return found;
}

// This process's path in the v2 hierarchy ("0::/path") or in the v1 hierarchy holding "cpu".
std::optional<std::string> CgroupPath(absl::string_view proc_cgroup, bool v2) {
  for (absl::string_view line : absl::StrSplit(proc_cgroup, '\n', absl::SkipEmpty())) {
    std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (v2 && fields[0] == "0" && fields[1].empty()) return std::string(fields[2]);
    if (!v2) {
      for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
        if (controller == "cpu") return std::string(fields[2]);
      }
    }
  }
  return std::nullopt;
}

// The quota stated in one cgroup folder, if any.
std::optional<double> QuotaIn(const std::string& folder, bool v2) {
  if (v2) {
    std::optional<std::string> text = ReadText(folder + "/cpu.max");
    if (!text) return std::nullopt;
    absl::StatusOr<std::optional<double>> quota = ParseCgroupV2CpuMax(*text);
    return quota.ok() ? *quota : std::nullopt;
  }
  std::optional<std::string> quota = ReadText(folder + "/cpu.cfs_quota_us");
  std::optional<std::string> period = ReadText(folder + "/cpu.cfs_period_us");
  if (!quota || !period) return std::nullopt;
  absl::StatusOr<std::optional<double>> cpus = ParseCgroupV1CpuQuota(*quota, *period);
  return cpus.ok() ? *cpus : std::nullopt;
}

}  // namespace

std::string CpuBudget::ToString() const {
  std::string text = absl::StrCat(cpus, cpus == 1 ? " CPU" : " CPUs");
  if (overridden) return absl::StrCat(text, " (--cpus or PSYNC_CPUS)");
  absl::StrAppend(&text, " (affinity ", affinity_cpus);
  if (quota_cpus) {
    absl::StrAppend(&text,
                    absl::StrFormat(", cgroup quota %.2f from %s", *quota_cpus, quota_source));
  } else {
    absl::StrAppend(&text, ", no cgroup CPU quota");
  }
  return text + ")";
}

absl::StatusOr<std::optional<double>> ParseCgroupV2CpuMax(absl::string_view text) {
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(text), ' ', absl::SkipEmpty());
  int64_t period = 0;
  if (fields.size() != 2 || !absl::SimpleAtoi(fields[1], &period) || period <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu.max: expected '<quota|max> <period>', got '", text, "'"));
  }
  if (fields[0] == "max") return std::optional<double>();
  int64_t quota = 0;
  if (!absl::SimpleAtoi(fields[0], &quota) || quota <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu.max: the quota is neither 'max' nor a positive count: '", text, "'"));
  }
  return std::optional<double>(static_cast<double>(quota) / static_cast<double>(period));
}

absl::StatusOr<std::optional<double>> ParseCgroupV1CpuQuota(absl::string_view quota_text,
                                                            absl::string_view period_text) {
  int64_t quota = 0;
  int64_t period = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(quota_text), &quota)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu.cfs_quota_us: not a count: '", quota_text, "'"));
  }
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(period_text), &period) || period <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu.cfs_period_us: not a positive count: '", period_text, "'"));
  }
  if (quota < 0) return std::optional<double>();
  if (quota == 0) {
    return absl::InvalidArgumentError("cpu.cfs_quota_us: 0 is neither a quota nor -1");
  }
  return std::optional<double>(static_cast<double>(quota) / static_cast<double>(period));
}

std::optional<std::pair<double, std::string>> ReadCgroupCpuQuota(const std::string& root) {
  const std::string prefix = root == "/" ? "" : root;
  std::optional<std::string> mountinfo = ReadText(prefix + "/proc/self/mountinfo");
  std::optional<std::string> proc_cgroup = ReadText(prefix + "/proc/self/cgroup");
  if (!mountinfo || !proc_cgroup) return std::nullopt;
  std::optional<std::pair<double, std::string>> tightest;
  for (const CpuHierarchy& hierarchy : CpuHierarchies(*mountinfo)) {
    std::optional<std::string> path = CgroupPath(*proc_cgroup, hierarchy.v2);
    if (!path) continue;
    // The process's folder under the mount point: its path less the part the mount hides. A
    // path outside the mount's root (a container seeing only its own cgroup) starts at the mount.
    std::string relative;
    if (hierarchy.mount_root == "/") {
      relative = *path;
    } else if (path->rfind(hierarchy.mount_root, 0) == 0) {
      relative = path->substr(hierarchy.mount_root.size());
    }
    std::string folder = hierarchy.mount_point + (relative == "/" ? "" : relative);
    // From the process's folder up to the mount point: a parent's quota binds its children.
    while (true) {
      if (std::optional<double> quota = QuotaIn(prefix + folder, hierarchy.v2)) {
        if (!tightest || *quota < tightest->first) {
          tightest =
              std::make_pair(*quota, folder + (hierarchy.v2 ? "/cpu.max" : "/cpu.cfs_quota_us"));
        }
      }
      if (folder.size() <= hierarchy.mount_point.size()) break;
      folder.resize(folder.rfind('/'));
      if (folder.size() < hierarchy.mount_point.size()) folder = hierarchy.mount_point;
    }
  }
  return tightest;
}

int AffinityCpus() {
  // Masks for hosts of more than CPU_SETSIZE (1,024) CPUs are allocated by size.
  for (int size = 1024; size <= 1 << 16; size *= 2) {
    cpu_set_t* set = CPU_ALLOC(size);
    const size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, set);
    const int rc = sched_getaffinity(0, bytes, set);
    const int count = rc == 0 ? CPU_COUNT_S(bytes, set) : 0;
    CPU_FREE(set);
    if (rc == 0) return count > 0 ? count : 1;
    if (errno != EINVAL) break;
  }
  return 1;
}

CpuBudget MakeCpuBudget(int affinity_cpus,
                        const std::optional<std::pair<double, std::string>>& quota,
                        int override_cpus) {
  CpuBudget budget;
  budget.affinity_cpus = affinity_cpus > 0 ? affinity_cpus : 1;
  if (quota) {
    budget.quota_cpus = quota->first;
    budget.quota_source = quota->second;
  }
  if (override_cpus > 0) {
    budget.cpus = override_cpus;
    budget.overridden = true;
    return budget;
  }
  budget.cpus = budget.affinity_cpus;
  if (quota) {
    const int quota_cpus = static_cast<int>(std::ceil(quota->first - 1e-9));
    budget.cpus = std::max(1, std::min(budget.cpus, quota_cpus));
  }
  return budget;
}

CpuBudget DetectCpuBudget(int override_cpus) {
  return MakeCpuBudget(AffinityCpus(), ReadCgroupCpuQuota(), override_cpus);
}

}  // namespace psync::serve

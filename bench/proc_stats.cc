#include "bench/proc_stats.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace psync::bench {
namespace {

bool ReadWhole(const std::string& path, std::string* out) {
  std::ifstream in(path);
  if (!in) return false;
  std::stringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

// "VmRSS:	  123456 kB" -> bytes.
int64_t KilobytesField(const std::string& status, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!absl::ConsumePrefix(&line, key)) continue;
    if (!absl::ConsumePrefix(&line, ":")) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int64_t value = 0;
    if (!parts.empty() && absl::SimpleAtoi(parts[0], &value)) return value * 1024;
  }
  return 0;
}

}  // namespace

absl::StatusOr<ProcSample> SampleProcess(pid_t pid) {
  const std::string base = absl::StrCat("/proc/", pid);
  std::string stat;
  if (!ReadWhole(base + "/stat", &stat)) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " is gone"));
  }
  // The command name (field 2) may hold spaces and parentheses: fields resume after the last ')'.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) {
    return absl::InternalError(absl::StrCat(base, "/stat: no ')'"));
  }
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipWhitespace());
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  uint64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InternalError(absl::StrCat(base, "/stat: cannot parse utime/stime"));
  }
  ProcSample sample;
  sample.cpu_seconds = static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
  std::string status;
  if (!ReadWhole(base + "/status", &status)) {
    return absl::NotFoundError(absl::StrCat("process ", pid, " is gone"));
  }
  sample.rss_bytes = KilobytesField(status, "VmRSS");
  sample.hwm_bytes = KilobytesField(status, "VmHWM");
  sample.threads = static_cast<int>(KilobytesField(status, "Threads") / 1024);
  return sample;
}

std::array<double, 3> LoadAverage() {
  std::array<double, 3> load = {0, 0, 0};
  std::ifstream in("/proc/loadavg");
  if (in) in >> load[0] >> load[1] >> load[2];
  return load;
}

}  // namespace psync::bench

#include "bench/node_processes.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/subprocess.h"

namespace psync::bench {
namespace {

constexpr const char* kPhases[] = {"attached", "warm", "measured"};
constexpr absl::Duration kPoll = absl::Microseconds(200);
// The next phase starts this long after the last worker arrived, so that every worker has seen
// the go file before its first check-in is due.
constexpr int64_t kLeadNs = 5'000'000;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

absl::Status WriteAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << content;
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("rename to ", path));
  }
  return absl::OkStatus();
}

std::string PhaseFile(const std::string& dir, const char* phase, uint32_t worker) {
  return absl::StrCat(dir, "/", phase, ".", worker);
}
std::string GoFile(const std::string& dir, const char* phase) {
  return absl::StrCat(dir, "/", phase, ".go");
}
std::string ResultFile(const std::string& dir, uint32_t worker) {
  return absl::StrCat(dir, "/result.", worker);
}

// One worker's result file, read back.
struct WorkerResult {
  uint64_t counters[8] = {};  // as FormatWorkerRecords writes them
  double join_seconds = 0;
  double attach_seconds = 0;
  std::vector<int64_t> pump_lag_ns;
  // Per (step, chunk), step-major: last send, first and last directive, ranks, sequence.
  std::vector<std::array<int64_t, 5>> records;
};

absl::StatusOr<WorkerResult> ReadWorkerResult(const std::string& path, size_t records) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no ", path));
  WorkerResult r;
  std::string tag;
  in >> tag;
  for (uint64_t& c : r.counters) in >> c;
  r.records.resize(records);
  for (auto& rec : r.records) {
    in >> tag;
    for (int64_t& v : rec) in >> v;
  }
  size_t lags = 0;
  in >> tag >> r.join_seconds >> r.attach_seconds >> tag >> lags;
  r.pump_lag_ns.resize(lags);
  for (int64_t& v : r.pump_lag_ns) in >> v;
  if (!in) return absl::DataLossError(absl::StrCat(path, " is cut short"));
  return r;
}

}  // namespace

std::function<absl::StatusOr<int64_t>(const char* phase)> WorkerRendezvous(const std::string& dir,
                                                                           uint32_t worker,
                                                                           absl::Duration timeout) {
  return [dir, worker, timeout](const char* phase) -> absl::StatusOr<int64_t> {
    if (absl::Status s = WriteAtomically(PhaseFile(dir, phase, worker), ""); !s.ok()) return s;
    const std::string go = GoFile(dir, phase);
    const absl::Time deadline = absl::Now() + timeout;
    while (!Exists(go)) {
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("the other load processes did not reach '",
                                                        phase, "' within ",
                                                        absl::FormatDuration(timeout)));
      }
      absl::SleepFor(kPoll);
    }
    std::ifstream in(go);
    int64_t start = 0;
    if (!(in >> start)) return absl::DataLossError(absl::StrCat("cannot read ", go));
    return start;
  };
}

std::string FormatWorkerRecords(ReleaseRecords& records, uint64_t steps, uint32_t chunks,
                                const DriverCounters& counters) {
  std::ostringstream out;
  out << "counters " << counters.directives.load() << " " << counters.duplicate_directives.load()
      << " " << counters.unexpected_directives.load() << " " << counters.sequence_mismatches.load()
      << " " << counters.checkins_measured.load() << " " << counters.messages_up.load() << " "
      << counters.messages_down.load() << " " << counters.acks.load() << "\n";
  for (uint64_t s = 0; s < steps; ++s) {
    for (uint32_t c = 0; c < chunks; ++c) {
      const ChunkRecord& r = records.at(s, c);
      out << "r " << r.last_send_ns.load() << " " << r.first_directive_ns.load() << " "
          << r.last_directive_ns.load() << " " << r.ranks_released.load() << " "
          << r.sequence.load() << "\n";
    }
  }
  return out.str();
}

absl::Status WriteWorkerResult(const std::string& dir, uint32_t worker, const std::string& records,
                               const DriverResult& result) {
  std::ostringstream out;
  out << records << "times " << result.join_seconds << " " << result.attach_seconds << "\nlags "
      << result.pump_lag_ns.size();
  for (int64_t v : result.pump_lag_ns) out << " " << v;
  out << "\n";
  return WriteAtomically(ResultFile(dir, worker), out.str());
}

WorkerRun WorkerRunOf(const NodeOptions& nodes) {
  return WorkerRun{nodes.workload.ranks, nodes.workload.chunks,  nodes.warmup_steps,  nodes.steps,
                   nodes.timeout,        nodes.on_measure_start, nodes.on_measure_end};
}

WorkerRun WorkerRunOf(const DriverOptions& ranks) {
  return WorkerRun{ranks.ranks,   ranks.chunks,           ranks.warmup_steps,  ranks.steps,
                   ranks.timeout, ranks.on_measure_start, ranks.on_measure_end};
}

absl::StatusOr<DriverResult> RunWorkerProcesses(const WorkerRun& run,
                                                const NodeProcessOptions& options) {
  const uint32_t n = options.processes;
  std::vector<std::unique_ptr<Subprocess>> workers;
  std::vector<pid_t> pids;
  for (uint32_t i = 0; i < n; ++i) {
    auto child =
        Subprocess::Start(options.worker_argv(i), absl::StrCat(options.dir, "/worker-", i, ".log"));
    if (!child.ok()) return child.status();
    pids.push_back((*child)->pid());
    workers.push_back(std::move(*child));
  }
  if (options.on_started) options.on_started(pids);
  // A worker that ended early: its status, naming its log.
  auto ended = [&](uint32_t i, const char* where) {
    const int status = workers[i]->Stop();
    return absl::AbortedError(absl::StrCat("load process ", i, " ended ", where, " (wait status ",
                                           status, "; see ", options.dir, "/worker-", i, ".log)"));
  };

  int64_t measure_start = 0;
  double measured_seconds = 0;
  for (const char* phase : kPhases) {
    const absl::Time deadline = absl::Now() + run.timeout;
    for (uint32_t i = 0; i < n; ++i) {
      while (!Exists(PhaseFile(options.dir, phase, i))) {
        if (!workers[i]->Running()) return ended(i, absl::StrCat("before '", phase, "'").c_str());
        if (absl::Now() > deadline) {
          return absl::DeadlineExceededError(absl::StrCat("load process ", i, " did not reach '",
                                                          phase, "' within ",
                                                          absl::FormatDuration(run.timeout)));
        }
        absl::SleepFor(kPoll);
      }
    }
    if (std::string(phase) == "warm") {
      if (run.on_measure_start) run.on_measure_start();
      measure_start = NowNs();
    } else if (std::string(phase) == "measured") {
      measured_seconds = static_cast<double>(NowNs() - measure_start) * 1e-9;
      if (run.on_measure_end) run.on_measure_end();
    }
    if (absl::Status s =
            WriteAtomically(GoFile(options.dir, phase), absl::StrCat(NowNs() + kLeadNs, "\n"));
        !s.ok()) {
      return s;
    }
  }
  // The workers close their streams and write their results.
  const absl::Time deadline = absl::Now() + run.timeout;
  for (uint32_t i = 0; i < n; ++i) {
    while (workers[i]->Running() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    const int status = workers[i]->Stop();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return ended(i, "with a failure");
  }

  const uint64_t steps = run.warmup_steps + run.steps;
  ReleaseRecords merged(steps, run.chunks);
  DriverCounters counters;
  DriverResult result;
  for (uint32_t i = 0; i < n; ++i) {
    absl::StatusOr<WorkerResult> r =
        ReadWorkerResult(ResultFile(options.dir, i), steps * run.chunks);
    if (!r.ok()) return r.status();
    std::atomic<uint64_t>* sums[] = {&counters.directives,
                                     &counters.duplicate_directives,
                                     &counters.unexpected_directives,
                                     &counters.sequence_mismatches,
                                     &counters.checkins_measured,
                                     &counters.messages_up,
                                     &counters.messages_down,
                                     &counters.acks};
    for (size_t k = 0; k < 8; ++k) sums[k]->fetch_add(r->counters[k]);
    for (uint64_t s = 0; s < steps; ++s) {
      for (uint32_t c = 0; c < run.chunks; ++c) {
        const auto& rec = r->records[s * run.chunks + c];
        ChunkRecord& m = merged.at(s, c);
        AtomicMax(m.last_send_ns, rec[0]);
        if (rec[1] != 0) AtomicMinSet(m.first_directive_ns, rec[1]);
        AtomicMax(m.last_directive_ns, rec[2]);
        m.ranks_released.fetch_add(static_cast<uint32_t>(rec[3]));
        if (rec[4] != 0 && !m.NoteSequence(static_cast<uint64_t>(rec[4]))) {
          counters.sequence_mismatches.fetch_add(1);
        }
      }
    }
    result.join_seconds = std::max(result.join_seconds, r->join_seconds);
    result.attach_seconds = std::max(result.attach_seconds, r->attach_seconds);
    result.pump_lag_ns.insert(result.pump_lag_ns.end(), r->pump_lag_ns.begin(),
                              r->pump_lag_ns.end());
  }
  result.releases_expected = steps * run.chunks;
  result.measured_seconds = measured_seconds;
  std::vector<int64_t> lags = std::move(result.pump_lag_ns);
  SummarizeRun(merged, run.ranks, run.warmup_steps, counters, &result);
  result.pump_lag_ns = std::move(lags);
  return result;
}

}  // namespace psync::bench

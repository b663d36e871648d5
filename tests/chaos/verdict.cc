#include "tests/chaos/verdict.h"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace psync::chaos {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint64_t U(const std::string& s) {
  uint64_t v = 0;
  absl::SimpleAtoi(s, &v);
  return v;
}

}  // namespace

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

uint64_t Progress(const std::vector<ProcessLog>& logs) {
  uint64_t best = 0;
  for (const ProcessLog& p : logs) {
    std::string text = ReadFile(p.path);
    size_t at = text.rfind("\ncomplete ");
    if (at == std::string::npos) continue;
    std::vector<std::string> f =
        absl::StrSplit(text.substr(at + 1, text.find('\n', at + 1) - at - 1), ' ');
    if (f.size() == 3) best = std::max(best, U(f[2]));
  }
  return best;
}

Verdict Judge(const std::vector<ProcessLog>& logs, uint32_t ranks, uint32_t chunks,
              uint64_t steps) {
  Verdict v;
  auto problem = [&v](std::string line) {
    if (v.problems.size() < 50) v.problems.push_back(std::move(line));
  };
  // (segment, step, chunk, rank, optimizer) -> time staged (earliest)
  std::map<std::tuple<uint64_t, uint64_t, uint32_t, uint32_t, std::string>, int64_t> staged;
  std::map<std::pair<uint64_t, uint64_t>, std::set<uint32_t>> completed;  // (segment, step)
  std::map<uint64_t, std::set<size_t>> in_segment;                        // segment -> processes
  std::map<uint64_t, std::set<size_t>> aborted_by;                        // segment -> processes
  std::set<std::pair<uint64_t, uint64_t>> active;                         // (segment, step)
  // A killed process may have finished a step without logging it: (segment, step) -> rank ->
  // chunks it synced there.
  std::map<std::pair<uint64_t, uint64_t>, std::map<uint32_t, std::set<uint64_t>>> killed_syncs;
  for (size_t i = 0; i < logs.size(); ++i) {
    const ProcessLog& p = logs[i];
    std::set<std::tuple<uint64_t, uint64_t, uint32_t>> executed;  // (segment, step, chunk)
    for (absl::string_view line : absl::StrSplit(ReadFile(p.path), '\n', absl::SkipEmpty())) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      const std::string& kind = f[0];
      if (kind == "staged" && f.size() == 6) {
        auto key = std::make_tuple(U(f[1]), U(f[3]), static_cast<uint32_t>(U(f[4])), p.rank, f[5]);
        const int64_t t = static_cast<int64_t>(U(f[2]));
        auto [it, fresh] = staged.emplace(key, t);
        if (!fresh) it->second = std::min(it->second, t);
        in_segment[U(f[1])].insert(i);
        active.emplace(U(f[1]), U(f[3]));
      } else if (kind == "directive" && f.size() == 5) {
        v.directives.push_back({U(f[1]), U(f[3]), static_cast<uint32_t>(U(f[4])), p.rank,
                                static_cast<int64_t>(U(f[2]))});
      } else if (kind == "sync" && f.size() == 4) {
        ++v.syncs;
        if (p.killed) killed_syncs[{U(f[1]), U(f[2])}][p.rank].insert(U(f[3]));
        if (!executed.emplace(U(f[1]), U(f[2]), static_cast<uint32_t>(U(f[3]))).second) {
          ++v.double_syncs;
          problem(absl::StrCat("double: rank ", p.rank, " synced step ", f[2], " chunk ", f[3],
                               " twice in segment ", f[1]));
        }
      } else if (kind == "complete" && f.size() == 3) {
        completed[{U(f[1]), U(f[2])}].insert(p.rank);
        if (U(f[2]) == steps - 1) v.finished.insert(p.rank);
      } else if (kind == "abort" && f.size() >= 2) {
        ++v.aborts;
        aborted_by[U(f[1])].insert(i);
      } else if (kind == "exit" && f.size() == 2) {
        v.resumes += U(f[1]);
      }
    }
  }
  v.segments = in_segment.size();
  for (const Verdict::Directive& d : v.directives) {
    for (uint32_t r = 0; r < ranks; ++r) {
      for (const char* optimizer : {"dense", "expert"}) {
        auto it = staged.find({d.segment, d.step, d.chunk, r, optimizer});
        if (it == staged.end() || it->second > d.t) {
          ++v.early_syncs;
          problem(absl::StrCat("early: rank ", d.rank, " got step ", d.step, " chunk ", d.chunk,
                               " (segment ", d.segment, ") before rank ", r, " ", optimizer,
                               " staged"));
        }
      }
    }
  }
  std::set<uint64_t> done_steps;  // steps some segment completed on every rank
  for (const auto& [segment, step] : active) {
    auto c = completed.find({segment, step});
    std::set<uint32_t> finished_here = c != completed.end() ? c->second : std::set<uint32_t>();
    for (const auto& [rank, synced] : killed_syncs[{segment, step}]) {
      if (synced.size() == chunks) finished_here.insert(rank);  // synced all, killed before logging
    }
    if (finished_here.size() == ranks) {
      ++v.steps_completed;
      done_steps.insert(step);
      continue;
    }
    bool everyone_aborted = true;
    for (size_t i : in_segment[segment]) {
      everyone_aborted = everyone_aborted && (aborted_by[segment].count(i) > 0 || logs[i].killed);
    }
    if (everyone_aborted) {
      ++v.steps_aborted;
    } else {
      ++v.steps_unsettled;
      problem(absl::StrCat("segment ", segment, " step ", step,
                           " neither completed on every rank nor aborted on every rank"));
    }
  }
  for (uint64_t step = 0; step < steps; ++step) {
    if (done_steps.count(step) == 0) v.never_done.push_back(step);
  }
  return v;
}

std::string Summary(const Verdict& v, uint32_t ranks) {
  return absl::StrFormat(
      "segments %d, aborts %d, resumes %d, syncs %d; (segment, step)s completed %d, aborted %d, "
      "neither %d; early syncs %d, double syncs %d; ranks finished %d/%d",
      v.segments, v.aborts, v.resumes, v.syncs, v.steps_completed, v.steps_aborted,
      v.steps_unsettled, v.early_syncs, v.double_syncs, v.finished.size(), ranks);
}

void ExpectClean(const Verdict& v, uint32_t ranks, const std::string& job) {
  for (const std::string& problem : v.problems) ADD_FAILURE() << job << ": " << problem;
  EXPECT_EQ(v.early_syncs, 0u) << job;
  EXPECT_EQ(v.double_syncs, 0u) << job;
  EXPECT_EQ(v.steps_unsettled, 0u) << job;
  EXPECT_EQ(v.finished.size(), ranks) << job;
  EXPECT_TRUE(v.never_done.empty())
      << job << ": steps never completed: " << absl::StrJoin(v.never_done, ",");
}

int64_t FirstDirectiveAfter(const Verdict& v, int64_t t) {
  int64_t first = 0;
  for (const Verdict::Directive& x : v.directives) {
    if (x.t > t && (first == 0 || x.t < first)) first = x.t;
  }
  return first;
}

}  // namespace psync::chaos

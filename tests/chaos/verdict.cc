#include "tests/chaos/verdict.h"

#include <time.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace psync::chaos {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last `bytes` of the file at `path` (all of it when shorter); *whole says which.
std::string ReadTail(const std::string& path, size_t bytes, bool* whole) {
  *whole = true;
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size <= 0) return "";
  const std::streamoff from =
      size > static_cast<std::streamoff>(bytes) ? size - static_cast<std::streamoff>(bytes) : 0;
  *whole = from == 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

bool Num(const std::string& s, uint64_t* v) { return absl::SimpleAtoi(s, v); }

// The step of the last whole "complete <generation> <step>" line of `text`. A partial line (a
// line still being written, or the cut at the start of a tail) is not taken.
std::optional<uint64_t> LastComplete(const std::string& text, bool starts_at_line) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  // The last element follows the last '\n': empty, or a line not written to its end yet.
  const size_t first = starts_at_line ? 0 : 1;
  for (size_t i = lines.size() - 1; i-- > first;) {
    std::vector<std::string> f = absl::StrSplit(lines[i], ' ');
    uint64_t generation = 0, step = 0;
    if (f.size() == 3 && f[0] == "complete" && Num(f[1], &generation) && Num(f[2], &step)) {
      return step;
    }
  }
  return std::nullopt;
}

// One line of a log (see chaos_rank.cc for the format). Lines that do not parse (a process
// killed while writing one) are skipped.
struct Parsed {
  enum Kind { kSeg, kGen, kStaged, kDirective, kSync, kComplete, kAbort, kExit } kind = kSeg;
  uint64_t generation = 0;
  int64_t t = 0;
  uint64_t step = 0;
  uint32_t chunk = 0;
  std::string optimizer;
  uint64_t epoch = 0;
  bool arrived = true;  // a directive logged as it arrived (not when it was handed out)
  uint64_t resumes = 0;
  size_t run = 0;  // the run of its process it belongs to
};

std::optional<Parsed> Parse(absl::string_view line) {
  std::vector<std::string> f = absl::StrSplit(line, ' ');
  Parsed p;
  uint64_t t = 0, chunk = 0;
  const std::string& kind = f[0];
  bool ok = false;
  if (kind == "seg" && f.size() == 3) {
    p.kind = Parsed::kSeg;
    ok = Num(f[1], &p.generation) && Num(f[2], &p.step);
  } else if (kind == "gen" && f.size() == 3) {
    p.kind = Parsed::kGen;
    ok = Num(f[1], &p.generation) && Num(f[2], &t);
  } else if (kind == "staged" && f.size() == 6) {
    p.kind = Parsed::kStaged;
    ok = Num(f[1], &p.generation) && Num(f[2], &t) && Num(f[3], &p.step) && Num(f[4], &chunk) &&
         (f[5] == "dense" || f[5] == "expert");
    p.optimizer = f[5];
  } else if (kind == "directive" && f.size() >= 5 && f.size() <= 7) {
    p.kind = Parsed::kDirective;
    ok = Num(f[1], &p.generation) && Num(f[2], &t) && Num(f[3], &p.step) && Num(f[4], &chunk) &&
         (f.size() < 6 || Num(f[5], &p.epoch)) && (f.size() < 7 || f[6] == "handout");
    p.arrived = f.size() < 7;
  } else if (kind == "sync" && f.size() == 4) {
    p.kind = Parsed::kSync;
    ok = Num(f[1], &p.generation) && Num(f[2], &p.step) && Num(f[3], &chunk);
  } else if (kind == "complete" && f.size() == 3) {
    p.kind = Parsed::kComplete;
    ok = Num(f[1], &p.generation) && Num(f[2], &p.step);
  } else if (kind == "abort" && f.size() >= 2) {
    p.kind = Parsed::kAbort;
    ok = Num(f[1], &p.generation);
  } else if (kind == "exit" && f.size() == 2) {
    p.kind = Parsed::kExit;
    ok = Num(f[1], &p.resumes);
  }
  if (!ok) return std::nullopt;
  p.t = static_cast<int64_t>(t);
  p.chunk = static_cast<uint32_t>(chunk);
  return p;
}

// Generations joined into segments (union-find); a segment is named by its lowest generation.
class Segments {
 public:
  uint64_t Of(uint64_t generation) {
    auto it = parent_.emplace(generation, generation).first;
    if (it->second == generation) return generation;
    const uint64_t root = Of(it->second);
    it->second = root;
    return root;
  }
  void Join(uint64_t a, uint64_t b) {
    a = Of(a);
    b = Of(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }

 private:
  std::map<uint64_t, uint64_t> parent_;
};

}  // namespace

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

uint64_t Progress(const std::vector<ProcessLog>& logs) {
  uint64_t best = 0;
  for (const ProcessLog& p : logs) {
    bool whole = true;
    std::optional<uint64_t> step = LastComplete(ReadTail(p.path, 8192, &whole), whole);
    if (!step.has_value() && !whole) step = LastComplete(ReadFile(p.path), true);
    if (step.has_value()) best = std::max(best, *step);
  }
  return best;
}

Verdict Judge(const std::vector<ProcessLog>& logs, uint32_t ranks, uint32_t chunks,
              uint64_t steps) {
  Verdict v;
  auto problem = [&v](std::string line) {
    if (v.problems.size() < 50) v.problems.push_back(std::move(line));
  };

  // Pass 1: parse every log; split each process into runs (a client, and the client that
  // reconnected in a generation it had been in after it failed) and tie the generations each
  // run went through into segments.
  Segments segments;
  std::vector<std::vector<Parsed>> parsed(logs.size());
  for (size_t i = 0; i < logs.size(); ++i) {
    const ProcessLog& p = logs[i];
    std::vector<std::set<uint64_t>> runs;  // the generations each run was in
    uint64_t client_epoch = 0;             // highest epoch the current client accepted
    // A job started again from nothing: every coordinator that held it lost it and the ranks
    // joined afresh, so the new holder numbers generations from 1 again. A client that joins
    // (not resumes) a generation its process was in, at a step at or before one it completed
    // there, is in that new run of the job: its lines of that number get a number of their own
    // (the number plus era << 40; every rank restarts the same way, so eras agree).
    std::map<uint64_t, uint64_t> renumbered;     // generation as logged -> as judged
    std::map<uint64_t, int64_t> last_completed;  // generation as judged -> step (this process)
    uint64_t eras = 0;
    for (absl::string_view text : absl::StrSplit(ReadFile(p.path), '\n', absl::SkipEmpty())) {
      std::optional<Parsed> line = Parse(text);
      if (!line.has_value()) continue;
      if (line->kind == Parsed::kExit) {
        parsed[i].push_back(std::move(*line));
        continue;
      }
      if (line->kind == Parsed::kSeg) {
        auto judged = renumbered.find(line->generation);
        const uint64_t as_judged = judged == renumbered.end() ? line->generation : judged->second;
        auto done = last_completed.find(as_judged);
        if (done != last_completed.end() && static_cast<int64_t>(line->step) <= done->second) {
          renumbered[line->generation] = line->generation + (++eras << 40);
        }
      }
      if (auto it = renumbered.find(line->generation); it != renumbered.end()) {
        line->generation = it->second;
      }
      if (line->kind == Parsed::kComplete) {
        int64_t& last = last_completed.emplace(line->generation, -1).first->second;
        last = std::max(last, static_cast<int64_t>(line->step));
      }
      if (line->kind == Parsed::kSeg) {
        client_epoch = 0;
        if (runs.empty() || runs.back().count(line->generation) == 0) runs.emplace_back();
      } else if (runs.empty()) {
        runs.emplace_back();
      }
      if (!runs.back().empty()) segments.Join(*runs.back().begin(), line->generation);
      runs.back().insert(line->generation);
      segments.Of(line->generation);
      line->run = runs.size() - 1;
      if (line->kind == Parsed::kDirective && line->arrived) {
        if (line->epoch < client_epoch) {
          ++v.deposed_directives;
          problem(absl::StrCat("deposed: rank ", p.rank, " accepted step ", line->step, " chunk ",
                               line->chunk, " of epoch ", line->epoch, " after epoch ",
                               client_epoch));
        }
        client_epoch = std::max(client_epoch, line->epoch);
      }
      parsed[i].push_back(std::move(*line));
    }
  }

  // Pass 2: the checks, per segment.
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
    std::set<std::tuple<size_t, uint64_t, uint32_t>> executed;  // (run, step, chunk)
    for (const Parsed& line : parsed[i]) {
      const uint64_t segment = line.kind == Parsed::kExit ? 0 : segments.Of(line.generation);
      switch (line.kind) {
        case Parsed::kStaged: {
          auto key = std::make_tuple(segment, line.step, line.chunk, p.rank, line.optimizer);
          auto [it, fresh] = staged.emplace(key, line.t);
          if (!fresh) it->second = std::min(it->second, line.t);
          in_segment[segment].insert(i);
          active.emplace(segment, line.step);
          break;
        }
        case Parsed::kDirective:
          v.directives.push_back(
              {segment, line.step, line.chunk, p.rank, line.t, line.generation, line.epoch});
          break;
        case Parsed::kSync:
          ++v.syncs;
          if (p.killed) killed_syncs[{segment, line.step}][p.rank].insert(line.chunk);
          if (!executed.emplace(line.run, line.step, line.chunk).second) {
            ++v.double_syncs;
            problem(absl::StrCat("double: rank ", p.rank, " synced step ", line.step, " chunk ",
                                 line.chunk, " twice (generation ", line.generation, ")"));
          }
          break;
        case Parsed::kComplete:
          completed[{segment, line.step}].insert(p.rank);
          if (line.step == steps - 1) v.finished.insert(p.rank);
          break;
        case Parsed::kAbort:
          ++v.aborts;
          aborted_by[segment].insert(i);
          break;
        case Parsed::kExit:
          v.resumes += line.resumes;
          break;
        case Parsed::kSeg:
        case Parsed::kGen:
          break;
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
          problem(absl::StrCat(
              "early: rank ", d.rank, " got step ", d.step, " chunk ", d.chunk, " (generation ",
              d.generation, ", epoch ", d.epoch, ", segment ", d.segment, ")",
              it == staged.end() ? ", and rank " : " before rank ", r, " ", optimizer,
              it == staged.end() ? " never staged it in that segment" : " staged"));
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
      "neither %d; early syncs %d, double syncs %d, deposed directives %d; ranks finished %d/%d",
      v.segments, v.aborts, v.resumes, v.syncs, v.steps_completed, v.steps_aborted,
      v.steps_unsettled, v.early_syncs, v.double_syncs, v.deposed_directives, v.finished.size(),
      ranks);
}

void ExpectClean(const Verdict& v, uint32_t ranks, const std::string& job) {
  for (const std::string& problem : v.problems) ADD_FAILURE() << job << ": " << problem;
  EXPECT_EQ(v.early_syncs, 0u) << job;
  EXPECT_EQ(v.double_syncs, 0u) << job;
  EXPECT_EQ(v.deposed_directives, 0u) << job;
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

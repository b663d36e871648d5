// The chaos verdict, from the ranks' own audit logs only (chaos_rank.cc writes them), never from
// a coordinator: used by the chaos test (one coordinator restarted by kill -9) and the replica
// failover tests (owners killed, paused, etcd restarted).
//
// Segments. Every line of a log carries a generation: the one the coordinator stamped on a
// directive, or the one the rank's client was in when it wrote the line (never one cached at
// connect time). A segment is a set of generations that one run of the job went through: a
// client that a resume carried from generation g into g' (a restarted coordinator, or a new
// owner replica, rebuilt the job from the ranks) ties g and g' into one segment, because the
// check-ins it made in g count in g' too. A rank that joins fresh in g' (it started late, or
// joined again) is in that segment as well. An abort ends a segment: the ranks join again in a
// new generation that no client was carried into, and restage.
//
//  * no early sync: every directive a rank received came after every contributor of the chunk
//    logged its check-in for that step in that segment (one host clock, CLOCK_MONOTONIC; a
//    directive's time is when it arrived at the client);
//  * no double sync: a rank executes each (step, chunk) at most once per run of its client (a
//    client and the one that reconnected in its generation after it failed);
//  * no deposed owner: a client accepts no directive of a lower epoch than one it accepted;
//  * every (segment, step) was either completed by every rank or its segment was aborted on every
//    rank that took part (an abort line, or the rank was the one killed);
//  * which ranks finished the run, and which steps no segment completed on every rank.
// Pure (reads the files it is given). Thread-compatible.
#ifndef PSYNC_TESTS_CHAOS_VERDICT_H_
#define PSYNC_TESTS_CHAOS_VERDICT_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace psync::chaos {

// One rank process's audit log.
struct ProcessLog {
  uint32_t rank = 0;
  bool killed = false;  // by the test
  std::string path;
};

struct Verdict {
  struct Directive {
    uint64_t segment, step;  // segment: the lowest generation of the segment
    uint32_t chunk, rank;
    int64_t t;            // CLOCK_MONOTONIC nanoseconds, when it arrived
    uint64_t generation;  // as the coordinator stamped it
    uint64_t epoch;       // of the replica that released it (0 without replicas)
  };
  std::vector<Directive> directives;
  uint64_t syncs = 0, double_syncs = 0, early_syncs = 0, resumes = 0, aborts = 0;
  uint64_t deposed_directives = 0;  // accepted after one of a higher epoch
  uint64_t steps_completed = 0, steps_aborted = 0, steps_unsettled = 0;
  size_t segments = 0;
  std::set<uint32_t> finished;        // ranks that completed the last step
  std::vector<uint64_t> never_done;   // steps no segment completed on every rank
  std::vector<std::string> problems;  // what went wrong, one line each (the first 50)
};

// Judges one job of `ranks` ranks, `chunks` chunks (two optimizers each, "dense" and "expert")
// and `steps` steps from its processes' logs.
Verdict Judge(const std::vector<ProcessLog>& logs, uint32_t ranks, uint32_t chunks, uint64_t steps);

// One line of `v`'s counts: segments, aborts, resumes, syncs, (segment, step)s completed, aborted
// and neither, early and double syncs, ranks finished of `ranks`.
std::string Summary(const Verdict& v, uint32_t ranks);

// Adds a test failure, naming `job`, for each way `v` is not clean: a problem line, an early or
// double sync, a deposed owner's directive accepted, a (segment, step) neither completed nor
// aborted, a rank of `ranks` that did not finish, a step no segment completed.
void ExpectClean(const Verdict& v, uint32_t ranks, const std::string& job);

// The first directive any rank received after `t` (CLOCK_MONOTONIC ns); 0 when none.
int64_t FirstDirectiveAfter(const Verdict& v, int64_t t);

// Highest step any of `logs` completed so far (its last complete line). Reads only the end of
// each log while that holds a complete line, so polling it stays cheap as the logs grow.
uint64_t Progress(const std::vector<ProcessLog>& logs);

// CLOCK_MONOTONIC now, in nanoseconds (the clock of the logs).
int64_t MonotonicNanos();

}  // namespace psync::chaos

#endif  // PSYNC_TESTS_CHAOS_VERDICT_H_

// chaos_rank: one simulated training rank as its own process, for the chaos test
// (tests/chaos/chaos_test.cc). It trains `--steps` steps of a job where every rank stages two
// optimizers ("dense", "expert") for every chunk and every chunk syncs over all ranks ("dp"),
// with random delays, check-ins in random order and some sent twice.
//
// It writes an audit log of its own (`--log`, one line per event, written and flushed before the
// event's message goes out or right after the notice arrived), which the chaos test checks without
// trusting the coordinator (tests/chaos/verdict.h):
//   start <pid> <incarnation>
//   seg <generation> <first_step>       a Connect: a new client, in the generation it joined
//   gen <generation> <t>                the client now is in another generation: a resume (a
//                                       restarted coordinator or a new owner replica) carried
//                                       this rank's run into it
//   staged <generation> <t> <step> <chunk> <optimizer>
//   directive <generation> <t> <step> <chunk> <epoch> [handout]
//   sync <generation> <step> <chunk>    the sync executed (at most once per step and chunk)
//   complete <generation> <step>
//   abort <generation> <why>            the client is over for this rank (it connects again)
//   exit <resumes>
// t: CLOCK_MONOTONIC nanoseconds (one clock for every process of the host). A directive line
// carries the generation and epoch the coordinator stamped on it and the time it arrived (logged
// by the client's notice handler; `handout`: it arrived before the handler was set and is logged
// when the training loop got it). Every other line carries the generation the client is in when
// the line is written, read then: never one cached at connect time, which a resume makes stale.
//
// After an abort (or at start) the rank asks the coordinator where the job is (GetJobStatus) and
// joins at that step: a forming generation's first step, or the lowest rank step of the running
// one.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "",
          "coordinator address, or the comma-separated addresses of coordinator replicas");
ABSL_FLAG(absl::Duration, keepalive, absl::Seconds(1),
          "HTTP/2 keepalive of the client's channels (how soon a paused coordinator is noticed)");
ABSL_FLAG(std::string, job, "chaos", "job id");
ABSL_FLAG(uint32_t, world_size, 32, "ranks");
ABSL_FLAG(uint32_t, rank, 0, "this rank");
ABSL_FLAG(uint32_t, chunks, 4, "model chunks");
ABSL_FLAG(uint64_t, steps, 200, "train steps [0, steps)");
ABSL_FLAG(uint64_t, seed, 1, "random seed");
ABSL_FLAG(int, max_delay_us, 1000, "each check-in waits up to this long");
ABSL_FLAG(double, duplicate_probability, 0.05, "a check-in is sent twice with this probability");
ABSL_FLAG(std::string, log, "", "audit log (appended)");
ABSL_FLAG(std::vector<std::string>, hold_before_steps, {},
          "steps this rank does not stage until the file <hold_dir>/release.<step> exists (a test "
          "keeps a job from running past a fault it has not injected yet)");
ABSL_FLAG(std::string, hold_dir, "", "where --hold_before_steps' release files appear");

namespace {

// Waits until the release file of `step` exists, when --hold_before_steps names it.
void AwaitRelease(uint64_t step) {
  for (const std::string& held : absl::GetFlag(FLAGS_hold_before_steps)) {
    uint64_t s = 0;
    if (!absl::SimpleAtoi(held, &s) || s != step) continue;
    const std::string file = absl::StrCat(absl::GetFlag(FLAGS_hold_dir), "/release.", step);
    while (access(file.c_str(), F_OK) != 0) absl::SleepFor(absl::Milliseconds(10));
  }
}

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Lines come from the training loop and from the client's reader thread (directives).
class AuditLog {
 public:
  explicit AuditLog(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {}
  ~AuditLog() {
    if (file_ != nullptr) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr; }
  void Line(const std::string& line) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    std::fputs(line.c_str(), file_);
    std::fputc('\n', file_);
    std::fflush(file_);
  }

 private:
  absl::Mutex mu_;
  FILE* const file_;
};

// The (step, chunk)s whose directive the client's notice handler logged, so that the training
// loop logs the few that arrived before the handler was set (re-sent on attach to a client that
// reconnected into its generation).
class Arrivals {
 public:
  void Add(uint64_t step, uint32_t chunk) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    logged_.emplace(step, chunk);
  }
  // True once the handler logged (step, chunk), waiting up to `timeout` for it: the handler runs
  // on the reader thread just after the directive was queued, so it may still be on its way.
  bool Logged(uint64_t step, uint32_t chunk, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_) {
    const std::pair<uint64_t, uint32_t> key(step, chunk);
    absl::MutexLock lock(&mu_);
    auto logged = [this, &key]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return logged_.count(key) > 0; };
    mu_.AwaitWithTimeout(absl::Condition(&logged), timeout);
    return logged_.count(key) > 0;
  }

 private:
  absl::Mutex mu_;
  std::set<std::pair<uint64_t, uint32_t>> logged_ ABSL_GUARDED_BY(mu_);
};

psync::v1::JoinRequest Plan(uint64_t first_step, const std::string& incarnation) {
  psync::v1::JoinRequest plan;
  plan.set_job_id(absl::GetFlag(FLAGS_job));
  plan.set_world_size(absl::GetFlag(FLAGS_world_size));
  plan.set_rank(absl::GetFlag(FLAGS_rank));
  plan.set_num_chunks(absl::GetFlag(FLAGS_chunks));
  plan.set_first_step(first_step);
  plan.set_incarnation(incarnation);
  for (uint32_t c = 0; c < absl::GetFlag(FLAGS_chunks); ++c) {
    psync::v1::ChunkPlan* chunk = plan.add_chunks();
    chunk->set_chunk(c);
    chunk->add_optimizers("dense");
    chunk->add_optimizers("expert");
    psync::v1::SyncGroup* group = chunk->add_groups();
    group->set_name("dp");
    for (uint32_t r = 0; r < absl::GetFlag(FLAGS_world_size); ++r) group->add_ranks(r);
  }
  return plan;
}

// Where the job is: the step to join at. NOT_FOUND (no job yet) is step 0. With several
// coordinator replicas, the one that holds the job answers; NOT_FOUND from all of them is step 0.
absl::StatusOr<uint64_t> JobStep(
    const std::vector<std::unique_ptr<psync::v1::Coordinator::Stub>>& stubs) {
  psync::v1::GetJobStatusRequest request;
  request.set_job_id(absl::GetFlag(FLAGS_job));
  grpc::Status last;
  bool answered = false;
  for (const auto& stub : stubs) {
    psync::v1::JobStatus status;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    context.set_wait_for_ready(stubs.size() == 1);
    grpc::Status s = stub->GetJobStatus(&context, request, &status);
    if (s.ok()) {
      return status.min_rank_step();
    }
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      answered = true;
    } else {
      last = s;
    }
  }
  if (answered) return 0;
  return absl::UnavailableError(last.error_message());
}

// One client: connect at the job's step and train until done (OK) or the generation is over
// (ABORTED / FAILED_PRECONDITION: join again). Other errors are returned. *progressed: a step
// was completed.
absl::Status RunSegment(const std::vector<std::unique_ptr<psync::v1::Coordinator::Stub>>& stubs,
                        const std::string& incarnation, std::mt19937_64& rng, AuditLog& log,
                        uint64_t* resumes, bool* done, bool* progressed) {
  absl::StatusOr<uint64_t> first = JobStep(stubs);
  if (!first.ok()) return first.status();
  psync::ClientOptions options;
  options.target = absl::GetFlag(FLAGS_target);
  options.plan = Plan(*first, incarnation);
  options.call_timeout = absl::Seconds(30);
  options.keepalive = absl::GetFlag(FLAGS_keepalive);
  absl::StatusOr<std::unique_ptr<psync::Client>> connected = psync::Client::Connect(options);
  if (!connected.ok()) return connected.status();
  std::unique_ptr<psync::Client> client = std::move(*connected);
  // The generation the client is in, read at every line: a resume moves the client into the
  // next generation without the training loop seeing more than a delay, and a rank that joins
  // after it (late, or again) joins that generation directly. A change is logged (`gen`), which
  // is what ties the two generations into one segment for the verdict.
  uint64_t generation = client->generation();
  auto current = [&]() {
    const uint64_t now = client->generation();
    if (now != generation) {
      generation = now;
      log.Line(absl::StrCat("gen ", now, " ", MonotonicNanos()));
    }
    return now;
  };
  log.Line(absl::StrCat("seg ", generation, " ", client->next_step()));
  // Directives are logged as they arrive, with the generation and epoch the coordinator stamped
  // on them: the one WaitForDirective returns may have been re-keyed to a later generation by a
  // resume since (client/notice_queue.h, ContinueGeneration). Set after the seg line, so that
  // every line of this client follows it.
  auto arrivals = std::make_shared<Arrivals>();
  client->SetNoticeHandler([&log, arrivals](const psync::v1::SessionDown& down) {
    if (!down.has_directive()) return;
    const psync::v1::SyncDirective& d = down.directive();
    log.Line(absl::StrCat("directive ", d.generation(), " ", MonotonicNanos(), " ", d.step(), " ",
                          d.chunk(), " ", d.epoch()));
    arrivals->Add(d.step(), d.chunk());
  });

  const uint32_t chunks = absl::GetFlag(FLAGS_chunks);
  std::uniform_int_distribution<int> delay(0, absl::GetFlag(FLAGS_max_delay_us));
  std::bernoulli_distribution duplicate(absl::GetFlag(FLAGS_duplicate_probability));
  absl::Status status;
  for (uint64_t step = client->next_step(); step < absl::GetFlag(FLAGS_steps) && status.ok();
       ++step) {
    AwaitRelease(step);
    std::vector<std::pair<uint32_t, std::string>> items;
    for (uint32_t c = 0; c < chunks; ++c) {
      items.emplace_back(c, "dense");
      items.emplace_back(c, "expert");
    }
    std::shuffle(items.begin(), items.end(), rng);
    for (const auto& [chunk, optimizer] : items) {
      absl::SleepFor(absl::Microseconds(delay(rng)));
      log.Line(absl::StrCat("staged ", current(), " ", MonotonicNanos(), " ", step, " ", chunk, " ",
                            optimizer));
      status = client->ReportStaged(step, chunk, optimizer);
      if (status.ok() && duplicate(rng)) status = client->ReportStaged(step, chunk, optimizer);
      if (!status.ok()) break;
    }
    std::vector<uint32_t> order(chunks);
    for (uint32_t c = 0; c < chunks; ++c) order[c] = c;
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t chunk : order) {
      if (!status.ok()) break;
      absl::StatusOr<psync::v1::SyncDirective> d =
          client->WaitForDirective(step, chunk, absl::Seconds(60));
      if (!d.ok()) {
        status = d.status();
        break;
      }
      if (!arrivals->Logged(step, chunk, absl::Milliseconds(200))) {
        log.Line(absl::StrCat("directive ", d->generation(), " ", MonotonicNanos(), " ", step, " ",
                              chunk, " ", d->epoch(), " handout"));
      }
      log.Line(absl::StrCat("sync ", current(), " ", step, " ", chunk));
      psync::v1::GroupChecksum checksum;
      checksum.set_group("dp");
      checksum.set_checksum(step * 1000 + chunk);
      status = client->ReportSyncDone(step, chunk, {checksum});
    }
    if (status.ok()) {
      log.Line(absl::StrCat("complete ", current(), " ", step));
      *progressed = true;
    }
  }
  *resumes += client->stats().resumes;
  if (status.ok()) {
    *done = true;
    return absl::OkStatus();
  }
  log.Line(absl::StrCat("abort ", current(), " ",
                        absl::StrReplaceAll(status.ToString(), {{"\n", " "}})));
  client->Close();
  // The generation is over (aborted, or this rank's messages are of a stale generation): join
  // again. Anything else is an error.
  if (status.code() == absl::StatusCode::kAborted ||
      (status.code() == absl::StatusCode::kFailedPrecondition &&
       absl::StrContains(status.message(), "stale"))) {
    return absl::OkStatus();
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  AuditLog log(absl::GetFlag(FLAGS_log));
  if (!log.ok()) {
    std::fprintf(stderr, "cannot open --log\n");
    return 2;
  }
  std::random_device device;
  const std::string incarnation = absl::StrFormat("%d-%x", getpid(), device());
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) * 1000003 + absl::GetFlag(FLAGS_rank) +
                      static_cast<uint64_t>(getpid()) * 7919);
  log.Line(absl::StrCat("start ", getpid(), " ", incarnation));
  std::vector<std::unique_ptr<psync::v1::Coordinator::Stub>> stubs;
  for (absl::string_view target : absl::StrSplit(absl::GetFlag(FLAGS_target), ',')) {
    stubs.push_back(psync::v1::Coordinator::NewStub(
        grpc::CreateChannel(std::string(target), grpc::InsecureChannelCredentials())));
  }
  uint64_t resumes = 0;
  bool done = false;
  // Gives up once it failed for this long without completing a step in between. Not a count:
  // a loaded machine sees bursts of quick failures (lapsed leases, replicas that cannot tell
  // where the job is yet, a reconnect past a call's timeout), each survived by connecting again.
  constexpr absl::Duration kGiveUpAfter = absl::Minutes(3);
  int failures = 0;  // in a row, without a step completed
  absl::Time failing_since;
  while (!done) {
    bool progressed = false;
    absl::Status s = RunSegment(stubs, incarnation, rng, log, &resumes, &done, &progressed);
    if (progressed) failures = 0;
    if (!s.ok()) {
      std::fprintf(stderr, "rank %u: %s\n", absl::GetFlag(FLAGS_rank), s.ToString().c_str());
      if (failures++ == 0) failing_since = absl::Now();
      if (absl::Now() - failing_since > kGiveUpAfter) return 3;
      // 100 ms doubling to 2 s.
      absl::SleepFor(
          std::min(absl::Milliseconds(100) * (1 << std::min(failures - 1, 5)), absl::Seconds(2)));
    }
  }
  log.Line(absl::StrCat("exit ", resumes));
  return 0;
}

// chaos_rank: one simulated training rank as its own process, for the chaos test
// (tests/chaos/chaos_test.cc). It trains `--steps` steps of a job where every rank stages two
// optimizers ("dense", "expert") for every chunk and every chunk syncs over all ranks ("dp"),
// with random delays, check-ins in random order and some sent twice.
//
// It writes an audit log of its own (`--log`, one line per event, written and flushed before the
// event's message goes out or right after the notice arrived), which the chaos test checks without
// trusting the coordinator:
//   start <pid> <incarnation>
//   seg <segment> <first_step>          a Connect: segment = the generation it joined
//   staged <segment> <t> <step> <chunk> <optimizer>
//   directive <segment> <t> <step> <chunk>
//   sync <segment> <step> <chunk>       the sync executed (at most once per step and chunk)
//   complete <segment> <step>
//   abort <segment> <why>               the segment is over for this rank (it joins again)
//   exit <resumes>
// t: CLOCK_MONOTONIC nanoseconds (one clock for every process of the host).
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
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "grpcpp/grpcpp.h"

ABSL_FLAG(std::string, target, "",
          "coordinator address, or the comma-separated addresses of coordinator replicas");
ABSL_FLAG(absl::Duration, keepalive, absl::Seconds(10),
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

namespace {

int64_t MonotonicNanos() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

class AuditLog {
 public:
  explicit AuditLog(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {}
  ~AuditLog() {
    if (file_ != nullptr) std::fclose(file_);
  }
  bool ok() const { return file_ != nullptr; }
  void Line(const std::string& line) {
    std::fputs(line.c_str(), file_);
    std::fputc('\n', file_);
    std::fflush(file_);
  }

 private:
  FILE* file_;
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

// One segment: connect at the job's step and train until done (OK) or the generation is over
// (ABORTED / FAILED_PRECONDITION: join again). Other errors are returned.
absl::Status RunSegment(const std::vector<std::unique_ptr<psync::v1::Coordinator::Stub>>& stubs,
                        const std::string& incarnation, std::mt19937_64& rng, AuditLog& log,
                        uint64_t* resumes, bool* done) {
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
  const uint64_t segment = client->generation();
  log.Line(absl::StrCat("seg ", segment, " ", client->next_step()));

  const uint32_t chunks = absl::GetFlag(FLAGS_chunks);
  std::uniform_int_distribution<int> delay(0, absl::GetFlag(FLAGS_max_delay_us));
  std::bernoulli_distribution duplicate(absl::GetFlag(FLAGS_duplicate_probability));
  absl::Status status;
  for (uint64_t step = client->next_step(); step < absl::GetFlag(FLAGS_steps) && status.ok();
       ++step) {
    std::vector<std::pair<uint32_t, std::string>> items;
    for (uint32_t c = 0; c < chunks; ++c) {
      items.emplace_back(c, "dense");
      items.emplace_back(c, "expert");
    }
    std::shuffle(items.begin(), items.end(), rng);
    for (const auto& [chunk, optimizer] : items) {
      absl::SleepFor(absl::Microseconds(delay(rng)));
      log.Line(absl::StrCat("staged ", segment, " ", MonotonicNanos(), " ", step, " ", chunk, " ",
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
      log.Line(absl::StrCat("directive ", segment, " ", MonotonicNanos(), " ", step, " ", chunk));
      log.Line(absl::StrCat("sync ", segment, " ", step, " ", chunk));
      psync::v1::GroupChecksum checksum;
      checksum.set_group("dp");
      checksum.set_checksum(step * 1000 + chunk);
      status = client->ReportSyncDone(step, chunk, {checksum});
    }
    if (status.ok()) log.Line(absl::StrCat("complete ", segment, " ", step));
  }
  *resumes += client->stats().resumes;
  if (status.ok()) {
    *done = true;
    return absl::OkStatus();
  }
  log.Line(
      absl::StrCat("abort ", segment, " ", absl::StrReplaceAll(status.ToString(), {{"\n", " "}})));
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
  int failures = 0;
  while (!done) {
    absl::Status s = RunSegment(stubs, incarnation, rng, log, &resumes, &done);
    if (!s.ok()) {
      std::fprintf(stderr, "rank %u: %s\n", absl::GetFlag(FLAGS_rank), s.ToString().c_str());
      if (++failures > 20) return 3;
      absl::SleepFor(absl::Milliseconds(100));
    }
  }
  log.Line(absl::StrCat("exit ", resumes));
  return 0;
}

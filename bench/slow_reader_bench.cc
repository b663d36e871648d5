// slow_reader_bench: what Session streams that write as fast as they can and never read cost the
// coordinator, and whether they slow anyone else down.
//
// Starts psync-coordinator (--coordinator, with --coordinator_args) as a child process, then:
//   1. baseline: a normal 2-rank job runs steps (both ranks stage chunk 0, both wait for the
//      directive, both report SyncDone) for --duration; the release latency of each step is the
//      time from the last check-in's write to both directives read.
//   2. flood: --streams Session streams (one job of that many ranks, each on its own connection)
//      attach, then each writes check-ins of an undeclared optimizer named by --echo_bytes bytes
//      (each refused with an Ack quoting it) as fast as it can and never reads, while the normal
//      job runs steps again for --duration.
// Then reads the flooding streams to their end (how many the coordinator ended with
// RESOURCE_EXHAUSTED) and prints one JSON object: coordinator RSS after the baseline and peak RSS
// (VmHWM) at the end, both phases' release latency and the flood/baseline ratios, the machine's
// load average. A busy machine measures the machine: compare the two phases of one run.
//
//   bazel run -c opt //bench:slow_reader_bench -- --duration=30s --streams=100
#include <sys/stat.h>
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/latency_summary.h"
#include "bench/proc_stats.h"
#include "bench/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

ABSL_FLAG(std::string, coordinator, "server/psync-coordinator", "psync-coordinator binary");
ABSL_FLAG(std::string, coordinator_args, "",
          "extra flags for the coordinator, space-separated (e.g. --stream_queue_bytes=1048576)");
ABSL_FLAG(int, streams, 100, "Session streams that write and never read");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(30), "length of each phase");
ABSL_FLAG(int, echo_bytes, 65536, "length of the optimizer name each flooding check-in carries");
ABSL_FLAG(
    bool, flood_bdp_probe, false,
    "let the flooding clients' HTTP/2 receive windows grow (BDP probing): their transport then "
    "absorbs megabytes of answers before the coordinator's queue for them fills; off, a "
    "client that never reads stalls after 64 KiB, as any does in the end");

namespace psync::bench {
namespace {

using Stream = grpc::ClientReaderWriter<v1::SessionUp, v1::SessionDown>;

v1::JoinRequest Plan(const std::string& job, uint32_t world, uint32_t rank) {
  v1::JoinRequest r;
  r.set_job_id(job);
  r.set_world_size(world);
  r.set_rank(rank);
  r.set_num_chunks(1);
  r.set_incarnation(absl::StrCat("bench-", rank));
  v1::ChunkPlan* plan = r.add_chunks();
  plan->set_chunk(0);
  plan->add_optimizers("dense");
  v1::SyncGroup* dp = plan->add_groups();
  dp->set_name("dp");
  for (uint32_t q = 0; q < world; ++q) dp->add_ranks(q);
  return r;
}

v1::SessionUp Staged(uint64_t id, uint64_t generation, uint64_t step, const std::string& opt) {
  v1::SessionUp up;
  up.set_request_id(id);
  up.mutable_staged()->set_generation(generation);
  v1::Staged* s = up.mutable_staged()->add_items();
  s->set_step(step);
  s->set_chunk(0);
  s->set_optimizer(opt);
  return up;
}

// One attached Session of one rank.
struct Rank {
  std::unique_ptr<grpc::ClientContext> context = std::make_unique<grpc::ClientContext>();
  std::unique_ptr<Stream> stream;
  uint64_t generation = 0;
  uint64_t next_id = 1;
};

bool JoinAndAttach(v1::Coordinator::Stub* stub, const v1::JoinRequest& plan, Rank* rank) {
  v1::JoinResponse joined;
  grpc::ClientContext join_context;
  grpc::Status s = stub->Join(&join_context, plan, &joined);
  if (!s.ok()) {
    std::cerr << "Join: " << s.error_message() << "\n";
    return false;
  }
  rank->generation = joined.generation();
  rank->stream = stub->Session(rank->context.get());
  v1::SessionUp up;
  up.set_request_id(rank->next_id++);
  v1::Attach* a = up.mutable_attach();
  a->set_job_id(plan.job_id());
  a->set_rank(plan.rank());
  a->set_generation(joined.generation());
  a->set_session_id(joined.session_id());
  if (!rank->stream->Write(up)) return false;
  v1::SessionDown down;
  while (rank->stream->Read(&down)) {
    if (down.has_ack()) return down.ack().code() == 0;
  }
  return false;
}

// Reads until the Ack of `id` (0: none wanted) and, when `want_directive`, the directive of `step`.
bool ReadUntil(Rank* rank, uint64_t id, bool want_directive, uint64_t step) {
  bool acked = id == 0;
  bool directed = !want_directive;
  v1::SessionDown down;
  while (!(acked && directed) && rank->stream->Read(&down)) {
    if (down.has_ack() && down.ack().request_id() == id) acked = true;
    if (down.has_directive() && down.directive().step() == step) directed = true;
  }
  return acked && directed;
}

// Runs the normal job's steps from `*step` for `duration`; returns each step's release latency.
std::vector<int64_t> RunSteps(Rank* r0, Rank* r1, uint64_t* step, absl::Duration duration) {
  std::vector<int64_t> latencies;
  const absl::Time end = absl::Now() + duration;
  while (absl::Now() < end) {
    const uint64_t s = *step;
    const uint64_t id0 = r0->next_id++;
    if (!r0->stream->Write(Staged(id0, r0->generation, s, "dense"))) break;
    if (!ReadUntil(r0, id0, false, s)) break;
    const uint64_t id1 = r1->next_id++;
    const absl::Time start = absl::Now();
    if (!r1->stream->Write(Staged(id1, r1->generation, s, "dense"))) break;
    // The directive is queued before the Ack of the check-in that caused it.
    if (!ReadUntil(r1, id1, true, s) || !ReadUntil(r0, 0, true, s)) break;
    latencies.push_back(absl::ToInt64Nanoseconds(absl::Now() - start));
    for (Rank* r : {r0, r1}) {
      v1::SessionUp done;
      const uint64_t id = r->next_id++;
      done.set_request_id(id);
      done.mutable_sync_done()->set_generation(r->generation);
      v1::SyncDone* d = done.mutable_sync_done()->add_items();
      d->set_step(s);
      d->set_chunk(0);
      v1::GroupChecksum* c = d->add_checksums();
      c->set_group("dp");
      c->set_checksum(s);
      if (!r->stream->Write(done) || !ReadUntil(r, id, false, s)) return latencies;
    }
    ++*step;
  }
  return latencies;
}

int64_t Mib(int64_t bytes) { return bytes >> 20; }

int Main() {
  const std::string dir = absl::StrCat("/tmp/slow_reader_bench.", getpid());
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    std::cerr << "slow_reader_bench: cannot create " << dir << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  std::vector<std::string> argv = {absl::GetFlag(FLAGS_coordinator), "--listen=127.0.0.1:0",
                                   "--http_listen=", absl::StrCat("--port_file=", dir, "/port")};
  for (absl::string_view a :
       absl::StrSplit(absl::GetFlag(FLAGS_coordinator_args), ' ', absl::SkipEmpty())) {
    argv.emplace_back(a);
  }
  auto child = Subprocess::Start(argv, dir + "/coordinator.log");
  if (!child.ok()) {
    std::cerr << child.status() << "\n";
    return 1;
  }
  auto port = WaitForPortFile(dir + "/port", child->get(), absl::Seconds(30));
  if (!port.ok()) {
    std::cerr << port.status() << "\n";
    return 1;
  }
  const std::string target = absl::StrCat("127.0.0.1:", *port);
  auto stub =
      v1::Coordinator::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));

  Rank r0, r1;
  if (!JoinAndAttach(stub.get(), Plan("normal", 2, 0), &r0) ||
      !JoinAndAttach(stub.get(), Plan("normal", 2, 1), &r1)) {
    return 1;
  }
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  uint64_t step = 0;
  const std::vector<int64_t> baseline = RunSteps(&r0, &r1, &step, duration);
  const auto before = SampleProcess((*child)->pid());

  // The flood: each stream on its own connection, as separate clients would be.
  const int n = absl::GetFlag(FLAGS_streams);
  const std::string name(absl::GetFlag(FLAGS_echo_bytes), 'x');
  std::vector<std::unique_ptr<v1::Coordinator::Stub>> stubs;
  std::vector<Rank> flooders(n);
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    if (!absl::GetFlag(FLAGS_flood_bdp_probe)) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    stubs.push_back(v1::Coordinator::NewStub(
        grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args)));
    // Bounds a flooding stream the coordinator never ends (no bound configured).
    flooders[i].context->set_deadline(
        absl::ToChronoTime(absl::Now() + 2 * duration + absl::Seconds(60)));
    if (!JoinAndAttach(stubs.back().get(), Plan("flood", n, i), &flooders[i])) return 1;
  }
  std::atomic<uint64_t> written{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (Rank& f : flooders) {
    writers.emplace_back([&f, &written, &stop, &name] {
      while (!stop.load()) {
        if (!f.stream->Write(Staged(f.next_id++, f.generation, 1, name))) return;
        written.fetch_add(1);
      }
    });
  }
  int64_t peak_rss = 0;
  std::atomic<bool> sampling{true};
  std::thread sampler([&] {
    while (sampling.load()) {
      if (auto s = SampleProcess((*child)->pid()); s.ok()) {
        peak_rss = std::max(peak_rss, s->rss_bytes);
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  });
  const std::vector<int64_t> flooded = RunSteps(&r0, &r1, &step, duration);
  stop.store(true);
  sampling.store(false);
  sampler.join();
  const auto after = SampleProcess((*child)->pid());
  const uint64_t flood_messages = written.load();

  // Read every flooding stream to its end: how did it end? (A stream the coordinator did not end
  // is half-closed once its writer stopped, and ends OK.)
  int exhausted = 0, other = 0;
  std::string exhausted_message, other_message;
  std::vector<std::thread> readers;
  for (Rank& f : flooders) {
    readers.emplace_back([&f] {
      v1::SessionDown down;
      while (f.stream->Read(&down)) {
      }
    });
  }
  for (std::thread& t : writers) t.join();
  for (Rank& f : flooders) f.stream->WritesDone();
  for (std::thread& t : readers) t.join();
  for (Rank& f : flooders) {
    const grpc::Status s = f.stream->Finish();
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted;
      exhausted_message = s.error_message();
    } else {
      ++other;
      other_message = absl::StrCat(s.error_code(), ": ", s.error_message());
    }
  }
  (*child)->Stop();

  const LatencySummary b = Summarize(baseline);
  const LatencySummary f = Summarize(flooded);
  const auto load = LoadAverage();
  std::printf(
      "{\"streams\":%d,\"duration_s\":%.0f,\"echo_bytes\":%d,\"flood_bdp_probe\":%s,"
      "\"coordinator_args\":\"%s\",\n"
      " \"rss_after_baseline_mib\":%lld,\"rss_peak_sampled_mib\":%lld,\"vmhwm_mib\":%lld,\n"
      " \"flood_messages_written\":%llu,\"flood_streams_resource_exhausted\":%d,"
      "\"flood_streams_other_end\":%d,\n"
      " \"baseline\":%s,\n \"flooded\":%s,\n"
      " \"ratio_p50\":%.2f,\"ratio_p99\":%.2f,\"loadavg\":[%.2f,%.2f,%.2f],\n"
      " \"overflow_status\":\"%s\",\"other_status\":\"%s\"}\n",
      n, absl::ToDoubleSeconds(duration), absl::GetFlag(FLAGS_echo_bytes),
      absl::GetFlag(FLAGS_flood_bdp_probe) ? "true" : "false",
      absl::GetFlag(FLAGS_coordinator_args).c_str(),
      static_cast<long long>(before.ok() ? Mib(before->rss_bytes) : -1),
      static_cast<long long>(Mib(peak_rss)),
      static_cast<long long>(after.ok() ? Mib(after->hwm_bytes) : -1),
      static_cast<unsigned long long>(flood_messages), exhausted, other, b.Json().c_str(),
      f.Json().c_str(), b.p50_us > 0 ? f.p50_us / b.p50_us : 0,
      b.p99_us > 0 ? f.p99_us / b.p99_us : 0, load[0], load[1], load[2],
      absl::StrReplaceAll(exhausted_message, {{"\"", "'"}}).c_str(),
      absl::StrReplaceAll(other_message, {{"\"", "'"}}).c_str());
  return 0;
}

}  // namespace
}  // namespace psync::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return psync::bench::Main();
}

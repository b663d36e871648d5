// release_path_bench: the coordinator's own cost of a step, in process, without gRPC: a Coordinator
// (with its Prometheus metrics as an event sink, as psync-coordinator runs it) and N ranks whose
// sessions are counting sinks, grouped 8 to a node the way a node agent's stream groups them
// (corked together while a decision's notices are handed out).
//
//   BM_Step/N/C/B: one step of N ranks x 2 optimizers x C chunks, one dp group of all N ranks per
//     chunk: every rank's check-ins in batches of B ranks (Coordinator::ApplyBatch, B x 2 messages
//     of one item each; B = 8 is a node agent's batch, 2,048 a relay's of 256 nodes), then every
//     rank's SyncDones, B ranks to a batch. Reported per check-in, in all and under the job's
//     lock.
//   BM_StepThreads/N/C/T: BM_Step/N/C/8 with its batches applied by T threads at once, as many
//     streams' threads apply them: what contention on the job's lock costs (wall time, the lock
//     held and waited for, per check-in).
//   BM_ReleasingBatch/N/idle_ms: the batch carrying a chunk's last check-in only (manual time: from
//     the batch until the last transport of the N sinks was uncorked with the release's notices:
//     the last check-in applied, the release decided and its notices handed out), back to
//     back (idle_ms 0) or after the coordinator sat idle for idle_ms, as between a paced job's
//     steps. This is the coordinator's share of the release latency that psync-bench measures end
//     to end.
//   BM_ReleaseToAgentStreams/N/S: BM_ReleasingBatch/N/0 with N ranks attached S to a stream (8:
//   node
//     agents; 2,048: relays of 256 nodes each) whose transports do what an AgentSession's does:
//     convert the notice once, queue it for its ranks (serve::AgentDownQueue), and on the uncork
//     take and serialize the message.
//   BM_StallReport/N/M: the stall inspector's pass (Coordinator::EnforceLiveness) that reports
//     chunk 0 stalled with M of N ranks' check-ins missing: how long it holds the coordinator, and
//     the stall event's size (detail_bytes, listed contributors).
//   BM_InspectorPass/N/D: the same pass with nothing stalled and D of the N ranks detached (within
//     their lease).
//   BM_JobStatusView/N and BM_JobStatusViewLimited/N/L: a job's status (GetJobStatus) built while
//     every one of its 8 chunks waits with half of its ranks' check-ins in, its lists whole or cut
//     to L entries.
//   BM_ListJobsView/N: the same job's line in ListJobs (psyncctl jobs, /api/jobs), as the listing
//     builds it.
//   BM_JobOverviewView/N: the view the same job's overview (GetJobOverview, /api/overview, the
//     dashboard's poll) is built from, under the job's lock.
//   BM_MetricsScrape/N: a Prometheus scrape of the coordinator's metrics with that job live (its
//     gauges are read from the job then: chunks waiting, who is missing, per node).
//   BM_Join/N/C: a job formed: each of N ranks joins (Coordinator::Join, its plan validated and
//     merged into the job's) and attaches, declaring C chunks with one dp group of all N ranks
//     each, as a data-parallel group of the whole world does. Reported per join.
//   BM_MemoryWalk/idle_ms: the machine's baseline for the idle variants (no psync code).
//
// bazel run -c opt //bench:release_path_bench -- --benchmark_counters_tabular=true
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "serve/agent_down_queue.h"
#include "serve/clock.h"
#include "serve/metrics/registry.h"
#include "server/coordinator_metrics.h"
#include "server/owner/coordinator.h"
#include "server/rpc/convert.h"

namespace psync::bench {
namespace {

using server::Coordinator;
using server::RankMessage;

constexpr uint32_t kRanksPerNode = 8;
constexpr char kJob[] = "bench";
const char* const kOptimizers[] = {"dense", "expert"};

// The transport of the sinks of a node (or a relay): the coordinator corks it around a
// decision's notices. It counts the notices, and with `queues` does an AgentSession's work (see
// BM_ReleaseToAgentStreams): it converts each notice once, queues it for its ranks and, on the
// uncork, takes the messages and serializes them.
class StreamTransport final : public server::NoticeBatcher {
 public:
  StreamTransport(std::string job_id, bool queues) : job_id_(std::move(job_id)), queues_(queues) {}
  void Cork() override {}
  void Uncork() override {
    while (!queue_.empty()) bytes_ += queue_.Take().SerializeAsString().size();
    last_uncork_ns_.store(absl::GetCurrentTimeNanos(), std::memory_order_relaxed);
  }
  void SendToRanks(const std::string& /*job_id*/, absl::Span<const core::RankId> ranks,
                   const core::Notice& notice) override {
    notices_ += ranks.size();
    if (!queues_) return;
    const v1::SessionDown proto = server::NoticeToProto(notice);
    queue_.AddNotice(job_id_, ranks, proto, serve::AgentDownQueue::NoticeKey(job_id_, proto));
  }
  // Notices handed out (one per rank), written by one thread at a time.
  uint64_t notices() const { return notices_; }
  // When the transport was last uncorked (its notices written out), in Unix nanoseconds.
  int64_t last_uncork_ns() const { return last_uncork_ns_.load(std::memory_order_relaxed); }

 private:
  const std::string job_id_;
  const bool queues_;
  serve::AgentDownQueue queue_;
  uint64_t notices_ = 0;
  std::atomic<int64_t> last_uncork_ns_{0};  // the delivery's helper threads uncork too
  uint64_t bytes_ = 0;
};

class CountingSink final : public server::SessionSink {
 public:
  explicit CountingSink(server::NoticeBatcher* batcher) : batcher_(batcher) {}
  void Send(const core::Notice& /*notice*/) override { abort(); }  // notices go to the transport
  void Close(const absl::Status& /*status*/) override {}
  server::NoticeBatcher* batcher() override { return batcher_; }

 private:
  server::NoticeBatcher* const batcher_;
};

// The coordinator's defaults, with room for a session per rank.
// `apply_threads`: helpers that apply a batch's check-ins chunk by chunk (0: group by group, on
// the applying thread).
// `stall_after` (zero: the default's): every chunk's stall deadline, learned or not.
server::CoordinatorOptions OptionsFor(uint32_t ranks, int apply_threads,
                                      absl::Duration stall_after = absl::ZeroDuration()) {
  server::CoordinatorOptions options;
  options.max_sessions = std::max<size_t>(options.max_sessions, ranks);
  options.apply_threads = apply_threads;
  if (stall_after > absl::ZeroDuration()) {
    options.observer.deadline.initial = stall_after;
    options.observer.deadline.floor = stall_after;
    options.observer.deadline.ceiling = stall_after;
  }
  return options;
}

// A joined, attached job of `ranks` ranks in `chunks` chunks, and the messages of its steps.
class Job {
 public:
  // `ranks_per_stream` ranks share a transport; `queues`: the transports do an AgentSession's
  // work (StreamTransport).
  // `stall_after`: as OptionsFor's.
  Job(uint32_t ranks, uint32_t chunks, uint32_t ranks_per_stream = kRanksPerNode,
      bool queues = false, int apply_threads = 0, absl::Duration stall_after = absl::ZeroDuration())
      : ranks_(ranks),
        chunks_(chunks),
        coordinator_(OptionsFor(ranks, apply_threads, stall_after), &clock_) {
    metrics_ = *server::CoordinatorMetrics::Create(&coordinator_, &registry_);
    core::GroupDecl dp{"dp", {}};
    for (uint32_t r = 0; r < ranks; ++r) dp.ranks.push_back(r);
    for (uint32_t r = 0; r < ranks; r += ranks_per_stream) {
      transports_.push_back(std::make_unique<StreamTransport>(kJob, queues));
    }
    for (uint32_t r = 0; r < ranks; ++r) {
      core::RankPlan plan;
      plan.job_id = kJob;
      plan.world_size = ranks;
      plan.rank = r;
      plan.num_chunks = chunks;
      plan.incarnation = absl::StrCat("i", r);
      for (uint32_t c = 0; c < chunks; ++c) {
        plan.chunks.push_back({c, {kOptimizers[0], kOptimizers[1]}, {dp}});
      }
      absl::StatusOr<core::JoinResult> joined = coordinator_.Join(plan);
      if (!joined.ok()) abort();
      generation_ = joined->generation;
      sinks_.push_back(std::make_shared<CountingSink>(transports_[r / ranks_per_stream].get()));
      if (!coordinator_.Attach(kJob, r, generation_, joined->session_id, sinks_.back()).ok()) {
        abort();
      }
    }
  }

  // The check-ins of chunk `c` of `step`, one message per (rank, optimizer). Built once per chunk
  // and then only re-stepped, so that the timed loops measure the coordinator, not this.
  const std::vector<std::vector<core::StagedItem>>& CheckinItems(core::Step step, uint32_t c) {
    if (items_.empty()) items_.resize(chunks_);
    std::vector<std::vector<core::StagedItem>>& items = items_[c];
    if (items.empty()) {
      for (uint32_t r = 0; r < ranks_; ++r) {
        for (const char* o : kOptimizers) items.push_back({{step, c, o, std::nullopt}});
      }
    }
    for (std::vector<core::StagedItem>& message : items) message[0].step = step;
    return items;
  }

  // Applies the messages of ranks [first, first + count) from `items` (two per rank).
  void ApplyCheckins(const std::vector<std::vector<core::StagedItem>>& items, uint32_t first,
                     uint32_t count) {
    std::vector<RankMessage> messages;
    for (uint32_t r = first; r < first + count; ++r) {
      for (int k = 0; k < 2; ++k) {
        RankMessage m;
        m.rank = r;
        m.staged = items[2 * r + k];
        messages.push_back(m);
      }
    }
    Check(coordinator_.ApplyBatch(kJob, generation_, messages));
  }

  // Applies `messages` as one batch (they must all be accepted).
  void Apply(const std::vector<RankMessage>& messages) {
    Check(coordinator_.ApplyBatch(kJob, generation_, messages));
  }

  // Every rank's SyncDones of `step`, `ranks_per_batch` ranks to a batch; with `stride` > 1 only
  // the batches `offset`, `offset` + `stride`, ... (one thread's share of them). A rank's message
  // reports every chunk, or `only_chunk`.
  void ApplySyncDones(core::Step step, uint32_t ranks_per_batch = kRanksPerNode,
                      uint32_t offset = 0, uint32_t stride = 1,
                      std::optional<uint32_t> only_chunk = std::nullopt) {
    std::vector<core::SyncDoneItem> done;
    for (uint32_t c = 0; c < chunks_; ++c) {
      if (!only_chunk.has_value() || *only_chunk == c) done.push_back({step, c, {}, 1});
    }
    for (uint32_t first = offset * ranks_per_batch; first < ranks_;
         first += stride * ranks_per_batch) {
      std::vector<RankMessage> messages;
      for (uint32_t r = first; r < std::min(ranks_, first + ranks_per_batch); ++r) {
        RankMessage m;
        m.rank = r;
        m.kind = RankMessage::Kind::kSyncDone;
        m.sync_done = done;
        messages.push_back(m);
      }
      Check(coordinator_.ApplyBatch(kJob, generation_, messages));
    }
  }

  // How long the coordinator's locks were held so far (the job's lock, for these messages), and
  // waited for, summed over threads.
  absl::Duration lock_held() const { return coordinator_.load_times().lock_held; }
  absl::Duration lock_wait() const { return coordinator_.load_times().lock_wait; }
  uint64_t notices() const {
    uint64_t n = 0;
    for (const auto& t : transports_) n += t->notices();
    return n;
  }
  // When the last transport was uncorked so far: the notices of the last decision all handed out.
  absl::Time last_uncork() const {
    int64_t last = 0;
    for (const auto& t : transports_) last = std::max(last, t->last_uncork_ns());
    return absl::FromUnixNanos(last);
  }
  uint32_t ranks() const { return ranks_; }
  uint32_t chunks() const { return chunks_; }
  Coordinator& coordinator() { return coordinator_; }
  // The Prometheus text a scrape of the coordinator's metrics gets (its collectors run first).
  std::string Scrape() { return registry_.Render(); }
  // Rank `rank`'s session ends (its lease starts running).
  void Detach(core::RankId rank) { coordinator_.Detach(kJob, rank, sinks_[rank].get()); }

 private:
  static void Check(const std::vector<absl::Status>& statuses) {
    for (const absl::Status& s : statuses) {
      if (!s.ok()) {
        fprintf(stderr, "release_path_bench: %s\n", s.ToString().c_str());
        abort();
      }
    }
  }

  const uint32_t ranks_;
  const uint32_t chunks_;
  serve::RealClock clock_;
  metrics::Registry registry_;
  Coordinator coordinator_;
  std::unique_ptr<server::CoordinatorMetrics> metrics_;
  std::vector<std::unique_ptr<StreamTransport>> transports_;
  std::vector<std::vector<std::vector<core::StagedItem>>> items_;  // per chunk (CheckinItems)
  std::vector<std::shared_ptr<CountingSink>> sinks_;
  uint64_t generation_ = 0;
};

// The figures of `step` steps: check-ins a second, ns per check-in, and under the job's lock.
void ReportSteps(benchmark::State& state, const Job& job, core::Step step,
                 absl::Duration held_before) {
  const uint64_t checkins = step * job.ranks() * 2ull * job.chunks();
  state.counters["checkins"] =
      benchmark::Counter(static_cast<double>(checkins), benchmark::Counter::kIsRate);
  state.counters["ns_per_checkin"] = benchmark::Counter(
      static_cast<double>(checkins), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  // The share of it under the job's lock, which one job's check-ins take one at a time: what
  // bounds how soon a burst of them is decided, however many cores serve it.
  state.counters["locked_ns_per_checkin"] = benchmark::Counter(
      absl::ToDoubleNanoseconds(job.lock_held() - held_before) / static_cast<double>(checkins));
  if (job.notices() != step * job.ranks() * job.chunks()) state.SkipWithError("notices lost");
}

// Steps of N ranks x 2 x C check-ins in batches of B ranks; each rank's SyncDones of a step in
// one message after every chunk's check-ins, or with `per_chunk` each chunk's (one item) right
// after its check-ins.
void RunSteps(benchmark::State& state, bool per_chunk) {
  Job job(static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  const uint32_t per_batch = static_cast<uint32_t>(state.range(2));
  core::Step step = 0;
  const absl::Duration held_before = job.lock_held();
  for (auto _ : state) {
    for (uint32_t c = 0; c < job.chunks(); ++c) {
      const auto& items = job.CheckinItems(step, c);
      for (uint32_t first = 0; first < job.ranks(); first += per_batch) {
        job.ApplyCheckins(items, first, std::min(per_batch, job.ranks() - first));
      }
      if (per_chunk) job.ApplySyncDones(step, per_batch, /*offset=*/0, /*stride=*/1, c);
    }
    if (!per_chunk) job.ApplySyncDones(step, per_batch);
    ++step;
  }
  ReportSteps(state, job, step, held_before);
}

void BM_Step(benchmark::State& state) { RunSteps(state, /*per_chunk=*/false); }
BENCHMARK(BM_Step)
    ->ArgsProduct({{64, 256, 1024, 4096, 16384}, {1, 8}, {kRanksPerNode}})
    ->Args({16384, 8, 2048})
    ->Args({131072, 8, 2048})
    ->Unit(benchmark::kMillisecond);

// BM_Step with each chunk's SyncDones (one item each) after its check-ins, as ranks report a sync
// once it ran and psync-agent forwards them: the shape of a real step's batches.
void BM_StepChunkByChunk(benchmark::State& state) { RunSteps(state, /*per_chunk=*/true); }
BENCHMARK(BM_StepChunkByChunk)
    ->Args({16384, 8, kRanksPerNode})
    ->Args({16384, 8, 2048})
    ->Unit(benchmark::kMillisecond);

// A step's messages in the order they arrive when every check-in leaves at its own random time
// over the step (a backward pass's buckets, psync-bench's --spread_us): every (rank, chunk,
// optimizer) of the step in one shuffled order, B messages of one item to a batch, then every
// (rank, chunk)'s SyncDone (with its group's checksum) in another shuffled order, B to a batch.
// Where BM_Step walks the job's state chunk by chunk and rank by rank, these batches touch it all
// over, as relays' batches do. BM_StepArrivals/N/C/B/U/T: U ranks' check-ins of one item arrive
// together (below); T helper threads apply a batch's check-ins chunk by chunk
// (CoordinatorOptions::apply_threads; 0: group by group on the applying thread).
void BM_StepArrivals(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1)),
          kRanksPerNode, /*queues=*/false, static_cast<int>(state.range(4)));
  const size_t per_batch = static_cast<size_t>(state.range(2));
  struct Arrival {
    uint32_t rank;
    uint32_t chunk;
    uint32_t optimizer;  // index into kOptimizers; unused for a SyncDone
  };
  // Check-ins arrive in units of `together` ranks (1: each on its own; 8: a node's ranks of one
  // item at once), the units in one shuffled order.
  const uint32_t together = state.range(3) > 0 ? static_cast<uint32_t>(state.range(3)) : 1;
  std::vector<Arrival> units;
  std::vector<Arrival> sync_dones;
  for (uint32_t r = 0; r < job.ranks(); ++r) {
    for (uint32_t c = 0; c < job.chunks(); ++c) {
      if (r % together == 0) {
        for (uint32_t k = 0; k < 2; ++k) units.push_back({r, c, k});
      }
      sync_dones.push_back({r, c, 0});
    }
  }
  std::mt19937_64 random(42);
  std::shuffle(units.begin(), units.end(), random);
  std::shuffle(sync_dones.begin(), sync_dones.end(), random);
  std::vector<Arrival> checkins;
  for (const Arrival& u : units) {
    for (uint32_t r = u.rank; r < std::min(job.ranks(), u.rank + together); ++r) {
      checkins.push_back({r, u.chunk, u.optimizer});
    }
  }
  // The batches' messages, built once and re-stepped: the timed loop measures the coordinator.
  std::vector<core::StagedItem> staged(checkins.size());
  std::vector<core::SyncDoneItem> synced(sync_dones.size());
  std::vector<std::vector<RankMessage>> batches;
  for (size_t first = 0; first < checkins.size(); first += per_batch) {
    std::vector<RankMessage>& batch = batches.emplace_back();
    for (size_t i = first; i < std::min(checkins.size(), first + per_batch); ++i) {
      staged[i] = {0, checkins[i].chunk, kOptimizers[checkins[i].optimizer], std::nullopt};
      RankMessage m;
      m.rank = checkins[i].rank;
      m.staged = absl::MakeConstSpan(&staged[i], 1);
      batch.push_back(m);
    }
  }
  const size_t checkin_batches = batches.size();  // the SyncDones' come after them
  for (size_t first = 0; first < sync_dones.size(); first += per_batch) {
    std::vector<RankMessage>& batch = batches.emplace_back();
    for (size_t i = first; i < std::min(sync_dones.size(), first + per_batch); ++i) {
      synced[i] = {0, sync_dones[i].chunk, {{"dp", 0}}, 1};  // the group's checksum, as ranks send
      RankMessage m;
      m.rank = sync_dones[i].rank;
      m.kind = RankMessage::Kind::kSyncDone;
      m.sync_done = absl::MakeConstSpan(&synced[i], 1);
      batch.push_back(m);
    }
  }
  core::Step step = 0;
  const absl::Duration held_before = job.lock_held();
  absl::Duration held_by_checkins;  // the check-in batches' share: what a step's releases wait for
  for (auto _ : state) {
    state.PauseTiming();
    for (core::StagedItem& item : staged) item.step = step;
    for (core::SyncDoneItem& item : synced) {
      item.step = step;
      item.checksums[0].checksum = step * 1000003 + item.chunk;  // every member agrees
    }
    state.ResumeTiming();
    const absl::Duration held_at_start = job.lock_held();
    for (size_t b = 0; b < batches.size(); ++b) {
      if (b == checkin_batches) held_by_checkins += job.lock_held() - held_at_start;
      job.Apply(batches[b]);
    }
    ++step;
  }
  ReportSteps(state, job, step, held_before);
  state.counters["checkin_locked_ns"] =
      benchmark::Counter(absl::ToDoubleNanoseconds(held_by_checkins) /
                         static_cast<double>(std::max<core::Step>(step, 1) * checkins.size()));
}
BENCHMARK(BM_StepArrivals)
    ->Args({16384, 8, 8, 1, 0})
    ->Args({16384, 8, 128, 1, 0})
    ->Args({16384, 8, 2048, 1, 0})
    ->Args({131072, 8, 128, 1, 0})
    ->Args({16384, 8, 8, 8, 0})
    ->Args({16384, 8, 128, 8, 0})
    ->Args({16384, 8, 2048, 8, 0})
    ->Args({16384, 8, 2048, 1024, 0})
    ->Args({16384, 8, 512, 1, 1})
    ->Args({16384, 8, 2048, 1, 1})
    ->Args({16384, 8, 2048, 1, 3})
    ->Args({16384, 8, 8192, 1, 1})
    ->Args({16384, 8, 8192, 1, 3})
    ->Args({16384, 8, 512, 1, 0})
    ->Args({16384, 8, 8192, 1, 0})
    ->Unit(benchmark::kMillisecond);

// BM_Step/N/C/8 with the node batches applied by T threads at once (batch i by thread i mod T),
// as the coordinator's stream threads apply the batches of many node or relay streams: what
// contention on the job's lock costs a check-in.
void BM_StepThreads(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), static_cast<uint32_t>(state.range(1)));
  const uint32_t threads = static_cast<uint32_t>(state.range(2));
  core::Step step = 0;
  const absl::Duration held_before = job.lock_held();
  const absl::Duration wait_before = job.lock_wait();
  for (auto _ : state) {
    std::vector<const std::vector<std::vector<core::StagedItem>>*> items_of(job.chunks());
    for (uint32_t c = 0; c < job.chunks(); ++c) items_of[c] = &job.CheckinItems(step, c);
    std::vector<std::thread> workers;
    for (uint32_t t = 0; t < threads; ++t) {
      workers.emplace_back([&job, &items_of, t, threads] {
        for (uint32_t c = 0; c < job.chunks(); ++c) {
          const auto& items = *items_of[c];
          for (uint32_t first = t * kRanksPerNode; first < job.ranks();
               first += threads * kRanksPerNode) {
            job.ApplyCheckins(items, first, std::min(kRanksPerNode, job.ranks() - first));
          }
        }
      });
    }
    for (std::thread& w : workers) w.join();
    workers.clear();
    for (uint32_t t = 0; t < threads; ++t) {
      workers.emplace_back(
          [&job, step, t, threads] { job.ApplySyncDones(step, kRanksPerNode, t, threads); });
    }
    for (std::thread& w : workers) w.join();
    ++step;
  }
  const double checkins = static_cast<double>(step * job.ranks() * 2ull * job.chunks());
  state.counters["ns_per_checkin"] =
      benchmark::Counter(checkins, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["locked_ns_per_checkin"] =
      benchmark::Counter(absl::ToDoubleNanoseconds(job.lock_held() - held_before) / checkins);
  state.counters["wait_ns_per_checkin"] =
      benchmark::Counter(absl::ToDoubleNanoseconds(job.lock_wait() - wait_before) / checkins);
  if (job.notices() != step * job.ranks() * job.chunks()) state.SkipWithError("notices lost");
}
BENCHMARK(BM_StepThreads)
    ->ArgsProduct({{16384}, {8}, {1, 2, 4, 8, 16}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The release of one chunk decided by the batch of the last node's check-ins, timed from the
// batch to its notices handed to the transports; every other node's check-ins, untimed, before.
void ReleaseEachStep(Job& job, int64_t idle_ms, benchmark::State& state) {
  core::Step step = 0;
  absl::Duration timed;
  const uint32_t last_node = (job.ranks() - 1) / kRanksPerNode * kRanksPerNode;
  for (auto _ : state) {
    const auto& items = job.CheckinItems(step, 0);
    for (uint32_t first = 0; first < last_node; first += kRanksPerNode) {
      job.ApplyCheckins(items, first, kRanksPerNode);
    }
    const uint64_t before = job.notices();
    if (idle_ms > 0) absl::SleepFor(absl::Milliseconds(idle_ms));
    const absl::Time start = absl::Now();
    job.ApplyCheckins(items, last_node, job.ranks() - last_node);
    // Until the release's notices were all handed out: what the batch does after that (observing
    // its events) delays no rank.
    const absl::Duration took = job.last_uncork() - start;
    state.SetIterationTime(absl::ToDoubleSeconds(took));
    timed += took;
    if (job.notices() - before != job.ranks()) state.SkipWithError("release not handed out");
    job.ApplySyncDones(step);
    ++step;
  }
  state.counters["ns_per_rank"] = absl::ToDoubleNanoseconds(timed) /
                                  static_cast<double>(std::max<uint64_t>(step, 1) * job.ranks());
}

void BM_ReleasingBatch(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 1);
  ReleaseEachStep(job, state.range(1), state);
}
BENCHMARK(BM_ReleasingBatch)
    ->ArgsProduct({{64, 256, 1024, 4096, 16384}, {0, 100}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

void BM_ReleaseToAgentStreams(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 1, static_cast<uint32_t>(state.range(1)),
          /*queues=*/true);
  ReleaseEachStep(job, 0, state);
}
BENCHMARK(BM_ReleaseToAgentStreams)
    ->ArgsProduct({{4096, 16384, 131072}, {8, 2048}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);

// The inspector's pass (Coordinator::EnforceLiveness, every --inspect_interval) that finds chunk 0
// stalled with M of its N ranks' check-ins missing (both optimizers) and reports it: how long the
// pass holds the coordinator, and how large the stall event is. BM_StallReport/N/M.
void BM_StallReport(benchmark::State& state) {
  constexpr absl::Duration kStallAfter = absl::Milliseconds(1);
  Job job(static_cast<uint32_t>(state.range(0)), 1, kRanksPerNode, /*queues=*/false,
          /*apply_threads=*/0, kStallAfter);
  const uint32_t staged = job.ranks() - static_cast<uint32_t>(state.range(1));
  core::Step step = 0;
  size_t detail_bytes = 0;
  size_t listed = 0;
  for (auto _ : state) {
    const auto& items = job.CheckinItems(step, 0);
    for (uint32_t first = 0; first < staged; first += kRanksPerNode) {
      job.ApplyCheckins(items, first, std::min(kRanksPerNode, staged - first));
    }
    absl::SleepFor(2 * kStallAfter);
    const absl::Time start = absl::Now();
    const std::vector<core::Event> found = job.coordinator().EnforceLiveness();
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
    if (found.size() != 1 || found[0].kind != core::EventKind::kStall) {
      state.SkipWithError("no stall reported");
      break;
    }
    detail_bytes = found[0].detail.size();
    listed = found[0].contributors.size();
    for (uint32_t first = staged; first < job.ranks(); first += kRanksPerNode) {
      job.ApplyCheckins(items, first, std::min(kRanksPerNode, job.ranks() - first));
    }
    job.ApplySyncDones(step);
    ++step;
  }
  state.counters["detail_bytes"] = static_cast<double>(detail_bytes);
  state.counters["listed"] = static_cast<double>(listed);
}
BENCHMARK(BM_StallReport)
    ->Args({16384, 8})
    ->Args({16384, 8192})
    ->Args({131072, 8})
    ->Args({131072, 65536})
    ->Iterations(30)  // each iteration also applies a whole step, untimed
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// The inspector's pass when no chunk stalls, with D of the job's N ranks detached (a relay or a
// rack gone, its ranks within their lease): what every --inspect_interval costs the coordinator
// while it holds it. BM_InspectorPass/N/D.
void BM_InspectorPass(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 1);
  for (uint32_t r = 0; r < static_cast<uint32_t>(state.range(1)); ++r) {
    job.Detach(r);
  }
  for (auto _ : state) {
    const absl::Time start = absl::Now();
    const std::vector<core::Event> found = job.coordinator().EnforceLiveness();
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
    if (!found.empty()) {
      state.SkipWithError("the pass found something");
      break;
    }
  }
}
BENCHMARK(BM_InspectorPass)
    ->Args({16384, 0})
    ->Args({16384, 2048})
    ->Args({131072, 0})
    ->Args({131072, 2048})
    ->Args({131072, 131072})
    ->Iterations(200)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Step 0 of every chunk of `job` with the check-ins of its first half of ranks.
void StageHalfOfEveryChunk(Job& job) {
  for (uint32_t c = 0; c < job.chunks(); ++c) {
    const auto& items = job.CheckinItems(0, c);
    for (uint32_t first = 0; first < job.ranks() / 2; first += kRanksPerNode) {
      job.ApplyCheckins(items, first, kRanksPerNode);
    }
  }
}
// A job's status as GetJobStatus (and /api/job) builds it under the job's lock, while every chunk
// waits with half of its N ranks' check-ins in: every chunk's lists whole, as a client asking
// without a list_limit gets them. BM_JobStatusView/N.
void BM_JobStatusView(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 8);
  StageHalfOfEveryChunk(job);
  for (auto _ : state) {
    benchmark::DoNotOptimize(job.coordinator().GetJobStatus(kJob));
  }
}
BENCHMARK(BM_JobStatusView)->Arg(16384)->Arg(131072)->Iterations(10)->Unit(benchmark::kMillisecond);

// The same with each list cut to L entries (GetJobStatusRequest.list_limit, /api/job?list_limit=L;
// L = 0: no lists, as GetAudit asks). BM_JobStatusViewLimited/N/L.
void BM_JobStatusViewLimited(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 8);
  StageHalfOfEveryChunk(job);
  for (auto _ : state) {
    benchmark::DoNotOptimize(job.coordinator().GetJobStatus(kJob, server::ViewDetail::kStatus,
                                                            static_cast<size_t>(state.range(1))));
  }
}
BENCHMARK(BM_JobStatusViewLimited)
    ->Args({16384, 64})
    ->Args({131072, 64})
    ->Args({131072, 0})
    ->Iterations(10)
    ->Unit(benchmark::kMillisecond);

// The job's line in ListJobs as psyncctl jobs and /api/jobs build it (their one job here), while
// every chunk waits with half of its N ranks' check-ins in. BM_ListJobsView/N.
void BM_ListJobsView(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 8);
  StageHalfOfEveryChunk(job);
  for (auto _ : state) {
    benchmark::DoNotOptimize(job.coordinator().ListJobs({}, server::ViewDetail::kSummary));
  }
}
BENCHMARK(BM_ListJobsView)->Arg(16384)->Arg(131072)->Iterations(10)->Unit(benchmark::kMillisecond);

// The view the job at a glance (GetJobOverview, /api/overview, the dashboard's poll) is built from,
// as the coordinator builds it under the job's lock, with the same job live. BM_JobOverviewView/N.
void BM_JobOverviewView(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 8);
  StageHalfOfEveryChunk(job);
  for (auto _ : state) {
    benchmark::DoNotOptimize(job.coordinator().GetJobStatus(kJob, server::ViewDetail::kOverview));
  }
}
BENCHMARK(BM_JobOverviewView)
    ->Arg(16384)
    ->Arg(131072)
    ->Iterations(10)
    ->Unit(benchmark::kMillisecond);

// A Prometheus scrape with the same job live. BM_MetricsScrape/N.
void BM_MetricsScrape(benchmark::State& state) {
  Job job(static_cast<uint32_t>(state.range(0)), 8);
  StageHalfOfEveryChunk(job);
  for (auto _ : state) benchmark::DoNotOptimize(job.Scrape());
}
BENCHMARK(BM_MetricsScrape)->Arg(16384)->Arg(131072)->Iterations(10)->Unit(benchmark::kMillisecond);

void BM_Join(benchmark::State& state) {
  const uint32_t ranks = static_cast<uint32_t>(state.range(0));
  for (auto _ : state) {
    auto job = std::make_unique<Job>(ranks, static_cast<uint32_t>(state.range(1)));
    state.PauseTiming();
    job.reset();
    state.ResumeTiming();
  }
  state.counters["per_join"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * ranks,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Join)
    ->ArgsProduct({{256, 1024, 4096, 16384}, {8}})
    ->Unit(benchmark::kMillisecond)
    ->MeasureProcessCPUTime();

// The machine's own baseline for the idle variants above: 16,384 dependent loads chasing a random
// cycle through 1 MiB (the pattern of the coordinator's per-rank lookups), timed right after
// sleeping `idle_ms` (0: back to back). On a virtual machine whose core idles, the caches are cold
// when work arrives; this says by how much, independent of psync.
void BM_MemoryWalk(benchmark::State& state) {
  std::vector<uint32_t> next(1 << 18);
  std::vector<uint32_t> order(next.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 rng(1);
  std::shuffle(order.begin() + 1, order.end(), rng);
  for (size_t i = 0; i < order.size(); ++i) next[order[i]] = order[(i + 1) % order.size()];
  uint32_t at = 0;
  for (auto _ : state) {
    if (state.range(0) > 0) absl::SleepFor(absl::Milliseconds(state.range(0)));
    const absl::Time start = absl::Now();
    for (int i = 0; i < 16384; ++i) at = next[at];
    benchmark::DoNotOptimize(at);
    state.SetIterationTime(absl::ToDoubleSeconds(absl::Now() - start));
  }
}
BENCHMARK(BM_MemoryWalk)->Arg(0)->Arg(10)->Arg(100)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace psync::bench

BENCHMARK_MAIN();

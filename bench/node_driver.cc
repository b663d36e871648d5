#include "bench/node_driver.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <limits>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/release_records.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::bench {
namespace {

namespace v1 = ::psync::v1;

// One check-in of a rank of a node, due at due_ns.
struct DueCheckin {
  int64_t due_ns;
  uint32_t local;  // rank - first rank of the node
  uint32_t chunk;
  uint32_t optimizer;
  bool operator<(const DueCheckin& o) const { return due_ns < o.due_ns; }
};

class NodeDriver;

constexpr char kStreamsNotEnded[] = "node streams did not end within the timeout";

// One simulated node agent: its AgentSession stream and its ranks' steps. Reactions may run
// concurrently with the pump thread; mu_ guards the state.
class NodeStream final : public grpc::ClientBidiReactor<v1::AgentUp, v1::AgentDown> {
 public:
  NodeStream(NodeDriver* driver, uint32_t first_rank, uint32_t count, v1::Coordinator::Stub* stub)
      : driver_(driver),
        first_rank_(first_rank),
        count_(count),
        stub_(stub),
        rank_step_(count, 0),
        held_(count, 0),
        dones_held_(count, 0) {}

  // Attaches every rank of the node with its Join answer and starts the call.
  void Start(const std::vector<v1::JoinResponse>& joined);
  // Adds the check-ins of `step` for every rank of the node, due from start_ns on. Appends to
  // `completions` the time each chunk's last local check-in of the step is due.
  // `held`: leave out the check-ins NodeOptions::withhold is true for.
  void PlanStep(uint64_t step, int64_t start_ns, bool held, std::mt19937_64& rng,
                std::vector<int64_t>* completions) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes what is due at `now` as one AgentBatch; while a write is in flight, remembers to write
  // it as soon as that write is done.
  void Pump(int64_t now) ABSL_LOCKS_EXCLUDED(mu_);
  // Ends the stream once nothing is queued (WritesDone).
  void Close(bool cancel) ABSL_LOCKS_EXCLUDED(mu_);
  bool Answered() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return acked_ == sent_ && sync_dones_.empty();
  }

  void OnWriteDone(bool ok) override;
  void OnReadDone(bool ok) override;
  void OnWritesDoneDone(bool /*ok*/) override {}
  void OnDone(const grpc::Status& status) override;

 private:
  void WriteLocked(v1::AgentUp up) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StartNextWriteLocked(bool* start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleDown(const v1::AgentDown& down, int64_t now);
  // Whether a check-in of rank `local` is due at `now` and not sent.
  bool HoldsDueLocked(uint32_t local, int64_t now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < due_.size() && due_[i].due_ns <= now; ++i) {
      if (due_[i].local == local) return true;
    }
    return false;
  }

  NodeDriver* const driver_;
  const uint32_t first_rank_;
  const uint32_t count_;
  v1::Coordinator::Stub* const stub_;
  grpc::ClientContext context_;
  v1::AgentDown in_;  // touched by the read reactions only, one at a time

  absl::Mutex mu_;
  std::string job_id_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<v1::AgentUp> queue_ ABSL_GUARDED_BY(mu_);  // attaches, written before batches
  size_t queue_next_ ABSL_GUARDED_BY(mu_) = 0;
  v1::AgentUp current_;  // the message being written; touched by the single writer
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> lazy_ids_ ABSL_GUARDED_BY(mu_);    // lazy_ack batches not answered yet
  std::vector<DueCheckin> due_ ABSL_GUARDED_BY(mu_);      // sorted by due_ns, not yet sent
  std::vector<uint64_t> due_step_ ABSL_GUARDED_BY(mu_);   // step of due_[i]
  std::vector<uint64_t> rank_step_ ABSL_GUARDED_BY(mu_);  // step each rank is staging
  std::vector<uint32_t> held_ ABSL_GUARDED_BY(mu_);       // directives of rank_step_ held, per rank
  // SyncDones not sent yet, in the order their directives were read (so by due time).
  struct DueSyncDone {
    uint32_t local = 0;
    v1::SyncDone done;
    int64_t due_ns = 0;
  };
  std::deque<DueSyncDone> sync_dones_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> dones_held_ ABSL_GUARDED_BY(mu_);  // per rank: its entries in sync_dones_
  bool pump_after_write_ ABSL_GUARDED_BY(mu_) = false;     // a flush came while writing
};

class NodeDriver {
 public:
  explicit NodeDriver(const NodeOptions& options)
      : options_(options),
        total_steps_(options.warmup_steps + options.steps),
        records_(total_steps_, options.workload.chunks) {}

  absl::StatusOr<DriverResult> Run();

  const NodeOptions& options() const { return options_; }
  ChunkRecord& record(uint64_t step, uint32_t chunk) { return records_.at(step, chunk); }
  bool measured(uint64_t step) const { return step >= options_.warmup_steps; }
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (failure_.ok()) failure_ = std::move(status);
  }
  void OnAttached(uint32_t n) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    attached_ += n;
  }
  void OnStreamDone() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++streams_done_;
  }

  DriverCounters counters;

 private:
  // Waits until `done` holds or a failure; DEADLINE_EXCEEDED naming `phase` after the timeout.
  absl::Status Await(const char* phase, const std::function<bool()>& done);
  absl::Status JoinAll(std::vector<v1::JoinResponse>* joined);
  // Plans `steps` steps from `first`, one every step_period from start_ns, pumping every tick until
  // every (step, chunk) of them reached every rank.
  // `hold_until` (not InfinitePast): the steps are held ones (NodeOptions::withhold), pumped until
  // then, their releases not waited for.
  absl::Status RunSteps(uint64_t first, uint64_t steps, const char* phase, int64_t start,
                        absl::Time hold_until = absl::InfinitePast());
  // RunSteps' loop for the nodes n with n % shards == shard, on one of its threads; `lags` gets the
  // shard's pump lags (DriverResult::pump_lag_ns).
  absl::Status PumpShard(size_t shard, size_t shards, int64_t start, uint64_t first, uint64_t steps,
                         const char* phase, absl::Time hold_until, std::vector<int64_t>* lags);
  bool Released(uint64_t step) {
    for (uint32_t c = 0; c < options_.workload.chunks; ++c) {
      if (record(step, c).ranks_released.load() < my_ranks_) return false;
    }
    return true;
  }
  // The next phase's start: when every process got to `phase` (NodeOptions::share).
  absl::StatusOr<int64_t> Rendezvous(const char* phase) { return options_.share.Meet(phase); }

  const NodeOptions options_;
  const uint64_t total_steps_;
  ReleaseRecords records_;
  std::vector<int64_t> pump_lag_ns_;  // RunSteps' thread only (DriverResult::pump_lag_ns)
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Coordinator::Stub>> stubs_;
  std::vector<std::unique_ptr<NodeStream>> nodes_;
  std::mt19937_64 rng_{options_.workload.seed};
  std::vector<uint32_t> my_nodes_;  // the nodes this process simulates (NodeOptions::share)
  uint32_t my_ranks_ = 0;           // their ranks

  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  uint32_t attached_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t streams_done_ ABSL_GUARDED_BY(mu_) = 0;
};

// ---------------------------------------------------------------------------------------------
// NodeStream

void NodeStream::Start(const std::vector<v1::JoinResponse>& joined) {
  {
    absl::MutexLock lock(&mu_);
    job_id_ = driver_->options().workload.job_id;
    generation_ = joined[first_rank_].generation();
    for (uint32_t i = 0; i < count_; ++i) {
      v1::AgentUp up;
      v1::Attach* a = up.mutable_attach()->mutable_attach();
      a->set_job_id(job_id_);
      a->set_rank(first_rank_ + i);
      a->set_generation(joined[first_rank_ + i].generation());
      a->set_session_id(joined[first_rank_ + i].session_id());
      up.set_request_id(next_request_id_++);
      queue_.push_back(std::move(up));
    }
  }
  stub_->async()->AgentSession(&context_, this);
  StartRead(&in_);
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    StartNextWriteLocked(&start);
  }
  if (start) StartWrite(&current_);
  StartCall();
}

void NodeStream::PlanStep(uint64_t step, int64_t start_ns, bool held, std::mt19937_64& rng,
                          std::vector<int64_t>* completions) {
  const NodeOptions& o = driver_->options();
  const Workload& w = o.workload;
  const int64_t spread = absl::ToInt64Nanoseconds(o.spread);
  std::uniform_int_distribution<int64_t> delay(0, std::max<int64_t>(spread, 0));
  const uint32_t node = first_rank_ / o.ranks_per_node;
  const int64_t late =
      std::find(o.slow_nodes.begin(), o.slow_nodes.end(), node) != o.slow_nodes.end()
          ? absl::ToInt64Nanoseconds(o.slow_by)
          : 0;
  std::vector<DueCheckin> planned;
  planned.reserve(static_cast<size_t>(count_) * w.chunks * w.optimizers);
  for (uint32_t i = 0; i < count_; ++i) {
    for (uint32_t c = 0; c < w.chunks; ++c) {
      for (uint32_t k = 0; k < w.optimizers; ++k) {
        if (held && o.withhold(first_rank_ + i, c, k)) continue;
        planned.push_back({start_ns + delay(rng) + late, i, c, k});
      }
    }
  }
  std::vector<int64_t> last_due(w.chunks, start_ns);
  for (const DueCheckin& d : planned) last_due[d.chunk] = std::max(last_due[d.chunk], d.due_ns);
  completions->insert(completions->end(), last_due.begin(), last_due.end());
  std::sort(planned.begin(), planned.end());
  absl::MutexLock lock(&mu_);
  // Steps are planned in order, each after the previous one's due times: appending keeps due_
  // sorted by step first, which is the order they may be sent in.
  for (const DueCheckin& d : planned) {
    due_.push_back(d);
    due_step_.push_back(step);
  }
}

void NodeStream::Pump(int64_t now) {
  const Workload& w = driver_->options().workload;
  // Check-ins of the batch, for the latency records.
  struct Sent {
    uint64_t step;
    uint32_t chunk;
    int64_t due_ns;
  };
  std::vector<Sent> in_write;
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    if (writing_) {
      pump_after_write_ = true;
      return;
    }
    const bool done_due = !sync_dones_.empty() && sync_dones_.front().due_ns <= now;
    if (!done_due && (due_.empty() || due_.front().due_ns > now)) return;  // nothing due
    v1::AgentUp up;
    v1::AgentBatch* batch = up.mutable_batch();
    // SyncDones first: they move their ranks to the next step before its check-ins. Equal ones
    // share an entry, as psync-agent sends them (--merge_sync_dones).
    absl::flat_hash_map<std::string, v1::MergedSyncDone*> equal_done;
    for (; !sync_dones_.empty() && sync_dones_.front().due_ns <= now; sync_dones_.pop_front()) {
      const uint32_t local = sync_dones_.front().local;
      v1::SyncDone& done = sync_dones_.front().done;
      --dones_held_[local];
      const uint32_t message = static_cast<uint32_t>(batch->ranks_size());
      batch->add_ranks(first_rank_ + local);
      if (!driver_->options().merge_sync_dones) {
        v1::IndexedSyncDone* s = batch->add_sync_dones();
        s->set_message(message);
        *s->add_items() = std::move(done);
        continue;
      }
      v1::MergedSyncDone*& entry = equal_done[done.SerializeAsString()];
      if (entry == nullptr) {
        entry = batch->add_merged_sync_dones();
        *entry->add_items() = std::move(done);
      }
      entry->add_messages(message);
    }
    // Due check-ins of ranks that are at their step, merged per (step, chunk, optimizer). due_ is
    // sorted by time (steps do not overlap: spread < step_period).
    absl::flat_hash_map<std::pair<uint64_t, uint32_t>, v1::MergedStaged*> merged;
    size_t kept = 0;
    size_t i = 0;
    for (; i < due_.size() && due_[i].due_ns <= now; ++i) {
      const DueCheckin& d = due_[i];
      const uint64_t step = due_step_[i];
      // The rank still waits for directives of its step, or its SyncDones of the step before.
      if (rank_step_[d.local] != step || dones_held_[d.local] > 0) {
        due_[kept] = d;
        due_step_[kept] = step;
        ++kept;
        continue;
      }
      const uint32_t message = static_cast<uint32_t>(batch->ranks_size());
      batch->add_ranks(first_rank_ + d.local);
      v1::MergedStaged*& m = merged[{step, d.chunk * w.optimizers + d.optimizer}];
      if (m == nullptr) {
        m = batch->add_staged();
        m->set_step(step);
        m->set_chunk(d.chunk);
        m->set_optimizer(OptimizerName(d.optimizer));
      }
      m->add_messages(message);
      in_write.push_back({step, d.chunk, d.due_ns});
    }
    for (; i < due_.size(); ++i, ++kept) {
      due_[kept] = due_[i];
      due_step_[kept] = due_step_[i];
    }
    due_.resize(kept);
    due_step_.resize(kept);
    if (batch->ranks_size() == 0) return;
    batch->set_job_id(job_id_);
    batch->set_generation(generation_);
    up.set_request_id(next_request_id_++);
    if (driver_->options().lazy_acks) {
      up.set_lazy_ack(true);
      lazy_ids_.push_back(up.request_id());
    }
    ++sent_;
    current_ = std::move(up);
    writing_ = true;
    start = true;
  }
  if (start) {
    // A check-in counts from when its rank handed it to the agent (its due time), so that the
    // time it waited for the node's next batch is part of the release latency.
    for (const Sent& c : in_write) {
      AtomicMax(driver_->record(c.step, c.chunk).last_send_ns, c.due_ns);
      if (driver_->measured(c.step)) driver_->counters.checkins_measured.fetch_add(1);
    }
    driver_->counters.messages_up.fetch_add(1);
    StartWrite(&current_);
  }
}

void NodeStream::StartNextWriteLocked(bool* start) {
  *start = false;
  if (writing_ || queue_next_ >= queue_.size()) return;
  current_ = std::move(queue_[queue_next_++]);
  if (queue_next_ == queue_.size()) {
    queue_.clear();
    queue_next_ = 0;
  }
  ++sent_;
  writing_ = true;
  *start = true;
  driver_->counters.messages_up.fetch_add(1);
}

void NodeStream::OnWriteDone(bool ok) {
  if (!ok) {
    driver_->Fail(absl::UnavailableError(absl::StrCat(
        "node of ranks ", first_rank_, "..", first_rank_ + count_ - 1, ": a write failed")));
    return;
  }
  bool start = false;
  bool writes_done = false;
  bool pump = false;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    StartNextWriteLocked(&start);
    if (!start && closing_ && !writes_done_) writes_done = writes_done_ = true;
    if (!start && pump_after_write_) {
      pump_after_write_ = false;
      pump = true;
    }
  }
  if (start) StartWrite(&current_);
  if (writes_done) StartWritesDone();
  if (pump) Pump(NowNs());
}

void NodeStream::Close(bool cancel) {
  if (cancel) {
    context_.TryCancel();
    return;
  }
  bool writes_done = false;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!writing_ && !writes_done_) writes_done = writes_done_ = true;
  }
  if (writes_done) StartWritesDone();
}

void NodeStream::OnReadDone(bool ok) {
  if (!ok) return;  // the call ended; OnDone follows
  driver_->counters.messages_down.fetch_add(1);
  HandleDown(in_, NowNs());
  StartRead(&in_);
}

void NodeStream::HandleDown(const v1::AgentDown& down, int64_t now) {
  const Workload& w = driver_->options().workload;
  for (const v1::AgentAck& ack : down.acks()) {
    driver_->counters.acks.fetch_add(1);
    if (ack.code() != 0 || ack.rejected_size() > 0) {
      const std::string what = ack.code() != 0
                                   ? ack.message()
                                   : absl::StrCat("message ", ack.rejected(0).index(),
                                                  " of the batch: ", ack.rejected(0).message());
      driver_->Fail(absl::InternalError(absl::StrCat("node of ranks ", first_rank_, "..",
                                                     first_rank_ + count_ - 1, ": request ",
                                                     ack.request_id(), " refused: ", what)));
    }
  }
  uint32_t attached = 0;
  bool pump = false;
  {
    absl::MutexLock lock(&mu_);
    for (const v1::AgentAck& ack : down.acks()) {
      ++acked_;
      if (ack.request_id() <= count_) ++attached;  // the attaches are requests 1..count_
      auto lazy = std::find(lazy_ids_.begin(), lazy_ids_.end(), ack.request_id());
      if (lazy != lazy_ids_.end()) lazy_ids_.erase(lazy);  // answered on its own
    }
    while (!lazy_ids_.empty() && lazy_ids_.front() <= down.acked_through()) {
      lazy_ids_.pop_front();
      ++acked_;
    }
  }
  if (attached > 0) driver_->OnAttached(attached);
  for (const v1::AgentNotice& n : down.notices()) {
    switch (n.notice().kind_case()) {
      case v1::SessionDown::kDirective:
        break;
      case v1::SessionDown::kAbort:
        driver_->Fail(
            absl::AbortedError(absl::StrCat("job aborted: ", n.notice().abort().reason())));
        continue;
      default:
        driver_->Fail(absl::InternalError(absl::StrCat(
            "node of ranks ", first_rank_, "..: unexpected notice ", n.notice().DebugString())));
        continue;
    }
    const v1::SyncDirective& d = n.notice().directive();
    // Without a delay a SyncDone goes in the next batch, whatever time that batch's pump read.
    const absl::Duration delay = driver_->options().sync_done_delay;
    const int64_t done_due_ns = delay > absl::ZeroDuration() ? now + absl::ToInt64Nanoseconds(delay)
                                                             : std::numeric_limits<int64_t>::min();
    const uint64_t recorded_steps = driver_->options().warmup_steps + driver_->options().steps;
    // The held step (NodeOptions::withhold) is answered but not recorded.
    const bool held_step = driver_->options().withhold && d.step() == recorded_steps;
    if ((d.step() >= recorded_steps && !held_step) || d.chunk() >= w.chunks) {
      driver_->counters.unexpected_directives.fetch_add(n.ranks_size());
      continue;
    }
    ChunkRecord* r = held_step ? nullptr : &driver_->record(d.step(), d.chunk());
    if (r != nullptr && !r->NoteSequence(d.sequence())) {
      driver_->counters.sequence_mismatches.fetch_add(1);
    }
    absl::MutexLock lock(&mu_);
    for (uint32_t rank : n.ranks()) {
      driver_->counters.directives.fetch_add(1);
      if (rank < first_rank_ || rank >= first_rank_ + count_) {
        driver_->counters.unexpected_directives.fetch_add(1);
        continue;
      }
      const uint32_t local = rank - first_rank_;
      if (d.step() != rank_step_[local]) {  // a repeat of an earlier step, or a future one
        driver_->counters.duplicate_directives.fetch_add(1);
        continue;
      }
      ++held_[local];
      if (r != nullptr) r->ranks_released.fetch_add(1);
      sync_dones_.push_back({local, SyncDoneFor(w, rank, d.step(), d.chunk()), done_due_ns});
      ++dones_held_[local];
      if (held_[local] == w.chunks) {
        held_[local] = 0;
        ++rank_step_[local];
        // Check-ins of the rank's next step that became due while it waited go out now.
        pump = pump || (driver_->options().flush_on_complete && HoldsDueLocked(local, now));
      }
    }
    if (r != nullptr) r->NoteDirective(now);
  }
  if (pump) Pump(now);
  if (!down.closed().empty()) {
    driver_->Fail(absl::InternalError(
        absl::StrCat("rank ", down.closed(0).rank(), " closed: ", down.closed(0).message())));
  }
}

void NodeStream::OnDone(const grpc::Status& status) {
  bool expected = false;
  {
    absl::MutexLock lock(&mu_);
    expected = writes_done_;
  }
  if (!expected) {
    driver_->Fail(absl::UnavailableError(absl::StrCat(
        "node of ranks ", first_rank_, "..", first_rank_ + count_ - 1,
        ": AgentSession ended early: ", status.error_code(), " ", status.error_message())));
  }
  driver_->OnStreamDone();
}

// ---------------------------------------------------------------------------------------------
// NodeDriver

absl::Status NodeDriver::Await(const char* phase, const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return failure_;
    }
    if (done()) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(phase, " did not finish within ", absl::FormatDuration(options_.timeout)));
    }
    absl::SleepFor(options_.tick);
  }
}

absl::Status NodeDriver::JoinAll(std::vector<v1::JoinResponse>* joined) {
  const Workload& w = options_.workload;
  joined->assign(w.ranks, v1::JoinResponse());
  // Ranks of a real job join in no particular order.
  std::vector<uint32_t> order;
  order.reserve(my_ranks_);
  for (uint32_t n : my_nodes_) {
    const uint32_t first = n * options_.ranks_per_node;
    for (uint32_t r = first; r < std::min(first + options_.ranks_per_node, w.ranks); ++r) {
      order.push_back(r);
    }
  }
  std::shuffle(order.begin(), order.end(), rng_);
  const uint32_t count = static_cast<uint32_t>(order.size());
  std::atomic<uint32_t> next{0};
  std::vector<std::thread> threads;
  const uint32_t workers = std::max<uint32_t>(1, std::min(options_.join_concurrency, count));
  for (uint32_t t = 0; t < workers; ++t) {
    threads.emplace_back([&, t] {
      v1::Coordinator::Stub* stub = stubs_[t % stubs_.size()].get();
      for (uint32_t i = next.fetch_add(1); i < count; i = next.fetch_add(1)) {
        const uint32_t r = order[i];
        grpc::ClientContext context;
        context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
        v1::JoinRequest join = JoinRequestFor(w, r);
        join.set_node(absl::StrCat("node-", r / options_.ranks_per_node));
        grpc::Status s = stub->Join(&context, join, &(*joined)[r]);
        if (!s.ok()) {
          Fail(absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                            absl::StrCat("Join of rank ", r, ": ", s.error_message())));
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  absl::MutexLock lock(&mu_);
  return failure_;
}

absl::Status NodeDriver::PumpShard(size_t shard, size_t shards, int64_t start, uint64_t first,
                                   uint64_t steps, const char* phase, absl::Time hold_until,
                                   std::vector<int64_t>* lags) {
  const bool held = hold_until != absl::InfinitePast();
  const bool measuring = !held && first >= options_.warmup_steps;
  const int64_t period = absl::ToInt64Nanoseconds(options_.step_period);
  const int64_t tick = absl::ToInt64Nanoseconds(options_.tick);
  std::mt19937_64 rng(options_.workload.seed + 7919 * (first + 1) + shard);
  uint64_t planned = 0;
  // Node n ticks at start + n x tick / nodes + k x tick: the nodes' flushes are spread over the
  // tick as independent agents' are, not one burst of every node at once.
  std::vector<NodeStream*> mine;
  for (size_t n = shard; n < nodes_.size(); n += shards) mine.push_back(nodes_[n].get());
  const size_t nodes = mine.size();
  int64_t round_start = start;
  size_t cursor = 0;
  auto tick_of = [&](size_t n) {
    return round_start + static_cast<int64_t>(static_cast<double>(tick) * n / nodes);
  };
  // (due time of a chunk's last local check-in of a step, node): the node writes then.
  using Completion = std::pair<int64_t, NodeStream*>;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<Completion>> completions;
  std::vector<int64_t> times;
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    int64_t now = NowNs();
    // Plan each step a tick before it starts (so that its first check-ins go out on time).
    while (planned < steps && start + static_cast<int64_t>(planned) * period <= now + tick) {
      for (NodeStream* node : mine) {
        times.clear();
        node->PlanStep(first + planned, start + static_cast<int64_t>(planned) * period, held, rng,
                       &times);
        if (!options_.flush_on_complete) continue;
        for (int64_t t : times) completions.emplace(t, node);
      }
      ++planned;
    }
    while (tick_of(cursor) <= now) {
      mine[cursor]->Pump(now);
      if (++cursor == nodes) {
        cursor = 0;
        round_start = std::max(round_start + tick, now - tick);
      }
    }
    while (!completions.empty() && completions.top().first <= now) {
      completions.top().second->Pump(now);
      if (measuring) lags->push_back(NowNs() - completions.top().first);
      completions.pop();
    }
    {
      absl::MutexLock lock(&mu_);
      if (!failure_.ok()) return failure_;
    }
    if (held) {
      if (planned == steps && absl::Now() >= hold_until) return absl::OkStatus();
    } else if (planned == steps && Released(first + steps - 1)) {
      bool all = true;
      for (uint64_t s = first; s < first + steps && all; ++s) all = Released(s);
      if (all) break;
    }
    if (!held && absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(phase, " did not finish within ", absl::FormatDuration(options_.timeout)));
    }
    // Node ticks are served in slices of a millisecond (2,048 nodes would wake this thread every
    // 10 us); completions at their time.
    constexpr int64_t kSlice = 1000000;
    int64_t wake = (tick_of(cursor) + kSlice - 1) / kSlice * kSlice;
    if (!completions.empty()) wake = std::min(wake, completions.top().first);
    now = NowNs();
    if (wake > now) absl::SleepFor(absl::Nanoseconds(wake - now));
  }
  return absl::OkStatus();
}

absl::Status NodeDriver::RunSteps(uint64_t first, uint64_t steps, const char* phase, int64_t start,
                                  absl::Time hold_until) {
  // The nodes are pumped by pump_threads threads, node n by thread n % threads, so that the load
  // generator keeps its schedule (one thread fell 200 ms behind at 16,384 ranks).
  const size_t threads =
      std::max<size_t>(1, std::min<size_t>(options_.pump_threads, nodes_.size()));
  std::vector<absl::Status> statuses(threads);
  std::vector<std::vector<int64_t>> lags(threads);
  std::vector<std::thread> pumps;
  for (size_t t = 0; t < threads; ++t) {
    pumps.emplace_back([&, t] {
      statuses[t] = PumpShard(t, threads, start, first, steps, phase, hold_until, &lags[t]);
    });
  }
  for (std::thread& pump : pumps) pump.join();
  for (const std::vector<int64_t>& l : lags) {
    pump_lag_ns_.insert(pump_lag_ns_.end(), l.begin(), l.end());
  }
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  // The SyncDones of the last step go out too, so that the coordinator finishes it.
  return Await(phase, [&] {
    const int64_t now = NowNs();
    bool answered = true;
    for (auto& node : nodes_) {
      node->Pump(now);
      answered = answered && node->Answered();
    }
    return answered;
  });
}

absl::StatusOr<DriverResult> NodeDriver::Run() {
  const NodeOptions& o = options_;
  const Workload& w = o.workload;
  if (o.targets.empty()) return absl::InvalidArgumentError("targets must not be empty");
  if (w.ranks == 0) return absl::InvalidArgumentError("ranks must be positive");
  if (o.ranks_per_node == 0) return absl::InvalidArgumentError("ranks_per_node must be positive");
  if (w.chunks == 0 || w.optimizers == 0) {
    return absl::InvalidArgumentError("chunks and optimizers must be positive");
  }
  if (o.step_period <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("step_period must be positive");
  }
  if (o.spread < absl::ZeroDuration() || o.spread >= o.step_period) {
    return absl::InvalidArgumentError("spread must be in [0, step_period)");
  }
  if (o.tick <= absl::ZeroDuration()) return absl::InvalidArgumentError("tick must be positive");
  if (o.steps == 0) return absl::InvalidArgumentError("steps must be positive");
  if (o.share.workers == 0 || o.share.worker >= o.share.workers) {
    return absl::InvalidArgumentError("worker must be in [0, workers)");
  }
  if (o.share.workers > 1 && o.withhold) {
    return absl::InvalidArgumentError("withhold needs a single process (workers 1)");
  }
  const uint32_t nodes = (w.ranks + o.ranks_per_node - 1) / o.ranks_per_node;
  if (o.share.workers > nodes)
    return absl::InvalidArgumentError("workers must be at most the nodes");
  for (uint32_t n = o.share.worker; n < nodes; n += o.share.workers) {
    my_nodes_.push_back(n);
    my_ranks_ += std::min(o.ranks_per_node, w.ranks - n * o.ranks_per_node);
  }
  for (uint32_t n : my_nodes_) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("psync.bench.node", static_cast<int>(n));
    auto channel = grpc::CreateCustomChannel(o.targets[n % o.targets.size()],
                                             grpc::InsecureChannelCredentials(), args);
    stubs_.push_back(v1::Coordinator::NewStub(channel));
    channels_.push_back(std::move(channel));
  }
  DriverResult result;
  result.releases_expected = total_steps_ * w.chunks;

  absl::Time t = absl::Now();
  std::vector<v1::JoinResponse> joined;
  absl::Status status = JoinAll(&joined);
  result.join_seconds = absl::ToDoubleSeconds(absl::Now() - t);

  if (status.ok()) {
    t = absl::Now();
    for (size_t i = 0; i < my_nodes_.size(); ++i) {
      const uint32_t first = my_nodes_[i] * o.ranks_per_node;
      const uint32_t count = std::min(o.ranks_per_node, w.ranks - first);
      nodes_.push_back(std::make_unique<NodeStream>(this, first, count, stubs_[i].get()));
    }
    for (auto& node : nodes_) node->Start(joined);
    status = Await("attaches", [&] {
      absl::MutexLock lock(&mu_);
      return attached_ == my_ranks_;
    });
    result.attach_seconds = absl::ToDoubleSeconds(absl::Now() - t);
  }
  // Each phase starts when every process got there (at once for a process on its own).
  absl::StatusOr<int64_t> start = int64_t{0};
  if (status.ok()) start = Rendezvous("attached");
  if (!start.ok()) status = start.status();
  if (status.ok() && o.warmup_steps > 0) {
    status = RunSteps(0, o.warmup_steps, "warmup steps", *start);
  }
  if (status.ok()) start = Rendezvous("warm");
  if (!start.ok()) status = start.status();
  int64_t measure_start = 0;
  if (status.ok()) {
    if (o.on_measure_start) o.on_measure_start();
    measure_start = NowNs();
    status = RunSteps(o.warmup_steps, o.steps, "measured steps", std::max(*start, measure_start));
    result.measured_seconds = static_cast<double>(NowNs() - measure_start) * 1e-9;
    if (status.ok()) {
      absl::StatusOr<int64_t> done = Rendezvous("measured");
      if (!done.ok()) status = done.status();
    }
    if (status.ok() && o.on_measure_end) o.on_measure_end();
  }
  if (status.ok() && o.withhold) {
    status = RunSteps(total_steps_, 1, "held step", NowNs(), absl::Now() + o.hold_open);
  }
  for (auto& node : nodes_) node->Close(/*cancel=*/!status.ok());
  const uint32_t started = static_cast<uint32_t>(nodes_.size());
  {
    absl::MutexLock lock(&mu_);
    auto all_done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return streams_done_ >= started; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&all_done), o.timeout)) {
      // gRPC still holds streams that never reported back: RunNodes keeps this driver alive.
      return absl::DeadlineExceededError(kStreamsNotEnded);
    }
  }
  if (!status.ok()) return status;

  if (o.share.on_records) o.share.on_records(records_, counters);
  SummarizeRun(records_, my_ranks_, o.warmup_steps, counters, &result);
  result.pump_lag_ns = std::move(pump_lag_ns_);
  return result;
}

}  // namespace

absl::StatusOr<DriverResult> RunNodes(const NodeOptions& options) {
  auto driver = std::make_unique<NodeDriver>(options);
  absl::StatusOr<DriverResult> result = driver->Run();
  if (result.status().code() == absl::StatusCode::kDeadlineExceeded &&
      result.status().message() == kStreamsNotEnded) {
    driver.release();  // gRPC may still call into it
  }
  return result;
}

}  // namespace psync::bench

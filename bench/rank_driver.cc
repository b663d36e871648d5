#include "bench/rank_driver.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <queue>
#include <random>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/release_records.h"
#include "bench/workload.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::bench {
namespace {

namespace v1 = ::psync::v1;

class RankStream;

// Wakes ranks when their next check-ins are due. One thread.
class Scheduler {
 public:
  Scheduler() : thread_([this] { Loop(); }) {}
  ~Scheduler() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
      cv_.Signal();
    }
    thread_.join();
  }

  void At(int64_t due_ns, RankStream* rank) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const bool earliest = heap_.empty() || due_ns < heap_.top().first;
    heap_.emplace(due_ns, rank);
    if (earliest) cv_.Signal();
  }

 private:
  void Loop();

  using Entry = std::pair<int64_t, RankStream*>;
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

class Driver;

// One rank: its Session stream and its step. Reactions of one stream may run concurrently (a read
// and a write completing), so the rank's state is under mu_.
class RankStream final : public grpc::ClientBidiReactor<v1::SessionUp, v1::SessionDown> {
 public:
  RankStream(Driver* driver, uint32_t rank, v1::Coordinator::Stub* stub, uint64_t seed)
      : driver_(driver), rank_(rank), stub_(stub), rng_(seed) {}

  void Start(uint64_t generation, const std::string& session_id);
  // Schedules this rank's check-ins of `step`, each due at base_ns + uniform [0, spread].
  void BeginStep(uint64_t step, int64_t base_ns) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends the check-ins that are due (called by the scheduler).
  void OnTimer() ABSL_LOCKS_EXCLUDED(mu_);
  // Half-closes the stream once every queued message is written; with `cancel`, cancels it.
  void Close(bool cancel) ABSL_LOCKS_EXCLUDED(mu_);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone(const grpc::Status& status) override;

 private:
  // Queues `up` with a fresh request_id. True when the caller must StartWrite(&current_) (after
  // unlocking).
  bool EnqueueLocked(v1::SessionUp up) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the next queued message into current_ and records what it carries.
  void TakeNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues StagedBatches of the check-ins due at `now`; schedules the next one. True when the
  // caller must StartWrite.
  bool SendDueLocked(int64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool FinishedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the caller must StartWritesDone and RemoveHold.
  bool ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleDirective(const v1::SyncDirective& d, int64_t now, bool* start_write, bool* step_done,
                       uint64_t* done_step) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  v1::SyncDone SyncDoneFor(uint64_t step, uint32_t chunk) const;

  Driver* const driver_;
  const uint32_t rank_;
  v1::Coordinator::Stub* const stub_;
  grpc::ClientContext context_;
  uint64_t generation_ = 0;
  v1::SessionDown in_;  // touched by the read reactions only, one at a time

  absl::Mutex mu_;
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::SessionUp> queue_ ABSL_GUARDED_BY(mu_);
  v1::SessionUp current_;  // written only while writing_, by the thread that set writing_
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool hold_released_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;  // the call ended without the run closing it
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t sent_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t acked_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<uint64_t> lazy_ids_ ABSL_GUARDED_BY(mu_);  // lazy_ack messages not answered yet
  uint64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  bool last_step_done_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<char> received_ ABSL_GUARDED_BY(mu_);
  uint32_t received_count_ ABSL_GUARDED_BY(mu_) = 0;
  // This step's check-ins: (due time, item = chunk * optimizers + optimizer), by due time.
  std::vector<std::pair<int64_t, uint32_t>> schedule_ ABSL_GUARDED_BY(mu_);
  size_t next_item_ ABSL_GUARDED_BY(mu_) = 0;
};

class Driver {
 public:
  explicit Driver(const DriverOptions& options)
      : options_(options),
        total_steps_(options.warmup_steps + options.steps),
        records_(total_steps_, options.chunks) {
    workload_.job_id = options.job_id;
    workload_.ranks = options.ranks;
    workload_.optimizers = options.optimizers;
    workload_.chunks = options.chunks;
    workload_.group_size = options.group_size;
    workload_.seed = options.seed;
    for (uint32_t k = 0; k < options.optimizers; ++k) optimizers_.push_back(OptimizerName(k));
    for (uint32_t r = options.share.worker; r < options.ranks; r += options.share.workers) {
      mine_.push_back(r);
    }
  }

  absl::StatusOr<DriverResult> Run();

  const DriverOptions& options() const { return options_; }
  uint64_t total_steps() const { return total_steps_; }
  const std::string& optimizer(uint32_t k) const { return optimizers_[k]; }
  ChunkRecord& record(uint64_t step, uint32_t chunk) { return records_.at(step, chunk); }
  Scheduler& scheduler() { return scheduler_; }
  const Workload& workload() const { return workload_; }

  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (failure_.ok()) failure_ = std::move(status);
  }
  void OnAttached() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++attached_;
  }
  void OnRankFinished() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++finished_;
  }
  void OnStreamDone(uint32_t rank, bool expected, const grpc::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    ++streams_done_;
    if (!expected && failure_.ok()) {
      failure_ = absl::UnavailableError(
          absl::StrCat("rank ", rank, ": its Session ended early: ", status.error_code(), " ",
                       status.error_message()));
    }
  }
  // Called by a rank once it holds every directive of `step` (its SyncDones are queued).
  void OnRankStepDone(RankStream* rank, uint64_t step);
  // True when no stream or join started by Run() can call back into the driver any more.
  bool Quiescent() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return streams_done_ >= streams_.size() && joins_done_ == joins_started_;
  }

  DriverCounters counters;

 private:
  void StartJoin(uint32_t rank);
  // Waits until `done` holds or a failure; DEADLINE_EXCEEDED naming `phase` after the timeout.
  absl::Status Await(const char* phase, const std::function<bool()>& done);
  // Waits until `done` holds (evaluated under mu_); false after `timeout`.
  bool WaitFor(const std::function<bool()>& done, absl::Duration timeout);
  void CancelAll();
  const DriverOptions options_;
  const uint64_t total_steps_;
  ReleaseRecords records_;
  Workload workload_;
  std::vector<std::string> optimizers_;
  std::vector<uint32_t> mine_;  // the ranks this process drives (DriverOptions::share)
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::Coordinator::Stub>> stubs_;
  std::vector<uint32_t> rank_stub_;  // per rank (of mine_ only): index into stubs_
  std::vector<v1::JoinResponse> joined_;
  std::vector<std::unique_ptr<RankStream>> streams_;
  std::atomic<uint32_t> next_join_{0};
  std::atomic<int64_t> measure_start_ns_{0};

  absl::Mutex mu_;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
  uint32_t joins_started_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t joins_done_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t attached_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t parked_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t finished_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t streams_done_ ABSL_GUARDED_BY(mu_) = 0;

  Scheduler scheduler_;  // last: its thread stops before the ranks go away
};

void Scheduler::Loop() {
  mu_.Lock();
  while (!stop_) {
    if (heap_.empty()) {
      cv_.Wait(&mu_);
      continue;
    }
    const int64_t now = NowNs();
    const Entry top = heap_.top();
    if (top.first > now) {
      cv_.WaitWithTimeout(&mu_, absl::Nanoseconds(top.first - now));
      continue;
    }
    heap_.pop();
    mu_.Unlock();
    top.second->OnTimer();
    mu_.Lock();
  }
  mu_.Unlock();
}

// ---------------------------------------------------------------------------------------------
// RankStream

void RankStream::Start(uint64_t generation, const std::string& session_id) {
  generation_ = generation;
  v1::SessionUp up;
  v1::Attach* attach = up.mutable_attach();
  attach->set_job_id(driver_->options().job_id);
  attach->set_rank(rank_);
  attach->set_generation(generation);
  attach->set_session_id(session_id);
  stub_->async()->Session(&context_, this);
  AddHold();  // writes start outside reactions; released when the stream is closed
  StartRead(&in_);
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    start = EnqueueLocked(std::move(up));
  }
  if (start) StartWrite(&current_);
  StartCall();
}

bool RankStream::EnqueueLocked(v1::SessionUp up) {
  up.set_request_id(next_request_id_++);
  ++sent_;
  if (driver_->options().lazy_acks && (up.has_staged() || up.has_sync_done())) {
    up.set_lazy_ack(true);
    lazy_ids_.push_back(up.request_id());
  }
  queue_.push_back(std::move(up));
  if (writing_) return false;
  writing_ = true;
  TakeNextLocked();
  return true;
}

void RankStream::TakeNextLocked() {
  current_ = std::move(queue_.front());
  queue_.pop_front();
  driver_->counters.messages_up.fetch_add(1, std::memory_order_relaxed);
  if (current_.kind_case() != v1::SessionUp::kStaged) return;
  const int64_t now = NowNs();
  uint64_t measured = 0;
  for (const v1::Staged& item : current_.staged().items()) {
    AtomicMax(driver_->record(item.step(), item.chunk()).last_send_ns, now);
    if (item.step() >= driver_->options().warmup_steps) ++measured;
  }
  driver_->counters.checkins_measured.fetch_add(measured, std::memory_order_relaxed);
}

void RankStream::BeginStep(uint64_t step, int64_t base_ns) {
  const DriverOptions& o = driver_->options();
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    step_ = step;
    received_.assign(o.chunks, 0);
    received_count_ = 0;
    schedule_.clear();
    next_item_ = 0;
    const int64_t spread = absl::ToInt64Nanoseconds(o.spread);
    std::uniform_int_distribution<int64_t> delay(0, std::max<int64_t>(spread, 0));
    for (uint32_t i = 0; i < o.chunks * o.optimizers; ++i) {
      schedule_.emplace_back(base_ns + (spread > 0 ? delay(rng_) : 0), i);
    }
    std::sort(schedule_.begin(), schedule_.end());
    start = SendDueLocked(NowNs());
  }
  if (start) StartWrite(&current_);
}

bool RankStream::SendDueLocked(int64_t now) {
  const DriverOptions& o = driver_->options();
  bool start = false;
  while (next_item_ < schedule_.size() && schedule_[next_item_].first <= now) {
    v1::SessionUp up;
    v1::StagedBatch* batch = up.mutable_staged();
    batch->set_generation(generation_);
    while (next_item_ < schedule_.size() && schedule_[next_item_].first <= now &&
           static_cast<uint32_t>(batch->items_size()) < std::max<uint32_t>(o.max_batch_items, 1)) {
      const uint32_t item = schedule_[next_item_++].second;
      v1::Staged* staged = batch->add_items();
      staged->set_step(step_);
      staged->set_chunk(item / o.optimizers);
      staged->set_optimizer(driver_->optimizer(item % o.optimizers));
    }
    start |= EnqueueLocked(std::move(up));
  }
  if (next_item_ < schedule_.size()) driver_->scheduler().At(schedule_[next_item_].first, this);
  return start;
}

void RankStream::OnTimer() {
  bool start = false;
  {
    absl::MutexLock lock(&mu_);
    start = SendDueLocked(NowNs());
  }
  if (start) StartWrite(&current_);
}

v1::SyncDone RankStream::SyncDoneFor(uint64_t step, uint32_t chunk) const {
  return bench::SyncDoneFor(driver_->workload(), rank_, step, chunk);
}

void RankStream::HandleDirective(const v1::SyncDirective& d, int64_t now, bool* start_write,
                                 bool* step_done, uint64_t* done_step) {
  const DriverOptions& o = driver_->options();
  if (d.step() != step_ || d.chunk() >= o.chunks || received_[d.chunk()]) {
    const bool duplicate = d.step() < step_ || (d.step() == step_ && d.chunk() < o.chunks);
    (duplicate ? driver_->counters.duplicate_directives : driver_->counters.unexpected_directives)
        .fetch_add(1, std::memory_order_relaxed);
    return;
  }
  received_[d.chunk()] = 1;
  ++received_count_;
  driver_->counters.directives.fetch_add(1, std::memory_order_relaxed);
  ChunkRecord& record = driver_->record(d.step(), d.chunk());
  record.NoteDirective(now);
  record.ranks_released.fetch_add(1, std::memory_order_relaxed);
  if (!record.NoteSequence(d.sequence())) {
    driver_->counters.sequence_mismatches.fetch_add(1, std::memory_order_relaxed);
  }
  if (!o.batch_sync_done) {
    v1::SessionUp up;
    up.mutable_sync_done()->set_generation(generation_);
    *up.mutable_sync_done()->add_items() = SyncDoneFor(d.step(), d.chunk());
    *start_write |= EnqueueLocked(std::move(up));
  }
  if (received_count_ < o.chunks) return;
  if (o.batch_sync_done) {
    v1::SessionUp up;
    up.mutable_sync_done()->set_generation(generation_);
    for (uint32_t c = 0; c < o.chunks; ++c) {
      *up.mutable_sync_done()->add_items() = SyncDoneFor(step_, c);
    }
    *start_write |= EnqueueLocked(std::move(up));
  }
  *step_done = true;
  *done_step = step_;
  if (step_ + 1 == driver_->total_steps()) last_step_done_ = true;
}

bool RankStream::FinishedLocked() {
  if (finished_ || !last_step_done_ || acked_ != sent_) return false;
  finished_ = true;
  return true;
}

void RankStream::OnReadDone(bool ok) {
  if (!ok) {
    // The call is ending. If the run did not close it, release the hold so that OnDone reports
    // the call's status (a write still in flight releases it when it fails).
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      if (!closing_) broken_ = true;
      if (broken_ && !hold_released_ && !writing_) release = hold_released_ = true;
    }
    if (release) RemoveHold();
    return;
  }
  driver_->counters.messages_down.fetch_add(1, std::memory_order_relaxed);
  const int64_t now = NowNs();
  bool start_write = false, attached = false, step_done = false, finished = false;
  uint64_t done_step = 0;
  {
    absl::MutexLock lock(&mu_);
    switch (in_.kind_case()) {
      case v1::SessionDown::kAck:
        ++acked_;
        driver_->counters.acks.fetch_add(1, std::memory_order_relaxed);
        if (in_.ack().code() != 0) {
          driver_->Fail(
              absl::Status(static_cast<absl::StatusCode>(in_.ack().code()),
                           absl::StrCat("rank ", rank_, " request ", in_.ack().request_id(), ": ",
                                        in_.ack().message())));
        } else if (!attached_) {
          attached_ = attached = true;
        }
        break;
      case v1::SessionDown::kDirective:
        HandleDirective(in_.directive(), now, &start_write, &step_done, &done_step);
        break;
      case v1::SessionDown::kStepSkipped:
        driver_->Fail(
            absl::InternalError(absl::StrCat("rank ", rank_, ": unexpected StepSkipped")));
        break;
      case v1::SessionDown::kAbort:
        driver_->Fail(
            absl::AbortedError(absl::StrCat("rank ", rank_, ": Abort: ", in_.abort().reason())));
        break;
      case v1::SessionDown::KIND_NOT_SET:
        break;
    }
    // The lazily acked messages up to acked_through were accepted.
    while (!lazy_ids_.empty() && lazy_ids_.front() <= in_.acked_through()) {
      lazy_ids_.pop_front();
      ++acked_;
      driver_->counters.acks.fetch_add(1, std::memory_order_relaxed);
    }
    finished = FinishedLocked();
  }
  if (start_write) StartWrite(&current_);
  if (attached) driver_->OnAttached();
  if (step_done) driver_->OnRankStepDone(this, done_step);
  if (finished) driver_->OnRankFinished();
  StartRead(&in_);
}

void RankStream::OnWriteDone(bool ok) {
  bool start = false, release = false, broken_hold = false;
  {
    absl::MutexLock lock(&mu_);
    if (!ok) {
      writing_ = false;
      if (!closing_) broken_ = true;  // the call is ending; OnDone reports its status
      if (broken_ && !hold_released_) {
        hold_released_ = true;
        broken_hold = true;
      } else {
        release = closing_ && ReleaseHoldLocked();
      }
    } else if (!queue_.empty()) {
      TakeNextLocked();
      start = true;
    } else {
      writing_ = false;
      release = closing_ && ReleaseHoldLocked();
    }
  }
  if (start) StartWrite(&current_);
  if (release) {
    StartWritesDone();
    RemoveHold();
  }
  if (broken_hold) RemoveHold();
}

bool RankStream::ReleaseHoldLocked() {
  if (hold_released_ || writing_) return false;
  hold_released_ = true;
  return true;
}

void RankStream::Close(bool cancel) {
  if (cancel) context_.TryCancel();
  bool release = false;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    release = ReleaseHoldLocked();  // else the write in flight completes (or fails) and releases
  }
  if (release) {
    StartWritesDone();
    RemoveHold();
  }
}

void RankStream::OnDone(const grpc::Status& status) {
  bool expected = false;
  {
    absl::MutexLock lock(&mu_);
    expected = closing_ && !broken_;
  }
  driver_->OnStreamDone(rank_, expected, status);
}

// ---------------------------------------------------------------------------------------------
// Driver

void Driver::StartJoin(uint32_t rank) {
  struct Call {
    grpc::ClientContext context;
    v1::JoinRequest request;
  };
  {
    absl::MutexLock lock(&mu_);
    ++joins_started_;
  }
  auto* call = new Call;
  call->context.set_deadline(absl::ToChronoTime(absl::Now() + options_.timeout));
  call->request = JoinRequestFor(workload_, rank);
  stubs_[rank_stub_[rank]]->async()->Join(
      &call->context, &call->request, &joined_[rank], [this, call, rank](grpc::Status status) {
        delete call;
        if (!status.ok()) {
          Fail(absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                            absl::StrCat("Join of rank ", rank, ": ", status.error_message())));
        }
        {
          absl::MutexLock lock(&mu_);
          ++joins_done_;
        }
        const uint32_t next = next_join_.fetch_add(1);
        if (next < mine_.size() && status.ok()) StartJoin(mine_[next]);
      });
}

void Driver::OnRankStepDone(RankStream* rank, uint64_t step) {
  const uint64_t next = step + 1;
  if (next == total_steps_) return;  // the rank reports itself finished once every Ack is in
  if (next == options_.warmup_steps) {
    absl::MutexLock lock(&mu_);
    ++parked_;  // Run() starts the measured steps once every rank is here
    return;
  }
  int64_t base = NowNs();
  const int64_t period = absl::ToInt64Nanoseconds(options_.step_period);
  if (period > 0 && next >= options_.warmup_steps) {
    base = std::max(base, measure_start_ns_.load() +
                              static_cast<int64_t>(next - options_.warmup_steps) * period);
  }
  rank->BeginStep(next, base);
}

absl::Status Driver::Await(const char* phase, const std::function<bool()>& done) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !failure_.ok() || done(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&ready), options_.timeout)) {
    return absl::DeadlineExceededError(
        absl::StrCat(phase, " did not finish within ", absl::FormatDuration(options_.timeout),
                     " (joins ", joins_done_, ", attached ", attached_, ", parked ", parked_,
                     ", finished ", finished_, " of ", mine_.size(), " ranks)"));
  }
  return failure_;
}

bool Driver::WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

void Driver::CancelAll() {
  for (auto& s : streams_) s->Close(/*cancel=*/true);
  const uint32_t started = static_cast<uint32_t>(streams_.size());
  WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return streams_done_ >= started; },
          absl::Seconds(10));
}

absl::StatusOr<DriverResult> Driver::Run() {
  const DriverOptions& o = options_;
  // Channels: `connections` per target (0: one per rank), each its own TCP connection; only for
  // this process's ranks.
  const uint32_t targets = static_cast<uint32_t>(o.targets.size());
  const uint32_t count = static_cast<uint32_t>(mine_.size());
  std::vector<uint32_t> ranks_of(targets, 0);
  std::vector<uint32_t> target_of(o.ranks);
  for (uint32_t r : mine_) {
    target_of[r] = static_cast<uint32_t>(static_cast<uint64_t>(r) * targets / o.ranks);
    ++ranks_of[target_of[r]];
  }
  auto channels_of = [&](uint32_t t) {
    return std::max<uint32_t>(
        o.connections == 0 ? ranks_of[t] : std::min(o.connections, ranks_of[t]), 1);
  };
  std::vector<uint32_t> first_stub(targets, 0);
  for (uint32_t t = 0; t < targets; ++t) {
    first_stub[t] = static_cast<uint32_t>(stubs_.size());
    if (ranks_of[t] == 0) continue;
    for (uint32_t i = 0; i < channels_of(t); ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("psync.bench.connection", static_cast<int>(i));
      auto channel =
          grpc::CreateCustomChannel(o.targets[t], grpc::InsecureChannelCredentials(), args);
      stubs_.push_back(v1::Coordinator::NewStub(channel));
      channels_.push_back(std::move(channel));
    }
  }
  rank_stub_.resize(o.ranks);
  std::vector<uint32_t> seen(targets, 0);
  for (uint32_t r : mine_) {
    const uint32_t t = target_of[r];
    rank_stub_[r] = first_stub[t] + seen[t]++ % channels_of(t);
  }

  DriverResult result;
  // Joins, a bounded number in flight.
  joined_.resize(o.ranks);
  const int64_t join_start = NowNs();
  const uint32_t initial = std::min(std::max<uint32_t>(o.join_concurrency, 1), count);
  next_join_ = initial;
  for (uint32_t i = 0; i < initial; ++i) StartJoin(mine_[i]);
  absl::Status status =
      Await("join", [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return joins_done_ == count; });
  if (!status.ok()) {
    // Joins still in flight reference this driver: wait them out (each has a deadline).
    WaitFor([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return joins_done_ == joins_started_; },
            o.timeout);
    return status;
  }
  result.join_seconds = static_cast<double>(NowNs() - join_start) / 1e9;

  // Sessions.
  const int64_t attach_start = NowNs();
  for (uint32_t r : mine_) {
    streams_.push_back(std::make_unique<RankStream>(this, r, stubs_[rank_stub_[r]].get(),
                                                    o.seed * 0x9E3779B97F4A7C15ull + r));
  }
  for (size_t i = 0; i < mine_.size(); ++i) {
    streams_[i]->Start(joined_[mine_[i]].generation(), joined_[mine_[i]].session_id());
  }
  status = Await("attach", [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return attached_ == count; });
  result.attach_seconds = static_cast<double>(NowNs() - attach_start) / 1e9;
  int64_t first_step_ns = 0;
  if (status.ok()) {
    absl::StatusOr<int64_t> go = options_.share.Meet("attached");
    status = go.status();
    if (go.ok()) first_step_ns = *go;
  }

  // Warmup steps, then the measured ones.
  int64_t measure_start = 0;
  // The measured steps start when every process is warm (at once with one process).
  auto start_measuring = [&](uint64_t first_step) {
    absl::StatusOr<int64_t> go = o.share.Meet("warm");
    if (!go.ok()) return go.status();
    if (o.on_measure_start) o.on_measure_start();
    measure_start = o.share.rendezvous ? *go : NowNs();
    measure_start_ns_ = measure_start;
    for (auto& s : streams_) s->BeginStep(first_step, measure_start);
    return absl::OkStatus();
  };
  if (status.ok()) {
    if (o.warmup_steps == 0) {
      status = start_measuring(0);
    } else {
      for (auto& s : streams_) s->BeginStep(0, first_step_ns);
      status =
          Await("warmup", [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return parked_ == count; });
      if (status.ok()) status = start_measuring(o.warmup_steps);
    }
  }
  if (status.ok()) {
    status = Await("measured steps",
                   [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return finished_ == count; });
  }
  if (status.ok()) status = o.share.Meet("measured").status();
  if (status.ok()) {
    result.measured_seconds = static_cast<double>(NowNs() - measure_start) / 1e9;
    if (o.on_measure_end) o.on_measure_end();
  }
  if (!status.ok()) {
    CancelAll();
    return status;
  }
  // Close: half-close every stream; the coordinator ends each with OK.
  for (auto& s : streams_) s->Close(/*cancel=*/false);
  status =
      Await("close", [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return streams_done_ == count; });
  if (!status.ok()) {
    CancelAll();
    return status;
  }

  result.releases_expected = total_steps_ * o.chunks;
  if (o.share.on_records) o.share.on_records(records_, counters);
  SummarizeRun(records_, count, o.warmup_steps, counters, &result);
  return result;
}

}  // namespace

absl::StatusOr<DriverResult> RunRanks(const DriverOptions& options) {
  if (options.targets.empty()) return absl::InvalidArgumentError("targets must not be empty");
  if (options.ranks < 1) return absl::InvalidArgumentError("ranks must be at least 1");
  if (options.targets.size() > options.ranks) {
    return absl::InvalidArgumentError("targets: more targets than ranks");
  }
  if (options.optimizers < 1 || options.optimizers > 16) {
    return absl::InvalidArgumentError("optimizers must be in [1, 16]");
  }
  if (options.chunks < 1) return absl::InvalidArgumentError("chunks must be at least 1");
  if (options.steps < 1) return absl::InvalidArgumentError("steps must be at least 1");
  if (options.spread < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("spread must not be negative");
  }
  if (options.job_id.empty()) return absl::InvalidArgumentError("job_id must not be empty");
  if (options.share.workers == 0 || options.share.worker >= options.share.workers) {
    return absl::InvalidArgumentError("worker must be in [0, workers)");
  }
  if (options.share.workers > options.ranks) {
    return absl::InvalidArgumentError("workers must be at most the ranks");
  }
  auto driver = std::make_unique<Driver>(options);
  absl::StatusOr<DriverResult> result = driver->Run();
  // The last reactions may still be returning from the driver's mutex.
  absl::SleepFor(absl::Milliseconds(50));
  if (!driver->Quiescent()) {
    // A failed run whose cancelled streams or joins have not all reported back (a saturated
    // machine with thousands of ranks): gRPC still holds pointers into the driver, so it must
    // not be freed. The caller reports the failure and exits.
    driver.release();
  }
  return result;
}

}  // namespace psync::bench

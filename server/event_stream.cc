#include "server/event_stream.h"

#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/convert.h"

namespace psync::server {

WatchQueue::WatchQueue(std::string job_id, absl::flat_hash_set<std::string> kinds, size_t max_bytes,
                       size_t max_events)
    : job_id_(std::move(job_id)),
      kinds_(std::move(kinds)),
      max_bytes_(max_bytes),
      max_events_(max_events) {}

size_t WatchQueue::EventBytes(const core::Event& e) {
  size_t bytes = sizeof(core::Event) + e.optimizer.size() + e.detail.size() +
                 e.ranks.size() * sizeof(core::RankId);
  for (const core::Contributor& c : e.contributors) {
    bytes += sizeof(core::Contributor) + c.optimizer.size();
  }
  return bytes;
}

bool WatchQueue::Matches(const core::Event& e) const {
  if (!job_id_.empty() && e.job_id != job_id_) return false;
  return kinds_.empty() || kinds_.contains(core::EventKindName(e.kind));
}

void WatchQueue::Queue(const core::Event& e) {
  if (stopped_ || !Matches(e)) return;
  const size_t bytes = EventBytes(e);
  if (queue_.size() >= max_events_ || (max_bytes_ > 0 && bytes_ + bytes > max_bytes_)) {
    overflowed_ = true;
    Stop();
    return;
  }
  queue_.push_back(e);
  bytes_ += bytes;
}

void WatchQueue::Start(uint64_t first_live, const std::vector<core::Event>& backlog) {
  started_ = true;
  first_live_ = first_live;
  for (const core::Event& e : backlog) Queue(e);
  for (const core::Event& e : early_) {
    if (e.index >= first_live_) Queue(e);
  }
  early_.clear();
  early_.shrink_to_fit();
}

void WatchQueue::AddLive(const std::vector<core::Event>& events) {
  if (stopped_) return;
  if (!started_) {
    early_.insert(early_.end(), events.begin(), events.end());
    return;
  }
  for (const core::Event& e : events) {
    if (e.index >= first_live_) Queue(e);
  }
}

void WatchQueue::pop_front() {
  bytes_ -= EventBytes(queue_.front());
  last_index_ = queue_.front().index;
  took_any_ = true;
  queue_.pop_front();
}

void WatchQueue::Stop() {
  stopped_ = true;
  queue_.clear();
  early_.clear();
  bytes_ = 0;
}

std::string WatchQueue::OverflowMessage() const {
  return absl::StrCat("watcher fell more than ", max_events_, " events or ", max_bytes_,
                      " bytes behind (--watch_queue_bytes); watch again with replay",
                      took_any_ ? absl::StrCat(" and skip events up to index ", last_index_) : "");
}

namespace {

class EventStream final : public grpc::ServerWriteReactor<v1::Event>, public EventSink {
 public:
  EventStream(Coordinator* coordinator, const v1::WatchEventsRequest& request,
              const StreamLimits& limits)
      : coordinator_(coordinator),
        counters_(limits.counters),
        queue_(request.job_id(),
               absl::flat_hash_set<std::string>(request.kinds().begin(), request.kinds().end()),
               limits.watch_queue_bytes) {
    std::vector<core::Event> backlog;
    // Live events may reach OnEvents before this returns: the queue holds them until Start.
    const uint64_t first_live =
        coordinator_->AddEventSink(this, request.replay() ? &backlog : nullptr);
    Next next;
    {
      absl::MutexLock lock(&mu_);
      queue_.Start(first_live, backlog);
      next = NextLocked();
    }
    Do(next);
  }

  void OnEvents(const std::vector<core::Event>& events) override ABSL_LOCKS_EXCLUDED(mu_) {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      queue_.AddLive(events);
      next = NextLocked();
    }
    Do(next);
  }

  void OnWriteDone(bool ok) override ABSL_LOCKS_EXCLUDED(mu_) {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      next = NextLocked();
    }
    Do(next);
  }

  void OnCancel() override ABSL_LOCKS_EXCLUDED(mu_) {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
      next = NextLocked();
    }
    Do(next);
  }

  void OnDone() override {
    coordinator_->RemoveEventSink(this);  // after this returns no OnEvents call is running
    delete this;
  }

 private:
  // What to start once mu_ is released: Finish may lead gRPC to run OnDone (which deletes this
  // stream) on another thread at once, so no gRPC call is made while holding a member mutex.
  struct Next {
    bool write = false;
    std::optional<grpc::Status> finish;
  };

  Next NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (queue_.overflowed() && !finishing_) {
      if (counters_ != nullptr) counters_->overflows.fetch_add(1);
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, queue_.OverflowMessage()));
    }
    Next next;
    if (finished_) return next;
    // A watcher over the bound is finished at once, even with a write in flight: the write may
    // never complete while the watcher does not read.
    if (finishing_ && (queue_.overflowed() || !writing_)) {
      finished_ = true;
      next.finish = finish_status_;
      return next;
    }
    if (writing_ || queue_.empty()) return next;
    current_.Clear();
    EventToProto(queue_.front(), &current_);
    queue_.pop_front();
    writing_ = true;
    next.write = true;
    return next;
  }

  void Do(const Next& next) ABSL_LOCKS_EXCLUDED(mu_) {
    if (next.write) StartWrite(&current_);
    if (next.finish.has_value()) Finish(*next.finish);
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    finish_status_ = std::move(status);
    queue_.Stop();
  }

  Coordinator* const coordinator_;
  StreamCounters* const counters_;

  absl::Mutex mu_;
  WatchQueue queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  // The event being written; filled under mu_ by NextLocked, then read by gRPC until
  // OnWriteDone (writing_ keeps NextLocked from touching it meanwhile).
  v1::Event current_;
};

}  // namespace

grpc::ServerWriteReactor<v1::Event>* NewEventStream(Coordinator* coordinator,
                                                    const v1::WatchEventsRequest& request,
                                                    const StreamLimits& limits) {
  return new EventStream(coordinator, request, limits);
}

}  // namespace psync::server

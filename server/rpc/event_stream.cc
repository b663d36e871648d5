#include "server/rpc/event_stream.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/rpc/convert.h"
#include "wire/wire_status.h"

namespace psync::server {

WatchQueue::WatchQueue(std::string job_id, absl::flat_hash_set<std::string> kinds, size_t max_bytes,
                       size_t max_events, size_t page_events)
    : job_id_(std::move(job_id)),
      kinds_(std::move(kinds)),
      max_bytes_(max_bytes),
      max_events_(max_events),
      page_events_(std::max<size_t>(page_events, 1)) {}

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

bool WatchQueue::HasRoom(size_t bytes) const {
  if (queue_.empty()) return true;  // one event always fits, or the watcher could never move
  return queue_.size() < max_events_ && (max_bytes_ == 0 || bytes_ + bytes <= max_bytes_);
}

void WatchQueue::Queue(const core::Event& e, size_t bytes) {
  queue_.push_back(e);
  bytes_ += bytes;
}

void WatchQueue::Start(uint64_t first_live, bool replay) {
  started_ = true;
  first_live_ = first_live;
  end_ = first_live;
  next_ = replay ? 0 : first_live;
  replay_head_ = replay && first_live > 0;
  std::vector<core::Event> early = std::move(early_);
  early_.clear();
  early_.shrink_to_fit();
  AddLive(early);
}

void WatchQueue::AddLive(const std::vector<core::Event>& events) {
  if (stopped_) return;
  if (!started_) {
    early_.insert(early_.end(), events.begin(), events.end());
    return;
  }
  for (const core::Event& e : events) {
    if (stopped_) return;
    Live(e);
  }
}

void WatchQueue::Live(const core::Event& e) {
  // Recorded before the watch started: in the log, and read from there when replaying.
  if (e.index < first_live_) return;
  const bool matches = Matches(e);
  const size_t bytes = matches ? EventBytes(e) : 0;
  if (matches) {
    ++unread_events_;
    unread_bytes_ += bytes;
    if (unread_events_ > max_events_ || (max_bytes_ > 0 && unread_bytes_ > max_bytes_)) {
      End(absl::ResourceExhaustedError(absl::StrCat(
          "watcher took no event while more than ", max_events_, " events or ", max_bytes_,
          " bytes of them were recorded (--watch_queue_bytes); watch again with replay",
          SkipHint())));
      return;
    }
  }
  if (e.index < next_) return;  // already read from the log
  // Caught up with the log and room for it: queued now. Otherwise it stays in the log, and a
  // page reads it once the watcher has taken what is queued.
  if (!paging_ && next_ == end_ && e.index == next_ && (!matches || HasRoom(bytes))) {
    if (matches) Queue(e, bytes);
    next_ = end_ = e.index + 1;
    return;
  }
  end_ = std::max(end_, e.index + 1);
}

bool WatchQueue::NextPage(uint64_t* from, size_t* limit) {
  if (stopped_ || paging_ || next_ >= end_) return false;
  // The low-water mark: the queue still holds enough to keep the stream writing.
  if (queue_.size() >= page_events_ || (max_bytes_ > 0 && bytes_ > max_bytes_ / 2)) return false;
  *from = next_;
  *limit = page_events_;
  paging_ = true;
  return true;
}

void WatchQueue::AddPage(const std::vector<core::Event>& events, uint64_t next, uint64_t end) {
  paging_ = false;
  if (stopped_) return;
  end_ = std::max(end_, end);
  // EventsSince returns the events kept from next_ on: a first one past next_ (or none, while
  // the log has events past next_) means the ones before it were dropped from the log.
  const uint64_t first = events.empty() ? next : events.front().index;
  if (replay_head_) {
    replay_head_ = false;  // replay starts at the oldest event held, wherever that is
    next_ = std::max(next_, first);
  } else if (first > next_) {
    End(absl::OutOfRangeError(absl::StrCat(
        "events ", next_, " to ", first - 1, " (", first - next_,
        " events) were dropped from the coordinator's event log before this watcher reached "
        "them; watch again with replay",
        SkipHint())));
    return;
  }
  for (const core::Event& e : events) {
    if (e.index < next_) continue;
    if (Matches(e)) {
      const size_t bytes = EventBytes(e);
      if (!HasRoom(bytes)) break;  // the next page starts at e
      Queue(e, bytes);
    }
    next_ = e.index + 1;
  }
}

void WatchQueue::pop_front() {
  bytes_ -= EventBytes(queue_.front());
  last_index_ = queue_.front().index;
  took_any_ = true;
  queue_.pop_front();
  unread_events_ = 0;
  unread_bytes_ = 0;
}

void WatchQueue::Stop() {
  stopped_ = true;
  queue_.clear();
  early_.clear();
  bytes_ = 0;
}

void WatchQueue::End(absl::Status status) {
  status_ = std::move(status);
  Stop();
}

std::string WatchQueue::SkipHint() const {
  return took_any_ ? absl::StrCat(" and skip events up to index ", last_index_) : "";
}

namespace {

class EventStream final : public grpc::ServerWriteReactor<v1::Event>, public EventSink {
 public:
  EventStream(Coordinator* coordinator, const v1::WatchEventsRequest& request,
              const serve::StreamLimits& limits)
      : coordinator_(coordinator),
        counters_(limits.counters),
        queue_(request.job_id(),
               absl::flat_hash_set<std::string>(request.kinds().begin(), request.kinds().end()),
               limits.watch_queue_bytes) {
    // Live events may reach OnEvents before this returns: the queue holds them until Start.
    // The backlog is not copied here: Pump reads it from the log a page at a time.
    const uint64_t first_live = coordinator_->AddEventSink(this, /*backlog=*/nullptr);
    {
      absl::MutexLock lock(&mu_);
      queue_.Start(first_live, request.replay());
    }
    Pump();
  }

  // Never reads the log: the coordinator calls this under its sinks lock, which it takes after
  // the log's lock (AddEventSink). Events the queue leaves in the log are read by Pump.
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
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
    }
    Pump();
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

  // Starts what is due, and reads pages of the log while the queue asks for them (outside mu_),
  // until it asks for none. While a page is read the stream is not finished (NextLocked), so this
  // stream outlives the read; only one page is read at a time (WatchQueue::NextPage).
  void Pump() ABSL_LOCKS_EXCLUDED(mu_) {
    for (;;) {
      Next next;
      bool page = false;
      uint64_t from = 0;
      size_t limit = 0;
      {
        absl::MutexLock lock(&mu_);
        next = NextLocked();
        if (!next.finish.has_value()) page = queue_.NextPage(&from, &limit);
      }
      Do(next);
      if (!page) return;
      uint64_t page_next = 0;
      uint64_t end = 0;
      const std::vector<core::Event> events =
          coordinator_->EventsSince(from, &page_next, limit, &end);
      absl::MutexLock lock(&mu_);
      queue_.AddPage(events, page_next, end);
    }
  }

  Next NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Next next;
    if (finished_) return next;
    const bool ended_by_queue = !queue_.status().ok();
    if (ended_by_queue && !finishing_) {
      if (counters_ != nullptr && queue_.status().code() == absl::StatusCode::kResourceExhausted) {
        counters_->overflows.fetch_add(1);
      }
      FinishLocked(wire::ToGrpcStatus(queue_.status()));
    }
    if (finishing_) {
      // Not while a page is being read: the thread reading it comes back to this stream. A
      // watcher the queue ended is finished at once, even with a write in flight: the write may
      // never complete while the watcher does not read.
      if (!queue_.paging() && (ended_by_queue || !writing_)) {
        finished_ = true;
        next.finish = finish_status_;
      }
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

  // Constant after construction.
  Coordinator* const coordinator_;
  serve::StreamCounters* const counters_;

  // State below is protected by mu_.
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
                                                    const serve::StreamLimits& limits) {
  return new EventStream(coordinator, request, limits);
}

}  // namespace psync::server

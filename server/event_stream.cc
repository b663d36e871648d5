#include "server/event_stream.h"

#include <deque>
#include <optional>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "server/convert.h"

namespace psync::server {
namespace {

constexpr size_t kMaxQueued = 65536;

class EventStream final : public grpc::ServerWriteReactor<v1::Event>, public EventSink {
 public:
  EventStream(Coordinator* coordinator, const v1::WatchEventsRequest& request)
      : coordinator_(coordinator),
        job_id_(request.job_id()),
        kinds_(request.kinds().begin(), request.kinds().end()) {
    std::vector<core::Event> backlog;
    const uint64_t first_live =
        coordinator_->AddEventSink(this, request.replay() ? &backlog : nullptr);
    Next next;
    {
      absl::MutexLock lock(&mu_);
      first_live_ = first_live;
      for (const core::Event& e : backlog) QueueLocked(e);
      next = NextLocked();
    }
    Do(next);
  }

  void OnEvents(const std::vector<core::Event>& events) override ABSL_LOCKS_EXCLUDED(mu_) {
    Next next;
    {
      absl::MutexLock lock(&mu_);
      for (const core::Event& e : events) {
        if (e.index >= first_live_) QueueLocked(e);
      }
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
  bool Matches(const core::Event& e) const {
    if (!job_id_.empty() && e.job_id != job_id_) return false;
    return kinds_.empty() || kinds_.contains(core::EventKindName(e.kind));
  }

  void QueueLocked(const core::Event& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_ || !Matches(e)) return;
    if (queue_.size() >= kMaxQueued) {
      queue_.clear();
      FinishLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                "watcher fell more than 65536 events behind"));
      return;
    }
    queue_.push_back(e);
  }

  // What to start once mu_ is released: Finish may lead gRPC to run OnDone (which deletes this
  // stream) on another thread at once, so no gRPC call is made while holding a member mutex.
  struct Next {
    bool write = false;
    std::optional<grpc::Status> finish;
  };

  Next NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Next next;
    if (writing_ || finished_) return next;
    if (queue_.empty()) {
      if (finishing_) {
        finished_ = true;
        next.finish = finish_status_;
      }
      return next;
    }
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
    queue_.clear();
  }

  Coordinator* const coordinator_;
  const std::string job_id_;
  const absl::flat_hash_set<std::string> kinds_;

  absl::Mutex mu_;
  uint64_t first_live_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<core::Event> queue_ ABSL_GUARDED_BY(mu_);
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
                                                    const v1::WatchEventsRequest& request) {
  return new EventStream(coordinator, request);
}

}  // namespace psync::server

#include "server/session_stream.h"

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/arena_message.h"
#include "server/convert.h"

namespace psync::server {
namespace {

using Reactor = grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown>;

// Queues messages for one stream and writes them one at a time. Outlives the reactor: once the
// stream is done, everything sent is dropped.
class Outbox final : public SessionSink {
 public:
  explicit Outbox(Reactor* reactor) : reactor_(reactor) {}

  void Send(const core::Notice& notice) override { Enqueue(NoticeToProto(notice)); }

  void Enqueue(v1::SessionDown message) ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* reactor = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) return;
      queue_.push_back(std::move(message));
      if (writing_) return;
      writing_ = true;
      current_ = std::move(queue_.front());
      queue_.pop_front();
      reactor = reactor_;
    }
    reactor->StartWrite(&current_);
  }

  void Close(const absl::Status& status) override ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* reactor = nullptr;
    grpc::Status finish;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr || closing_) return;
      closing_ = true;
      finish_status_ = ToGrpcStatus(status);
      if (writing_ || !queue_.empty()) return;  // finished when the queue drains
      finished_ = true;
      reactor = reactor_;
      finish = finish_status_;
    }
    reactor->Finish(finish);
  }

  // Called from the reactor's OnWriteDone.
  void WriteDone(bool ok) ABSL_LOCKS_EXCLUDED(mu_) {
    Reactor* reactor = nullptr;
    bool finish = false;
    grpc::Status finish_status;
    {
      absl::MutexLock lock(&mu_);
      if (reactor_ == nullptr) return;
      reactor = reactor_;
      if (!ok) {
        // The peer is gone: drop what is queued and end the call.
        queue_.clear();
        if (!closing_) {
          closing_ = true;
          finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "write failed: peer gone");
        }
      }
      if (ok && !queue_.empty()) {
        current_ = std::move(queue_.front());
        queue_.pop_front();
      } else {
        writing_ = false;
        if (closing_ && !finished_) finish = finished_ = true;
        if (!finish) return;
        finish_status = finish_status_;
      }
    }
    if (finish) {
      reactor->Finish(finish_status);
    } else {
      reactor->StartWrite(&current_);
    }
  }

  // Called from the reactor's OnDone: nothing is written after this.
  void Detach() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    reactor_ = nullptr;
    queue_.clear();
  }

 private:
  absl::Mutex mu_;
  Reactor* reactor_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::SessionDown> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status finish_status_ ABSL_GUARDED_BY(mu_);
  // The message being written; touched only by the single writer (writing_ == true).
  v1::SessionDown current_;
};

class SessionStream final : public Reactor {
 public:
  explicit SessionStream(Coordinator* coordinator)
      : coordinator_(coordinator), outbox_(std::make_shared<Outbox>(this)) {
    StartRead(request_.get());
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing, or the call ended
      DetachFromCoordinator();
      outbox_->Close(absl::OkStatus());
      return;
    }
    if (!IsAttached()) {
      HandleAttach();
      return;
    }
    absl::Status status = Dispatch(*request_);
    v1::SessionDown ack;
    ack.mutable_ack()->set_request_id(request_->request_id());
    ack.mutable_ack()->set_code(static_cast<int>(status.code()));
    ack.mutable_ack()->set_message(std::string(status.message()));
    outbox_->Enqueue(std::move(ack));
    StartRead(request_.Renew());
  }

  void OnWriteDone(bool ok) override { outbox_->WriteDone(ok); }

  void OnCancel() override {
    DetachFromCoordinator();
    outbox_->Close(absl::CancelledError("session cancelled"));
  }

  void OnDone() override {
    DetachFromCoordinator();
    outbox_->Detach();
    delete this;
  }

 private:
  void HandleAttach() {
    if (request_->kind_case() != v1::SessionUp::kAttach) {
      outbox_->Close(absl::InvalidArgumentError(
          "attach: the first message of a Session must be attach"));
      return;
    }
    const v1::Attach& a = request_->attach();
    absl::StatusOr<std::vector<core::Notice>> pending;
    if (a.job_id().empty()) {
      pending = absl::InvalidArgumentError("attach.job_id must not be empty");
    } else if (a.session_id().empty()) {
      pending = absl::InvalidArgumentError("attach.session_id must not be empty");
    } else {
      pending = coordinator_->Attach(a.job_id(), a.rank(), a.generation(), a.session_id(), outbox_);
    }
    if (!pending.ok()) {
      outbox_->Close(absl::Status(pending.status().code(),
                                  absl::StrCat("attach: ", pending.status().message())));
      return;
    }
    {
      absl::MutexLock lock(&attach_mu_);
      job_id_ = a.job_id();
      rank_ = a.rank();
      attached_ = true;
    }
    v1::SessionDown ack;
    ack.mutable_ack()->set_request_id(request_->request_id());
    outbox_->Enqueue(std::move(ack));
    for (const core::Notice& n : *pending) outbox_->Send(n);
    StartRead(request_.Renew());
  }

  bool IsAttached() ABSL_LOCKS_EXCLUDED(attach_mu_) {
    absl::MutexLock lock(&attach_mu_);
    return attached_;
  }

  absl::Status Dispatch(const v1::SessionUp& up) ABSL_LOCKS_EXCLUDED(attach_mu_) {
    std::string job_id;
    core::RankId rank = 0;
    {
      absl::MutexLock lock(&attach_mu_);
      job_id = job_id_;
      rank = rank_;
    }
    switch (up.kind_case()) {
      case v1::SessionUp::kStaged:
        return coordinator_->Stage(job_id, rank, up.staged().generation(),
                                   StagedFromProto(up.staged()));
      case v1::SessionUp::kSkip:
        return coordinator_->Skip(job_id, rank, up.skip().generation(), up.skip().step(),
                                  up.skip().reason());
      case v1::SessionUp::kSyncDone:
        return coordinator_->SyncDone(job_id, rank, up.sync_done().generation(),
                                      SyncDoneFromProto(up.sync_done()));
      case v1::SessionUp::kAttach:
        return absl::InvalidArgumentError("attach: this session is already attached");
      case v1::SessionUp::KIND_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError("kind: one of staged, skip, sync_done must be set");
  }

  void DetachFromCoordinator() ABSL_LOCKS_EXCLUDED(attach_mu_) {
    std::string job_id;
    core::RankId rank = 0;
    {
      absl::MutexLock lock(&attach_mu_);
      if (!attached_ || detached_) return;
      detached_ = true;
      job_id = job_id_;
      rank = rank_;
    }
    coordinator_->Detach(job_id, rank, outbox_.get());
  }

  Coordinator* const coordinator_;
  const std::shared_ptr<Outbox> outbox_;
  ArenaMessage<v1::SessionUp> request_;  // touched by the read reactions only, one at a time
  // Set once by the attach (a read reaction); read by OnCancel/OnDone, which may run concurrently.
  absl::Mutex attach_mu_;
  bool attached_ ABSL_GUARDED_BY(attach_mu_) = false;
  bool detached_ ABSL_GUARDED_BY(attach_mu_) = false;
  std::string job_id_ ABSL_GUARDED_BY(attach_mu_);
  core::RankId rank_ ABSL_GUARDED_BY(attach_mu_) = 0;
};

}  // namespace

grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown>* NewSessionStream(Coordinator* coordinator) {
  return new SessionStream(coordinator);
}

}  // namespace psync::server

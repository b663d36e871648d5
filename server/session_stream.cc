#include "server/session_stream.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/arena_message.h"
#include "server/convert.h"
#include "server/session_writer.h"

namespace psync::server {
namespace {

using Reactor = grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown>;

// The coordinator's sink for one rank's notices: converts them and queues them on the stream's
// writer. Outlives the reactor: once the stream is done, everything sent is dropped.
class Outbox final : public SessionSink {
 public:
  explicit Outbox(Reactor* reactor) : writer_(reactor) {}

  void Send(const core::Notice& notice) override { writer_.Enqueue(NoticeToProto(notice)); }
  void Close(const absl::Status& status) override { writer_.Close(ToGrpcStatus(status)); }

  SessionWriter& writer() { return writer_; }

 private:
  SessionWriter writer_;
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
    outbox_->writer().Enqueue(std::move(ack));
    StartRead(request_.Renew());
  }

  void OnWriteDone(bool ok) override { outbox_->writer().WriteDone(ok); }

  void OnCancel() override {
    DetachFromCoordinator();
    outbox_->Close(absl::CancelledError("session cancelled"));
  }

  void OnDone() override {
    DetachFromCoordinator();
    outbox_->writer().Detach();
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
    outbox_->writer().Enqueue(std::move(ack));
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

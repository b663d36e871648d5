#include "server/rpc/session_stream.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "serve/session_writer.h"
#include "server/rpc/convert.h"
#include "server/rpc/session_attach.h"
#include "server/rpc/session_dispatch.h"
#include "wire/not_served.h"
#include "wire/session_protocol.h"
#include "wire/wire_status.h"

namespace psync::server {
namespace {

using Reactor = wire::SessionReactor;

// The coordinator's sink for one rank's notices: converts them and queues them on the stream's
// writer. It is its own (corkable) batcher, so that the coordinator queues a release's notices
// first and then starts the streams' writes on its delivery threads. Outlives the reactor: once
// the stream is done, everything sent is dropped. It also holds the Session's attachment (job,
// rank), so that either the reactor (the stream ended) or the writer (the overflow deadline ended
// it, while the reactor may wait for a peer that does not read) detaches it, once.
class SessionStreamSink final : public SessionSink,
                                public NoticeBatcher,
                                public std::enable_shared_from_this<SessionStreamSink> {
 public:
  // Bounded by `limits`; call ArmOverflowTimer once the sink is owned by a shared_ptr.
  SessionStreamSink(Reactor* reactor, Coordinator* coordinator, const serve::StreamLimits& limits)
      : coordinator_(coordinator),
        writer_(reactor, limits, /*clock=*/nullptr,
                [this](absl::Duration after) { overflow_timer_(after); }) {
    writer_.SetOnOverflow([this] { DetachFromCoordinator(); });
  }
  void ArmOverflowTimer() {
    overflow_timer_ = serve::AlarmTimer(
        weak_from_this(), [](SessionStreamSink& s) -> serve::SessionWriter& { return s.writer_; });
  }

  // The Session is attached as `rank` of `job_id` (once).
  void Attached(const std::string& job_id, core::RankId rank) ABSL_LOCKS_EXCLUDED(attach_mu_) {
    absl::MutexLock lock(&attach_mu_);
    job_id_ = job_id;
    rank_ = rank;
    attached_ = true;
  }
  bool IsAttached() ABSL_LOCKS_EXCLUDED(attach_mu_) {
    absl::MutexLock lock(&attach_mu_);
    return attached_;
  }
  // The job and rank of the attached Session (empty and 0 before the attach).
  std::pair<std::string, core::RankId> Attachment() ABSL_LOCKS_EXCLUDED(attach_mu_) {
    absl::MutexLock lock(&attach_mu_);
    return {job_id_, rank_};
  }
  // Detaches the Session from the coordinator, once (nothing before the attach).
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
    coordinator_->Detach(job_id, rank, this);
  }

  void Send(const core::Notice& notice) override { writer_.Enqueue(NoticeToProto(notice)); }
  NoticeBatcher* batcher() override { return this; }
  // The transport of one rank: `ranks` is this Session's.
  void SendToRanks(const std::string& /*job_id*/, absl::Span<const core::RankId> ranks,
                   const core::Notice& notice) override {
    for (size_t i = 0; i < ranks.size(); ++i) Send(notice);
  }
  void Cork() override { writer_.Cork(); }
  void Uncork() override { writer_.Uncork(); }
  // What was accepted lazily is said before the stream ends.
  void Close(const absl::Status& status) override {
    writer_.FlushLazyAcks();
    writer_.Close(wire::ToGrpcStatus(status));
  }

  // The message `request_id` (lazy_ack) was accepted: the next message written says so, or a
  // message of its own once `delay` has passed.
  void AckLater(uint64_t request_id, absl::Duration delay) {
    if (!writer_.AckLater(request_id)) return;  // a queued message carries it, or a flush is due
    serve::RunAfter(delay, weak_from_this(),
                    [](SessionStreamSink& s) { s.writer_.FlushLazyAcks(); });
  }

  serve::SessionWriter& writer() { return writer_; }

 private:
  Coordinator* const coordinator_;
  // Set once by ArmOverflowTimer, before the stream reads its first message.
  std::function<void(absl::Duration)> overflow_timer_;
  serve::SessionWriter writer_;
  // Set once by the attach (a read reaction); read by the reactor's OnCancel/OnDone and the
  // writer's overflow, which may run concurrently.
  absl::Mutex attach_mu_;
  bool attached_ ABSL_GUARDED_BY(attach_mu_) = false;
  bool detached_ ABSL_GUARDED_BY(attach_mu_) = false;
  std::string job_id_ ABSL_GUARDED_BY(attach_mu_);
  core::RankId rank_ ABSL_GUARDED_BY(attach_mu_) = 0;
};

class SessionStream final : public Reactor {
 public:
  SessionStream(Coordinator* coordinator, const serve::StreamLimits& limits)
      : coordinator_(coordinator),
        lazy_ack_delay_(limits.lazy_ack_delay),
        sink_(std::make_shared<SessionStreamSink>(this, coordinator, limits)) {
    sink_->ArmOverflowTimer();
    // Reading stops while the answers queued are over the bound (the client does not read them):
    // HTTP/2 flow control then holds the client back. It resumes once the queue drained.
    sink_->writer().SetResumeRead([this] { StartRead(frame_.Renew()); });
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client finished writing, or the call ended
      DetachFromCoordinator();
      sink_->Close(absl::OkStatus());
      return;
    }
    const bool attached = IsAttached();
    const wire::SessionDecision decision =
        frame_.parsed() ? wire::DecideSessionMessage(attached, frame_.message())
                        : wire::DecideUnparsable(attached);
    switch (decision.action) {
      case wire::SessionAction::kClose:
        coordinator_->RecordRejected(attached ? AttachedJob() : "", decision.status);
        sink_->Close(decision.status);
        return;
      case wire::SessionAction::kAttach:
        if (!HandleAttach()) return;
        break;
      case wire::SessionAction::kAck:
        coordinator_->RecordRejected(AttachedJob(), decision.status);
        sink_->writer().Enqueue(wire::AckFor(frame_.message().request_id(), decision.status));
        break;
      case wire::SessionAction::kStaged:
      case wire::SessionAction::kSkip:
      case wire::SessionAction::kSyncDone:
      case wire::SessionAction::kLeave: {
        // A lazy report's answer may ride on what its own decision sends this rank (the directive
        // of the chunk it completes): the writer holds that back until the answer is known.
        const bool lazy = frame_.message().lazy_ack() &&
                          decision.action != wire::SessionAction::kLeave &&
                          lazy_ack_delay_ > absl::ZeroDuration();
        if (lazy) sink_->writer().Cork();
        absl::Status status = Dispatch(decision.action, frame_.message());
        // A coordinator replica that does not serve the job (any more) ends the stream with its
        // redirect instead of acking: the client re-joins where the job is served and sends the
        // message again there.
        if (wire::RedirectOf(status).has_value()) {
          if (lazy) sink_->writer().Uncork();
          DetachFromCoordinator();
          sink_->Close(status);
          return;
        }
        if (lazy && status.ok()) {
          sink_->AckLater(frame_.message().request_id(), lazy_ack_delay_);
        } else {
          sink_->writer().Enqueue(wire::AckFor(frame_.message().request_id(), status));
        }
        if (lazy) sink_->writer().Uncork();
        break;
      }
    }
    if (sink_->writer().ReadAllowed()) StartRead(frame_.Renew());
  }

  void OnWriteDone(bool ok) override { sink_->writer().WriteDone(ok); }

  void OnCancel() override {
    DetachFromCoordinator();
    sink_->Close(absl::CancelledError("session cancelled"));
  }

  void OnDone() override {
    DetachFromCoordinator();
    sink_->writer().Detach();
    delete this;
  }

 private:
  // Attaches as the request's attach says; false when refused (the stream is closing).
  bool HandleAttach() {
    const v1::Attach& a = frame_.message().attach();
    absl::StatusOr<std::vector<core::Notice>> pending = AttachSession(*coordinator_, a, sink_);
    if (!pending.ok()) {
      sink_->Close(pending.status());
      return false;
    }
    sink_->Attached(a.job_id(), a.rank());
    sink_->writer().Enqueue(wire::AckFor(frame_.message().request_id(), absl::OkStatus()));
    for (const core::Notice& n : *pending) sink_->Send(n);
    return true;
  }

  bool IsAttached() { return sink_->IsAttached(); }

  // The job of the attached Session (empty before the attach).
  std::string AttachedJob() { return sink_->Attachment().first; }

  // Applies a staged, skip, sync_done or leave message as the attached rank.
  absl::Status Dispatch(wire::SessionAction action, const v1::SessionUp& up) {
    const auto [job_id, rank] = sink_->Attachment();
    return ApplySessionMessage(*coordinator_, job_id, rank, action, up);
  }

  void DetachFromCoordinator() { sink_->DetachFromCoordinator(); }

  Coordinator* const coordinator_;
  const absl::Duration lazy_ack_delay_;
  const std::shared_ptr<SessionStreamSink> sink_;
  wire::SessionUpFrame frame_;  // touched by the read reactions only, one at a time
};

}  // namespace

wire::SessionReactor* NewSessionStream(Coordinator* coordinator,
                                       const serve::StreamLimits& limits) {
  return new SessionStream(coordinator, limits);
}

}  // namespace psync::server

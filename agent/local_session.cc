#include "agent/local_session.h"

#include <atomic>
#include <memory>
#include <utility>

#include "agent/local_rank.h"
#include "wire/session_protocol.h"
#include "wire/wire_status.h"

namespace psync::agent {
namespace {

class LocalSession final : public wire::SessionReactor {
 public:
  LocalSession(Router* router, AgentCounters* counters, CallsInFlight::Token call)
      : call_(std::move(call)),
        router_(router),
        counters_(counters),
        link_(std::make_shared<LocalRank>(this, counters)) {
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the rank finished writing, or the call ended
      Detach();
      link_->Close(grpc::Status::OK);
      return;
    }
    const v1::SessionUp& up = frame_.message();
    const wire::SessionDecision decision = frame_.parsed()
                                               ? wire::DecideSessionMessage(attached_, up)
                                               : wire::DecideUnparsable(attached_);
    switch (decision.action) {
      case wire::SessionAction::kClose:
        counters_->local_rejected.fetch_add(1);
        if (attached_) Detach();
        link_->Close(wire::ToGrpcStatus(decision.status));
        return;
      case wire::SessionAction::kAttach:
        // Forwarded unchecked: the coordinator answers it (LocalRank::AttachResult).
        // Through the replica the job is routed to now (agent/router.h).
        attached_ = true;
        link_->SetAttach(up.attach(), up.request_id());
        upstream_.store(router_->UpstreamFor(up.attach().job_id()));
        upstream_.load()->Attach(link_);
        break;
      case wire::SessionAction::kAck:
        counters_->local_rejected.fetch_add(1);
        link_->Ack(up.request_id(), decision.status);
        break;
      case wire::SessionAction::kSkip:
      case wire::SessionAction::kStaged:
      case wire::SessionAction::kSyncDone:
      case wire::SessionAction::kLeave:
        upstream_.load()->Submit(link_, up);  // a copy: the frame's message lives on its arena
        break;
    }
    StartRead(frame_.Renew());
  }

  void OnWriteDone(bool ok) override { link_->WriteDone(ok); }

  void OnCancel() override {
    Detach();
    link_->Close(grpc::Status(grpc::StatusCode::CANCELLED, "session cancelled"));
  }

  void OnDone() override {
    Detach();
    link_->DetachReactor();
    delete this;
  }

 private:
  // Detaches the rank from the Upstream it attached through (idempotent; none before attach).
  void Detach() {
    if (Upstream* upstream = upstream_.load(); upstream != nullptr) upstream->Detach(link_);
  }

  // First, so released last: the Router and Upstreams stay until every Session is destroyed.
  const CallsInFlight::Token call_;
  Router* const router_;
  AgentCounters* const counters_;
  // Set by the attach (a read reaction); read by OnCancel too, which may run concurrently.
  std::atomic<Upstream*> upstream_{nullptr};
  const std::shared_ptr<LocalRank> link_;
  wire::SessionUpFrame frame_;  // touched by the read reactions only, one at a time
  bool attached_ = false;       // likewise
};

}  // namespace

wire::SessionReactor* NewLocalSession(Router* router, AgentCounters* counters,
                                      CallsInFlight::Token call) {
  return new LocalSession(router, counters, std::move(call));
}

}  // namespace psync::agent

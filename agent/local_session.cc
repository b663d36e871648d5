#include "agent/local_session.h"

#include <memory>
#include <utility>

#include "agent/local_rank.h"
#include "server/session_protocol.h"
#include "server/wire_status.h"

namespace psync::agent {
namespace {

class LocalSession final : public server::SessionReactor {
 public:
  LocalSession(Upstream* upstream, AgentCounters* counters)
      : upstream_(upstream),
        counters_(counters),
        link_(std::make_shared<LocalRank>(this, counters)) {
    StartRead(&frame_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the rank finished writing, or the call ended
      upstream_->Detach(link_);
      link_->Close(grpc::Status::OK);
      return;
    }
    const v1::SessionUp& up = frame_.message();
    const server::SessionDecision decision = frame_.parsed()
                                                 ? server::DecideSessionMessage(attached_, up)
                                                 : server::DecideUnparsable(attached_);
    switch (decision.action) {
      case server::SessionAction::kClose:
        counters_->local_rejected.fetch_add(1);
        if (attached_) upstream_->Detach(link_);
        link_->Close(server::ToGrpcStatus(decision.status));
        return;
      case server::SessionAction::kAttach:
        // Forwarded unchecked: the coordinator answers it (LocalRank::AttachResult).
        attached_ = true;
        link_->SetAttach(up.attach(), up.request_id());
        upstream_->Attach(link_);
        break;
      case server::SessionAction::kAck:
        counters_->local_rejected.fetch_add(1);
        link_->Ack(up.request_id(), decision.status);
        break;
      case server::SessionAction::kSkip:
      case server::SessionAction::kStaged:
      case server::SessionAction::kSyncDone:
      case server::SessionAction::kLeave:
        upstream_->Submit(link_, up);  // a copy: the frame's message lives on its arena
        break;
    }
    StartRead(frame_.Renew());
  }

  void OnWriteDone(bool ok) override { link_->WriteDone(ok); }

  void OnCancel() override {
    upstream_->Detach(link_);
    link_->Close(grpc::Status(grpc::StatusCode::CANCELLED, "session cancelled"));
  }

  void OnDone() override {
    upstream_->Detach(link_);
    link_->DetachReactor();
    delete this;
  }

 private:
  Upstream* const upstream_;
  AgentCounters* const counters_;
  const std::shared_ptr<LocalRank> link_;
  server::SessionUpFrame frame_;  // touched by the read reactions only, one at a time
  bool attached_ = false;         // likewise
};

}  // namespace

server::SessionReactor* NewLocalSession(Upstream* upstream, AgentCounters* counters) {
  return new LocalSession(upstream, counters);
}

}  // namespace psync::agent

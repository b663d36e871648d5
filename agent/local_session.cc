#include "agent/local_session.h"

#include <memory>
#include <utility>

#include "agent/local_rank.h"
#include "server/session_protocol.h"
#include "server/wire_status.h"

namespace psync::agent {
namespace {

class LocalSession final : public grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown> {
 public:
  LocalSession(Upstream* upstream, AgentCounters* counters)
      : upstream_(upstream), link_(std::make_shared<LocalRank>(this, counters)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the rank finished writing, or the call ended
      upstream_->Detach(link_);
      link_->Close(grpc::Status::OK);
      return;
    }
    const server::SessionDecision decision = server::DecideSessionMessage(attached_, request_);
    switch (decision.action) {
      case server::SessionAction::kClose:
        link_->Close(server::ToGrpcStatus(decision.status));
        return;
      case server::SessionAction::kAttach:
        // Forwarded unchecked: the coordinator answers it (LocalRank::AttachResult).
        attached_ = true;
        link_->SetAttach(request_.attach(), request_.request_id());
        upstream_->Attach(link_);
        StartRead(&request_);
        return;
      case server::SessionAction::kAck:
        link_->Ack(request_.request_id(), decision.status);
        break;
      case server::SessionAction::kSkip:
      case server::SessionAction::kStaged:
      case server::SessionAction::kSyncDone:
      case server::SessionAction::kLeave:
        upstream_->Submit(link_, std::move(request_));
        break;
    }
    request_.Clear();
    StartRead(&request_);
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
  const std::shared_ptr<LocalRank> link_;
  v1::SessionUp request_;  // touched by the read reactions only, one at a time
  bool attached_ = false;  // likewise
};

}  // namespace

grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown>* NewLocalSession(Upstream* upstream,
                                                                         AgentCounters* counters) {
  return new LocalSession(upstream, counters);
}

}  // namespace psync::agent

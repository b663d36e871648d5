#include "agent/local_session.h"

#include <memory>
#include <utility>

#include "agent/local_link.h"

namespace psync::agent {
namespace {

class LocalSession final : public grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown> {
 public:
  LocalSession(Upstream* upstream, AgentCounters* counters)
      : upstream_(upstream), link_(std::make_shared<LocalLink>(this, counters)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the rank finished writing, or the call ended
      upstream_->Detach(link_);
      link_->Close(grpc::Status::OK);
      return;
    }
    if (!attached_) {
      if (request_.kind_case() != v1::SessionUp::kAttach) {
        link_->Close(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                  "attach: the first message of a Session must be attach"));
        return;
      }
      attached_ = true;
      link_->SetAttach(request_.attach(), request_.request_id());
      upstream_->Attach(link_);
      StartRead(&request_);
      return;
    }
    switch (request_.kind_case()) {
      case v1::SessionUp::kSkip:
        link_->NoteSkipVote(request_.request_id(), request_.skip().step());
        upstream_->Submit(link_, std::move(request_));
        break;
      case v1::SessionUp::kStaged:
      case v1::SessionUp::kSyncDone:
        upstream_->Submit(link_, std::move(request_));
        break;
      case v1::SessionUp::kAttach:
        link_->Ack(request_.request_id(),
                   absl::InvalidArgumentError("attach: this session is already attached"));
        break;
      case v1::SessionUp::KIND_NOT_SET:
        link_->Ack(request_.request_id(),
                   absl::InvalidArgumentError("kind: one of staged, skip, sync_done must be set"));
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
  const std::shared_ptr<LocalLink> link_;
  v1::SessionUp request_;  // touched by the read reactions only, one at a time
  bool attached_ = false;  // likewise
};

}  // namespace

grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown>* NewLocalSession(Upstream* upstream,
                                                                          AgentCounters* counters) {
  return new LocalSession(upstream, counters);
}

}  // namespace psync::agent

#include "agent/relay_session.h"

#include <memory>
#include <utility>

#include "agent/relayed_agent.h"

namespace psync::agent {
namespace {

class RelaySession final : public grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown> {
 public:
  RelaySession(RelayHub* hub, CallsInFlight::Token call)
      : call_(std::move(call)),
        hub_(hub),
        agent_(std::make_shared<RelayedAgent>(this, hub->counters().down_wait_agents,
                                              hub->counters().down_write_agents)) {
    hub_->Connect(agent_);
    StartRead(&up_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent finished writing, or the call ended
      hub_->Disconnect(agent_.get());
      agent_->writer().Close(grpc::Status::OK);
      return;
    }
    hub_->Receive(agent_, &up_);
    StartRead(&up_);
  }

  void OnWriteDone(bool ok) override { agent_->writer().WriteDone(ok); }

  void OnCancel() override {
    hub_->Disconnect(agent_.get());
    agent_->writer().Close(grpc::Status(grpc::StatusCode::CANCELLED, "agent session cancelled"));
  }

  void OnDone() override {
    hub_->Disconnect(agent_.get());
    agent_->writer().Detach();
    delete this;
  }

 private:
  // First, so released last: the hub stays until every relayed stream is destroyed.
  const CallsInFlight::Token call_;
  RelayHub* const hub_;
  const std::shared_ptr<RelayedAgent> agent_;
  v1::AgentUp up_;  // touched by the read reactions only, one at a time
};

}  // namespace

grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* NewRelaySession(RelayHub* hub,
                                                                     CallsInFlight::Token call) {
  return new RelaySession(hub, std::move(call));
}

}  // namespace psync::agent

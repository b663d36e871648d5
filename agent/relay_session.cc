#include "agent/relay_session.h"

#include <memory>
#include <utility>

#include "agent/relayed_agent.h"
#include "agent/relayed_routes.h"

namespace psync::agent {
namespace {

class RelaySession final : public grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown> {
 public:
  RelaySession(Router* router, CallsInFlight::Token call)
      : call_(std::move(call)),
        agent_(std::make_shared<RelayedAgent>(this, router->counters()->down_wait_agents,
                                              router->counters()->down_write_agents)),
        routes_(router, agent_) {
    StartRead(&up_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent finished writing, or the call ended
      routes_.Disconnect();
      agent_->writer().Close(grpc::Status::OK);
      return;
    }
    routes_.Receive(&up_);
    StartRead(&up_);
  }

  void OnWriteDone(bool ok) override { agent_->writer().WriteDone(ok); }

  void OnCancel() override {
    routes_.Disconnect();
    agent_->writer().Close(grpc::Status(grpc::StatusCode::CANCELLED, "agent session cancelled"));
  }

  void OnDone() override {
    routes_.Disconnect();
    agent_->writer().Detach();
    delete this;
  }

 private:
  // First, so released last: the router and its hubs stay until every relayed stream is destroyed.
  const CallsInFlight::Token call_;
  const std::shared_ptr<RelayedAgent> agent_;
  RelayedRoutes routes_;
  v1::AgentUp up_;  // touched by the read reactions only, one at a time
};

}  // namespace

grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* NewRelaySession(Router* router,
                                                                     CallsInFlight::Token call) {
  return new RelaySession(router, std::move(call));
}

}  // namespace psync::agent

#include "agent/agent_service.h"

#include <chrono>
#include <functional>
#include <utility>

#include "agent/local_session.h"
#include "server/session_up_frame.h"

namespace psync::agent {
namespace {

// Forwards one unary call to the coordinator and answers with its result. The client call gets
// the server call's deadline; cancelling the server call cancels it. Deletes itself in OnDone.
class Forward final : public grpc::ServerUnaryReactor {
 public:
  // `start` starts the client call on the given context with the given completion callback.
  using Start = std::function<void(grpc::ClientContext*, std::function<void(grpc::Status)>)>;

  Forward(grpc::CallbackServerContext* server_context, const Start& start) {
    if (server_context->deadline() != std::chrono::system_clock::time_point::max()) {
      client_context_.set_deadline(server_context->deadline());
    }
    start(&client_context_, [this](grpc::Status status) { Finish(status); });
  }

  void OnCancel() override { client_context_.TryCancel(); }
  void OnDone() override { delete this; }

 private:
  grpc::ClientContext client_context_;
};

}  // namespace

grpc::ServerUnaryReactor* AgentService::Join(grpc::CallbackServerContext* context,
                                             const v1::JoinRequest* request,
                                             v1::JoinResponse* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->Join(c, request, response,
                                [this, request, done = std::move(done)](grpc::Status status) {
                                  // The rank's declared chunks: when its node's check-ins of a
                                  // chunk are complete (the upstream's completion flush).
                                  if (status.ok()) upstream_->Declare(*request);
                                  done(std::move(status));
                                });
  });
}

AgentService::AgentService(Upstream* upstream, v1::Coordinator::Stub* coordinator,
                           AgentCounters* counters)
    : upstream_(upstream), coordinator_(coordinator), counters_(counters) {
  MarkMethodCallback(server::SessionMethodIndex(),
                     server::NewSessionHandler([this](grpc::CallbackServerContext*) {
                       return NewLocalSession(upstream_, counters_);
                     }));
}

grpc::ServerUnaryReactor* AgentService::GetJobStatus(grpc::CallbackServerContext* context,
                                                     const v1::GetJobStatusRequest* request,
                                                     v1::JobStatus* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->GetJobStatus(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* AgentService::ListJobs(grpc::CallbackServerContext* context,
                                                 const v1::ListJobsRequest* request,
                                                 v1::ListJobsResponse* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->ListJobs(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* AgentService::EndJob(grpc::CallbackServerContext* context,
                                               const v1::EndJobRequest* request,
                                               v1::EndJobResponse* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->EndJob(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* AgentService::GetChunkStatus(grpc::CallbackServerContext* context,
                                                       const v1::GetChunkStatusRequest* request,
                                                       v1::ChunkStatus* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->GetChunkStatus(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* AgentService::GetAudit(grpc::CallbackServerContext* context,
                                                 const v1::GetAuditRequest* request,
                                                 v1::GetAuditResponse* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->GetAudit(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* AgentService::GetTrace(grpc::CallbackServerContext* context,
                                                 const v1::GetTraceRequest* request,
                                                 v1::GetTraceResponse* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->GetTrace(c, request, response, std::move(done));
  });
}

grpc::ServerWriteReactor<v1::Event>* AgentService::WatchEvents(
    grpc::CallbackServerContext* /*context*/, const v1::WatchEventsRequest* /*request*/) {
  class Refuse final : public grpc::ServerWriteReactor<v1::Event> {
   public:
    Refuse() {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "WatchEvents is served by the coordinator, not by psync-agent"));
    }
    void OnDone() override { delete this; }
  };
  return new Refuse();
}

grpc::ServerUnaryReactor* AgentService::KvSet(grpc::CallbackServerContext* context,
                                              const v1::KvSetRequest* request,
                                              v1::KvSetResponse* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->KvSet(c, request, response, std::move(done));
  });
}

grpc::ServerUnaryReactor* AgentService::KvGet(grpc::CallbackServerContext* context,
                                              const v1::KvGetRequest* request,
                                              v1::KvGetResponse* response) {
  return new Forward(context, [this, request, response](grpc::ClientContext* c, auto done) {
    coordinator_->async()->KvGet(c, request, response, std::move(done));
  });
}

grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* AgentService::AgentSession(
    grpc::CallbackServerContext* /*context*/) {
  class Refuse final : public grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown> {
   public:
    Refuse() {
      Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "AgentSession is served by the coordinator; agents do not chain"));
    }
    void OnDone() override { delete this; }
  };
  return new Refuse();
}

}  // namespace psync::agent

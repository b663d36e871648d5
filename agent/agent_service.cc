#include "agent/agent_service.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "agent/local_session.h"
#include "agent/relay_session.h"
#include "wire/session_up_frame.h"

namespace psync::agent {
namespace {

// Forwards one unary call to the replica its job is routed to and answers with the result,
// following redirects (AgentService's header). Each attempt gets the server call's deadline;
// cancelling the server call cancels the attempt in flight. Deletes itself in OnDone.
template <typename Request, typename Response>
class Forward final : public grpc::ServerUnaryReactor {
 public:
  // Starts the call on `stub` with `context`, answering into `response`, then runs `done`.
  using Call = std::function<void(v1::Coordinator::Stub* stub, grpc::ClientContext* context,
                                  const Request* request, Response* response,
                                  std::function<void(grpc::Status)> done)>;
  // Runs when the call succeeded at `target`.
  using OnOk = std::function<void(const std::string& target)>;

  Forward(CallsInFlight::Token token, grpc::CallbackServerContext* server_context, Router* router,
          std::string job_id, const Request* request, Response* response, Call call,
          OnOk on_ok = nullptr)
      : token_(std::move(token)),
        deadline_(server_context->deadline()),
        router_(router),
        job_id_(std::move(job_id)),
        request_(request),
        response_(response),
        call_(std::move(call)),
        on_ok_(std::move(on_ok)) {
    Attempt();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (!contexts_.empty()) contexts_.back()->TryCancel();
  }
  void OnDone() override {
    // gRPC runs OnDone after OnCancel has returned, through atomics in its own (uninstrumented)
    // code that ThreadSanitizer cannot see; taking mu_, which OnCancel holds while it cancels the
    // attempt, makes that order visible before the contexts are deleted (CI saw it reported).
    { absl::MutexLock lock(&mu_); }
    delete this;
  }

 private:
  void Attempt() {
    std::string target;
    v1::Coordinator::Stub* stub = router_->Stub(job_id_, &target);
    grpc::ClientContext* context = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (!cancelled_) {
        ++attempts_;
        // Kept until OnDone: a finished attempt's context outlives its callback.
        contexts_.push_back(std::make_unique<grpc::ClientContext>());
        context = contexts_.back().get();
        if (deadline_ != std::chrono::system_clock::time_point::max()) {
          context->set_deadline(deadline_);
        }
      }
    }
    if (context == nullptr) {  // cancelled: finished outside the lock
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "call cancelled"));
      return;
    }
    call_(stub, context, request_, response_,
          [this, target](grpc::Status status) { Done(target, std::move(status)); });
  }

  void Done(const std::string& target, grpc::Status status) {
    if (status.ok()) {
      if (on_ok_) on_ok_(target);
      Finish(status);
      return;
    }
    bool retry = router_->FollowFailure(job_id_, target, status);
    {
      absl::MutexLock lock(&mu_);
      retry = retry && attempts_ < AgentService::kMaxForwardHops && !cancelled_;
    }
    if (retry) {
      response_->Clear();
      Attempt();
      return;
    }
    // Never an OwnerRedirect: the rank comes back through the agent.
    Finish(grpc::Status(status.error_code(), status.error_message()));
  }

  // First, so released last (CallsInFlight).
  const CallsInFlight::Token token_;
  // Constant after construction.
  const std::chrono::system_clock::time_point deadline_;
  Router* const router_;
  const std::string job_id_;
  const Request* const request_;
  Response* const response_;
  const Call call_;
  const OnOk on_ok_;

  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  int attempts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_ ABSL_GUARDED_BY(mu_);
};

// A Forward of `call` for `job_id`.
template <typename Request, typename Response>
grpc::ServerUnaryReactor* Forwarded(CallsInFlight::Token token,
                                    grpc::CallbackServerContext* context, Router* router,
                                    std::string job_id, const Request* request, Response* response,
                                    typename Forward<Request, Response>::Call call,
                                    typename Forward<Request, Response>::OnOk on_ok = nullptr) {
  return new Forward<Request, Response>(std::move(token), context, router, std::move(job_id),
                                        request, response, std::move(call), std::move(on_ok));
}

}  // namespace

AgentService::AgentService(Router* router, AgentCounters* counters)
    : router_(router), counters_(counters) {
  MarkMethodCallback(wire::SessionMethodIndex(),
                     wire::NewSessionHandler([this](grpc::CallbackServerContext*) {
                       return NewLocalSession(router_, counters_, calls_.Enter());
                     }));
}

grpc::ServerUnaryReactor* AgentService::Join(grpc::CallbackServerContext* context,
                                             const v1::JoinRequest* request,
                                             v1::JoinResponse* response) {
  // The rank's declared chunks: when its node's check-ins of a chunk are complete (the completion
  // flush of the Upstream that carries the job at the replica that answered).
  return Forwarded(
      calls_.Enter(), context, router_, request->job_id(), request, response,
      [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req, auto* resp,
         std::function<void(grpc::Status)> done) {
        stub->async()->Join(c, req, resp, std::move(done));
      },
      [this, request](const std::string& target) {
        router_->UpstreamAt(target)->Declare(*request);
      });
}

grpc::ServerUnaryReactor* AgentService::GetJobStatus(grpc::CallbackServerContext* context,
                                                     const v1::GetJobStatusRequest* request,
                                                     v1::JobStatus* response) {
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->GetJobStatus(c, req, resp, std::move(done));
                   });
}

grpc::ServerUnaryReactor* AgentService::GetJobOverview(grpc::CallbackServerContext* context,
                                                       const v1::GetJobOverviewRequest* request,
                                                       v1::JobOverview* response) {
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->GetJobOverview(c, req, resp, std::move(done));
                   });
}

grpc::ServerUnaryReactor* AgentService::ListJobs(grpc::CallbackServerContext* context,
                                                 const v1::ListJobsRequest* request,
                                                 v1::ListJobsResponse* response) {
  return Forwarded(calls_.Enter(), context, router_, "", request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->ListJobs(c, req, resp, std::move(done));
                   });
}

grpc::ServerUnaryReactor* AgentService::EndJob(grpc::CallbackServerContext* context,
                                               const v1::EndJobRequest* request,
                                               v1::EndJobResponse* response) {
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->EndJob(c, req, resp, std::move(done));
                   });
}

grpc::ServerUnaryReactor* AgentService::GetChunkStatus(grpc::CallbackServerContext* context,
                                                       const v1::GetChunkStatusRequest* request,
                                                       v1::ChunkStatus* response) {
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->GetChunkStatus(c, req, resp, std::move(done));
                   });
}

grpc::ServerUnaryReactor* AgentService::GetAudit(grpc::CallbackServerContext* context,
                                                 const v1::GetAuditRequest* request,
                                                 v1::GetAuditResponse* response) {
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->GetAudit(c, req, resp, std::move(done));
                   });
}

grpc::ServerUnaryReactor* AgentService::GetTrace(grpc::CallbackServerContext* context,
                                                 const v1::GetTraceRequest* request,
                                                 v1::GetTraceResponse* response) {
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->GetTrace(c, req, resp, std::move(done));
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
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->KvSet(c, req, resp, std::move(done));
                   });
}

grpc::ServerUnaryReactor* AgentService::KvGet(grpc::CallbackServerContext* context,
                                              const v1::KvGetRequest* request,
                                              v1::KvGetResponse* response) {
  return Forwarded(calls_.Enter(), context, router_, request->job_id(), request, response,
                   [](v1::Coordinator::Stub* stub, grpc::ClientContext* c, const auto* req,
                      auto* resp, std::function<void(grpc::Status)> done) {
                     stub->async()->KvGet(c, req, resp, std::move(done));
                   });
}

grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* AgentService::AgentSession(
    grpc::CallbackServerContext* /*context*/) {
  return NewRelaySession(router_, calls_.Enter());
}

}  // namespace psync::agent

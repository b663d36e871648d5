#include "server/rpc/service.h"

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/ha/replica_proto.h"
#include "server/owner/job_history.h"
#include "server/rpc/agent_stream.h"
#include "server/rpc/convert.h"
#include "server/rpc/event_stream.h"
#include "server/rpc/job_overview.h"
#include "server/rpc/session_stream.h"
#include "wire/session_up_frame.h"

namespace psync::server {

grpc::ServerUnaryReactor* CoordinatorService::Join(grpc::CallbackServerContext* context,
                                                   const v1::JoinRequest* request,
                                                   v1::JoinResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto join = [this, reactor, request, response] {
    absl::StatusOr<core::JoinResult> result = coordinator_->Join(RankPlanFromProto(*request));
    if (result.ok()) *response = JoinResponseToProto(*result);
    reactor->Finish(wire::ToGrpcStatus(result.status()));
  };
  // A replica's Join may claim the job in etcd, and wait for it: not on a callback thread.
  if (claims_ != nullptr) {
    claims_->Run(std::move(join));
  } else {
    join();
  }
  return reactor;
}

CoordinatorService::CoordinatorService(Coordinator* coordinator, RendezvousStore* rendezvous,
                                       serve::StreamLimits streams, const ha::Replica* replica)
    : coordinator_(coordinator),
      rendezvous_(rendezvous),
      streams_(streams),
      replica_(replica),
      claims_(replica != nullptr ? std::make_unique<serve::BlockingPool>(kClaimThreads) : nullptr) {
  MarkMethodCallback(wire::SessionMethodIndex(),
                     wire::NewSessionHandler([this](grpc::CallbackServerContext* /*context*/) {
                       return NewSessionStream(coordinator_, streams_);
                     }));
}

grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* CoordinatorService::AgentSession(
    grpc::CallbackServerContext* /*context*/) {
  return NewAgentStream(coordinator_, streams_);
}

grpc::ServerUnaryReactor* CoordinatorService::GetJobStatus(grpc::CallbackServerContext* context,
                                                           const v1::GetJobStatusRequest* request,
                                                           v1::JobStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->job_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id must not be empty"));
    return reactor;
  }
  const size_t list_limit = ListLimit(request->list_limit());
  absl::StatusOr<JobStatusView> view =
      coordinator_->GetJobStatus(request->job_id(), ViewDetail::kStatus, list_limit);
  if (view.ok()) JobStatusToProto(*view, response, list_limit);
  reactor->Finish(wire::ToGrpcStatus(view.status()));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetJobOverview(
    grpc::CallbackServerContext* context, const v1::GetJobOverviewRequest* request,
    v1::JobOverview* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->job_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id must not be empty"));
    return reactor;
  }
  absl::StatusOr<OverviewRequest> wanted = OverviewRequestFromProto(*request);
  if (!wanted.ok()) {
    reactor->Finish(wire::ToGrpcStatus(wanted.status()));
    return reactor;
  }
  absl::StatusOr<JobStatusView> view =
      coordinator_->GetJobStatus(request->job_id(), ViewDetail::kOverview);
  if (view.ok()) JobOverviewToProto(*view, *wanted, response);
  reactor->Finish(wire::ToGrpcStatus(view.status()));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::ListJobs(grpc::CallbackServerContext* context,
                                                       const v1::ListJobsRequest* request,
                                                       v1::ListJobsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  std::vector<std::string> states;
  for (int i = 0; i < request->states_size(); ++i) {
    std::optional<std::string> state = CanonicalJobState(request->states(i));
    if (!state.has_value()) {
      reactor->Finish(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("states[", i, "]: '", absl::string_view(request->states(i)).substr(0, 32),
                       "' is not a job state (", kJobStateNames, ", in any case)")));
      return reactor;
    }
    states.push_back(*std::move(state));
  }
  for (const JobStatusView& view : coordinator_->ListJobs(states, ViewDetail::kSummary)) {
    JobSummaryToProto(view, response->add_jobs());
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::EndJob(grpc::CallbackServerContext* context,
                                                     const v1::EndJobRequest* request,
                                                     v1::EndJobResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<EndJobResult> result =
      coordinator_->EndJob(request->job_id(), request->reason(), request->token());
  if (result.ok()) {
    JobStatusToProto(result->status, response->mutable_status());
    response->set_already_ended(result->already_ended);
  }
  reactor->Finish(wire::ToGrpcStatus(result.status()));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetChunkStatus(
    grpc::CallbackServerContext* context, const v1::GetChunkStatusRequest* request,
    v1::ChunkStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->job_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id must not be empty"));
    return reactor;
  }
  absl::Duration deadline;
  const size_t list_limit = ListLimit(request->list_limit());
  absl::StatusOr<core::ChunkSnapshot> chunk = coordinator_->GetChunkStatus(
      request->job_id(), request->step(), request->chunk(), &deadline, list_limit);
  if (chunk.ok()) ChunkStatusToProto(*chunk, deadline, response);
  reactor->Finish(wire::ToGrpcStatus(chunk.status()));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetAudit(grpc::CallbackServerContext* context,
                                                       const v1::GetAuditRequest* request,
                                                       v1::GetAuditResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->job_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id must not be empty"));
    return reactor;
  }
  std::vector<std::string> earlier_owners;
  absl::StatusOr<std::vector<observe::SyncAudit>> records =
      coordinator_->Audit(request->job_id(), &earlier_owners);
  // Only the audit totals are read: no chunk lists, layout or stragglers.
  absl::StatusOr<JobStatusView> view =
      coordinator_->GetJobStatus(request->job_id(), ViewDetail::kSummary);
  if (records.ok() && view.ok()) AuditToProto(*records, view->audit, earlier_owners, response);
  reactor->Finish(wire::ToGrpcStatus(records.status()));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::GetTrace(grpc::CallbackServerContext* context,
                                                       const v1::GetTraceRequest* request,
                                                       v1::GetTraceResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->job_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id must not be empty"));
    return reactor;
  }
  absl::StatusOr<std::string> json =
      coordinator_->Trace(request->job_id(), request->first_step(), request->last_step());
  if (json.ok()) response->set_trace_json(std::move(*json));
  reactor->Finish(wire::ToGrpcStatus(json.status()));
  return reactor;
}

grpc::ServerWriteReactor<v1::Event>* CoordinatorService::WatchEvents(
    grpc::CallbackServerContext* /*context*/, const v1::WatchEventsRequest* request) {
  return NewEventStream(coordinator_, *request, streams_);
}

grpc::ServerUnaryReactor* CoordinatorService::ListReplicas(
    grpc::CallbackServerContext* context, const v1::ListReplicasRequest* /*request*/,
    v1::ListReplicasResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  *response = ha::ReplicasToProto(replica_);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::KvSet(grpc::CallbackServerContext* context,
                                                    const v1::KvSetRequest* request,
                                                    v1::KvSetResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(wire::ToGrpcStatus(rendezvous_->Set(request->job_id(), request->generation(),
                                                      {request->rank(), request->session_id()},
                                                      request->key(), request->value())));
  return reactor;
}

namespace {

// Answers one KvGet, possibly later: parked in the store until the keys are set or the call is
// cancelled (its deadline passed or the client left). Deletes itself in OnDone.
class KvGetReactor final : public grpc::ServerUnaryReactor {
 public:
  KvGetReactor(RendezvousStore* store, const v1::KvGetRequest* request, v1::KvGetResponse* response)
      : store_(store), response_(response) {
    const std::vector<std::string> keys(request->keys().begin(), request->keys().end());
    waiter_ = store_->Get(
        request->job_id(), request->generation(), {request->rank(), request->session_id()}, keys,
        request->wait(),
        [this](absl::StatusOr<RendezvousStore::Values> values) { Complete(std::move(values)); });
    // A cancellation that arrived while Get ran saw no waiter id yet: cancel now.
    if (cancelled_.load()) CancelWaiter();
  }

  void OnCancel() override {
    cancelled_.store(true);
    CancelWaiter();
  }
  void OnDone() override { delete this; }

 private:
  void Complete(absl::StatusOr<RendezvousStore::Values> values) {
    if (values.ok()) {
      for (std::string& v : *values) response_->add_values(std::move(v));
    }
    Finish(wire::ToGrpcStatus(values.status()));
  }

  void CancelWaiter() {
    // Cancel is a no-op for an id that already completed (or 0).
    store_->Cancel(waiter_.load(), absl::CancelledError("KvGet cancelled or past its deadline"));
  }

  RendezvousStore* const store_;
  v1::KvGetResponse* const response_;
  std::atomic<uint64_t> waiter_{0};
  std::atomic<bool> cancelled_{false};
};

}  // namespace

grpc::ServerUnaryReactor* CoordinatorService::KvGet(grpc::CallbackServerContext* /*context*/,
                                                    const v1::KvGetRequest* request,
                                                    v1::KvGetResponse* response) {
  return new KvGetReactor(rendezvous_, request, response);
}

}  // namespace psync::server

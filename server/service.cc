#include "server/service.h"

#include "server/convert.h"
#include "server/session_stream.h"

namespace psync::server {

grpc::ServerUnaryReactor* CoordinatorService::Join(grpc::CallbackServerContext* context,
                                                   const v1::JoinRequest* request,
                                                   v1::JoinResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<core::JoinResult> result = coordinator_->Join(RankPlanFromProto(*request));
  if (result.ok()) {
    response->set_generation(result->generation);
    response->set_session_id(result->session_id);
    response->set_next_step(result->next_step);
  }
  reactor->Finish(ToGrpcStatus(result.status()));
  return reactor;
}

grpc::ServerBidiReactor<v1::SessionUp, v1::SessionDown>* CoordinatorService::Session(
    grpc::CallbackServerContext* /*context*/) {
  return NewSessionStream(coordinator_);
}

grpc::ServerUnaryReactor* CoordinatorService::GetJobStatus(grpc::CallbackServerContext* context,
                                                           const v1::GetJobStatusRequest* request,
                                                           v1::JobStatus* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (request->job_id().empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job_id must not be empty"));
    return reactor;
  }
  absl::StatusOr<JobStatusView> view = coordinator_->GetJobStatus(request->job_id());
  if (view.ok()) JobStatusToProto(*view, response);
  reactor->Finish(ToGrpcStatus(view.status()));
  return reactor;
}

grpc::ServerUnaryReactor* CoordinatorService::ListJobs(grpc::CallbackServerContext* context,
                                                       const v1::ListJobsRequest* /*request*/,
                                                       v1::ListJobsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  for (const JobStatusView& view : coordinator_->ListJobs()) {
    JobSummaryToProto(view, response->add_jobs());
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace psync::server

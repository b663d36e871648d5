// CoordinatorService: the psync.v1.Coordinator gRPC service. Thin: maps protos to Coordinator calls
// and statuses back; every decision lives in the Coordinator and its core. Never blocks in a
// reactor. Thread-safe; does not own the Coordinator.
#ifndef PSYNC_SERVER_RPC_SERVICE_H_
#define PSYNC_SERVER_RPC_SERVICE_H_

#include <memory>

#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "serve/blocking_pool.h"
#include "serve/stream_writer.h"
#include "server/ha/replica.h"
#include "server/kv/rendezvous_store.h"
#include "server/owner/coordinator.h"

namespace psync::server {

class CoordinatorService final : public v1::Coordinator::CallbackService {
 public:
  // Neither is owned; both must outlive the service. `streams` bounds every stream's outbound
  // queue (Session, AgentSession, WatchEvents). Session is served with SessionUpFrames
  // (session_up_frame.h), so that bytes that do not parse end the stream with INVALID_ARGUMENT.
  // `replica` (not owned; may be null) answers ListReplicas for a coordinator replica.
  CoordinatorService(Coordinator* coordinator, RendezvousStore* rendezvous,
                     serve::StreamLimits streams = {}, const ha::Replica* replica = nullptr);

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const v1::JoinRequest* request,
                                 v1::JoinResponse* response) override;
  grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* AgentSession(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetJobStatus(grpc::CallbackServerContext* context,
                                         const v1::GetJobStatusRequest* request,
                                         v1::JobStatus* response) override;
  grpc::ServerUnaryReactor* GetJobOverview(grpc::CallbackServerContext* context,
                                           const v1::GetJobOverviewRequest* request,
                                           v1::JobOverview* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const v1::ListJobsRequest* request,
                                     v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* EndJob(grpc::CallbackServerContext* context,
                                   const v1::EndJobRequest* request,
                                   v1::EndJobResponse* response) override;
  grpc::ServerUnaryReactor* GetChunkStatus(grpc::CallbackServerContext* context,
                                           const v1::GetChunkStatusRequest* request,
                                           v1::ChunkStatus* response) override;
  grpc::ServerUnaryReactor* GetAudit(grpc::CallbackServerContext* context,
                                     const v1::GetAuditRequest* request,
                                     v1::GetAuditResponse* response) override;
  grpc::ServerUnaryReactor* GetTrace(grpc::CallbackServerContext* context,
                                     const v1::GetTraceRequest* request,
                                     v1::GetTraceResponse* response) override;
  grpc::ServerWriteReactor<v1::Event>* WatchEvents(grpc::CallbackServerContext* context,
                                                   const v1::WatchEventsRequest* request) override;
  grpc::ServerUnaryReactor* KvSet(grpc::CallbackServerContext* context,
                                  const v1::KvSetRequest* request,
                                  v1::KvSetResponse* response) override;
  grpc::ServerUnaryReactor* KvGet(grpc::CallbackServerContext* context,
                                  const v1::KvGetRequest* request,
                                  v1::KvGetResponse* response) override;
  grpc::ServerUnaryReactor* ListReplicas(grpc::CallbackServerContext* context,
                                         const v1::ListReplicasRequest* request,
                                         v1::ListReplicasResponse* response) override;

 private:
  Coordinator* const coordinator_;
  RendezvousStore* const rendezvous_;
  const serve::StreamLimits streams_;
  const ha::Replica* const replica_;
  // With replicas: where Joins run, since claiming a job waits for etcd (null without).
  static constexpr int kClaimThreads = 4;
  const std::unique_ptr<serve::BlockingPool> claims_;
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_RPC_SERVICE_H_

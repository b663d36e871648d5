// AgentService: the psync.v1.Coordinator service as a node agent serves it to the node's ranks.
//
//  * Session: a LocalSession (agent/local_session.h) per rank, carried by the agent's one
//    AgentSession stream to the coordinator (agent/upstream.h).
//  * Join, GetJobStatus, ListJobs, GetChunkStatus, GetAudit, GetTrace, KvSet, KvGet: forwarded
//    as they are to the coordinator over the agent's channel (the call's deadline and
//    cancellation follow); the coordinator's answer or status comes back unchanged.
//  * WatchEvents and AgentSession: UNIMPLEMENTED (watch the coordinator directly; agents do not
//    chain).
//
// Never blocks in a reactor. Thread-safe; does not own the upstream, the counters or the stub.
#ifndef PSYNC_AGENT_AGENT_SERVICE_H_
#define PSYNC_AGENT_AGENT_SERVICE_H_

#include "agent/stats.h"
#include "agent/upstream.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::agent {

class AgentService final : public v1::Coordinator::CallbackService {
 public:
  // None is owned; all must outlive the service.
  // Session is served with SessionUpFrames (server/session_up_frame.h), as on the coordinator.
  AgentService(Upstream* upstream, v1::Coordinator::Stub* coordinator, AgentCounters* counters);

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const v1::JoinRequest* request,
                                 v1::JoinResponse* response) override;
  grpc::ServerUnaryReactor* GetJobStatus(grpc::CallbackServerContext* context,
                                         const v1::GetJobStatusRequest* request,
                                         v1::JobStatus* response) override;
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
  grpc::ServerBidiReactor<v1::AgentUp, v1::AgentDown>* AgentSession(
      grpc::CallbackServerContext* context) override;

 private:
  Upstream* const upstream_;
  v1::Coordinator::Stub* const coordinator_;
  AgentCounters* const counters_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_AGENT_SERVICE_H_

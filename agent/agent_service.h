// AgentService: the psync.v1.Coordinator service as a node agent serves it to the node's ranks.
//
//  * Session: a LocalSession (agent/local_session.h) per rank, carried by the AgentSession stream
//    to the replica its job is routed to (agent/router.h, agent/upstream.h).
//  * Join, GetJobStatus, GetJobOverview, ListJobs, EndJob, GetChunkStatus, GetAudit, GetTrace,
//  KvSet, KvGet:
//    forwarded to the replica the request's job is routed to (ListJobs: that of job id ""), with
//    the call's deadline and cancellation. A replica's UNAVAILABLE with an OwnerRedirect moves the
//    job to that owner and the call is sent there again, at most kMaxForwardHops times in all,
//    within the rank's deadline. Any other answer comes back as it is, except that the agent
//    never passes an OwnerRedirect on (the status keeps its code and message, without the
//    details): a rank always comes back through its agent. An unreachable replica or a redirect
//    to nobody moves the job to the next replica of the list, and the rank gets UNAVAILABLE (its
//    client retries).
//  * AgentSession: another node agent relayed through this one, each job to its replica
//    (agent/relayed_routes.h, agent/relay_hub.h).
//  * WatchEvents: UNIMPLEMENTED (watch the coordinator directly).
//
// Never blocks in a reactor. Thread-safe; does not own the router or the counters. Every Session
// and forwarded call holds a token of CallsInFlight until its reactor is destroyed: whoever
// destroys the router calls AwaitCallsDone() first, once the server is shut down.
#ifndef PSYNC_AGENT_AGENT_SERVICE_H_
#define PSYNC_AGENT_AGENT_SERVICE_H_

#include "agent/calls_in_flight.h"
#include "agent/router.h"
#include "agent/stats.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::agent {

class AgentService final : public v1::Coordinator::CallbackService {
 public:
  // Attempts of one forwarded call (the first and the redirects followed).
  static constexpr int kMaxForwardHops = 3;

  // Neither is owned; both must outlive the service. Session is served with SessionUpFrames
  // (wire/session_up_frame.h), as on the coordinator; AgentSession relays another node agent
  // (agent/relay_session.h).
  AgentService(Router* router, AgentCounters* counters);

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const v1::JoinRequest* request,
                                 v1::JoinResponse* response) override;
  grpc::ServerUnaryReactor* GetJobOverview(grpc::CallbackServerContext* context,
                                           const v1::GetJobOverviewRequest* request,
                                           v1::JobOverview* response) override;
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

  // Blocks until every Session, relayed AgentSession and forwarded call of this service is
  // destroyed.
  void AwaitCallsDone() { calls_.AwaitNone(); }

 private:
  Router* const router_;
  AgentCounters* const counters_;
  CallsInFlight calls_;
};

}  // namespace psync::agent

#endif  // PSYNC_AGENT_AGENT_SERVICE_H_

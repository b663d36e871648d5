// ScriptedServer: a gRPC server on 127.0.0.1 for a scripted psync.v1.Coordinator service (a test's
// own implementation that sends a client exactly the sequence under test), and the ClientOptions
// of a one-rank job that connects to it. For client tests that need a coordinator no real one
// would be (a deposed owner, a renumbered generation).
//
// Thread-safe as grpc::Server. Does not own the service; the service must outlive it.
#ifndef PSYNC_CLIENT_TESTING_SCRIPTED_COORDINATOR_H_
#define PSYNC_CLIENT_TESTING_SCRIPTED_COORDINATOR_H_

#include <memory>
#include <string>

#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::client::testing {

class ScriptedServer {
 public:
  // Serves `service` on a free port of 127.0.0.1; ok() says whether it started.
  explicit ScriptedServer(psync::v1::Coordinator::Service* service);
  ~ScriptedServer();

  bool ok() const { return server_ != nullptr; }
  // A one-rank, one-chunk job `job_id` at this server, with a 10 s call timeout.
  ClientOptions OneRankJob(const std::string& job_id) const;

 private:
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace psync::client::testing

#endif  // PSYNC_CLIENT_TESTING_SCRIPTED_COORDINATOR_H_

// ScriptedServer: a gRPC server on 127.0.0.1 for a scripted psync.v1.Coordinator service (a test's
// own implementation that sends a client exactly the sequence under test), and the ClientOptions
// of a one-rank job that connects to it. AcceptAttach and ReadUntilClosed are the two ends of a
// scripted Session. For client tests that need a coordinator no real one
// would be (a deposed owner, a renumbered generation).
//
// Thread-safe as grpc::Server. Does not own the service; the service must outlive it.
#ifndef PSYNC_CLIENT_TESTING_SCRIPTED_COORDINATOR_H_
#define PSYNC_CLIENT_TESTING_SCRIPTED_COORDINATOR_H_

#include <memory>
#include <optional>
#include <string>

#include "client/client.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::client::testing {

using SessionStream = grpc::ServerReaderWriter<psync::v1::SessionDown, psync::v1::SessionUp>;

// Reads the Session's first message and, when it is an attach, acknowledges it: the attach, or
// nullopt (not an attach, or the stream ended) when the Session should end.
std::optional<psync::v1::Attach> AcceptAttach(SessionStream* stream);
// Reads until the client ends the Session.
void ReadUntilClosed(SessionStream* stream);

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

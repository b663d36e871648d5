// ScriptedServer; contract: scripted_coordinator.h.
#include "client/testing/scripted_coordinator.h"

#include "absl/strings/str_cat.h"

namespace psync::client::testing {

std::optional<psync::v1::Attach> AcceptAttach(SessionStream* stream) {
  psync::v1::SessionUp up;
  if (!stream->Read(&up) || !up.has_attach()) return std::nullopt;
  psync::v1::SessionDown ack;
  ack.mutable_ack()->set_request_id(up.request_id());
  if (!stream->Write(ack)) return std::nullopt;
  return up.attach();
}

void ReadUntilClosed(SessionStream* stream) {
  psync::v1::SessionUp up;
  while (stream->Read(&up)) {
  }
}

ScriptedServer::ScriptedServer(psync::v1::Coordinator::Service* service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service);
  server_ = builder.BuildAndStart();
}

ScriptedServer::~ScriptedServer() {
  if (server_ != nullptr) server_->Shutdown();
}

ClientOptions ScriptedServer::OneRankJob(const std::string& job_id) const {
  ClientOptions options;
  options.target = absl::StrCat("127.0.0.1:", port_);
  options.plan.set_job_id(job_id);
  options.plan.set_world_size(1);
  options.plan.set_rank(0);
  options.plan.set_num_chunks(1);
  options.call_timeout = absl::Seconds(10);
  return options;
}

}  // namespace psync::client::testing

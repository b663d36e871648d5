// ScriptedServer; contract: scripted_coordinator.h.
#include "client/testing/scripted_coordinator.h"

#include "absl/strings/str_cat.h"

namespace psync::client::testing {

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

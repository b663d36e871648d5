#include "tests/ha/replica_processes.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "tests/chaos/spawn.h"
#include "tests/ha/etcd_process.h"

namespace psync::testing {

ReplicaProcesses::ReplicaProcesses(ReplicaOptions options) : options_(std::move(options)) {
  for (int i = 0; i < options_.replicas; ++i) {
    addresses_.push_back(absl::StrCat("127.0.0.1:", FreePort()));
    pids_.push_back(-1);
  }
}

ReplicaProcesses::~ReplicaProcesses() {
  for (int i = 0; i < options_.replicas; ++i) Kill(i);
}

bool ReplicaProcesses::Start(int i) {
  const std::string port_file = absl::StrCat(options_.dir, "/port.", starts_);
  pids_[i] =
      chaos::Spawn({options_.binary, "--listen=" + addresses_[i], "--advertise=" + addresses_[i],
                    "--etcd=" + options_.etcd,
                    absl::StrCat("--etcd_lease_ttl=", absl::FormatDuration(options_.lease_ttl)),
                    "--etcd_lease_margin=500ms", "--etcd_poll_interval=100ms",
                    "--http_listen=", "--port_file=" + port_file},
                   absl::StrCat(options_.dir, "/replica", i, ".", starts_, ".log"));
  ++starts_;
  return pids_[i] > 0 && chaos::WaitForPort(port_file) > 0;
}

void ReplicaProcesses::Kill(int i) {
  if (pids_[i] > 0) chaos::KillAndReap(pids_[i]);
  pids_[i] = -1;
}

std::string ReplicaProcesses::targets() const { return absl::StrJoin(addresses_, ","); }

int ReplicaProcesses::IndexOf(const std::string& address) const {
  auto it = std::find(addresses_.begin(), addresses_.end(), address);
  return it == addresses_.end() ? -1 : static_cast<int>(it - addresses_.begin());
}

std::string ReplicaProcesses::Owner(const std::string& job) const {
  for (int i = 0; i < options_.replicas; ++i) {
    if (pids_[i] <= 0) continue;
    std::string owner = OwnerOf(addresses_[i], job);
    if (!owner.empty()) return owner;
  }
  return "";
}

std::string ReplicaProcesses::Views() const {
  std::string out;
  for (int i = 0; i < options_.replicas; ++i) {
    if (pids_[i] <= 0) continue;
    auto stub = v1::Coordinator::NewStub(
        grpc::CreateChannel(addresses_[i], grpc::InsecureChannelCredentials()));
    v1::ListReplicasResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
    const grpc::Status s = stub->ListReplicas(&context, v1::ListReplicasRequest(), &response);
    absl::StrAppend(&out, "replica ", i, " (", addresses_[i], "): ",
                    s.ok() ? response.ShortDebugString()
                           : absl::StrCat("ListReplicas failed: ", s.error_message()),
                    "\n");
  }
  return out;
}

std::string OwnerOf(const std::string& target, const std::string& job) {
  auto stub =
      v1::Coordinator::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  v1::ListReplicasResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  if (!stub->ListReplicas(&context, v1::ListReplicasRequest(), &response).ok()) return "";
  for (const v1::JobOwner& o : response.owners()) {
    if (o.job_id() == job) return o.owner();
  }
  return "";
}

}  // namespace psync::testing

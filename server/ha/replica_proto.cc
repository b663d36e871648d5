#include "server/ha/replica_proto.h"

#include <string>

#include "absl/container/flat_hash_map.h"

namespace psync::server::ha {

psync::v1::ListReplicasResponse ReplicasToProto(const Replica* replica) {
  psync::v1::ListReplicasResponse response;
  if (replica == nullptr) return response;
  const ReplicaSnapshot s = replica->Describe();
  response.set_self(s.self);
  absl::flat_hash_map<std::string, uint32_t> owned;
  for (const JobOwner& o : s.owners) {
    ++owned[o.owner];
    psync::v1::JobOwner* p = response.add_owners();
    p->set_job_id(o.job);
    p->set_owner(o.owner);
    p->set_epoch(o.epoch);
  }
  for (const std::string& address : s.replicas) {
    psync::v1::Replica* r = response.add_replicas();
    r->set_address(address);
    r->set_jobs_owned(owned[address]);
  }
  response.set_takeovers(s.takeovers);
  response.set_jobs_lost(s.jobs_lost);
  return response;
}

}  // namespace psync::server::ha

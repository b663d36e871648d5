// ReplicasToProto: a replica's view of the replica set and the job owners (Replica::Describe) as
// the ListReplicasResponse that ListReplicas, psyncctl replicas and the dashboard's /api/replicas
// answer with. A null replica (a single coordinator, no --etcd) gives the empty response, whose
// empty `self` says so. Pure; thread-safe as Replica::Describe is.
#ifndef PSYNC_SERVER_HA_REPLICA_PROTO_H_
#define PSYNC_SERVER_HA_REPLICA_PROTO_H_

#include "proto/psync/v1/coordinator.pb.h"
#include "server/ha/replica.h"

namespace psync::server::ha {

psync::v1::ListReplicasResponse ReplicasToProto(const Replica* replica);

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_REPLICA_PROTO_H_

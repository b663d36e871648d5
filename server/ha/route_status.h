// RouteStatus: the JobGate answer (server/owner/job_gate.h) an ownership Route amounts to, for the
// replica `self`: the owner's epoch to serve at, NOT_FOUND for a job no replica owns (reads only),
// or a NotServedHere status (wire/not_served.h) naming the owner to go to, or none. Replica and
// the deterministic simulation's replicas answer with it. Pure; thread-safe.
#ifndef PSYNC_SERVER_HA_ROUTE_STATUS_H_
#define PSYNC_SERVER_HA_ROUTE_STATUS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "server/ha/ownership.h"

namespace psync::server::ha {

absl::StatusOr<uint64_t> RouteStatus(const std::string& self, const std::string& job_id,
                                     const Route& route);

}  // namespace psync::server::ha

#endif  // PSYNC_SERVER_HA_ROUTE_STATUS_H_

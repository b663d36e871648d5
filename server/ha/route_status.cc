// RouteStatus; contract: route_status.h.
#include "server/ha/route_status.h"

#include "absl/strings/str_cat.h"
#include "wire/not_served.h"

namespace psync::server::ha {

absl::StatusOr<uint64_t> RouteStatus(const std::string& self, const std::string& job_id,
                                     const Route& route) {
  switch (route.kind) {
    case RouteKind::kServe:
      return route.epoch;
    case RouteKind::kUnowned:
      return absl::NotFoundError(absl::StrCat("job '", job_id, "' is not owned by any replica"));
    case RouteKind::kRedirect:
      if (route.epoch == 0) {  // nobody owns it yet: the replica that is to claim it
        return wire::NotServedHere(absl::StrCat("job '", job_id, "' is not owned yet; replica '",
                                                route.owner, "' is to own it: join there"),
                                   route.owner, 0);
      }
      return wire::NotServedHere(
          absl::StrCat("job '", job_id, "' is owned by replica '", route.owner, "' (epoch ",
                       route.epoch, "): connect there"),
          route.owner, route.epoch);
    case RouteKind::kRefuse:
    case RouteKind::kClaim:
      break;
  }
  return wire::NotServedHere(absl::StrCat("replica '", self, "': ", route.reason), "", 0);
}

}  // namespace psync::server::ha

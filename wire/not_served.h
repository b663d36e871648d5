// NotServedHere: the status of a coordinator replica for a job it does not serve (another replica
// owns it, or nobody may serve it now), with the owner to go to attached as a payload. The wire
// carries it as a psync.v1.OwnerRedirect in the call's binary error details (wire_status.h's
// ToGrpcStatus); clients read it back with server::OwnerRedirectOf (wire_status.h).
//
// Pure functions, no protos (the coordinator core depends on Abseil only). Thread-safe.
#ifndef PSYNC_WIRE_NOT_SERVED_H_
#define PSYNC_WIRE_NOT_SERVED_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psync::wire {

// The payload type URL of a NotServedHere status.
inline constexpr absl::string_view kNotServedHereUrl = "type.googleapis.com/psync.v1.OwnerRedirect";

struct Redirect {
  std::string owner;  // host:port of the owner; empty: unknown, nobody may serve the job now
  uint64_t epoch = 0;
};

// UNAVAILABLE with `message` and a Redirect to `owner` at `epoch`.
absl::Status NotServedHere(absl::string_view message, const std::string& owner, uint64_t epoch);

// The Redirect of a NotServedHere status, or nullopt for any other status.
std::optional<Redirect> RedirectOf(const absl::Status& status);

}  // namespace psync::wire

#endif  // PSYNC_WIRE_NOT_SERVED_H_

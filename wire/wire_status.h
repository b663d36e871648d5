// The one mapping between absl::Status and psync.v1's wire forms of a status: the Ack that answers
// a Session message, the code and message of AgentAck, MessageStatus and AgentRankClosed, and the
// grpc::Status a call or stream ends with. The code travels as its number (absl::StatusCode and
// grpc::StatusCode share google.rpc.Code's numbering), the message unchanged; an OK status is
// code 0 with an empty message, and a message is cut to kMaxEchoedBytes (BoundEcho): statuses
// quote what the client sent (ids, reasons), and what goes back must not grow with it.
//
// Depends on the protos, Abseil and grpc::Status only (not on the coordinator), so the node agent
// uses it too. Pure functions; thread-safe.
#ifndef PSYNC_WIRE_WIRE_STATUS_H_
#define PSYNC_WIRE_WIRE_STATUS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"
#include "proto/psync/v1/coordinator.pb.h"
#include "wire/bounded_text.h"
#include "wire/not_served.h"

namespace psync::wire {

// How the message starts when the coordinator ends a stream whose outbound queue stayed over its
// bound (serve/stream_writer.h). Such a RESOURCE_EXHAUSTED is worth a reconnect (the client read
// too slowly); any other RESOURCE_EXHAUSTED (a message over the size limit, a limit on attach) is
// not: sending the same thing again would meet the same limit.
inline constexpr absl::string_view kStreamOverflowMessage = "outbound queue over ";

// Writes `status` into `out`'s code and message (bounded by BoundEcho). `WireStatus` is any
// psync.v1 message with `int32 code` and `string message` (Ack, AgentAck, MessageStatus,
// AgentRankClosed).
template <typename WireStatus>
void SetWireStatus(const absl::Status& status, WireStatus* out) {
  out->set_code(static_cast<int32_t>(status.code()));
  out->set_message(BoundEcho(status.message()));
}

// SetWireStatus, plus the owner a NotServedHere status names (not_served.h) in `out`'s
// `redirect` (AgentAck, AgentRankClosed).
template <typename WireStatus>
void SetWireStatusAndRedirect(const absl::Status& status, WireStatus* out) {
  SetWireStatus(status, out);
  if (std::optional<Redirect> r = RedirectOf(status)) {
    out->mutable_redirect()->set_owner(r->owner);
    out->mutable_redirect()->set_epoch(r->epoch);
  }
}

// The status carried by `in`'s code and message (the reverse of SetWireStatus).
template <typename WireStatus>
absl::Status StatusFromWire(const WireStatus& in) {
  return absl::Status(static_cast<absl::StatusCode>(in.code()), in.message());
}

// The SessionDown that answers the Session message `request_id` with `status`.
v1::SessionDown AckFor(uint64_t request_id, const absl::Status& status);

// The grpc::Status of `status`: what a call or stream ends with. A status carrying an
// NotServedHere (not_served.h) carries its redirect as the call's binary error details, a
// serialized v1::OwnerRedirect.
grpc::Status ToGrpcStatus(const absl::Status& status);

// The OwnerRedirect a grpc::Status carries in its binary error details (a coordinator replica's
// answer for a job it does not serve; see not_served.h), or nullopt.
std::optional<v1::OwnerRedirect> OwnerRedirectOf(const grpc::Status& status);

}  // namespace psync::wire

#endif  // PSYNC_WIRE_WIRE_STATUS_H_

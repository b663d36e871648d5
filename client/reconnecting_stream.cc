#include "client/reconnecting_stream.h"

#include "absl/strings/match.h"
#include "wire/wire_status.h"

namespace psync {

absl::Status StatusFromGrpc(const grpc::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()),
                   absl::StrCat(what, ": ", status.error_message()));
  // A coordinator replica's redirect (psync.v1.OwnerRedirect) travels on (client/endpoints.h).
  if (!status.error_details().empty()) {
    out.SetPayload("type.googleapis.com/psync.v1.OwnerRedirect",
                   absl::Cord(status.error_details()));
  }
  return out;
}

bool IsTransientFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
      return true;
    default:
      return false;
  }
}

bool IsTransientStreamEnd(const absl::Status& status, bool established) {
  return IsTransientFailure(status) ||
         (established && status.code() == absl::StatusCode::kResourceExhausted &&
          absl::StrContains(status.message(), wire::kStreamOverflowMessage));
}

grpc::ChannelArguments ReconnectingChannelArguments(const BackoffOptions& backoff,
                                                    absl::Duration keepalive) {
  grpc::ChannelArguments args;
  const int initial_ms = static_cast<int>(absl::ToInt64Milliseconds(backoff.initial));
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, initial_ms);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, initial_ms);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
              static_cast<int>(absl::ToInt64Milliseconds(backoff.max)));
  if (keepalive > absl::ZeroDuration()) {
    const int ms = static_cast<int>(absl::ToInt64Milliseconds(keepalive));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    // Twice the interval: a loaded coordinator answers a ping late more often than it pauses.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 2 * ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  }
  return args;
}

}  // namespace psync

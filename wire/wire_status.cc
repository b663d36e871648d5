#include "wire/wire_status.h"

#include "absl/strings/str_cat.h"
#include "wire/not_served.h"

namespace psync::wire {

v1::SessionDown AckFor(uint64_t request_id, const absl::Status& status) {
  v1::SessionDown down;
  down.mutable_ack()->set_request_id(request_id);
  SetWireStatus(status, down.mutable_ack());
  return down;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  if (std::optional<Redirect> redirect = RedirectOf(status)) {
    v1::OwnerRedirect details;
    details.set_owner(redirect->owner);
    details.set_epoch(redirect->epoch);
    details.set_no_owner(redirect->owner.empty());  // never empty bytes on the wire
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()), BoundEcho(status.message()),
                        details.SerializeAsString());
  }
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), BoundEcho(status.message()));
}

std::optional<v1::OwnerRedirect> OwnerRedirectOf(const grpc::Status& status) {
  if (status.ok() || status.error_details().empty()) return std::nullopt;
  v1::OwnerRedirect redirect;
  if (!redirect.ParseFromString(status.error_details())) return std::nullopt;
  return redirect;
}

}  // namespace psync::wire

#include "bench/owner_probe.h"

#include <memory>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/endpoints.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"

namespace psync::bench {

absl::StatusOr<std::string> FindOwner(const std::vector<std::string>& targets,
                                      const v1::JoinRequest& join, absl::Duration timeout) {
  if (targets.empty()) return absl::InvalidArgumentError("no coordinator target");
  if (targets.size() == 1) return targets.front();
  const absl::Time deadline = absl::Now() + timeout;
  size_t next = absl::Hash<std::string>()(join.job_id()) % targets.size();
  std::string target = targets[next];
  std::string last_error = "no answer";
  while (absl::Now() < deadline) {
    auto stub =
        v1::Coordinator::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(std::min(deadline, absl::Now() + absl::Seconds(5))));
    v1::JoinResponse response;
    const grpc::Status status = stub->Join(&context, join, &response);
    if (status.ok()) return target;
    const std::optional<v1::OwnerRedirect> redirect = RedirectIn(status);
    if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
        status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                          absl::StrCat("Join at ", target, ": ", status.error_message()));
    }
    last_error = absl::StrCat(target, ": ", status.error_message());
    if (redirect.has_value() && !redirect->owner().empty()) {
      target = redirect->owner();
      continue;
    }
    next = (next + 1) % targets.size();
    target = targets[next];
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("no replica accepted job '", join.job_id(), "' (last: ", last_error, ")"));
}

}  // namespace psync::bench

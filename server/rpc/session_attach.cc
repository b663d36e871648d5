#include "server/rpc/session_attach.h"

#include <utility>

#include "wire/session_protocol.h"

namespace psync::server {

absl::StatusOr<std::vector<core::Notice>> AttachSession(Coordinator& coordinator,
                                                        const v1::Attach& attach,
                                                        std::shared_ptr<SessionSink> sink) {
  if (absl::Status s = wire::CheckAttach(attach); !s.ok()) {
    coordinator.RecordRejected(attach.job_id(), wire::AttachRefused(s));
    return wire::AttachRefused(s);
  }
  absl::StatusOr<std::vector<core::Notice>> pending = coordinator.Attach(
      attach.job_id(), attach.rank(), attach.generation(), attach.session_id(), std::move(sink));
  if (!pending.ok()) return wire::AttachRefused(pending.status());
  return pending;
}

}  // namespace psync::server

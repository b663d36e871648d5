#include "wire/session_protocol.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace psync::wire {

SessionDecision DecideSessionMessage(bool attached, const v1::SessionUp& up) {
  if (!attached) {
    if (up.kind_case() == v1::SessionUp::kAttach) return {SessionAction::kAttach, absl::OkStatus()};
    return {SessionAction::kClose,
            absl::InvalidArgumentError("attach: the first message of a Session must be attach")};
  }
  switch (up.kind_case()) {
    case v1::SessionUp::kStaged:
      return {SessionAction::kStaged, absl::OkStatus()};
    case v1::SessionUp::kSkip:
      return {SessionAction::kSkip, absl::OkStatus()};
    case v1::SessionUp::kSyncDone:
      return {SessionAction::kSyncDone, absl::OkStatus()};
    case v1::SessionUp::kLeave:
      return {SessionAction::kLeave, absl::OkStatus()};
    case v1::SessionUp::kAttach:
      return {SessionAction::kAck,
              absl::InvalidArgumentError("attach: this session is already attached")};
    case v1::SessionUp::KIND_NOT_SET:
      break;
  }
  return {SessionAction::kAck,
          absl::InvalidArgumentError("kind: one of staged, skip, sync_done, leave must be set")};
}

SessionDecision DecideUnparsable(bool attached) {
  return {SessionAction::kClose,
          absl::InvalidArgumentError(absl::StrCat(
              attached ? "" : "attach: ",
              "the message does not parse as a psync.v1.SessionUp; the Session ends"))};
}

absl::Status CheckAttach(const v1::Attach& attach) {
  if (attach.job_id().empty()) {
    return absl::InvalidArgumentError("attach.job_id must not be empty");
  }
  return absl::OkStatus();
}

absl::Status AttachRefused(const absl::Status& refusal) {
  absl::Status refused(refusal.code(), absl::StrCat("attach: ", refusal.message()));
  // A replica's redirect (not_served.h) stays with it.
  refusal.ForEachPayload([&refused](absl::string_view url, const absl::Cord& payload) {
    refused.SetPayload(url, payload);
  });
  return refused;
}

}  // namespace psync::wire

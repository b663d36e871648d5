// The rules of a psync.v1 Session as its server side applies them, message by message, in one
// place for both ends that serve Sessions: the coordinator (server/rpc/session_stream.cc) and the
// node agent (agent/local_session.cc), so that a rank gets the same answers, codes and messages
// from either. Transport-free: the caller carries out the decision on its stream.
//
//   - The first message must be `attach`; anything else ends the Session with INVALID_ARGUMENT.
//     A refused attach ends the Session with the refusal's status (AttachRefused), never an Ack:
//     there is no session to answer on. Every refusal is counted by the job it names, if known.
//   - Once attached, `staged`, `skip`, `sync_done` and `leave` go to the coordinator (directly,
//     or through the agent) and each is answered by an Ack with its status (an accepted one sent
//     with lazy_ack may be answered by a later message's acked_through instead: session_stream.h).
//   - A second `attach`, or a message with no kind, is answered by an INVALID_ARGUMENT Ack and
//     changes nothing; the Session goes on.
//   - Bytes that do not parse as a SessionUp (first message or later) end the Session with
//     INVALID_ARGUMENT (DecideUnparsable): they carry no request_id an Ack could echo.
//
// The coordinator also checks an attach's job_id (CheckAttach) before the tracker sees it, on
// Sessions and on node agents' AgentSessions alike (server/rpc/session_attach.h); the tracker
// checks the rest (core::JobTracker::CheckAttach). A refused attach is reported as
// AttachRefused(refusal). The agent forwards attaches unchecked: the coordinator answers them.
//
// Pure functions over the message; no gRPC, no locks; thread-safe.
#ifndef PSYNC_WIRE_SESSION_PROTOCOL_H_
#define PSYNC_WIRE_SESSION_PROTOCOL_H_

#include "absl/status/status.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync::wire {

enum class SessionAction {
  kClose,     // end the Session with the decision's status (never OK); read nothing more
  kAck,       // answer the message with an Ack of the decision's status (never OK); nothing else
  kAttach,    // attach the rank as up.attach() says
  kStaged,    // apply up.staged(); answer with its status
  kSkip,      // apply up.skip(); answer with its status
  kSyncDone,  // apply up.sync_done(); answer with its status
  kLeave,     // apply up.leave(); answer with its status
};

struct SessionDecision {
  SessionAction action = SessionAction::kClose;
  absl::Status status;  // kClose and kAck: what to close or answer with; OK otherwise
};

// What to do with `up`, the next message of a Session that is `attached` (its first message was
// an attach that was taken) or not.
SessionDecision DecideSessionMessage(bool attached, const v1::SessionUp& up);

// What to do with a message whose bytes did not parse as a SessionUp: kClose with
// INVALID_ARGUMENT, whether or not the Session is attached.
SessionDecision DecideUnparsable(bool attached);

// OK when `attach` names a job; otherwise INVALID_ARGUMENT naming the field. (An empty session_id
// is refused by the job, which counts it: core::JobTracker::CheckAttach.)
absl::Status CheckAttach(const v1::Attach& attach);

// The status a refused attach is reported with: `refusal`'s code, its message prefixed
// "attach: ". Requires !refusal.ok().
absl::Status AttachRefused(const absl::Status& refusal);

}  // namespace psync::wire

#endif  // PSYNC_WIRE_SESSION_PROTOCOL_H_

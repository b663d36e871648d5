// Every (attached, kind) pair of a Session message gets its exact decision: action, code and
// message (the messages are part of the protocol: clients, tests and docs quote them).
#include "wire/session_protocol.h"

#include <string>

#include "gtest/gtest.h"

namespace psync::wire {
namespace {

enum class Kind { kNone, kAttach, kStaged, kSkip, kSyncDone, kLeave };

v1::SessionUp Message(Kind kind) {
  v1::SessionUp up;
  up.set_request_id(5);
  switch (kind) {
    case Kind::kNone:
      break;
    case Kind::kAttach:
      up.mutable_attach()->set_job_id("job");
      break;
    case Kind::kStaged:
      up.mutable_staged()->set_generation(1);
      break;
    case Kind::kSkip:
      up.mutable_skip()->set_step(3);
      break;
    case Kind::kSyncDone:
      up.mutable_sync_done()->set_generation(1);
      break;
    case Kind::kLeave:
      up.mutable_leave()->set_finished(true);
      break;
  }
  return up;
}

struct Case {
  bool attached;
  Kind kind;
  SessionAction action;
  absl::StatusCode code;
  std::string message;
};

TEST(DecideSessionMessageTest, EveryKindAttachedOrNot) {
  const std::string kFirst = "attach: the first message of a Session must be attach";
  const Case cases[] = {
      {false, Kind::kAttach, SessionAction::kAttach, absl::StatusCode::kOk, ""},
      {false, Kind::kNone, SessionAction::kClose, absl::StatusCode::kInvalidArgument, kFirst},
      {false, Kind::kStaged, SessionAction::kClose, absl::StatusCode::kInvalidArgument, kFirst},
      {false, Kind::kSkip, SessionAction::kClose, absl::StatusCode::kInvalidArgument, kFirst},
      {false, Kind::kSyncDone, SessionAction::kClose, absl::StatusCode::kInvalidArgument, kFirst},
      {false, Kind::kLeave, SessionAction::kClose, absl::StatusCode::kInvalidArgument, kFirst},
      {true, Kind::kStaged, SessionAction::kStaged, absl::StatusCode::kOk, ""},
      {true, Kind::kSkip, SessionAction::kSkip, absl::StatusCode::kOk, ""},
      {true, Kind::kSyncDone, SessionAction::kSyncDone, absl::StatusCode::kOk, ""},
      {true, Kind::kLeave, SessionAction::kLeave, absl::StatusCode::kOk, ""},
      {true, Kind::kAttach, SessionAction::kAck, absl::StatusCode::kInvalidArgument,
       "attach: this session is already attached"},
      {true, Kind::kNone, SessionAction::kAck, absl::StatusCode::kInvalidArgument,
       "kind: one of staged, skip, sync_done, leave must be set"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "attached=" << c.attached << " kind=" << static_cast<int>(c.kind));
    const SessionDecision d = DecideSessionMessage(c.attached, Message(c.kind));
    EXPECT_EQ(d.action, c.action);
    EXPECT_EQ(d.status.code(), c.code);
    EXPECT_EQ(d.status.message(), c.message);
  }
}

TEST(DecideSessionMessageTest, AnAttachIsTakenWhateverItsFields) {
  // The fields are the coordinator's to check (CheckAttach), not the protocol's.
  v1::SessionUp up;
  up.mutable_attach();
  EXPECT_EQ(DecideSessionMessage(false, up).action, SessionAction::kAttach);
}

v1::Attach Attach(std::string job_id, std::string session_id) {
  v1::Attach a;
  a.set_job_id(std::move(job_id));
  a.set_session_id(std::move(session_id));
  a.set_rank(2);
  a.set_generation(1);
  return a;
}

TEST(DecideUnparsableTest, EndsTheSessionWithInvalidArgumentAttachedOrNot) {
  const SessionDecision first = DecideUnparsable(false);
  EXPECT_EQ(first.action, SessionAction::kClose);
  EXPECT_EQ(first.status, absl::InvalidArgumentError("attach: the message does not parse as a "
                                                     "psync.v1.SessionUp; the Session ends"));
  const SessionDecision later = DecideUnparsable(true);
  EXPECT_EQ(later.action, SessionAction::kClose);
  EXPECT_EQ(later.status,
            absl::InvalidArgumentError(
                "the message does not parse as a psync.v1.SessionUp; the Session ends"));
}

TEST(CheckAttachTest, NamesTheMissingField) {
  EXPECT_EQ(CheckAttach(Attach("job", "s")), absl::OkStatus());
  EXPECT_EQ(CheckAttach(Attach("", "s")),
            absl::InvalidArgumentError("attach.job_id must not be empty"));
  // An empty session id goes to the job (which counts it as rejected): see session_attach_test.
  EXPECT_EQ(CheckAttach(Attach("job", "")), absl::OkStatus());
  EXPECT_EQ(CheckAttach(Attach("", "")),
            absl::InvalidArgumentError("attach.job_id must not be empty"));
}

TEST(AttachRefusedTest, KeepsTheCodePrefixesTheMessage) {
  EXPECT_EQ(AttachRefused(absl::NotFoundError("job_id 'x' is not known; Join first")),
            absl::NotFoundError("attach: job_id 'x' is not known; Join first"));
  EXPECT_EQ(AttachRefused(absl::InvalidArgumentError("attach.job_id must not be empty")),
            absl::InvalidArgumentError("attach: attach.job_id must not be empty"));
}

}  // namespace
}  // namespace psync::wire

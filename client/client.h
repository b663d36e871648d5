// psync::Client: the library a training rank links to talk to the psync coordinator.
//
// What it does. Connect() joins the job with the rank's plan (Join), opens the rank's Session
// stream and attaches it. The training loop then reports, per step and model chunk, when each of
// its optimizers has staged (ReportStaged / ReportStagedBatch), or that it skips a step
// (SkipStep); it waits for the chunk's sync directive (WaitForDirective), runs the chunk's param
// sync once, and reports it (ReportSyncDone).
//
// Calls. Each report exists in two forms. The asynchronous form (Report*Async, SkipStepAsync)
// queues one SessionUp message with a fresh request_id and returns at once; its callback runs
// exactly once with the Ack as a status: absl::Status(static_cast<absl::StatusCode>(ack.code),
// ack.message), or OK when the coordinator answers an accepted lazy call (ClientOptions.lazy_acks)
// with a later message's acked_through; callbacks run in request order. The blocking form
// (ReportStaged, SkipStep, ...) is the asynchronous one plus a wait of at most `call_timeout`. A
// rejected message changed nothing on the coordinator; the codes (see server/core/job_tracker.h)
// tell the caller what to do: INVALID_ARGUMENT fix the input, FAILED_PRECONDITION fix the order
// (e.g. the step is not reached), ABORTED the generation is over (join again: connect a new Client
// with the same plan and incarnation(), which the coordinator places in the next generation),
// ALREADY_EXISTS a conflicting duplicate. Blocking calls with no Ack within `call_timeout`:
// UNAVAILABLE when the Session was down for the end of the wait (reconnecting did not succeed in
// time), DEADLINE_EXCEEDED otherwise; the message is then no longer re-sent. Client-side errors:
// FAILED_PRECONDITION after Close(); CANCELLED for calls still waiting when Close() runs; the
// client's final status once it failed.
//
// Callbacks. An AckCallback runs on the client's reader thread when the Ack arrives, on the
// thread that calls Close() (CANCELLED) or on the reader thread when the client fails for good
// (its final status); on the calling thread, before the call returns, when the client was already
// closed or failed. It must not block nor call the blocking methods of this client (their Acks
// are delivered by the reader thread); it may call the asynchronous ones. An asynchronous call has
// no timeout of its own: it is re-sent across reconnects until answered, the client fails, or
// Close().
//
// Notices. The reader thread reads the Session. Acks complete calls by request_id.
// SyncDirective, StepSkipped and Abort are kept (see client/notice_queue.h): directives are
// de-duplicated by (generation, step, chunk), because a reconnect makes the coordinator re-send the
// directives this rank has not reported SyncDone for; WaitForDirective() hands each one out once.
// stats() counts directives received and duplicates dropped.
//
// Reconnect (client/reconnecting_stream.h, shared with the node agent). When the Session breaks
// (UNAVAILABLE, CANCELLED by the peer, DEADLINE_EXCEEDED, UNKNOWN, or the coordinator ending it
// with OK while the client did not close) the client reconnects in the background: it waits a
// backoff delay (client/backoff.h: 50 ms doubling to 2 s, +-20% jitter), Joins again with the same
// incarnation and plan (a reconnect for the coordinator: same generation and session) and attaches
// a new Session.
//  * Messages not acknowledged on the broken stream are sent again on the new one, with the same
//    request_id; the coordinator answers an identical repeat with the decision already made, so
//    each check-in counts once.
//  * On attach the coordinator re-sends the directives this rank has not reported SyncDone for,
//    and the StepSkipped of every retained step this rank voted to skip (dropped here when
//    already seen), so a skip decided while the Session was down still arrives.
//  * Not retried; the client fails for good and every call and wait returns the status: the
//    Session finished with ABORTED (a newer Session of the same rank superseded this one); any
//    other error ending the Session or answering the re-Join (a refused attach is never acked:
//    the coordinator ends the Session with the refusal, "attach: ..."; e.g. FAILED_PRECONDITION
//    for a changed plan, PERMISSION_DENIED); a re-Join that lands in another
//    generation (ABORTED: the job moved on while this rank was away, and the coordinator placed
//    this incarnation in the new generation; connect a new Client with the same incarnation and
//    restage).
//  * Coordinator restart (it keeps no state on disk). Every re-Join carries a Resume (see
//    client/resume_tracker.h): the rank's current step, its acknowledged check-ins and SyncDones
//    of that step, and the chunks whose directive it holds. A coordinator that still knows the
//    rank ignores it. A restarted one rebuilds the job from the ranks' resumes in the next
//    generation and answers `resumed`: the client then carries on in that generation (stats()
//    .resumes): unanswered messages are sent again with the new generation, directives already
//    received stay (the new coordinator's repeats are dropped as duplicates), and the coordinator
//    re-issues only the directives not yet executed. The training loop sees nothing but a delay.
//    Not covered: a SkipStep vote that was acknowledged but whose StepSkipped had not arrived
//    when the coordinator died (the resume has no field for it; the skip then waits for the call's
//    timeout).
//
// Thread-safety. All methods are thread-safe; several threads (e.g. the dense and the expert
// optimizer) may report concurrently; messages are written one at a time by the stream's writer
// thread, in the order they were sent. The notice handler runs on the reader thread with the same
// rules as an AckCallback.
//
// Ownership. Connect() returns the only owner. The client owns its gRPC channel (unless one is
// passed in ClientOptions::channel, which it shares) and its ReconnectingStream (two threads).
// Close() (also run by the destructor) half-closes the stream (WritesDone), waits a short grace for
// the coordinator to end it, cancels it otherwise, and joins the threads: it never hangs.
#ifndef PSYNC_CLIENT_CLIENT_H_
#define PSYNC_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/backoff.h"
#include "client/endpoints.h"
#include "client/notice_queue.h"
#include "client/reconnecting_stream.h"
#include "client/resume_tracker.h"
#include "grpcpp/grpcpp.h"
#include "proto/psync/v1/coordinator.grpc.pb.h"
#include "proto/psync/v1/coordinator.pb.h"

namespace psync {

struct ClientOptions {
  // Coordinator address, e.g. "127.0.0.1:7070" or "dns:///psync:7070". Ignored when `channel` is
  // set. Coordinator replicas (psync-coordinator --etcd): a comma-separated list of them
  // ("10.0.0.1:7070,10.0.0.2:7070"), or a DNS name resolving to several; the client follows a
  // replica's redirect to the job's owner and moves along the list when one fails, without the
  // caller seeing more than a delay (client/endpoints.h).
  std::string target;
  // Channel credentials; insecure when null.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // TLS: the name the coordinator's certificate must carry, when it is not the target's host
  // (e.g. connecting by IP address to a certificate issued for a DNS name). Empty: the host.
  std::string tls_target_name_override;
  // An existing channel to use instead of creating one (e.g. an in-process channel, or one
  // channel shared by the simulated ranks of one process).
  std::shared_ptr<grpc::Channel> channel;
  // This rank's part of the plan, sent with every Join. An empty incarnation is replaced by a
  // random 32-hex-digit id (see Client::incarnation()); an empty node by $PSYNC_NODE, else the
  // host name (JoinRequest.node: the status views group ranks by it).
  psync::v1::JoinRequest plan;
  // Per call: the time a blocking call waits for its Ack, the deadline of each Join, the time an
  // attach may wait for its Ack, and the time Connect() has to join and attach (retrying
  // transient failures with backoff).
  absl::Duration call_timeout = absl::Seconds(30);
  // Delays between reconnect attempts (also the reconnect backoff of a channel the client creates).
  BackoffOptions backoff;
  // HTTP/2 keepalive ping interval of a channel the client creates (a ping unanswered for twice
  // this long closes the connection), so that a half-open connection (coordinator host gone,
  // network cut without a reset) or a paused coordinator (SIGSTOP, a replica past its lease) ends
  // the Session within about three intervals and the client reconnects, to another replica when
  // given several. The coordinator must permit pings this often (psync-coordinator permits one
  // per second). Zero turns keepalive off.
  absl::Duration keepalive = absl::Seconds(1);
  // The asynchronous calls (Report*Async, SkipStepAsync) ask for lazy acks (SessionUp.lazy_ack):
  // the coordinator may answer an accepted one with a later message (at most its
  // --lazy_ack_delay, 50 ms by default, later) instead of an Ack of its own, which saves it a
  // message per check-in. Their callbacks may then run up to that much later; refusals come at
  // once. Blocking calls are always acked at once.
  bool lazy_acks = true;
};

struct ClientStats {
  uint64_t directives_received = 0;           // distinct directives of the current generation
  uint64_t duplicate_directives_dropped = 0;  // repeats dropped by the de-duplication
  uint64_t stale_notices_dropped = 0;         // notices of another generation
  uint64_t reconnects = 0;                    // successful attaches after the first one
  uint64_t messages_resent = 0;               // messages sent again on a new stream
  uint64_t resumes = 0;  // re-joins a restarted coordinator answered with `resumed`
  // Coordinator replicas: directives dropped because they carried an epoch older than one already
  // seen (a deposed owner's), and moves to another replica (redirects to an owner, and moves
  // along the target list after a failure).
  uint64_t deposed_directives_dropped = 0;
  uint64_t redirects = 0;
  uint64_t endpoint_rotations = 0;
};

// Runs once with the coordinator's answer to one message (see "Callbacks" above).
using AckCallback = std::function<void(absl::Status)>;

class Client final : private StreamProtocol<psync::v1::SessionUp, psync::v1::SessionDown> {
 public:
  // Joins, opens the Session and attaches, retrying transient failures (UNAVAILABLE, deadline)
  // with backoff until options.call_timeout has passed. Errors: INVALID_ARGUMENT for bad options
  // (the message names the field); the coordinator's status when it refuses the Join or the
  // attach (INVALID_ARGUMENT, FAILED_PRECONDITION, ...); UNAVAILABLE with the last error when no
  // attempt succeeded in time.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(ClientOptions options);

  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Asynchronous calls: queue the message and return at once; `done` runs once with the Ack.
  // Several check-ins in one message; the coordinator applies all or none.
  void ReportStagedAsync(std::vector<psync::v1::Staged> items, AckCallback done)
      ABSL_LOCKS_EXCLUDED(mu_);
  // This rank skips `step` (every rank must skip it before staging anything for it).
  void SkipStepAsync(uint64_t step, absl::string_view reason, AckCallback done)
      ABSL_LOCKS_EXCLUDED(mu_);
  // This rank ran the sync directive of (step, chunk); one checksum per sync group it belongs to.
  // `executions`: how many times this rank has run that sync, this one included (above 1 the
  // coordinator records a repeated-sync violation).
  void ReportSyncDoneAsync(uint64_t step, uint32_t chunk,
                           std::vector<psync::v1::GroupChecksum> checksums, uint32_t executions,
                           AckCallback done) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocking forms: the asynchronous call, then a wait of at most call_timeout for its Ack.
  // One check-in: `optimizer` of this rank staged `chunk` for `step`.
  absl::Status ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer,
                            std::optional<uint64_t> checksum = std::nullopt);
  absl::Status ReportStagedBatch(std::vector<psync::v1::Staged> items);
  absl::Status SkipStep(uint64_t step, absl::string_view reason);
  absl::Status ReportSyncDone(uint64_t step, uint32_t chunk,
                              std::vector<psync::v1::GroupChecksum> checksums,
                              uint32_t executions = 1);

  // The directive of (generation(), step, chunk), once: a later call for the same (step, chunk)
  // waits again. DEADLINE_EXCEEDED when it does not arrive within `timeout`; ABORTED with the
  // coordinator's reason once an Abort of this generation arrived; the client's status once it
  // failed or closed.
  absl::StatusOr<psync::v1::SyncDirective> WaitForDirective(uint64_t step, uint32_t chunk,
                                                            absl::Duration timeout);
  // OK once every rank skipped `step` (StepSkipped arrived); errors as WaitForDirective.
  absl::Status WaitForStepSkipped(uint64_t step, absl::Duration timeout);

  // Called on the reader thread with every notice kept (a directive seen for the first time, a
  // StepSkipped, the Abort of the current generation); not with Acks, duplicates or stale
  // notices. Replaces the previous handler; null removes it.
  void SetNoticeHandler(std::function<void(const psync::v1::SessionDown&)> handler)
      ABSL_LOCKS_EXCLUDED(mu_);

  // This rank completed its run: sends Leave with finished = true and waits (call_timeout) for
  // its Ack, then closes the client. Once every rank of the generation has finished, the job ends
  // on the coordinator (see EndJob in coordinator.proto). Returns the Leave's status; the client is
  // closed either way.
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_);

  // Half-closes the Session, waits up to a short grace (1 s, at most call_timeout) for the
  // coordinator to end it, cancels it otherwise, and joins the threads. Calls still waiting for
  // an Ack complete with CANCELLED. Idempotent; a call made while another closes returns when
  // that one is done.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // The generation of the current Join (changes only when a restarted coordinator resumed the
  // rank) and its session id.
  // The coordinator (replica) the client talks to now: its target; empty for a client given a
  // channel.
  std::string target() const { return endpoints_->current(); }
  uint64_t generation() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return generation_;
  }
  std::string session_id() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return session_id_;
  }
  // From the Join that Connect() made; constant afterwards.
  uint64_t next_step() const { return next_step_; }
  uint32_t rank() const { return options_.plan.rank(); }
  const std::string& job_id() const { return options_.plan.job_id(); }
  const std::string& incarnation() const { return options_.plan.incarnation(); }

  // True while a Session is attached.
  bool connected() const ABSL_LOCKS_EXCLUDED(mu_);
  ClientStats stats() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  enum class State { kDisconnected, kAttaching, kConnected, kFailed, kClosed };

  // One message waiting for its Ack.
  struct PendingCall {
    psync::v1::SessionUp up;  // for the resume's record of acknowledged messages
    AckCallback done;
  };

  explicit Client(ClientOptions options);

  // Waits until the first attach succeeded (OK) or the client failed (its status); UNAVAILABLE
  // with the last error at `deadline`.
  absl::Status AwaitFirstAttach(absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Stamps `up` with a fresh request_id and the generation and queues it; returns the id, or 0
  // when the client refused it at once (closed, failed: `done` has run).
  // With `lazy` (and options.lazy_acks) the message asks for a lazy ack.
  uint64_t SendAsync(psync::v1::SessionUp up, AckCallback done, bool lazy = false)
      ABSL_LOCKS_EXCLUDED(mu_);
  // SessionDown.acked_through: every pending lazy call up to `through` was accepted.
  void HandleAckedThrough(uint64_t through) ABSL_LOCKS_EXCLUDED(mu_);
  // SendAsync, then waits up to call_timeout for the Ack.
  absl::Status SendAndWait(psync::v1::SessionUp up) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes a call that got no Ack in time; false if its callback was already taken.
  bool GiveUp(uint64_t request_id) ABSL_LOCKS_EXCLUDED(mu_);

  // StreamProtocol, on the stream's reader thread.
  absl::Status Prepare(bool* retry) override ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<psync::v1::SessionUp> OnOpen(bool* handshake) override ABSL_LOCKS_EXCLUDED(mu_);
  void OnRead(const psync::v1::SessionDown& down) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status OnClosed(const StreamEnd& end, bool* retry) override ABSL_LOCKS_EXCLUDED(mu_);

  // One Join RPC with the plan (deadline: call_timeout); Close() cancels it.
  absl::StatusOr<psync::v1::JoinResponse> Join() ABSL_LOCKS_EXCLUDED(mu_);
  void HandleAck(const psync::v1::Ack& ack) ABSL_LOCKS_EXCLUDED(mu_);
  // A Join or Session to `target` failed with `status` (transient): follow a redirect to the
  // job's owner, or move along the target list.
  void NoteEndpointFailure(const std::string& target, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Keeps a notice (de-duplicated) and passes it to the handler.
  void Notify(const psync::v1::SessionDown& down) ABSL_LOCKS_EXCLUDED(mu_);
  // Fails the client for good with `status`; completes every waiting call with it.
  void Fail(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);
  // Removes every waiting call (to complete them after unlocking).
  std::vector<AckCallback> TakeCallsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Constant after construction (next_step_ is set by the first join, before Connect() returns
  // the client).
  ClientOptions options_;
  std::unique_ptr<Endpoints> endpoints_;
  uint64_t next_step_ = 0;

  NoticeQueue notices_;

  mutable absl::Mutex mu_;
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string session_id_ ABSL_GUARDED_BY(mu_);
  // What this rank did in its current step, for the Resume of a re-Join.
  ResumeTracker progress_ ABSL_GUARDED_BY(mu_);
  State state_ ABSL_GUARDED_BY(mu_) = State::kDisconnected;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool joined_ ABSL_GUARDED_BY(mu_) = false;  // the first Join succeeded
  bool attached_once_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);  // why the client failed (kFailed)
  absl::Status last_error_ ABSL_GUARDED_BY(mu_);    // last reason the Session was down
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t attach_request_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status attach_status_ ABSL_GUARDED_BY(mu_);             // non-OK: the attach was refused
  std::map<uint64_t, PendingCall> calls_ ABSL_GUARDED_BY(mu_);  // by request_id
  // The context of the reader thread's Join in progress, for cancelling it.
  grpc::ClientContext* join_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::shared_ptr<const std::function<void(const psync::v1::SessionDown&)>> handler_
      ABSL_GUARDED_BY(mu_);
  ClientStats stats_ ABSL_GUARDED_BY(mu_);
  // The target the current (or last) Session stream was opened to.
  std::string stream_target_ ABSL_GUARDED_BY(mu_);
  // The highest directive epoch seen (coordinator replicas; 0 with a single coordinator).
  uint64_t max_epoch_ ABSL_GUARDED_BY(mu_) = 0;

  // Last: destroyed (its threads joined) first.
  std::unique_ptr<ReconnectingStream<psync::v1::SessionUp, psync::v1::SessionDown>> stream_;
};

}  // namespace psync

#endif  // PSYNC_CLIENT_CLIENT_H_

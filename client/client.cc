#include "client/client.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/notification.h"
#include "client/job_start.h"
#include "client/resume_tracker.h"
#include "wire/wire_status.h"

namespace psync {
namespace {

using psync::v1::SessionDown;
using psync::v1::SessionUp;

// How long Close() waits for the coordinator to end a half-closed Session before cancelling it.
constexpr absl::Duration kCloseGrace = absl::Seconds(1);

std::string RandomIncarnation() {
  absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

// This host's node name for JoinRequest.node: $PSYNC_NODE (e.g. a Kubernetes pod's spec.nodeName
// through the downward API), else the host name; a character the coordinator does not take
// becomes '_', and it is cut at 128 characters.
std::string NodeName() {
  std::string name;
  if (const char* env = std::getenv("PSYNC_NODE"); env != nullptr && *env != '\0') {
    name = env;
  } else {
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) == 0) name = host;
  }
  if (name.size() > 128) name.resize(128);
  for (char& c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        absl::string_view("._-:@/").find(c) == absl::string_view::npos) {
      c = '_';
    }
  }
  return name;
}

void Complete(std::vector<AckCallback>& calls, const absl::Status& status) {
  for (AckCallback& done : calls) done(status);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (options.channel == nullptr && options.target.empty()) {
    return absl::InvalidArgumentError("options.target must not be empty (or set options.channel)");
  }
  if (options.channel == nullptr) {
    if (absl::StatusOr<std::vector<std::string>> targets =
            SplitTargets(options.target, "options.target");
        !targets.ok()) {
      return targets.status();
    }
  }
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.call_timeout must be > 0 (got ", absl::FormatDuration(options.call_timeout), ")"));
  }
  if (options.keepalive < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("options.keepalive must be >= 0");
  }
  if (absl::Status s = ValidateBackoffOptions(options.backoff); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("options.", s.message()));
  }
  if (options.plan.incarnation().empty()) options.plan.set_incarnation(RandomIncarnation());
  if (options.plan.node().empty()) options.plan.set_node(NodeName());

  const absl::Time deadline = absl::Now() + options.call_timeout;
  std::unique_ptr<Client> client = absl::WrapUnique(new Client(std::move(options)));
  client->stream_->Start();
  absl::Status status = client->AwaitFirstAttach(deadline);
  if (status.ok()) return client;
  client->Close();
  return status;
}

absl::Status Client::AwaitFirstAttach(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return attached_once_ || state_ == State::kFailed;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), deadline);
  if (attached_once_) return absl::OkStatus();
  if (state_ == State::kFailed) return final_status_;
  return absl::UnavailableError(
      absl::StrCat("could not join and attach to '", options_.target, "' within ",
                   absl::FormatDuration(options_.call_timeout),
                   "; last error: ", last_error_.ok() ? "none" : last_error_.ToString()));
}

namespace {

// The arguments of every channel the client creates: reconnect backoff, keepalive, and the TLS
// name override when one is set.
grpc::ChannelArguments ChannelArguments(const ClientOptions& options) {
  grpc::ChannelArguments args = ReconnectingChannelArguments(options.backoff, options.keepalive);
  if (!options.tls_target_name_override.empty()) {
    args.SetSslTargetNameOverride(options.tls_target_name_override);
  }
  return args;
}

}  // namespace

Client::Client(ClientOptions options) : options_(std::move(options)) {
  if (options_.channel != nullptr) {
    endpoints_ = std::make_unique<Endpoints>(options_.channel);
  } else {
    // Connect() checked that the target is not empty; several replicas are comma-separated, and
    // jobs start on different ones (before any redirect) by a hash of the job id.
    std::vector<std::string> targets =
        SplitTargets(options_.target, "options.target").value_or(std::vector<std::string>{});
    const size_t targets_count = targets.size();
    endpoints_ = std::make_unique<Endpoints>(
        std::move(targets),
        [credentials = options_.credentials != nullptr ? options_.credentials
                                                       : grpc::InsecureChannelCredentials(),
         args = ChannelArguments(options_)](const std::string& target) {
          return grpc::CreateCustomChannel(target, credentials, args);
        },
        JobStartIndex(options_.plan.job_id(), std::max<size_t>(targets_count, 1)));
  }
  ReconnectingStreamOptions stream_options;
  stream_options.backoff = options_.backoff;
  stream_options.handshake_timeout = options_.call_timeout;
  stream_ = std::make_unique<ReconnectingStream<SessionUp, SessionDown>>(
      stream_options,
      [this](grpc::ClientContext* context) {
        std::string target;
        psync::v1::Coordinator::Stub* stub = endpoints_->Stub(&target);
        {
          absl::MutexLock lock(&mu_);
          stream_target_ = target;
        }
        return stub->Session(context);
      },
      static_cast<StreamProtocol<SessionUp, SessionDown>*>(this));
}

Client::~Client() { Close(); }

// ---------------------------------------------------------------------------------------------
// Calls

namespace {

// The messages of the calls, without request id and generation (SendAsync stamps them).
SessionUp StagedMessage(std::vector<psync::v1::Staged> items) {
  SessionUp up;
  psync::v1::StagedBatch* batch = up.mutable_staged();
  for (psync::v1::Staged& item : items) *batch->add_items() = std::move(item);
  return up;
}

SessionUp SkipMessage(uint64_t step, absl::string_view reason) {
  SessionUp up;
  psync::v1::SkipStep* skip = up.mutable_skip();
  skip->set_step(step);
  skip->set_reason(std::string(reason));
  return up;
}

SessionUp SyncDoneMessage(uint64_t step, uint32_t chunk,
                          std::vector<psync::v1::GroupChecksum> checksums, uint32_t executions) {
  SessionUp up;
  psync::v1::SyncDone* item = up.mutable_sync_done()->add_items();
  item->set_step(step);
  item->set_chunk(chunk);
  item->set_executions(executions);
  for (psync::v1::GroupChecksum& c : checksums) *item->add_checksums() = std::move(c);
  return up;
}

}  // namespace

void Client::ReportStagedAsync(std::vector<psync::v1::Staged> items, AckCallback done) {
  SendAsync(StagedMessage(std::move(items)), std::move(done), /*lazy=*/true);
}

void Client::SkipStepAsync(uint64_t step, absl::string_view reason, AckCallback done) {
  SendAsync(SkipMessage(step, reason), std::move(done), /*lazy=*/true);
}

void Client::ReportSyncDoneAsync(uint64_t step, uint32_t chunk,
                                 std::vector<psync::v1::GroupChecksum> checksums,
                                 uint32_t executions, AckCallback done) {
  SendAsync(SyncDoneMessage(step, chunk, std::move(checksums), executions), std::move(done),
            /*lazy=*/true);
}

absl::Status Client::ReportStaged(uint64_t step, uint32_t chunk, absl::string_view optimizer,
                                  std::optional<uint64_t> checksum) {
  psync::v1::Staged item;
  item.set_step(step);
  item.set_chunk(chunk);
  item.set_optimizer(std::string(optimizer));
  if (checksum.has_value()) item.set_shard_checksum(*checksum);
  std::vector<psync::v1::Staged> items;
  items.push_back(std::move(item));
  return ReportStagedBatch(std::move(items));
}

absl::Status Client::Finish() {
  SessionUp up;
  up.mutable_leave()->set_finished(true);
  absl::Status status = SendAndWait(std::move(up));
  Close();
  return status;
}

absl::Status Client::ReportStagedBatch(std::vector<psync::v1::Staged> items) {
  return SendAndWait(StagedMessage(std::move(items)));
}

absl::Status Client::SkipStep(uint64_t step, absl::string_view reason) {
  return SendAndWait(SkipMessage(step, reason));
}

absl::Status Client::ReportSyncDone(uint64_t step, uint32_t chunk,
                                    std::vector<psync::v1::GroupChecksum> checksums,
                                    uint32_t executions) {
  return SendAndWait(SyncDoneMessage(step, chunk, std::move(checksums), executions));
}

uint64_t Client::SendAsync(SessionUp up, AckCallback done, bool lazy) {
  absl::Status refused;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kFailed) {
      refused = final_status_;
    } else if (closing_) {
      refused = absl::FailedPreconditionError("the client is closed");
    } else {
      const uint64_t id = next_request_id_++;
      up.set_request_id(id);
      up.set_lazy_ack(lazy && options_.lazy_acks);
      SetMessageGeneration(&up, generation_);
      progress_.OnSent(up);
      calls_.emplace(id, PendingCall{up, std::move(done)});
      // Queued under mu_, so the stream's ledger holds request ids in rising order.
      stream_->Send(id, std::move(up), Delivery::kTracked);
      return id;
    }
  }
  done(refused);
  return 0;
}

bool Client::GiveUp(uint64_t request_id) {
  absl::MutexLock lock(&mu_);
  if (calls_.erase(request_id) == 0) return false;
  stream_->Abandon(request_id);
  return true;
}

absl::Status Client::SendAndWait(SessionUp up) {
  struct Answer {
    absl::Notification done;
    absl::Status status;
  };
  auto answer = std::make_shared<Answer>();
  const uint64_t id = SendAsync(std::move(up), [answer](absl::Status status) {
    answer->status = std::move(status);
    answer->done.Notify();
  });
  if (id == 0 || answer->done.WaitForNotificationWithTimeout(options_.call_timeout) ||
      !GiveUp(id)) {
    answer->done.WaitForNotification();  // the callback was taken: it is running
    return answer->status;
  }
  absl::MutexLock lock(&mu_);
  if (state_ != State::kConnected) {
    return absl::UnavailableError(absl::StrCat(
        "no Ack for request_id ", id, " within ", absl::FormatDuration(options_.call_timeout),
        ": the Session is down and reconnecting did not succeed in time; last error: ",
        last_error_.ok() ? "none" : last_error_.ToString()));
  }
  return absl::DeadlineExceededError(absl::StrCat("no Ack for request_id ", id, " within ",
                                                  absl::FormatDuration(options_.call_timeout)));
}

// ---------------------------------------------------------------------------------------------
// Notices

absl::StatusOr<psync::v1::SyncDirective> Client::WaitForDirective(uint64_t step, uint32_t chunk,
                                                                  absl::Duration timeout) {
  return notices_.WaitForDirective(step, chunk, absl::Now() + timeout);
}

absl::Status Client::WaitForStepSkipped(uint64_t step, absl::Duration timeout) {
  return notices_.WaitForStepSkipped(step, absl::Now() + timeout);
}

void Client::SetNoticeHandler(std::function<void(const SessionDown&)> handler) {
  auto shared =
      handler ? std::make_shared<const std::function<void(const SessionDown&)>>(std::move(handler))
              : nullptr;
  absl::MutexLock lock(&mu_);
  handler_ = std::move(shared);
}

bool Client::connected() const {
  absl::MutexLock lock(&mu_);
  return state_ == State::kConnected;
}

ClientStats Client::stats() const {
  const NoticeQueue::Counters counters = notices_.counters();
  const uint64_t resent = stream_->resent();
  absl::MutexLock lock(&mu_);
  ClientStats stats = stats_;
  stats.directives_received = counters.directives_received;
  stats.duplicate_directives_dropped = counters.duplicate_directives;
  stats.stale_notices_dropped = counters.stale_notices;
  stats.messages_resent = resent;
  stats.redirects = endpoints_->redirects();
  stats.endpoint_rotations = endpoints_->rotations();
  return stats;
}

// ---------------------------------------------------------------------------------------------
// The Session protocol (reader thread)

absl::StatusOr<psync::v1::JoinResponse> Client::Join() {
  psync::v1::JoinResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  psync::v1::JoinRequest request = options_.plan;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::CancelledError("the client is closing");
    join_context_ = &context;
    // A rank that was running re-announces its step: if the coordinator restarted and lost the
    // job, it rebuilds the same decisions from the ranks' resumes; otherwise it ignores it.
    if (joined_) {
      std::optional<psync::v1::Resume> resume = progress_.Build(generation_);
      if (resume.has_value()) *request.mutable_resume() = std::move(*resume);
    }
  }
  std::string target;
  const grpc::Status status = endpoints_->Stub(&target)->Join(&context, request, &response);
  {
    absl::MutexLock lock(&mu_);
    join_context_ = nullptr;
  }
  if (!status.ok()) {
    absl::Status failed = StatusFromGrpc(status, "Join");
    if (IsTransientFailure(failed)) NoteEndpointFailure(target, failed);
    return failed;
  }
  return response;
}

absl::Status Client::Prepare(bool* retry) {
  *retry = true;
  absl::StatusOr<psync::v1::JoinResponse> joined = Join();
  if (!joined.ok()) {
    *retry = IsTransientFailure(joined.status());
    if (!*retry) Fail(joined.status());
    absl::MutexLock lock(&mu_);
    last_error_ = joined.status();
    return joined.status();
  }
  const psync::v1::JoinResponse& response = *joined;

  bool first_join;
  {
    absl::MutexLock lock(&mu_);
    first_join = !joined_;
    progress_.OnJoined(response.restarted_after());
  }
  if (first_join) {
    next_step_ = response.next_step();  // before attached_once_, which Connect() waits for
    notices_.SetGeneration(response.generation());
    absl::MutexLock lock(&mu_);
    progress_.Start(response.next_step());
    generation_ = response.generation();
    session_id_ = response.session_id();
    joined_ = true;
  } else if (response.generation() != generation() && response.resumed()) {
    // The coordinator restarted and continued this rank's run in a new generation: carry on.
    // Messages not yet answered go out again under the new generation; directives already here
    // stay (the new coordinator's repeats of them are duplicates).
    notices_.ContinueGeneration(response.generation());
    absl::MutexLock lock(&mu_);
    generation_ = response.generation();
    session_id_ = response.session_id();
    const uint64_t generation = generation_;
    stream_->EditTracked([generation](SessionUp* up) { SetMessageGeneration(up, generation); });
    ++stats_.resumes;
  } else if (response.generation() == generation()) {
    // The same generation: the same coordinator answers with the same session id; another
    // replica that took the job over has issued its own.
    absl::MutexLock lock(&mu_);
    session_id_ = response.session_id();
  } else {
    *retry = false;
    absl::Status moved_on = absl::AbortedError(absl::StrCat(
        "rank ", rank(), " of job '", job_id(), "' joined again after its Session broke and got ",
        "generation ", response.generation(), ", but this client belongs to generation ",
        generation(), ": the job moved on; connect a new client and restage"));
    Fail(moved_on);
    return moved_on;
  }
  return absl::OkStatus();
}

std::vector<SessionUp> Client::OnOpen(bool* handshake) {
  *handshake = true;
  SessionUp attach;
  absl::MutexLock lock(&mu_);
  attach.set_request_id(next_request_id_++);
  attach_request_id_ = attach.request_id();
  attach_status_ = absl::OkStatus();
  if (state_ != State::kFailed) state_ = State::kAttaching;
  psync::v1::Attach* a = attach.mutable_attach();
  a->set_job_id(job_id());
  a->set_rank(rank());
  a->set_generation(generation_);
  a->set_session_id(session_id_);
  std::vector<SessionUp> first;
  first.push_back(std::move(attach));
  return first;
}

void Client::OnRead(const SessionDown& down) {
  const uint64_t through = down.acked_through();
  if (down.has_ack()) {
    // Calls are answered in request order: the lazy ones below this Ack's request first.
    if (through != 0 && down.ack().request_id() > 1) {
      HandleAckedThrough(std::min(through, down.ack().request_id() - 1));
    }
    HandleAck(down.ack());
  } else if (down.kind_case() != SessionDown::KIND_NOT_SET) {
    Notify(down);
  }
  if (through != 0) HandleAckedThrough(through);
}

void Client::HandleAckedThrough(uint64_t through) {
  std::vector<AckCallback> accepted;
  {
    absl::MutexLock lock(&mu_);
    // Calls are keyed by request id: the lazy ones up to `through` were accepted. A call that is
    // not lazy is answered by an Ack of its own, which came first.
    for (auto it = calls_.begin(); it != calls_.end() && it->first <= through;) {
      if (!it->second.up.lazy_ack()) {
        ++it;
        continue;
      }
      stream_->Acknowledge(it->first);
      progress_.OnAcknowledged(it->second.up);
      accepted.push_back(std::move(it->second.done));
      it = calls_.erase(it);
    }
  }
  for (AckCallback& done : accepted) done(absl::OkStatus());
}

void Client::HandleAck(const psync::v1::Ack& ack) {
  const absl::Status status = wire::StatusFromWire(ack);
  AckCallback done;
  {
    absl::MutexLock lock(&mu_);
    if (ack.request_id() == attach_request_id_ && state_ == State::kAttaching) {
      // psync.v1 servers end the Session with a refused attach's status and never ack it; a
      // non-OK Ack for it (a server outside that contract) is taken as the same refusal.
      if (!status.ok()) {
        attach_status_ = absl::Status(status.code(), absl::StrCat("attach: ", status.message()));
        stream_->CancelStream();
        return;
      }
      state_ = State::kConnected;
      if (attached_once_) ++stats_.reconnects;
      attached_once_ = true;
      stream_->Established();
      return;
    }
    auto it = calls_.find(ack.request_id());
    if (it == calls_.end()) return;
    stream_->Acknowledge(ack.request_id());
    if (status.ok()) progress_.OnAcknowledged(it->second.up);
    done = std::move(it->second.done);
    calls_.erase(it);
  }
  done(status);
}

void Client::Notify(const SessionDown& down) {
  if (down.has_abort() && down.abort().rejoin()) {
    // A forming generation rebuilt after a coordinator restart was renumbered: this run continues.
    // The Session ends; the reconnect joins again with the resume (Prepare: `resumed`).
    absl::MutexLock lock(&mu_);
    if (down.abort().generation() != generation_) return;
    attach_status_ = absl::UnavailableError(
        absl::StrCat("generation ", generation_, " was renumbered while it formed: joining again"));
    stream_->CancelStream();
    return;
  }
  if (down.has_directive()) {
    // A directive of a deposed coordinator replica (an older epoch than one already seen) is
    // dropped: only the job's current owner releases.
    absl::MutexLock lock(&mu_);
    if (down.directive().epoch() < max_epoch_) {
      ++stats_.deposed_directives_dropped;
      return;
    }
    max_epoch_ = down.directive().epoch();
  }
  if (notices_.Add(down) != NoticeQueue::AddResult::kAccepted) return;
  std::shared_ptr<const std::function<void(const SessionDown&)>> handler;
  {
    absl::MutexLock lock(&mu_);
    if (down.has_step_skipped()) progress_.OnStepSkipped(down.step_skipped().step());
    if (down.has_directive())
      progress_.OnDirective(down.directive().step(), down.directive().chunk());
    handler = handler_;
  }
  if (handler != nullptr) (*handler)(down);
}

absl::Status Client::OnClosed(const StreamEnd& end, bool* retry) {
  absl::Status why;
  std::string target;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kAttaching || state_ == State::kConnected) {
      state_ = State::kDisconnected;
    }
    if (!attach_status_.ok()) {
      *retry = attach_status_.code() == absl::StatusCode::kUnavailable;
      why = attach_status_;
    } else if (end.handshake_timed_out) {
      *retry = true;
      why = absl::DeadlineExceededError(absl::StrCat("attach was not acknowledged within ",
                                                     absl::FormatDuration(options_.call_timeout)));
    } else if (end.finished.ok()) {
      *retry = true;
      why = absl::UnavailableError("the coordinator ended the Session");
    } else {
      *retry = IsTransientStreamEnd(end.finished, end.established);
      why = end.finished;
    }
    if (closing_) return why;
    if (*retry) last_error_ = why;
    target = stream_target_;
  }
  if (!*retry) Fail(why);
  if (*retry) NoteEndpointFailure(target, end.finished.ok() ? why : end.finished);
  return why;
}

void Client::NoteEndpointFailure(const std::string& target, const absl::Status& status) {
  endpoints_->OnFailure(target, status);
}

std::vector<AckCallback> Client::TakeCallsLocked() {
  std::vector<AckCallback> taken;
  for (auto& [id, call] : calls_) {
    stream_->Abandon(id);
    taken.push_back(std::move(call.done));
  }
  calls_.clear();
  return taken;
}

void Client::Fail(absl::Status status) {
  std::vector<AckCallback> calls;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kFailed || closing_) return;
    state_ = State::kFailed;
    final_status_ = status;
    calls = TakeCallsLocked();
  }
  notices_.Fail(status);
  Complete(calls, status);
  // No more streams: the cycle stops once this callback returns (retry is false).
}

// ---------------------------------------------------------------------------------------------
// Close

void Client::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (!closing_) {
      closing_ = true;
      // A Join in progress is pointless now.
      if (join_context_ != nullptr) join_context_->TryCancel();
    }
  }
  notices_.Fail(absl::CancelledError("the client is closed"));
  stream_->Close(std::min(kCloseGrace, options_.call_timeout));
  std::vector<std::pair<uint64_t, AckCallback>> calls;
  {
    absl::MutexLock lock(&mu_);
    if (state_ != State::kFailed) state_ = State::kClosed;
    for (auto& [id, call] : calls_) calls.emplace_back(id, std::move(call.done));
    calls_.clear();
  }
  for (auto& [id, done] : calls) {
    done(absl::CancelledError(
        absl::StrCat("the client was closed while request_id ", id, " waited for its Ack")));
  }
}

}  // namespace psync

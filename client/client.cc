#include "client/client.h"

#include <algorithm>
#include <utility>

#include "absl/memory/memory.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/resume_tracker.h"

namespace psync {
namespace {

// How long Close() waits for the coordinator to end a half-closed Session before cancelling it.
constexpr absl::Duration kCloseGrace = absl::Seconds(1);

absl::Status FromGrpc(const grpc::Status& status, absl::string_view what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(what, ": ", status.error_message()));
}

// Failures after which the client reconnects rather than giving up.
bool IsTransient(const absl::Status& status) {
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

std::string RandomIncarnation() {
  absl::BitGen gen;
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  if (options.channel == nullptr && options.target.empty()) {
    return absl::InvalidArgumentError("options.target must not be empty (or set options.channel)");
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

  const absl::Time deadline = absl::Now() + options.call_timeout;
  std::unique_ptr<Client> client = absl::WrapUnique(new Client(std::move(options)));
  client->reader_ = std::thread([c = client.get()] { c->SessionLoop(); });
  client->writer_ = std::thread([c = client.get()] { c->WriteLoop(); });

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

Client::Client(ClientOptions options) : options_(std::move(options)) {
  channel_ = options_.channel;
  if (channel_ == nullptr) {
    // gRPC's own reconnect backoff (1 s doubling to 120 s by default) gates fail-fast calls while
    // the channel is down; align it with ours so a coordinator that is back is found in time.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.backoff.initial)));
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.backoff.initial)));
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                static_cast<int>(absl::ToInt64Milliseconds(options_.backoff.max)));
    if (options_.keepalive > absl::ZeroDuration()) {
      const int ms = static_cast<int>(absl::ToInt64Milliseconds(options_.keepalive));
      args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
      args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
      args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    }
    channel_ = grpc::CreateCustomChannel(
        options_.target,
        options_.credentials != nullptr ? options_.credentials : grpc::InsecureChannelCredentials(),
        args);
  }
  stub_ = psync::v1::Coordinator::NewStub(channel_);
}

Client::~Client() { Close(); }

// ---------------------------------------------------------------------------------------------
// Calls

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

absl::Status Client::ReportStagedBatch(std::vector<psync::v1::Staged> items) {
  psync::v1::SessionUp up;
  psync::v1::StagedBatch* batch = up.mutable_staged();
  for (psync::v1::Staged& item : items) *batch->add_items() = std::move(item);
  return SendAndWait(std::move(up));
}

absl::Status Client::SkipStep(uint64_t step, absl::string_view reason) {
  bool new_vote = false;
  {
    absl::MutexLock lock(&mu_);
    if (!notices_.HasStepSkipped(step)) new_vote = skip_votes_.insert(step).second;
  }
  psync::v1::SessionUp up;
  psync::v1::SkipStep* skip = up.mutable_skip();
  skip->set_step(step);
  skip->set_reason(std::string(reason));
  absl::Status status = SendAndWait(std::move(up));
  // A refused vote was not counted; one that got no answer may have been.
  const bool maybe_counted = status.ok() || status.code() == absl::StatusCode::kUnavailable ||
                             status.code() == absl::StatusCode::kDeadlineExceeded ||
                             status.code() == absl::StatusCode::kCancelled;
  if (new_vote && !maybe_counted) {
    absl::MutexLock lock(&mu_);
    skip_votes_.erase(step);
  }
  return status;
}

absl::Status Client::ReportSyncDone(uint64_t step, uint32_t chunk,
                                    std::vector<psync::v1::GroupChecksum> checksums,
                                    uint32_t executions) {
  psync::v1::SessionUp up;
  psync::v1::SyncDoneBatch* batch = up.mutable_sync_done();
  psync::v1::SyncDone* item = batch->add_items();
  item->set_step(step);
  item->set_chunk(chunk);
  item->set_executions(executions);
  for (psync::v1::GroupChecksum& c : checksums) *item->add_checksums() = std::move(c);
  return SendAndWait(std::move(up));
}

absl::Status Client::SendAndWait(psync::v1::SessionUp up) {
  PendingCall call;
  absl::MutexLock lock(&mu_);
  if (state_ == State::kFailed) return final_status_;
  if (closing_) return absl::FailedPreconditionError("the client is closed");
  const uint64_t id = next_request_id_++;
  call.up = std::move(up);
  call.up.set_request_id(id);
  SetMessageGeneration(&call.up, generation_);
  calls_.emplace(id, &call);
  auto settled = [this, &call]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return call.done || state_ == State::kFailed || closing_;
  };
  mu_.AwaitWithDeadline(absl::Condition(&settled), absl::Now() + options_.call_timeout);
  calls_.erase(id);
  if (call.done) return call.status;
  if (state_ == State::kFailed) return final_status_;
  if (closing_) {
    return absl::CancelledError(
        absl::StrCat("the client was closed while request_id ", id, " waited for its Ack"));
  }
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

void Client::SetNoticeHandler(std::function<void(const psync::v1::SessionDown&)> handler) {
  auto shared = handler
                    ? std::make_shared<const std::function<void(const psync::v1::SessionDown&)>>(
                          std::move(handler))
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
  absl::MutexLock lock(&mu_);
  ClientStats stats = stats_;
  stats.directives_received = counters.directives_received;
  stats.duplicate_directives_dropped = counters.duplicate_directives;
  stats.stale_notices_dropped = counters.stale_notices;
  return stats;
}

// ---------------------------------------------------------------------------------------------
// Reader thread

void Client::SessionLoop() {
  Backoff backoff(options_.backoff);
  while (true) {
    bool retry = false;
    bool attached = false;
    absl::Status why = OpenSession(&retry);
    if (why.ok()) why = ReadSession(&retry, &attached);
    if (attached) backoff.Reset();

    absl::MutexLock lock(&mu_);
    if (closing_) break;
    if (!retry) {
      state_ = State::kFailed;
      final_status_ = why;
      notices_.Fail(why);
      break;
    }
    last_error_ = why;
    state_ = State::kDisconnected;
    const absl::Duration delay = backoff.NextDelay();
    if (mu_.AwaitWithTimeout(absl::Condition(&closing_), delay)) break;
  }
  absl::MutexLock lock(&mu_);
  reader_done_ = true;
}

absl::StatusOr<psync::v1::JoinResponse> Client::Join() {
  psync::v1::JoinResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::CancelledError("the client is closing");
    unary_context_ = &context;
  }
  psync::v1::JoinRequest request = options_.plan;
  {
    // A rank that was running re-announces its step: if the coordinator restarted and lost the
    // job, it rebuilds the same decisions from the ranks' resumes; otherwise it ignores it.
    absl::MutexLock lock(&mu_);
    if (joined_) {
      std::optional<psync::v1::Resume> resume = progress_.Build(generation_);
      if (resume.has_value()) *request.mutable_resume() = std::move(*resume);
    }
  }
  const grpc::Status status = stub_->Join(&context, request, &response);
  {
    absl::MutexLock lock(&mu_);
    unary_context_ = nullptr;
  }
  if (!status.ok()) return FromGrpc(status, "Join");
  return response;
}

absl::Status Client::OpenSession(bool* retry) {
  *retry = true;
  absl::StatusOr<psync::v1::JoinResponse> joined = Join();
  if (!joined.ok()) {
    *retry = IsTransient(joined.status());
    return joined.status();
  }
  const psync::v1::JoinResponse& response = *joined;

  bool first_join;
  {
    absl::MutexLock lock(&mu_);
    first_join = !joined_;
  }
  if (first_join) {
    next_step_ = response.next_step();  // before attached_once_, which Connect() waits for
    notices_.SetGeneration(response.generation());
    absl::MutexLock lock(&mu_);
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
    for (auto& [id, call] : calls_) SetMessageGeneration(&call->up, generation_);
    ++stats_.resumes;
  } else if (response.generation() != generation()) {
    *retry = false;
    return absl::AbortedError(absl::StrCat(
        "rank ", rank(), " of job '", job_id(), "' joined again after its Session broke and got ",
        "generation ", response.generation(), ", but this client belongs to generation ",
        generation(), ": the job moved on; connect a new client and restage"));
  }

  session_context_ = std::make_unique<grpc::ClientContext>();
  psync::v1::SessionUp attach;
  {
    absl::MutexLock lock(&mu_);
    if (closing_) {
      session_context_.reset();
      return absl::CancelledError("the client is closing");
    }
    stream_context_ = session_context_.get();
    attach.set_request_id(next_request_id_++);
    attach_request_id_ = attach.request_id();
  }
  psync::v1::Attach* a = attach.mutable_attach();
  a->set_job_id(job_id());
  a->set_rank(rank());
  a->set_generation(response.generation());
  a->set_session_id(response.session_id());

  // Starting the call may wait for the channel; Close() cancels it through stream_context_.
  std::shared_ptr<Stream> stream = stub_->Session(session_context_.get());
  {
    absl::MutexLock lock(&mu_);
    stream_ = stream;
    ++epoch_;
    state_ = State::kAttaching;
    attach_deadline_ = absl::Now() + options_.call_timeout;
    attach_timed_out_ = false;
    attach_status_ = absl::OkStatus();
  }
  // A failed write means the stream broke: ReadSession() then sees it end and reports why.
  absl::MutexLock write_lock(&write_mu_);
  stream->Write(attach);
  return absl::OkStatus();
}

absl::Status Client::ReadSession(bool* retry, bool* attached) {
  std::shared_ptr<Stream> stream;
  {
    absl::MutexLock lock(&mu_);
    stream = stream_;
  }
  psync::v1::SessionDown down;
  while (stream->Read(&down)) {
    if (!down.has_ack()) {
      Notify(down);
      continue;
    }
    switch (HandleAck(down.ack())) {
      case AckKind::kAttached:
        *attached = true;
        break;
      case AckKind::kReattached:
        *attached = true;
        RecoverSkips();
        break;
      default:
        break;
    }
  }
  stream.reset();
  const absl::Status finished = TearDown();

  absl::MutexLock lock(&mu_);
  if (!attach_status_.ok()) {
    *retry = attach_status_.code() == absl::StatusCode::kUnavailable;
    return attach_status_;
  }
  if (attach_timed_out_) {
    *retry = true;
    return absl::DeadlineExceededError(absl::StrCat("attach was not acknowledged within ",
                                                    absl::FormatDuration(options_.call_timeout)));
  }
  if (finished.ok()) {
    *retry = true;
    return absl::UnavailableError("the coordinator ended the Session");
  }
  *retry = IsTransient(finished);
  return finished;
}

Client::AckKind Client::HandleAck(const psync::v1::Ack& ack) {
  const absl::Status status(static_cast<absl::StatusCode>(ack.code()), ack.message());
  absl::MutexLock lock(&mu_);
  if (ack.request_id() == attach_request_id_ && state_ == State::kAttaching) {
    if (!status.ok()) {
      attach_status_ = absl::Status(status.code(), absl::StrCat("attach: ", status.message()));
      if (stream_context_ != nullptr) stream_context_->TryCancel();
      return AckKind::kAttachRefused;
    }
    state_ = State::kConnected;
    const bool reattached = attached_once_;
    if (reattached) ++stats_.reconnects;
    attached_once_ = true;
    return reattached ? AckKind::kReattached : AckKind::kAttached;
  }
  auto it = calls_.find(ack.request_id());
  if (it != calls_.end() && !it->second->done) {
    it->second->done = true;
    it->second->status = status;
    if (status.ok()) progress_.OnAcknowledged(it->second->up);
  }
  return AckKind::kCall;
}

void Client::Notify(const psync::v1::SessionDown& down) {
  if (notices_.Add(down) != NoticeQueue::AddResult::kAccepted) return;
  std::shared_ptr<const std::function<void(const psync::v1::SessionDown&)>> handler;
  {
    absl::MutexLock lock(&mu_);
    if (down.has_step_skipped()) {
      skip_votes_.erase(down.step_skipped().step());
      progress_.OnStepSkipped(down.step_skipped().step());
    }
    if (down.has_directive()) progress_.OnDirective(down.directive().step(), down.directive().chunk());
    handler = handler_;
  }
  if (handler != nullptr) (*handler)(down);
}

void Client::RecoverSkips() {
  {
    absl::MutexLock lock(&mu_);
    for (auto it = skip_votes_.begin(); it != skip_votes_.end();) {
      it = notices_.HasStepSkipped(*it) ? skip_votes_.erase(it) : std::next(it);
    }
    if (skip_votes_.empty()) return;
  }
  // The Session is attached now, so a skip decided from here on reaches it. A skip moves every
  // rank past the step at once, and a rank that voted to skip a step leaves it only that way; so
  // a voted step below the job's lowest rank step was skipped while this rank was away.
  psync::v1::GetJobStatusRequest request;
  request.set_job_id(job_id());
  psync::v1::JobStatus status;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + options_.call_timeout));
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return;
    unary_context_ = &context;
  }
  const grpc::Status rpc = stub_->GetJobStatus(&context, request, &status);
  {
    absl::MutexLock lock(&mu_);
    unary_context_ = nullptr;
  }
  // An aborted generation's Abort notice is on its way (the coordinator sends it on attach).
  if (!rpc.ok() || status.generation() != generation() || status.state() == "ABORTED") return;
  std::vector<uint64_t> settled;
  {
    absl::MutexLock lock(&mu_);
    for (uint64_t step : skip_votes_) {
      if (step < status.min_rank_step()) settled.push_back(step);
    }
  }
  for (uint64_t step : settled) {
    {
      absl::MutexLock lock(&mu_);
      skip_votes_.erase(step);
      ++stats_.skips_recovered;  // before the waiters wake
    }
    psync::v1::SessionDown down;
    down.mutable_step_skipped()->set_generation(generation());
    down.mutable_step_skipped()->set_step(step);
    Notify(down);
  }
}

absl::Status Client::TearDown() {
  std::shared_ptr<Stream> stream;
  {
    absl::MutexLock lock(&mu_);
    stream = std::move(stream_);
    if (state_ == State::kAttaching || state_ == State::kConnected) {
      state_ = State::kDisconnected;
    }
  }
  grpc::Status status;
  {
    // No write is in flight once write_mu_ is ours, and none starts: stream_ is gone.
    absl::MutexLock write_lock(&write_mu_);
    status = stream->Finish();
  }
  stream.reset();
  {
    absl::MutexLock lock(&mu_);
    stream_context_ = nullptr;
  }
  session_context_.reset();
  return FromGrpc(status, "Session");
}

// ---------------------------------------------------------------------------------------------
// Writer thread

bool Client::HasUnsent() const {
  for (const auto& [id, call] : calls_) {
    if (!call->done && call->sent_epoch != epoch_) return true;
  }
  return false;
}

void Client::WriteLoop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      const uint64_t epoch = epoch_;
      const bool watch_attach = state_ == State::kAttaching && !attach_timed_out_;
      auto ready = [this, epoch, watch_attach]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return closing_ || state_ == State::kFailed || epoch_ != epoch ||
               (watch_attach && state_ != State::kAttaching) ||
               (state_ == State::kConnected && HasUnsent());
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready),
                            watch_attach ? attach_deadline_ : absl::InfiniteFuture());
      if (closing_ || state_ == State::kFailed) break;
      if (state_ == State::kAttaching && !attach_timed_out_ && absl::Now() >= attach_deadline_) {
        attach_timed_out_ = true;
        if (stream_context_ != nullptr) stream_context_->TryCancel();
        continue;
      }
      if (state_ != State::kConnected || !HasUnsent()) continue;
    }
    absl::MutexLock write_lock(&write_mu_);
    std::shared_ptr<Stream> stream;
    psync::v1::SessionUp up;
    {
      absl::MutexLock lock(&mu_);
      if (state_ != State::kConnected || closing_) continue;
      for (auto& [id, call] : calls_) {
        if (call->done || call->sent_epoch == epoch_) continue;
        if (call->sent_epoch != 0) ++stats_.messages_resent;
        call->sent_epoch = epoch_;
        up = call->up;
        stream = stream_;
        break;
      }
    }
    // A failed write means the stream broke; the reader thread reconnects and the message is
    // written again on the next stream.
    if (stream != nullptr) stream->Write(up);
  }

  // Half-close the Session so the coordinator ends it.
  absl::MutexLock write_lock(&write_mu_);
  std::shared_ptr<Stream> stream;
  {
    absl::MutexLock lock(&mu_);
    if (state_ == State::kConnected || state_ == State::kAttaching) stream = stream_;
  }
  if (stream != nullptr) stream->WritesDone();
}

// ---------------------------------------------------------------------------------------------
// Close

void Client::Close() {
  {
    absl::MutexLock lock(&mu_);
    if (closing_) {
      // Another call closes: return once it is done.
      mu_.Await(absl::Condition(&closed_));
      return;
    }
    closing_ = true;
    // A Join in progress is pointless now. Not attached: nothing to half-close; stop the attach.
    if (unary_context_ != nullptr) unary_context_->TryCancel();
    if (state_ != State::kConnected && stream_context_ != nullptr) stream_context_->TryCancel();
  }
  notices_.Fail(absl::CancelledError("the client is closed"));
  if (writer_.joinable()) writer_.join();
  {
    absl::MutexLock lock(&mu_);
    const absl::Duration grace = std::min(kCloseGrace, options_.call_timeout);
    if (!mu_.AwaitWithTimeout(absl::Condition(&reader_done_), grace)) {
      if (unary_context_ != nullptr) unary_context_->TryCancel();
      if (stream_context_ != nullptr) stream_context_->TryCancel();
    }
  }
  if (reader_.joinable()) reader_.join();
  absl::MutexLock lock(&mu_);
  if (state_ != State::kFailed) state_ = State::kClosed;
  closed_ = true;
}

}  // namespace psync

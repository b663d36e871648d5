// SimRank; contract: sim_rank.h.
#include "tests/simulation/sim_rank.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/job_start.h"
#include "client/reconnecting_stream.h"
#include "wire/not_served.h"
#include "wire/wire_status.h"

namespace psync::simulation {
namespace {

// The checksum every member of a sync group reports for (step, chunk): the same for all.
uint64_t GroupChecksum(uint64_t step, uint32_t chunk, const std::string& group) {
  uint64_t h = MixSeed(step, chunk);
  for (unsigned char c : group) h = MixSeed(h, c);
  return h;
}

std::vector<std::string> AddressesOf(const std::vector<SimCoordinator*>& coordinators) {
  std::vector<std::string> addresses;
  for (const SimCoordinator* c : coordinators) addresses.push_back(c->address());
  return addresses;
}

}  // namespace

SimRank::SimRank(World* world, std::vector<SimCoordinator*> coordinators, RankChecker* checker,
                 RankSetup setup)
    : world_(world),
      coordinators_(std::move(coordinators)),
      checker_(checker),
      setup_(std::move(setup)),
      origin_(world->NewOrigin()),
      rng_(world->RngFor(origin_)),
      targets_(AddressesOf(coordinators_),
               JobStartIndex(setup_.join.job_id(), coordinators_.size())),
      coordinator_(coordinators_.front()),
      join_(setup_.join) {}

bool SimRank::Deferred(std::function<void()> again) {
  return world_->DeferWhilePaused(paused_until_, origin_, std::move(again));
}

void SimRank::Pause(absl::Duration length) {
  paused_until_ = std::max(paused_until_, world_->now() + length);
  world_->Trace(absl::StrCat("rank ", rank(), ": paused for ", absl::FormatDuration(length)));
}

void SimRank::Start() {
  world_->At(world_->now() + rng_.Between(absl::ZeroDuration(), absl::Milliseconds(50)), origin_,
             [this] { Connect(); });
}

void SimRank::Connect() {
  if (Deferred([this] { Connect(); })) return;
  if (phase_ == Phase::kFailed) return;
  phase_ = Phase::kJoining;
  for (SimCoordinator* c : coordinators_) {
    if (c->address() == targets_.current()) coordinator_ = c;
  }
  connection_incarnation_ = coordinator_->process_incarnation();
  connection_ = coordinator_->Connect(this);
  v1::JoinRequest request = join_;
  if (joined_) {
    std::optional<v1::Resume> resume = progress_.Build(generation_);
    if (resume.has_value()) *request.mutable_resume() = std::move(*resume);
  }
  world_->Trace(absl::StrCat(
      "rank ", rank(), ": join ",
      coordinators_.size() > 1 ? absl::StrCat("at ", coordinator_->address(), " ") : "",
      "on connection ", connection_,
      request.has_resume() ? absl::StrCat(" resuming step ", request.resume().step()) : ""));
  coordinator_->SendJoin(connection_, request);
  KeepAlive(connection_);
}

void SimRank::KeepAlive(uint64_t connection) {
  world_->After(absl::Seconds(1), origin_, [this, connection] {
    if (connection != connection_) return;
    // gRPC's keepalive runs on its own threads: a paused training loop still answers, a paused
    // coordinator process does not.
    if (coordinator_->paused_until() < world_->now() + absl::Seconds(2)) {
      KeepAlive(connection);
      return;
    }
    world_->After(absl::Seconds(2), origin_, [this, connection] {
      if (connection != connection_) return;
      world_->Trace(absl::StrCat("rank ", rank(), ": keepalive unanswered for 2s"));
      coordinator_->Hangup(connection);
    });
  });
}

void SimRank::Reconnect(const absl::Status& why) {
  if (phase_ == Phase::kFailed) return;
  world_->Trace(absl::StrCat("rank ", rank(), ": session lost (", why.ToString(), ")"));
  if (connection_ != 0) coordinator_->Hangup(connection_);
  connection_ = 0;
  phase_ = Phase::kIdle;
  world_->At(world_->now() + rng_.Between(absl::Milliseconds(10), absl::Milliseconds(200)), origin_,
             [this] { Connect(); });
}

void SimRank::OnJoinAnswer(uint64_t connection, absl::StatusOr<v1::JoinResponse> answer) {
  if (Deferred([this, connection, answer] { OnJoinAnswer(connection, answer); })) return;
  if (connection != connection_ || phase_ != Phase::kJoining) return;
  if (!answer.ok()) {
    if (IsTransientFailure(answer.status())) {
      NoteFailure(answer.status());
      Reconnect(answer.status());
    } else if (absl::IsAborted(answer.status()) && joined_) {
      // Its generation was aborted while it was away: a new client joins again, as after an
      // Abort.
      Restart(std::string(answer.status().message()));
    } else {
      checker_->OnRefused(rank(), "join", answer.status());
      phase_ = Phase::kFailed;
    }
    return;
  }
  const v1::JoinResponse& r = *answer;
  progress_.OnJoined(r.restarted_after());
  if (!joined_) {
    joined_ = true;
    generation_ = r.generation();
    session_id_ = r.session_id();
    notices_->SetGeneration(generation_);
    progress_.Start(r.next_step());
    step_ = r.next_step();
    checker_->OnFreshJoin(rank(), step_);
    world_->After(absl::ZeroDuration(), origin_, [this, run = run_] {
      if (run == run_) StartStep();
    });
  } else if (r.generation() < generation_ || (r.resumed() && r.generation() == generation_)) {
    // Generations never repeat: a number its run was in before names other releases. A resume is
    // continued in a generation above the one it names.
    checker_->Violation(absl::StrCat("rank ", rank(), " re-joined with its resume of generation ",
                                     generation_, " and was put in generation ", r.generation(),
                                     r.resumed() ? " (resumed)" : "",
                                     ": a generation number goes down or repeats"));
    phase_ = Phase::kFailed;
    return;
  } else if (r.generation() != generation_ && r.resumed()) {
    notices_->ContinueGeneration(r.generation());
    generation_ = r.generation();
    session_id_ = r.session_id();
    for (auto& [id, up] : tracked_) SetMessageGeneration(&up, generation_);
  } else if (r.generation() == generation_) {
    session_id_ = r.session_id();
  } else {
    checker_->Fail(absl::StrCat("rank ", rank(), " re-joined and got generation ", r.generation(),
                                " (was ", generation_, "), not resumed: its run cannot go on"));
    phase_ = Phase::kFailed;
    return;
  }
  world_->Trace(absl::StrCat("rank ", rank(), ": joined generation ", generation_,
                             r.resumed() ? " (resumed)" : "", ", next step ", r.next_step()));
  Attach();
}

void SimRank::Attach() {
  phase_ = Phase::kAttaching;
  v1::SessionUp up;
  attach_request_id_ = next_request_id_++;
  up.set_request_id(attach_request_id_);
  v1::Attach* a = up.mutable_attach();
  a->set_job_id(setup_.join.job_id());
  a->set_rank(rank());
  a->set_generation(generation_);
  a->set_session_id(session_id_);
  coordinator_->SendUp(connection_, up);
}

void SimRank::OnDown(uint64_t connection, const v1::SessionDown& down) {
  if (Deferred([this, connection, down] { OnDown(connection, down); })) return;
  if (connection != connection_ || phase_ == Phase::kFailed) return;
  if (down.has_ack()) {
    HandleAck(down.ack());
  } else {
    HandleNotice(down);
  }
  Progress();
}

void SimRank::HandleAck(const v1::Ack& ack) {
  const absl::Status status = wire::StatusFromWire(ack);
  if (phase_ == Phase::kAttaching && ack.request_id() == attach_request_id_) {
    if (!status.ok()) {
      Reconnect(status);
      return;
    }
    phase_ = Phase::kAttached;
    for (const auto& [id, up] : tracked_) coordinator_->SendUp(connection_, up);
    return;
  }
  auto it = tracked_.find(ack.request_id());
  if (it == tracked_.end()) return;
  if (status.ok()) {
    progress_.OnAcknowledged(it->second);
  } else if (IsTransientFailure(status)) {
    return;  // kept: sent again after the re-join
  } else {
    checker_->OnRefused(rank(), it->second.ShortDebugString(), status);
  }
  tracked_.erase(it);
}

void SimRank::HandleNotice(const v1::SessionDown& down) {
  if (down.has_directive()) {
    checker_->OnDirectiveArrived(rank(), connection_incarnation_, down.directive());
  }
  // As psync::Client: a renumbered forming generation is joined again with the resume.
  if (down.has_abort() && down.abort().rejoin()) {
    if (down.abort().generation() == generation_) {
      Reconnect(absl::UnavailableError(down.abort().reason()));
    }
    return;
  }
  if (notices_->Add(down) != NoticeQueue::AddResult::kAccepted) return;
  if (down.has_step_skipped()) progress_.OnStepSkipped(down.step_skipped().step());
  if (down.has_abort()) {
    Restart(down.abort().reason());
    return;
  }
  if (!down.has_directive()) return;
  const v1::SyncDirective& d = down.directive();
  progress_.OnDirective(d.step(), d.chunk());
  world_->Trace(absl::StrCat("rank ", rank(), ": executes (step ", d.step(), ", chunk ", d.chunk(),
                             ") sequence ", d.sequence()));
  checker_->OnHandedOut(rank(), run_, d.step(), d.chunk());
  executed_.insert({d.step(), d.chunk()});
}

void SimRank::RestartProcess() {
  if (Deferred([this] { RestartProcess(); })) return;
  if (phase_ == Phase::kFailed || finished()) return;
  Restart("the process restarted");
}

void SimRank::Restart(const std::string& why) {
  // ABORTED: "join again with a new client": the process restarts with a new incarnation and
  // starts its run over at the step the coordinator names.
  ++run_;
  world_->Trace(absl::StrCat("rank ", rank(), ": aborted (", why, "); restarts as run ", run_));
  join_.set_incarnation(absl::StrCat(setup_.join.incarnation(), "-restart", run_));
  joined_ = false;
  progress_ = ResumeTracker();
  notices_ = std::make_unique<NoticeQueue>();
  tracked_.clear();
  executed_.clear();
  reported_.clear();
  step_started_ = false;
  Reconnect(absl::AbortedError(why));
}

void SimRank::OnSessionEnd(uint64_t connection, const absl::Status& status) {
  if (Deferred([this, connection, status] { OnSessionEnd(connection, status); })) return;
  if (connection != connection_) return;
  NoteFailure(status);
  Reconnect(status);
}

void SimRank::NoteFailure(const absl::Status& status) {
  const std::optional<wire::Redirect> redirect = wire::RedirectOf(status);
  targets_.OnFailure(coordinator_->address(), redirect.has_value() ? redirect->owner : "");
}

void SimRank::SendTracked(v1::SessionUp up) {
  up.set_request_id(next_request_id_++);
  SetMessageGeneration(&up, generation_);
  progress_.OnSent(up);
  if (phase_ == Phase::kAttached) coordinator_->SendUp(connection_, up);
  tracked_.emplace(up.request_id(), std::move(up));
}

void SimRank::StartStep() {
  if (Deferred([this] { StartStep(); })) return;
  if (phase_ == Phase::kFailed || step_ >= setup_.end_step) return;
  step_started_ = true;
  items_sent_ = 0;
  reported_.clear();
  const uint64_t step = step_;
  if (setup_.skipped.count(step) > 0) {
    v1::SessionUp up;
    up.mutable_skip()->set_step(step);
    up.mutable_skip()->set_reason("found_inf");
    SendTracked(std::move(up));
    items_sent_ = setup_.items.size();
    Progress();
    return;
  }
  for (const auto& [chunk, optimizer] : setup_.items) {
    const absl::Duration compute = rng_.Between(absl::ZeroDuration(), absl::Milliseconds(5));
    world_->At(world_->now() + compute, origin_,
               [this, step, run = run_, chunk = chunk, optimizer = optimizer]() {
                 auto stage = [this, step, run, chunk, optimizer] {
                   if (step != step_ || run != run_ || phase_ == Phase::kFailed) return;
                   v1::SessionUp up;
                   v1::Staged* item = up.mutable_staged()->add_items();
                   item->set_step(step);
                   item->set_chunk(chunk);
                   item->set_optimizer(optimizer);
                   checker_->OnStageSent(rank(), step, chunk, optimizer);
                   SendTracked(std::move(up));
                   ++items_sent_;
                   Progress();
                 };
                 if (!Deferred(stage)) stage();
               });
  }
  if (setup_.items.empty()) Progress();
}

void SimRank::Progress() {
  if (phase_ == Phase::kFailed || !step_started_ || step_ >= setup_.end_step) return;
  if (items_sent_ < setup_.items.size()) return;
  if (setup_.skipped.count(step_) > 0) {
    if (!notices_->HasStepSkipped(step_)) return;
  } else {
    for (uint32_t chunk : setup_.syncs) {
      if (executed_.count({step_, chunk}) == 0) return;
      if (reported_.insert(chunk).second) SendSyncDone(step_, chunk);
    }
  }
  // Every chunk of the step is synced and reported: the next step.
  executed_.erase(executed_.begin(), executed_.lower_bound({step_ + 1, 0}));
  ++step_;
  step_started_ = false;
  world_->At(world_->now() + rng_.Between(absl::ZeroDuration(), absl::Milliseconds(2)), origin_,
             [this, run = run_] {
               if (run == run_) StartStep();
             });
}

void SimRank::SendSyncDone(uint64_t step, uint32_t chunk) {
  v1::SessionUp up;
  v1::SyncDone* done = up.mutable_sync_done()->add_items();
  done->set_step(step);
  done->set_chunk(chunk);
  done->set_executions(1);
  auto groups = setup_.groups.find(chunk);
  if (groups != setup_.groups.end()) {
    for (const std::string& group : groups->second) {
      v1::GroupChecksum* c = done->add_checksums();
      c->set_group(group);
      c->set_checksum(GroupChecksum(step, chunk, group));
    }
  }
  SendTracked(std::move(up));
}

std::string SimRank::Describe() const {
  std::vector<std::string> unanswered;
  for (const auto& [id, up] : tracked_) unanswered.push_back(up.ShortDebugString());
  return absl::StrCat("rank ", rank(), ": step ", step_, " of ", setup_.end_step, ", phase ",
                      static_cast<int>(phase_), ", generation ", generation_, ", items sent ",
                      items_sent_, "/", setup_.items.size(), ", unanswered [",
                      absl::StrJoin(unanswered, "; "), "]");
}

}  // namespace psync::simulation

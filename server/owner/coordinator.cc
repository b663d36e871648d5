#include "server/owner/coordinator.h"

#include <algorithm>
#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/observe/trace_export.h"
#include "server/owner/job_view.h"
#include "wire/bounded_text.h"
#include "wire/not_served.h"

namespace psync::server {

using core::EventKind;

Coordinator::Coordinator(CoordinatorOptions options, serve::Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      history_(options_.finished_jobs_kept),
      events_(options_.event_log_capacity),
      fan_out_(options_.delivery_threads) {}

namespace {

constexpr size_t kMaxEndReasonBytes = 256;
// A delivery thread's least share of a decision's streams (fewer streams are written by the
// delivering thread alone: a hand-over costs about a wake-up, a few writes' worth).
constexpr size_t kStreamsPerDeliveryThread = 16;

}  // namespace

Coordinator::Job* Coordinator::FindJob(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

absl::Status Coordinator::NoLiveJob(const std::string& job_id, absl::string_view hint) const {
  return EndedOrUnknown(job_id, hint, /*ask_gate=*/true);
}

absl::Status Coordinator::EndedOrUnknown(const std::string& job_id, absl::string_view hint,
                                         bool ask_gate) const {
  const FinishedJob* finished = history_.Find(job_id);
  if (finished == nullptr) {
    // A job another replica owns: send the caller there rather than deny the job exists.
    if (ask_gate && options_.gate != nullptr) {
      absl::Status served = options_.gate->AdmitMessage(job_id).status();
      const std::optional<wire::Redirect> redirect = wire::RedirectOf(served);
      if (redirect.has_value() && !redirect->owner.empty()) return served;
    }
    return absl::NotFoundError(absl::StrCat("job_id '", job_id, "' is not known", hint));
  }
  const JobEnd& end = finished->view.end;
  if (end.kind == JobEndKind::kEvicted) {
    return absl::FailedPreconditionError(absl::StrCat("job_id '", job_id, "' was evicted at ",
                                                      absl::FormatTime(end.time), " (", end.reason,
                                                      "); Join to start it again"));
  }
  return absl::FailedPreconditionError(absl::StrCat("job_id '", job_id, "' has ended at ",
                                                    absl::FormatTime(end.time), " (", end.reason,
                                                    "); it takes no more messages"));
}

void Coordinator::AppendEvent(core::Event event, Outgoing* out) {
  out->events.push_back(std::move(event));
}

void Coordinator::CommitEvents(Outgoing* out) {
  // The log keeps the vector as it is: its unused capacity would be kept with it.
  std::vector<core::Event>& events = out->events;
  if (events.capacity() > events.size() + events.size() / 2 + 8) events.shrink_to_fit();
  absl::MutexLock lock(&log_mu_);
  out->committed = events_.Append(std::move(out->events));
  out->events.clear();
  if (out->committed != nullptr || !out->notices.empty() || !out->closes.empty()) {
    out->ticket = ++last_ticket_;
  }
}

void Coordinator::Record(Job& job, core::Decisions& decisions, Outgoing* out) {
  const size_t first = out->events.size();
  if (first == 0) {
    out->events.swap(decisions.events);  // the common case: no event is moved
  } else {
    out->events.insert(out->events.end(), std::make_move_iterator(decisions.events.begin()),
                       std::make_move_iterator(decisions.events.end()));
  }
  decisions.events.clear();
  ObserveFrom(job, first, *out);
  QueueNotices(job, decisions.deliveries, out);
}

void Coordinator::ObserveFrom(Job& job, size_t first_event, const Outgoing& out) {
  CountFrom(job, first_event, out);
  absl::MutexLock observer_lock(&job.observer_mu);
  ObserveEvents(job, absl::MakeConstSpan(out.events).subspan(first_event));
}

void Coordinator::CountFrom(Job& job, size_t first_event, const Outgoing& out) {
  for (size_t i = first_event; i < out.events.size(); ++i) {
    const core::Event& e = out.events[i];
    switch (e.kind) {
      case EventKind::kCheckin:
        job.counters.checkins += core::RankCount(e);
        break;
      case EventKind::kDuplicate:
        ++job.counters.duplicate_checkins;
        break;
      case EventKind::kRelease:
        ++job.counters.releases;
        break;
      case EventKind::kSyncDone:
        job.counters.syncs_done += core::RankCount(e);
        break;
      case EventKind::kStepSkipped:
        ++job.counters.skipped_steps;
        break;
      case EventKind::kViolation:
        ++job.counters.violations;
        break;
      default:
        break;
    }
  }
}

void Coordinator::ObserveEvents(Job& job, absl::Span<const core::Event> events) {
  for (const core::Event& e : events) {
    if (e.kind != EventKind::kRejected) job.observer.OnEvent(e);
  }
}

void Coordinator::QueueNotices(Job& job, std::vector<core::Delivery>& deliveries, Outgoing* out) {
  // A release names every member (16,384 notices): grown once, not by doubling. A node's batch
  // adds a few at a time, so the vector still grows geometrically (an exact reserve per message
  // would copy it every time). A run of deliveries of the same notice (a release's directive to
  // every member) shares one copy.
  const size_t needed = out->notices.size() + deliveries.size();
  if (needed > out->notices.capacity()) {
    out->notices.reserve(std::max(needed, 2 * out->notices.capacity()));
  }
  std::shared_ptr<const core::Notice> shared;
  for (core::Delivery& d : deliveries) {
    auto it = job.sessions.find(d.rank);
    // A rank without a session gets its pending notices when it attaches.
    if (it == job.sessions.end()) continue;
    if (auto* directive = std::get_if<core::SyncDirective>(&d.notice)) directive->epoch = job.epoch;
    if (shared == nullptr || !(*shared == d.notice)) {
      shared = std::make_shared<const core::Notice>(std::move(d.notice));
    }
    out->notices.emplace_back(it->second, shared);
  }
}

namespace {

// The kRejected event of a refused message, without its job.
core::Event RejectedEvent(const absl::Status& status, absl::Time now) {
  core::Event e;
  e.kind = EventKind::kRejected;
  e.time = now;
  e.detail = wire::BoundEcho(status.ToString());
  return e;
}

}  // namespace

void Coordinator::RecordRejection(Job& job, const absl::Status& status, absl::Time now,
                                  Outgoing* out) {
  ++job.counters.rejected;
  core::Event e = RejectedEvent(status, now);
  e.job_id = job.tracker->job_id();
  e.generation = job.tracker->generation();
  AppendEvent(std::move(e), out);
}

void Coordinator::RecordRejection(const std::string& job_id, const absl::Status& status,
                                  absl::Time now, Outgoing* out) {
  core::Event e = RejectedEvent(status, now);
  e.job_id = wire::BoundEcho(job_id);
  AppendEvent(std::move(e), out);
}

void Coordinator::RecordRejectionOf(Job* job, const std::string& job_id, const absl::Status& status,
                                    absl::Time now, Outgoing* out) {
  if (job == nullptr) return RecordRejection(job_id, status, now, out);
  absl::MutexLock job_lock(&job->mu);
  RecordRejection(*job, status, now, out);
}

void Coordinator::Deliver(Outgoing& out) {
  if (out.ticket == 0) return;
  {
    absl::MutexLock lock(&deliver_mu_);
    const uint64_t ticket = out.ticket;
    ready_.emplace(ticket, std::move(out));
    if (delivering_) return;  // the thread delivering now delivers this one too, in turn
    delivering_ = true;
  }
  for (;;) {
    Outgoing next;
    {
      absl::MutexLock lock(&deliver_mu_);
      auto it = ready_.find(next_delivery_);
      if (it == ready_.end()) {  // its owner has not handed it over yet: the owner delivers it
        delivering_ = false;
        return;
      }
      next = std::move(it->second);
      ready_.erase(it);
      ++next_delivery_;
    }
    const int64_t start = SteadyNanos();
    DeliverNow(next);
    delivering_ns_.fetch_add(SteadyNanos() - start, std::memory_order_relaxed);
  }
}

LoadTimes Coordinator::load_times() const {
  LockTimes all;
  all.Add(lock_times_);
  {
    absl::ReaderMutexLock lock(&mu_);
    all.Add(left_jobs_lock_times_);
    for (const auto& [id, job] : jobs_) all.Add(job->lock_times);
  }
  LoadTimes t;
  t.lock_wait = all.wait();
  t.lock_held = all.held();
  t.lock_acquisitions = all.acquisitions.load(std::memory_order_relaxed);
  t.delivering = absl::Nanoseconds(delivering_ns_.load(std::memory_order_relaxed));
  return t;
}

void Coordinator::EraseJobLocked(
    absl::flat_hash_map<std::string, std::unique_ptr<Job>>::iterator it) {
  left_jobs_lock_times_.Add(it->second->lock_times);
  jobs_.erase(it);
}

void Coordinator::DeliverNow(Outgoing& out) {
  // Sinks that share a transport (a node agent's stream) get the decision's notices under one
  // cork, so that the notices for several of its ranks leave as one message. A run of one notice
  // to sinks of one transport (a release's members on one node) goes to it at once. The runs are
  // gathered per transport first (in the order each is first named, each transport's runs in
  // order); then each transport's notices are queued and its write started (serializing it and
  // handing it to the kernel, about 15 us) by one of the delivery threads, which share the
  // transports out. A transport's notices are queued by one thread, in decision order, before it
  // is uncorked, so what each stream sends does not depend on which thread wrote it.
  struct Transport {
    NoticeBatcher* batcher;
    std::vector<std::pair<size_t, size_t>> runs;  // [begin, end) in out.notices
  };
  absl::flat_hash_map<NoticeBatcher*, size_t> index;  // a release to 16k ranks names 2k agents
  std::vector<Transport> transports;
  for (size_t i = 0; i < out.notices.size();) {
    SessionSink* sink = out.notices[i].first.get();
    const core::Notice* notice = out.notices[i].second.get();
    NoticeBatcher* batcher = sink->batcher();
    if (batcher == nullptr) {
      sink->Send(*notice);
      ++i;
      continue;
    }
    const size_t begin = i;
    for (; i < out.notices.size() && out.notices[i].second.get() == notice &&
           out.notices[i].first->batcher() == batcher;
         ++i) {
    }
    auto [it, added] = index.try_emplace(batcher, transports.size());
    if (added) transports.push_back({batcher, {}});
    transports[it->second].runs.emplace_back(begin, i);
  }
  fan_out_.Run(transports.size(), kStreamsPerDeliveryThread, [&](size_t first, size_t last) {
    std::vector<SessionSink*> run;
    for (size_t t = first; t < last; ++t) {
      NoticeBatcher* batcher = transports[t].batcher;
      batcher->Cork();
      for (const auto& [begin, end] : transports[t].runs) {
        run.clear();
        for (size_t k = begin; k < end; ++k) run.push_back(out.notices[k].first.get());
        batcher->SendToEach(run, *out.notices[begin].second);
      }
      batcher->Uncork();
    }
  });
  for (auto& [sink, status] : out.closes) sink->Close(status);
  if (out.committed != nullptr) {
    absl::MutexLock lock(&sinks_mu_);
    for (EventSink* sink : event_sinks_) sink->OnEvents(*out.committed);
  }
}

uint64_t Coordinator::AddEventSink(EventSink* sink, std::vector<core::Event>* backlog) {
  absl::ReaderMutexLock lock(&log_mu_);
  absl::MutexLock sinks_lock(&sinks_mu_);
  event_sinks_.push_back(sink);
  if (backlog != nullptr) *backlog = events_.Since(events_.first_index());
  return events_.end_index();
}

void Coordinator::RemoveEventSink(EventSink* sink) {
  absl::MutexLock lock(&sinks_mu_);
  event_sinks_.erase(std::remove(event_sinks_.begin(), event_sinks_.end(), sink),
                     event_sinks_.end());
}

absl::StatusOr<core::JoinResult> Coordinator::Join(const core::RankPlan& plan) {
  // With replicas, the job must be served here first (claiming it may wait for etcd, so outside
  // the lock). A malformed plan skips this and is refused below, claiming nothing.
  uint64_t epoch = 0;
  if (options_.gate != nullptr && core::ValidateRankPlan(plan, options_.tracker.limits).ok()) {
    absl::StatusOr<uint64_t> admitted = options_.gate->AdmitJoin(plan.job_id);
    if (!admitted.ok()) return admitted.status();
    epoch = *admitted;
  }
  Outgoing out;
  absl::StatusOr<core::JoinResult> result;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    auto it = jobs_.find(plan.job_id);
    if (it != jobs_.end() && it->second->epoch != epoch) {
      // State from an earlier ownership of the job by this replica: the ranks rebuild it.
      DropJobLocked(
          it,
          wire::NotServedHere(absl::StrCat("job '", plan.job_id, "' changed owner: join again"), "",
                              epoch),
          &out);
      it = jobs_.end();
    }
    const FinishedJob* finished = it == jobs_.end() ? history_.Find(plan.job_id) : nullptr;
    Job* const live = it == jobs_.end() ? nullptr : it->second.get();
    if (auto s = core::ValidateRankPlan(plan, options_.tracker.limits); !s.ok()) {
      RecordRejectionOf(live, plan.job_id, s, now, &out);
      result = s;
    } else if (auto auth = CheckToken(plan); !auth.ok()) {
      RecordRejectionOf(live, plan.job_id, auth, now, &out);
      result = auth;
    } else if (finished != nullptr && finished->view.end.kind == JobEndKind::kEnded) {
      result = NoLiveJob(plan.job_id, "");
      RecordRejection(plan.job_id, result.status(), now, &out);
    } else if (it == jobs_.end() && jobs_.size() >= options_.max_jobs) {
      result = absl::ResourceExhaustedError(
          absl::StrCat("job_id '", plan.job_id,
                       "': the coordinator already holds max_jobs=", options_.max_jobs, " jobs"));
      RecordRejection(plan.job_id, result.status(), now, &out);
    } else {
      if (it == jobs_.end()) {
        it = jobs_
                 .emplace(plan.job_id, std::make_unique<Job>(std::make_unique<core::JobTracker>(
                                                                 plan.job_id, options_.tracker),
                                                             options_.observer, epoch))
                 .first;
      }
      Job& job = *it->second;
      bool first_join_failed = false;
      {
        absl::MutexLock job_lock(&job.mu);
        job.last_activity = now;
        core::Decisions decisions;
        const uint64_t generation_before = job.tracker->generation();
        result = job.tracker->Join(plan, now, &decisions, NewSecret());
        Record(job, decisions, &out);
        if (result.ok()) TrackDetached(job, plan.rank, generation_before, now);
        if (!result.ok()) {
          RecordRejection(job, result.status(), now, &out);
          first_join_failed = job.tracker->generation() == 0;
        }
      }
      if (first_join_failed) EraseJobLocked(it);  // a job whose first join failed
    }
    CommitEvents(&out);
  }
  Deliver(out);
  return result;
}

absl::StatusOr<std::vector<core::Notice>> Coordinator::Attach(const std::string& job_id,
                                                              core::RankId rank,
                                                              uint64_t generation,
                                                              const std::string& session_id,
                                                              std::shared_ptr<SessionSink> sink) {
  std::shared_ptr<SessionSink> superseded;  // closed with ABORTED after the notices
  std::vector<core::Notice> pending;
  Outgoing out;
  absl::Status status;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    Job* job = FindJob(job_id);
    if (job == nullptr) {
      status = NotHere(job_id, "; Join first");
      RecordRejection(job_id, status, now, &out);
    } else {
      absl::MutexLock job_lock(&job->mu);
      if (!(status = CheckServed(*job)).ok() ||
          !(status = job->tracker->CheckAttach(rank, generation, session_id)).ok()) {
        RecordRejection(*job, status, now, &out);
      } else if (!job->sessions.contains(rank) && sessions_ >= options_.max_sessions) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            "the coordinator already holds max_sessions=", options_.max_sessions, " sessions"));
        RecordRejection(*job, status, now, &out);
      } else {
        auto& slot = job->sessions[rank];
        if (slot == nullptr) ++sessions_;
        superseded = std::move(slot);
        slot = std::move(sink);
        job->detached_since.erase(rank);
        job->lost.erase(rank);
        job->last_activity = now;
        pending = job->tracker->Pending(rank);
        for (core::Notice& notice : pending) {
          if (auto* d = std::get_if<core::SyncDirective>(&notice)) d->epoch = job->epoch;
        }
        if (superseded != nullptr) {
          out.closes.emplace_back(std::move(superseded),
                                  absl::AbortedError(absl::StrCat(
                                      "session of rank ", rank, " superseded by a newer session")));
        }
      }
    }
    CommitEvents(&out);
  }
  Deliver(out);
  if (!status.ok()) return status;
  return pending;
}

void Coordinator::RecordRejected(const std::string& job_id, const absl::Status& status) {
  Outgoing out;
  {
    absl::ReaderMutexLock jobs_lock(&mu_);
    if (Job* job = FindJob(job_id); job != nullptr) {
      TimedMutexLock job_lock(&job->mu, &job->lock_times);
      RecordRejection(*job, status, clock_->Now(), &out);
      CommitEvents(&out);
    } else {
      RecordRejection(job_id, status, clock_->Now(), &out);
      CommitEvents(&out);
    }
  }
  Deliver(out);
}

void Coordinator::Detach(const std::string& job_id, core::RankId rank, const SessionSink* sink) {
  TimedMutexLock lock(&mu_, &lock_times_);
  Job* found = FindJob(job_id);
  if (found == nullptr) return;
  Job& job = *found;
  absl::MutexLock job_lock(&job.mu);
  auto s = job.sessions.find(rank);
  if (s == job.sessions.end() || s->second.get() != sink) return;
  job.sessions.erase(s);
  --sessions_;
  job.last_activity = clock_->Now();
  // A rank that left finished is not waited for.
  if (job.tracker->IsJoined(rank) && !job.finished.contains(rank)) {
    job.detached_since.emplace(rank, job.last_activity);
  }
}

void Coordinator::TrackDetached(Job& job, core::RankId rank, uint64_t generation_before,
                                absl::Time now) {
  if (job.tracker->generation() == generation_before) {
    // The same generation: only the joining rank changed (O(1) instead of O(ranks) per join).
    if (!job.sessions.contains(rank)) job.detached_since.try_emplace(rank, now);
    return;
  }
  job.finished.clear();  // a new generation: every rank runs again
  const std::vector<core::RankId> joined = job.tracker->JoinedRanks();
  for (auto it = job.detached_since.begin(); it != job.detached_since.end();) {
    if (!std::binary_search(joined.begin(), joined.end(), it->first)) {
      job.lost.erase(it->first);
      job.detached_since.erase(it++);
    } else {
      ++it;
    }
  }
  for (core::RankId r : joined) {
    if (!job.sessions.contains(r)) job.detached_since.try_emplace(r, now);
  }
}

void Coordinator::EnforceLivenessOf(Job& job, absl::Time now, Outgoing* out) {
  if (job.tracker->state() == core::JobState::kAborted) return;
  std::vector<std::pair<core::RankId, absl::Time>> detached(job.detached_since.begin(),
                                                            job.detached_since.end());
  std::sort(detached.begin(), detached.end());
  for (const auto& [rank, since] : detached) {
    const absl::Duration gone = now - since;
    if (gone >= options_.rank_lease && job.lost.insert(rank).second) {
      core::Event e;
      e.kind = EventKind::kRankLost;
      e.time = now;
      e.job_id = job.tracker->job_id();
      e.generation = job.tracker->generation();
      e.rank = rank;
      e.step = job.tracker->rank_step(rank);
      e.duration = gone;
      e.detail = absl::StrCat("rank ", rank, " lost: no session for ", absl::FormatDuration(gone),
                              " (lease ", absl::FormatDuration(options_.rank_lease),
                              "); the job aborts after ",
                              absl::FormatDuration(options_.lost_rank_abort_after));
      {
        absl::MutexLock observer_lock(&job.observer_mu);
        job.observer.OnEvent(e);
      }
      AppendEvent(std::move(e), out);
    }
    if (gone >= options_.lost_rank_abort_after) {
      core::Decisions decisions;
      job.tracker->Abort(
          absl::StrCat("rank ", rank, " lost: no session for ", absl::FormatDuration(gone)), now,
          &decisions);
      Record(job, decisions, out);
      return;
    }
  }
}

absl::Status Coordinator::Apply(
    const std::string& job_id,
    const std::function<absl::Status(core::JobTracker&, absl::Time, core::Decisions*)>& input) {
  Outgoing out;
  absl::Status status;
  {
    absl::ReaderMutexLock jobs_lock(&mu_);  // the job stays; other jobs' messages run meanwhile
    Job* job = FindJob(job_id);
    if (job == nullptr) {
      status = NotHere(job_id);
      RecordRejection(job_id, status, clock_->Now(), &out);
      CommitEvents(&out);
    } else {
      TimedMutexLock job_lock(&job->mu, &job->lock_times);
      const absl::Time now = clock_->Now();
      job->last_activity = now;
      core::Decisions decisions;
      status = CheckServed(*job);
      if (status.ok()) status = input(*job->tracker, now, &decisions);
      Record(*job, decisions, &out);
      if (!status.ok()) RecordRejection(*job, status, now, &out);
      CommitEvents(&out);
    }
  }
  Deliver(out);
  return status;
}

absl::Status Coordinator::Stage(const std::string& job_id, core::RankId rank, uint64_t generation,
                                absl::Span<const core::StagedItem> items) {
  return Apply(job_id, [&](core::JobTracker& t, absl::Time now, core::Decisions* d) {
    return t.Stage(rank, generation, items, now, d);
  });
}

absl::Status Coordinator::Skip(const std::string& job_id, core::RankId rank, uint64_t generation,
                               core::Step step, const std::string& reason) {
  return Apply(job_id, [&](core::JobTracker& t, absl::Time now, core::Decisions* d) {
    return t.Skip(rank, generation, step, reason, now, d);
  });
}

absl::Status Coordinator::SyncDone(const std::string& job_id, core::RankId rank,
                                   uint64_t generation,
                                   absl::Span<const core::SyncDoneItem> items) {
  return Apply(job_id, [&](core::JobTracker& t, absl::Time now, core::Decisions* d) {
    return t.SyncDone(rank, generation, items, now, d);
  });
}

std::vector<core::Event> Coordinator::EnforceLiveness() {
  Outgoing out;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      absl::Duration idle = -absl::InfiniteDuration();  // a job with a session is never idle
      {
        Job& job = *it->second;
        absl::MutexLock job_lock(&job.mu);
        if (job.sessions.empty()) idle = now - job.last_activity;
      }
      if (idle >= options_.job_idle_ttl) {
        FinishJob(it++, JobEndKind::kEvicted,
                  absl::StrCat("no session and no message for ", absl::FormatDuration(idle),
                               " (job_idle_ttl ", absl::FormatDuration(options_.job_idle_ttl), ")"),
                  now, &out);
      } else {
        ++it;
      }
    }
    for (auto& [id, job] : jobs_) {
      absl::MutexLock job_lock(&job->mu);
      EnforceLivenessOf(*job, now, &out);
      if (job->tracker->state() != core::JobState::kRunning) continue;
      // The (O(ranks)) lists of who is missing are built only for a chunk reported stalled.
      const core::JobTracker& tracker = *job->tracker;
      auto lists_of = [&](const core::ChunkSnapshot& brief) {
        absl::StatusOr<core::ChunkSnapshot> full = tracker.ChunkAt(brief.step, brief.chunk, now);
        return full.ok() ? *std::move(full) : brief;
      };
      absl::MutexLock observer_lock(&job->observer_mu);
      for (core::Event& e : job->observer.Inspect(
               now, tracker.Snapshot(now, /*lists_after=*/absl::InfiniteDuration()), lists_of)) {
        AppendEvent(std::move(e), &out);
      }
    }
    CommitEvents(&out);
  }
  std::vector<core::Event> found;
  if (out.committed != nullptr) {
    for (const core::Event& e : *out.committed) {
      if (e.kind == EventKind::kStall || e.kind == EventKind::kRankLost ||
          e.kind == EventKind::kJobEvicted) {
        found.push_back(e);
      }
    }
  }
  Deliver(out);
  return found;
}

JobStatusView Coordinator::View(const Job& job, absl::Time now) const {
  JobStatusView view;
  view.snapshot = job.tracker->Snapshot(now);
  view.counters = job.counters;
  view.sessions_connected = static_cast<uint32_t>(job.sessions.size());
  absl::MutexLock observer_lock(&job.observer_mu);
  view.stalls = job.observer.stalls();
  view.stragglers = job.observer.TopStragglers(10);
  for (core::ChunkId c = 0; c < view.snapshot.num_chunks; ++c) {
    view.deadlines.push_back(job.observer.Deadline(c));
  }
  view.audit = job.observer.totals();
  view.lost_ranks.assign(job.lost.begin(), job.lost.end());
  std::sort(view.lost_ranks.begin(), view.lost_ranks.end());
  view.lock_held = job.lock_times.held();
  view.lock_wait = job.lock_times.wait();
  view.lock_acquisitions = job.lock_times.acquisitions.load(std::memory_order_relaxed);
  return view;
}

absl::StatusOr<JobStatusView> Coordinator::GetJobStatus(const std::string& job_id) {
  absl::ReaderMutexLock lock(&mu_);
  Job* job = FindJob(job_id);
  if (absl::Status fenced = FenceRead(job_id, job); !fenced.ok()) return fenced;
  if (job != nullptr) {
    absl::MutexLock job_lock(&job->mu);
    return View(*job, clock_->Now());
  }
  if (const FinishedJob* finished = history_.Find(job_id); finished != nullptr) {
    return finished->view;
  }
  return NoLiveJob(job_id, "");
}

absl::StatusOr<core::ChunkSnapshot> Coordinator::GetChunkStatus(const std::string& job_id,
                                                                core::Step step,
                                                                core::ChunkId chunk,
                                                                absl::Duration* deadline) {
  absl::ReaderMutexLock lock(&mu_);
  Job* job = FindJob(job_id);
  if (absl::Status fenced = FenceRead(job_id, job); !fenced.ok()) return fenced;
  if (job == nullptr) return NoLiveJob(job_id, "");
  absl::MutexLock job_lock(&job->mu);
  {
    absl::MutexLock observer_lock(&job->observer_mu);
    *deadline = job->observer.Deadline(chunk);
  }
  return job->tracker->ChunkAt(step, chunk, clock_->Now());
}

absl::StatusOr<std::string> Coordinator::Trace(const std::string& job_id, core::Step first,
                                               core::Step last) {
  std::vector<core::Event> events;
  {
    absl::ReaderMutexLock lock(&mu_);
    Job* job = FindJob(job_id);
    if (absl::Status fenced = FenceRead(job_id, job); !fenced.ok()) return fenced;
    if (job == nullptr && history_.Find(job_id) == nullptr) return NoLiveJob(job_id, "");
    absl::ReaderMutexLock log_lock(&log_mu_);
    events_.ForEach([&](const core::Event& e) {
      if (e.job_id == job_id) events.push_back(e);
    });
  }
  return observe::ExportChromeTrace(events, job_id, first, last);
}

absl::StatusOr<std::vector<observe::SyncAudit>> Coordinator::Audit(
    const std::string& job_id, std::vector<std::string>* earlier_owners) {
  absl::ReaderMutexLock lock(&mu_);
  Job* job = FindJob(job_id);
  if (absl::Status fenced = FenceRead(job_id, job); !fenced.ok()) return fenced;
  if (job != nullptr) {
    if (earlier_owners != nullptr && options_.gate != nullptr) {
      *earlier_owners = options_.gate->EarlierOwnerAudits(job_id);
    }
    absl::MutexLock job_lock(&job->mu);
    absl::MutexLock observer_lock(&job->observer_mu);
    return job->observer.Audit();
  }
  if (const FinishedJob* finished = history_.Find(job_id); finished != nullptr) {
    if (earlier_owners != nullptr) *earlier_owners = finished->earlier_owners;
    return finished->audit;
  }
  return NoLiveJob(job_id, "");
}

std::optional<observe::AuditTotals> Coordinator::AuditTotalsAt(const std::string& job_id,
                                                               uint64_t epoch) {
  absl::ReaderMutexLock lock(&mu_);
  Job* job = FindJob(job_id);
  if (job == nullptr || job->epoch != epoch) return std::nullopt;
  absl::MutexLock observer_lock(&job->observer_mu);
  return job->observer.totals();
}

absl::Status Coordinator::CheckToken(const core::RankPlan& plan) const {
  if (options_.job_tokens.empty()) return absl::OkStatus();
  auto it = options_.job_tokens.find(plan.job_id);
  if (it == options_.job_tokens.end()) {
    return absl::PermissionDeniedError(
        absl::StrCat("job_id '", plan.job_id, "' is not permitted on this coordinator"));
  }
  if (plan.token != it->second) {
    return absl::UnauthenticatedError(
        absl::StrCat("token does not match the token of job '", plan.job_id, "'"));
  }
  return absl::OkStatus();
}

std::string Coordinator::NewSecret() {
  absl::MutexLock lock(&secret_mu_);
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                         absl::Uniform<uint64_t>(bitgen_));
}

absl::Status Coordinator::CheckGeneration(const std::string& job_id, uint64_t generation,
                                          core::RankId rank, const std::string& session_id) {
  absl::ReaderMutexLock lock(&mu_);
  Job* job = FindJob(job_id);
  if (job == nullptr) return NoLiveJob(job_id, "");
  absl::MutexLock job_lock(&job->mu);
  if (auto s = job->tracker->CheckGeneration(generation); !s.ok()) return s;
  if (!options_.job_tokens.empty()) {
    if (auto s = job->tracker->CheckAttach(rank, generation, session_id); !s.ok()) {
      return absl::PermissionDeniedError(
          absl::StrCat("rendezvous needs a joined rank's session: ", s.message()));
    }
  }
  return absl::OkStatus();
}

std::vector<JobStatusView> Coordinator::ListJobs(absl::Span<const std::string> states) {
  auto wanted = [&](const JobStatusView& view) {
    return states.empty() ||
           std::find(states.begin(), states.end(), JobStateText(view)) != states.end();
  };
  absl::ReaderMutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::vector<JobStatusView> out;
  for (const auto& [id, job] : jobs_) {
    absl::MutexLock job_lock(&job->mu);
    JobStatusView view = View(*job, now);
    if (wanted(view)) out.push_back(std::move(view));
  }
  std::sort(out.begin(), out.end(), [](const JobStatusView& a, const JobStatusView& b) {
    return a.snapshot.job_id < b.snapshot.job_id;
  });
  for (const FinishedJob& finished : history_.jobs()) {
    // One line per job id: a job evicted and joined again is listed as its live run only.
    if (jobs_.contains(finished.view.snapshot.job_id)) continue;
    if (wanted(finished.view)) out.push_back(finished.view);
  }
  return out;
}

size_t Coordinator::live_jobs() const {
  absl::ReaderMutexLock lock(&mu_);
  return jobs_.size();
}

void Coordinator::FinishJob(absl::flat_hash_map<std::string, std::unique_ptr<Job>>::iterator it,
                            JobEndKind kind, const std::string& reason, absl::Time now,
                            Outgoing* out) {
  Job& job = *it->second;
  const std::string& job_id = it->first;
  FinishedJob finished;
  core::Event e;
  {
    absl::MutexLock job_lock(&job.mu);
    finished.view = View(job, now);
    finished.view.end = {kind, reason, now};
    {
      absl::MutexLock observer_lock(&job.observer_mu);
      finished.audit = job.observer.Audit();
    }
    const absl::Status closing = absl::FailedPreconditionError(
        absl::StrCat("job_id '", job_id, "' has ",
                     kind == JobEndKind::kEvicted ? "been evicted" : "ended", ": ", reason));
    CloseSessionsLocked(job, closing, out);
    e.generation = job.tracker->generation();
  }
  e.kind = kind == JobEndKind::kEvicted ? EventKind::kJobEvicted : EventKind::kJobEnded;
  e.time = now;
  e.job_id = job_id;
  e.detail = reason;
  AppendEvent(std::move(e), out);
  if (options_.gate != nullptr) {
    finished.earlier_owners = options_.gate->EarlierOwnerAudits(job_id);
    options_.gate->JobEnded(job_id);
  }
  history_.Add(std::move(finished));
  EraseJobLocked(it);
}

absl::StatusOr<EndJobResult> Coordinator::EndJob(const std::string& job_id,
                                                 const std::string& reason,
                                                 const std::string& token) {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id must not be empty");
  if (reason.size() > kMaxEndReasonBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("reason is ", reason.size(), " bytes; at most ", kMaxEndReasonBytes));
  }
  core::RankPlan credentials;
  credentials.job_id = job_id;
  credentials.token = token;
  Outgoing out;
  absl::StatusOr<EndJobResult> result;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    auto it = jobs_.find(job_id);
    const FinishedJob* finished = it == jobs_.end() ? history_.Find(job_id) : nullptr;
    if (absl::Status auth = CheckToken(credentials); !auth.ok()) {
      result = auth;
      RecordRejectionOf(it == jobs_.end() ? nullptr : it->second.get(), job_id, auth, now, &out);
    } else if (it != jobs_.end()) {
      FinishJob(it, JobEndKind::kEnded, reason.empty() ? "ended by EndJob" : reason, now, &out);
      result = EndJobResult{history_.Find(job_id)->view, /*already_ended=*/false};
    } else if (finished != nullptr && finished->view.end.kind == JobEndKind::kEnded) {
      result = EndJobResult{finished->view, /*already_ended=*/true};
    } else {
      result = NoLiveJob(job_id, "");
      RecordRejection(job_id, result.status(), now, &out);
    }
    CommitEvents(&out);
  }
  Deliver(out);
  return result;
}

absl::Status Coordinator::LeaveLocked(Job& job, core::RankId rank, uint64_t generation,
                                      bool finished, bool* ends) {
  const uint64_t current = job.tracker->generation();
  if (generation != current) {
    return absl::FailedPreconditionError(absl::StrCat(
        "leave.generation ", generation, " is ", generation < current ? "stale" : "not issued yet",
        ": job '", job.tracker->job_id(), "' is at generation ", current));
  }
  if (!job.tracker->IsJoined(rank)) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " has not joined generation ", current));
  }
  if (!finished) return absl::OkStatus();
  job.finished.insert(rank);
  job.detached_since.erase(rank);
  job.lost.erase(rank);
  *ends = job.finished.size() == job.tracker->plan().world_size();
  return absl::OkStatus();
}

absl::Status Coordinator::Leave(const std::string& job_id, core::RankId rank, uint64_t generation,
                                bool finished) {
  Outgoing out;
  absl::Status status;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    Job* job = FindJob(job_id);
    if (job == nullptr) {
      status = NotHere(job_id);
      RecordRejection(job_id, status, now, &out);
    } else {
      bool ends = false;
      {
        absl::MutexLock job_lock(&job->mu);
        job->last_activity = now;
        status = CheckServed(*job);
        if (status.ok()) status = LeaveLocked(*job, rank, generation, finished, &ends);
        // A refused leave changed nothing.
        if (!status.ok()) RecordRejection(*job, status, now, &out);
      }
      if (ends) FinishJob(jobs_.find(job_id), JobEndKind::kEnded, "every rank finished", now, &out);
    }
    CommitEvents(&out);
  }
  Deliver(out);
  return status;
}

std::vector<core::Event> Coordinator::EventsSince(uint64_t from, uint64_t* next, size_t limit,
                                                  uint64_t* end) {
  absl::ReaderMutexLock lock(&log_mu_);
  std::vector<core::Event> events = events_.Since(from, limit);
  *next = events.empty() ? events_.end_index() : events.back().index + 1;
  if (end != nullptr) *end = events_.end_index();
  return events;
}

}  // namespace psync::server

namespace psync::server {

absl::Status Coordinator::NotHere(const std::string& job_id, absl::string_view hint) const {
  if (options_.gate != nullptr) {
    if (absl::Status served = options_.gate->AdmitMessage(job_id).status(); !served.ok()) {
      return served;
    }
  }
  return EndedOrUnknown(job_id, hint, /*ask_gate=*/false);  // the gate was just asked
}

absl::Status Coordinator::FenceRead(const std::string& job_id, Job* job) const {
  if (options_.gate == nullptr) return absl::OkStatus();
  absl::StatusOr<uint64_t> epoch = options_.gate->AdmitQuery(job_id);
  // Served here (the state held is that owner's, or there is none: history answers), or no
  // replica owns the job (history, or NOT_FOUND).
  if (epoch.ok() && (job == nullptr || *epoch == job->epoch)) return absl::OkStatus();
  if (absl::IsNotFound(epoch.status())) return absl::OkStatus();
  absl::Status refused =
      epoch.ok()
          ? wire::NotServedHere(absl::StrCat("job '", job_id,
                                             "' changed owner since this replica's state was "
                                             "built: it no longer answers for it"),
                                "", *epoch)
          : epoch.status();
  if (job == nullptr) return refused;
  // What this replica last knew, for the operator: named, never served as current.
  JobStatusView last;
  {
    absl::MutexLock job_lock(&job->mu);
    last = View(*job, clock_->Now());
  }
  const std::optional<wire::Redirect> redirect = wire::RedirectOf(refused);
  return wire::NotServedHere(
      absl::StrCat(refused.message(), " (last known here, not current: ", JobStateText(last),
                   ", generation ", last.snapshot.generation, ", ownership epoch ", job->epoch,
                   ")"),
      redirect.has_value() ? redirect->owner : "", redirect.has_value() ? redirect->epoch : 0);
}

absl::Status Coordinator::CheckServed(const Job& job) {
  if (options_.gate == nullptr) return absl::OkStatus();
  absl::StatusOr<uint64_t> epoch = options_.gate->AdmitMessage(job.tracker->job_id());
  if (!epoch.ok()) return epoch.status();
  if (*epoch != job.epoch) {
    return wire::NotServedHere(
        absl::StrCat("job '", job.tracker->job_id(),
                     "' changed owner since this state was built: join again"),
        "", *epoch);
  }
  return absl::OkStatus();
}

void Coordinator::DropJobLocked(absl::flat_hash_map<std::string, std::unique_ptr<Job>>::iterator it,
                                const absl::Status& status, Outgoing* out) {
  {
    absl::MutexLock job_lock(&it->second->mu);
    CloseSessionsLocked(*it->second, status, out);
  }
  EraseJobLocked(it);
}

void Coordinator::CloseSessionsLocked(Job& job, const absl::Status& status, Outgoing* out) {
  for (auto& [rank, sink] : job.sessions) {
    --sessions_;
    // A rank that left finished is done with its Session: it is not told why the job went.
    if (!job.finished.contains(rank)) out->closes.emplace_back(std::move(sink), status);
  }
  job.sessions.clear();
}

size_t Coordinator::DropJobs(absl::Span<const std::string> job_ids, const absl::Status& status) {
  Outgoing out;
  size_t dropped = 0;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    for (const std::string& job_id : job_ids) {
      auto it = jobs_.find(job_id);
      if (it == jobs_.end()) continue;
      DropJobLocked(it, status, &out);
      ++dropped;
    }
    CommitEvents(&out);
  }
  Deliver(out);
  return dropped;
}

}  // namespace psync::server

#include "server/owner/coordinator.h"

#include <utility>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "wire/not_served.h"

namespace psync::server {

namespace {

constexpr size_t kMaxEndReasonBytes = 256;

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options, serve::Clock* clock)
    : options_(std::move(options)),
      clock_(clock),
      history_(options_.finished_jobs_kept),
      delivery_(options_.event_log_capacity, options_.delivery_threads),
      apply_fan_out_(options_.apply_threads),
      apply_by_chunk_{&apply_fan_out_, options_.apply_by_chunk_min_messages} {}

absl::StatusOr<core::JoinResult> Coordinator::Join(const core::RankPlan& plan) {
  // With replicas, the job must be served here first (claiming it may wait for etcd, so outside
  // the lock). A malformed plan skips this and is refused below, claiming nothing.
  uint64_t epoch = 0;
  if (options_.gate != nullptr && core::ValidateRankPlan(plan, options_.tracker.limits).ok()) {
    absl::StatusOr<uint64_t> admitted = options_.gate->AdmitJoin(plan.job_id);
    if (!admitted.ok()) return admitted.status();
    epoch = *admitted;
  }
  Effects out;
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
      RecordRejectionWithoutJob(plan.job_id, result.status(), now, &out);
    } else if (it == jobs_.end() && jobs_.size() >= options_.max_jobs) {
      result = absl::ResourceExhaustedError(
          absl::StrCat("job_id '", plan.job_id,
                       "': the coordinator already holds max_jobs=", options_.max_jobs, " jobs"));
      RecordRejectionWithoutJob(plan.job_id, result.status(), now, &out);
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
        core::Decisions decisions = Job::NewDecisions();
        const uint64_t generation_before = job.tracker->generation();
        result = job.tracker->Join(plan, now, &decisions, NewSecret());
        job.Record(decisions, &out);
        if (result.ok()) {
          job.TrackDetached(plan.rank, generation_before, now);
          job.NameNode(plan.rank, plan.node);
        }
        if (!result.ok()) {
          job.RecordRejection(result.status(), now, &out);
          first_join_failed = job.tracker->generation() == 0;
        }
      }
      if (first_join_failed) EraseJobLocked(it);  // a job whose first join failed
    }
    delivery_.Commit(&out);
  }
  delivery_.Deliver(out);
  return result;
}

absl::StatusOr<std::vector<core::Notice>> Coordinator::Attach(const std::string& job_id,
                                                              core::RankId rank,
                                                              uint64_t generation,
                                                              const std::string& session_id,
                                                              std::shared_ptr<SessionSink> sink) {
  std::shared_ptr<SessionSink> superseded;  // closed with ABORTED after the notices
  std::vector<core::Notice> pending;
  Effects out;
  absl::Status status;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    Job* job = FindJob(job_id);
    if (job == nullptr) {
      status = NotHere(job_id, "; Join first");
      RecordRejectionWithoutJob(job_id, status, now, &out);
    } else {
      absl::MutexLock job_lock(&job->mu);
      if (!(status = CheckServed(*job)).ok() ||
          !(status = job->tracker->CheckAttach(rank, generation, session_id)).ok()) {
        job->RecordRejection(status, now, &out);
      } else if (!job->sessions.contains(rank) && sessions_ >= options_.max_sessions) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            "the coordinator already holds max_sessions=", options_.max_sessions, " sessions"));
        job->RecordRejection(status, now, &out);
      } else {
        superseded = job->sessions.Attach(rank, std::move(sink));
        if (superseded == nullptr) ++sessions_;
        job->detached_since.erase(rank);
        job->lost.erase(rank);
        job->last_activity = now;
        pending = job->tracker->NoticesToHold(rank);
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
    delivery_.Commit(&out);
  }
  delivery_.Deliver(out);
  if (!status.ok()) return status;
  return pending;
}

void Coordinator::RecordRejected(const std::string& job_id, const absl::Status& status) {
  Effects out;
  {
    absl::ReaderMutexLock jobs_lock(&mu_);
    if (Job* job = FindJob(job_id); job != nullptr) {
      TimedMutexLock job_lock(&job->mu, &job->lock_times);
      job->RecordRejection(status, clock_->Now(), &out);
      delivery_.Commit(&out);
    } else {
      RecordRejectionWithoutJob(job_id, status, clock_->Now(), &out);
      delivery_.Commit(&out);
    }
  }
  delivery_.Deliver(out);
}

void Coordinator::Detach(const std::string& job_id, core::RankId rank, const SessionSink* sink) {
  TimedMutexLock lock(&mu_, &lock_times_);
  Job* found = FindJob(job_id);
  if (found == nullptr) return;
  Job& job = *found;
  absl::MutexLock job_lock(&job.mu);
  if (!job.sessions.Detach(rank, sink)) return;
  --sessions_;
  job.last_activity = clock_->Now();
  // A rank that left finished is not waited for.
  if (job.tracker->IsJoined(rank) && !job.finished.contains(rank)) {
    job.detached_since.emplace(rank, job.last_activity);
  }
}

void Coordinator::RecordRejectionOf(Job* job, const std::string& job_id, const absl::Status& status,
                                    absl::Time now, Effects* out) {
  if (job == nullptr) return RecordRejectionWithoutJob(job_id, status, now, out);
  absl::MutexLock job_lock(&job->mu);
  job->RecordRejection(status, now, out);
}

absl::Status Coordinator::Apply(
    const std::string& job_id,
    const std::function<absl::Status(core::JobTracker&, absl::Time, core::Decisions*)>& input) {
  Effects out;
  absl::Status status;
  {
    absl::ReaderMutexLock jobs_lock(&mu_);  // the job stays; other jobs' messages run meanwhile
    Job* job = FindJob(job_id);
    if (job == nullptr) {
      status = NotHere(job_id);
      RecordRejectionWithoutJob(job_id, status, clock_->Now(), &out);
      delivery_.Commit(&out);
    } else {
      TimedMutexLock job_lock(&job->mu, &job->lock_times);
      const absl::Time now = clock_->Now();
      job->last_activity = now;
      core::Decisions decisions = Job::NewDecisions();
      status = CheckServed(*job);
      if (status.ok()) status = input(*job->tracker, now, &decisions);
      job->Record(decisions, &out);
      if (!status.ok()) job->RecordRejection(status, now, &out);
      delivery_.Commit(&out);
    }
  }
  delivery_.Deliver(out);
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
  Effects out;
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
      RecordRejectionWithoutJob(job_id, result.status(), now, &out);
    }
    delivery_.Commit(&out);
  }
  delivery_.Deliver(out);
  return result;
}

absl::Status Coordinator::Leave(const std::string& job_id, core::RankId rank, uint64_t generation,
                                bool finished) {
  Effects out;
  absl::Status status;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    Job* job = FindJob(job_id);
    if (job == nullptr) {
      status = NotHere(job_id);
      RecordRejectionWithoutJob(job_id, status, now, &out);
    } else {
      bool ends = false;
      {
        absl::MutexLock job_lock(&job->mu);
        job->last_activity = now;
        status = CheckServed(*job);
        if (status.ok()) status = job->Leave(rank, generation, finished, &ends);
        // A refused leave changed nothing.
        if (!status.ok()) job->RecordRejection(status, now, &out);
      }
      if (ends) FinishJob(jobs_.find(job_id), JobEndKind::kEnded, "every rank finished", now, &out);
    }
    delivery_.Commit(&out);
  }
  delivery_.Deliver(out);
  return status;
}

void Coordinator::FinishJob(JobMap::iterator it, JobEndKind kind, const std::string& reason,
                            absl::Time now, Effects* out) {
  Job& job = *it->second;
  const std::string& job_id = it->first;
  FinishedJob finished;
  core::Event e;
  {
    absl::MutexLock job_lock(&job.mu);
    finished.view = job.View(now, options_.node_size);
    finished.view.end = {kind, reason, now};
    {
      absl::MutexLock observer_lock(&job.observer_mu);
      finished.audit = job.CaughtUpObserver().Audit();
    }
    const absl::Status closing = absl::FailedPreconditionError(
        absl::StrCat("job_id '", job_id, "' has ",
                     kind == JobEndKind::kEvicted ? "been evicted" : "ended", ": ", reason));
    CloseSessionsLocked(job, closing, out);
    e.generation = job.tracker->generation();
  }
  e.kind = kind == JobEndKind::kEvicted ? core::EventKind::kJobEvicted : core::EventKind::kJobEnded;
  e.time = now;
  e.job_id = job_id;
  e.detail = reason;
  out->AddEvent(std::move(e));
  if (options_.gate != nullptr) {
    finished.earlier_owners = options_.gate->EarlierOwnerAudits(job_id);
    options_.gate->JobEnded(job_id);
  }
  history_.Add(std::move(finished));
  EraseJobLocked(it);
}

void Coordinator::CloseSessionsLocked(Job& job, const absl::Status& status, Effects* out) {
  sessions_ -= job.CloseSessions(status, out);
}

void Coordinator::EraseJobLocked(JobMap::iterator it) {
  left_jobs_lock_times_.Add(it->second->lock_times);
  jobs_.erase(it);
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

}  // namespace psync::server

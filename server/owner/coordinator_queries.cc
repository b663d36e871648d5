// Coordinator: what it answers about jobs (status, chunks, traces, audits, events), without
// changing them.
#include <algorithm>
#include <utility>

#include "server/observe/trace_export.h"
#include "server/owner/coordinator.h"

namespace psync::server {

Job* Coordinator::FindJob(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second.get();
}

absl::StatusOr<JobStatusView> Coordinator::GetJobStatus(const std::string& job_id,
                                                        ViewDetail detail, size_t list_limit) {
  absl::ReaderMutexLock lock(&mu_);
  Job* job = FindJob(job_id);
  if (absl::Status fenced = FenceRead(job_id, job); !fenced.ok()) return fenced;
  if (job != nullptr) {
    absl::MutexLock job_lock(&job->mu);
    return job->View(clock_->Now(), options_.node_size, detail, list_limit);
  }
  if (const FinishedJob* finished = history_.Find(job_id); finished != nullptr) {
    return finished->view;
  }
  return NoLiveJob(job_id, "");
}

absl::StatusOr<core::ChunkSnapshot> Coordinator::GetChunkStatus(const std::string& job_id,
                                                                core::Step step,
                                                                core::ChunkId chunk,
                                                                absl::Duration* deadline,
                                                                size_t list_limit) {
  absl::ReaderMutexLock lock(&mu_);
  Job* job = FindJob(job_id);
  if (absl::Status fenced = FenceRead(job_id, job); !fenced.ok()) return fenced;
  if (job == nullptr) return NoLiveJob(job_id, "");
  absl::MutexLock job_lock(&job->mu);
  {
    absl::MutexLock observer_lock(&job->observer_mu);
    *deadline = job->CaughtUpObserver().Deadline(chunk);
  }
  return job->tracker->ChunkAt(step, chunk, clock_->Now(), list_limit);
}

absl::StatusOr<std::string> Coordinator::Trace(const std::string& job_id, core::Step first,
                                               core::Step last) {
  std::vector<core::Event> events;
  {
    absl::ReaderMutexLock lock(&mu_);
    Job* job = FindJob(job_id);
    if (absl::Status fenced = FenceRead(job_id, job); !fenced.ok()) return fenced;
    if (job == nullptr && history_.Find(job_id) == nullptr) return NoLiveJob(job_id, "");
    events = delivery_.EventsOf(job_id);
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
    return job->CaughtUpObserver().Audit();
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
  // The job's lock first: a message admitted before the gate stopped serving the job may be
  // deciding a release under it; its events are queued for the observer before it is let go.
  absl::MutexLock job_lock(&job->mu);
  absl::MutexLock observer_lock(&job->observer_mu);
  return job->CaughtUpObserver().totals();
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

std::vector<JobStatusView> Coordinator::ListJobs(absl::Span<const std::string> states,
                                                 ViewDetail detail) {
  auto wanted = [&](const JobStatusView& view) {
    return states.empty() ||
           std::find(states.begin(), states.end(), JobStateText(view)) != states.end();
  };
  absl::ReaderMutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  std::vector<JobStatusView> out;
  for (const auto& [id, job] : jobs_) {
    absl::MutexLock job_lock(&job->mu);
    JobStatusView view = job->View(now, options_.node_size, detail);
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
  t.delivering = delivery_.delivering();
  t.checkins_by_chunk = checkins_by_chunk_.load(std::memory_order_relaxed);
  return t;
}

uint64_t Coordinator::AddEventSink(EventSink* sink, std::vector<core::Event>* backlog) {
  return delivery_.AddEventSink(sink, backlog);
}

void Coordinator::RemoveEventSink(EventSink* sink) { delivery_.RemoveEventSink(sink); }

std::vector<core::Event> Coordinator::EventsSince(uint64_t from, uint64_t* next, size_t limit,
                                                  uint64_t* end) {
  return delivery_.EventsSince(from, next, limit, end);
}

}  // namespace psync::server

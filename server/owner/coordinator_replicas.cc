// Coordinator with replicas: why a job is not here, fenced messages and reads, dropped jobs.
#include <optional>

#include "absl/strings/str_cat.h"
#include "serve/injected_faults.h"
#include "server/owner/coordinator.h"
#include "wire/not_served.h"

namespace psync::server {

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
  if (serve::IsInjected(serve::Injected().unfenced_reads)) return absl::OkStatus();
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
    last = job->View(clock_->Now(), options_.node_size);
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

void Coordinator::DropJobLocked(JobMap::iterator it, const absl::Status& status, Effects* out) {
  {
    absl::MutexLock job_lock(&it->second->mu);
    CloseSessionsLocked(*it->second, status, out);
  }
  EraseJobLocked(it);
}

size_t Coordinator::DropJobs(absl::Span<const std::string> job_ids, const absl::Status& status) {
  Effects out;
  size_t dropped = 0;
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    for (const std::string& job_id : job_ids) {
      auto it = jobs_.find(job_id);
      if (it == jobs_.end()) continue;
      DropJobLocked(it, status, &out);
      ++dropped;
    }
    delivery_.Commit(&out);
  }
  delivery_.Deliver(out);
  return dropped;
}

}  // namespace psync::server

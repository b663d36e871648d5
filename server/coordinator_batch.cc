// Coordinator::ApplyBatch: several ranks' Session messages of one job under one lock.
#include <utility>

#include "server/coordinator.h"

namespace psync::server {

std::vector<absl::Status> Coordinator::ApplyBatch(const std::string& job_id, uint64_t generation,
                                                  absl::Span<const RankMessage> messages) {
  std::vector<absl::Status> statuses;
  statuses.reserve(messages.size());
  Outgoing out;
  // An item makes one event (a release or a skip a few more): reserved so that events are moved
  // once, and not more, since the event log keeps the vector's capacity.
  size_t items = 1;
  for (const RankMessage& m : messages) items += m.staged.size() + m.sync_done.size();
  out.events.reserve(items);
  {
    TimedMutexLock lock(&mu_, &lock_times_);
    const absl::Time now = clock_->Now();
    Job* job = FindJob(job_id);
    if (job != nullptr) job->last_activity = now;
    // With replicas: a job not served here (any more) refuses every message, releasing nothing.
    if (absl::Status served = job != nullptr ? CheckServed(*job) : absl::OkStatus(); !served.ok()) {
      for (size_t i = 0; i < messages.size(); ++i) statuses.push_back(served);
      RecordRejection(job_id, job, served, now, &out);
      job = nullptr;
      messages = {};
    }
    core::Decisions decisions;  // reused: its vectors keep their capacity from message to message
    for (const RankMessage& m : messages) {
      if (job == nullptr) {
        absl::Status s = NotHere(job_id);
        RecordRejection(job_id, nullptr, s, now, &out);
        statuses.push_back(std::move(s));
        continue;
      }
      absl::Status s;
      if (m.kind == RankMessage::Kind::kLeave) {
        s = LeaveLocked(*job, m.rank, generation, m.leave_finished, now, &out);
        if (s.ok() && FindJob(job_id) == nullptr) {  // the last rank left finished: it ended
          job = nullptr;
          statuses.push_back(std::move(s));
          continue;
        }
      } else {
        // The tracker appends this message's events after the batch's earlier ones, where they
        // stay: a node's batch records one event per check-in, and none is moved again.
        decisions.deliveries.clear();
        decisions.events.swap(out.events);
        const size_t first_event = decisions.events.size();
        switch (m.kind) {
          case RankMessage::Kind::kStaged:
            s = job->tracker->Stage(m.rank, generation, m.staged, now, &decisions);
            break;
          case RankMessage::Kind::kSkip:
            s = job->tracker->Skip(m.rank, generation, m.skip_step, m.skip_reason, now, &decisions);
            break;
          case RankMessage::Kind::kSyncDone:
            s = job->tracker->SyncDone(m.rank, generation, m.sync_done, now, &decisions);
            break;
          case RankMessage::Kind::kLeave:
            break;
        }
        decisions.events.swap(out.events);
        RecordFrom(*job, first_event, decisions.deliveries, &out);
      }
      if (!s.ok()) RecordRejection(job_id, job, s, now, &out);
      statuses.push_back(std::move(s));
    }
    CommitEvents(&out);
  }
  Deliver(out);
  return statuses;
}

}  // namespace psync::server

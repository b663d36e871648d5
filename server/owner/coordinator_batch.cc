// Coordinator::ApplyBatch: several ranks' Session messages of one job under the job's lock.
#include <algorithm>
#include <utility>

#include "server/owner/checkin_groups.h"
#include "server/owner/coordinator.h"

namespace psync::server {

namespace {

// One caller's batch in its job's BatchCombiner: what it asks and the room for its answer.
struct BatchTask final : BatchCombiner::Task {
  BatchTask(uint64_t generation, absl::Span<const RankMessage> messages,
            const std::vector<BatchRun>* runs)
      : generation(generation), messages(messages), runs(runs) {}

  const uint64_t generation;
  const absl::Span<const RankMessage> messages;
  const std::vector<BatchRun>* const runs;  // SplitIntoRuns(messages)
  std::vector<absl::Status> statuses;
  Effects out;
};

}  // namespace

std::vector<absl::Status> Coordinator::ApplyBatch(const std::string& job_id, uint64_t generation,
                                                  absl::Span<const RankMessage> messages) {
  // A Leave may end the job, which only a caller holding mu_ exclusively may do: such a batch (a
  // node's ranks finishing their run) takes the slow path.
  if (std::any_of(messages.begin(), messages.end(),
                  [](const RankMessage& m) { return m.kind == RankMessage::Kind::kLeave; })) {
    Effects out;
    std::vector<absl::Status> statuses = ApplyBatchWithLeaves(job_id, generation, messages, &out);
    delivery_.Deliver(out);
    return statuses;
  }
  // Cut into runs and grouped before any lock is taken (it reads only the messages).
  const std::vector<BatchRun> runs = SplitIntoRuns(messages);
  BatchTask task(generation, messages, &runs);
  task.statuses.reserve(messages.size());
  // The ranks of a node send the same items, which make one record each (releases and the like a
  // few more): reserved for one message's check-ins and one's SyncDones, so that most batches move
  // no record.
  size_t staged = 0;
  size_t sync_done = 0;
  for (const RankMessage& m : messages) {
    staged = std::max(staged, m.staged.size());
    sync_done = std::max(sync_done, m.sync_done.size());
  }
  task.out.events.reserve(staged + sync_done + 8);
  {
    absl::ReaderMutexLock jobs_lock(&mu_);  // the job stays; other jobs' batches run meanwhile
    Job* job = FindJob(job_id);
    if (job == nullptr) {
      const absl::Time now = clock_->Now();
      for (size_t i = 0; i < messages.size(); ++i) {
        absl::Status s = NotHere(job_id);
        RecordRejectionWithoutJob(job_id, s, now, &task.out);
        task.statuses.push_back(std::move(s));
      }
      delivery_.Commit(&task.out);
    } else {
      // Every queued batch of the job is applied under one acquisition of its lock
      // (batch_combiner.h); each caller delivers its own batch's decisions below.
      job->combiner.Submit(&task, [this, job](absl::Span<BatchCombiner::Task* const> tasks) {
        mu_.AssertReaderHeld();  // by the runner, whichever submitter it is
        ApplyRound(*job, tasks);
      });
    }
  }
  delivery_.Deliver(task.out);
  // The observer's share (straggler scores, deadlines, the audit) after the batch's notices, so
  // that a release does not wait for it; whatever is queued, this batch's and earlier ones'.
  absl::ReaderMutexLock jobs_lock(&mu_);
  if (Job* job = FindJob(job_id); job != nullptr) {
    absl::MutexLock observer_lock(&job->observer_mu);
    job->CaughtUpObserver();
  }
  return std::move(task.statuses);
}

void Coordinator::ApplyRound(Job& job, absl::Span<BatchCombiner::Task* const> tasks) {
  TimedMutexLock job_lock(&job.mu, &job.lock_times);
  core::Decisions decisions = Job::NewDecisions();  // reused: its vectors keep their capacity
  // A node's ranks' same check-in (or SyncDone) is one record: counted and observed once every
  // message of its batch is applied, since a later message may still join an earlier record.
  decisions.merge_rank_events = true;
  // Batches of different streams bind no order between them. When their last runs of check-ins
  // (a node's batch ends with its check-ins, after its SyncDones) are many together, those runs
  // are applied at once, chunk by chunk on several threads, after every batch's earlier messages
  // (each batch's own order is kept), with the round's last batch.
  const auto trailing_messages = [tasks] {
    size_t n = 0;
    for (BatchCombiner::Task* queued : tasks) {
      const std::vector<BatchRun>& runs = *static_cast<BatchTask&>(*queued).runs;
      if (!runs.empty() && runs.back().groups.has_value()) {
        n += runs.back().end - runs.back().begin;
      }
    }
    return n;
  };
  // Counted only where helpers may take them (none by default).
  const bool trailing_together = tasks.size() > 1 && apply_fan_out_.helpers() > 0 &&
                                 Job::WorthApplyingByChunk(apply_by_chunk_, trailing_messages());
  std::vector<Job::CheckinRun> trailing;
  size_t by_chunk = 0;  // check-ins applied chunk by chunk
  for (size_t t = 0; t < tasks.size(); ++t) {
    BatchTask& task = static_cast<BatchTask&>(*tasks[t]);
    const absl::Span<const RankMessage> messages = task.messages;
    std::vector<absl::Status>& statuses = task.statuses;
    Effects& out = task.out;
    decisions.merge_run = core::Decisions::MergeRun();  // a record joins only its batch's records
    const absl::Time now = clock_->Now();
    job.last_activity = now;
    const size_t first_event = out.events.size();
    // With replicas: a job not served here (any more) refuses every message, releasing nothing.
    if (absl::Status served = CheckServed(job); !served.ok()) {
      statuses.assign(messages.size(), served);
      job.RecordRejection(served, now, &out);
    } else {
      // Run after run, in the batch's order (checkin_groups.h): in a run of one-item check-ins,
      // none repeated, each group of the same item at once.
      statuses.resize(messages.size());
      const std::vector<BatchRun>& runs = *task.runs;
      for (size_t r = 0; r < runs.size(); ++r) {
        const BatchRun& run = runs[r];
        if (!run.groups.has_value()) {
          job.ApplyMessages(task.generation, messages.subspan(run.begin, run.end - run.begin), now,
                            decisions, &out,
                            absl::MakeSpan(statuses).subspan(run.begin, run.end - run.begin));
          continue;
        }
        const Job::CheckinRun checkins{
            task.generation, &*run.groups,
            absl::MakeSpan(statuses).subspan(run.begin, run.end - run.begin)};
        if (trailing_together && r + 1 == runs.size()) {
          trailing.push_back(checkins);
        } else {
          by_chunk += job.ApplyCheckinGroups({checkins}, now, apply_by_chunk_, decisions, &out);
        }
      }
    }
    if (t + 1 == tasks.size() && !trailing.empty()) {
      decisions.merge_run = core::Decisions::MergeRun();
      by_chunk += job.ApplyCheckinGroups(trailing, now, apply_by_chunk_, decisions, &out);
    }
    job.CountFrom(first_event, out);
    delivery_.Commit(&out);
    // Observed once the notices are out (ApplyBatch), in the order the job decided them.
    job.ObserveLater(out.committed);
  }
  if (by_chunk > 0) checkins_by_chunk_.fetch_add(by_chunk, std::memory_order_relaxed);
}

std::vector<absl::Status> Coordinator::ApplyBatchWithLeaves(const std::string& job_id,
                                                            uint64_t generation,
                                                            absl::Span<const RankMessage> messages,
                                                            Effects* out) {
  std::vector<absl::Status> statuses;
  statuses.reserve(messages.size());
  TimedMutexLock lock(&mu_, &lock_times_);
  const absl::Time now = clock_->Now();
  auto it = jobs_.find(job_id);
  size_t next = 0;  // the first message not applied to the live job
  if (it != jobs_.end()) {
    Job& job = *it->second;
    bool ends = false;
    {
      absl::MutexLock job_lock(&job.mu);
      job.last_activity = now;
      if (absl::Status served = CheckServed(job); !served.ok()) {
        statuses.assign(messages.size(), served);
        job.RecordRejection(served, now, out);
        next = messages.size();
      } else {
        // Rare (a node's ranks finishing): every message's events are observed as it is applied,
        // so none is merged into a record already observed.
        core::Decisions decisions = Job::NewDecisions();
        for (; next < messages.size() && !ends; ++next) {
          const RankMessage& m = messages[next];
          if (m.kind != RankMessage::Kind::kLeave) {
            const size_t first_event = out->events.size();
            statuses.push_back(job.ApplyMessage(generation, m, now, decisions, out));
            job.ObserveFrom(first_event, *out);
            continue;
          }
          absl::Status s = job.Leave(m.rank, generation, m.leave_finished, &ends);
          if (!s.ok()) job.RecordRejection(s, now, out);
          statuses.push_back(std::move(s));
        }
      }
    }
    // The last rank left finished: the job ends, and the batch's later messages find it ended.
    if (ends) FinishJob(it, JobEndKind::kEnded, "every rank finished", now, out);
  }
  for (; next < messages.size(); ++next) {
    absl::Status s = NotHere(job_id);
    RecordRejectionWithoutJob(job_id, s, now, out);
    statuses.push_back(std::move(s));
  }
  delivery_.Commit(out);
  return statuses;
}

}  // namespace psync::server

#include "server/coordinator_metrics.h"

#include <algorithm>
#include <utility>

namespace psync::server {
namespace {

// A counter that mirrors a total kept elsewhere: raised to it (a counter never goes down).
void RaiseTo(metrics::Counter* counter, absl::Duration total) {
  counter->Add(absl::ToDoubleSeconds(total) - counter->Value());
}

// Seconds: 10 us .. 60 s.
std::vector<double> LatencyBuckets() {
  return {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025,
          0.05, 0.1,    0.25, 0.5,  1,      2.5,  5,    10,     30,   60};
}

constexpr size_t kMaxOpenChunks = 100000;

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> CoordinatorMetrics::Create(
    Coordinator* coordinator, metrics::Registry* registry, size_t node_series) {
  std::unique_ptr<CoordinatorMetrics> m(new CoordinatorMetrics(coordinator, registry, node_series));
  if (auto s = m->Register(registry); !s.ok()) return s;
  CoordinatorMetrics* self = m.get();
  registry->AddCollector([self] { self->Collect(); });
  coordinator->SetDeliveredObserver(
      metrics::SecondsObserver(m->decision_delivery_->WithLabels({})));
  coordinator->AddEventSink(self, nullptr);
  return m;
}

CoordinatorMetrics::~CoordinatorMetrics() {
  coordinator_->SetDeliveredObserver(nullptr);
  coordinator_->RemoveEventSink(this);
}

absl::Status CoordinatorMetrics::Register(metrics::Registry* r) {
  const std::vector<std::string> job = {"job"};
#define PSYNC_ADD(field, call)                \
  do {                                        \
    auto family = (call);                     \
    if (!family.ok()) return family.status(); \
    field = *family;                          \
  } while (0)
  PSYNC_ADD(checkins_,
            r->AddCounter("psync_checkins_total", "Check-ins accepted (first time).", job));
  PSYNC_ADD(duplicates_,
            r->AddCounter("psync_duplicate_checkins_total",
                          "Identical check-ins repeated (answered idempotently).", job));
  PSYNC_ADD(releases_, r->AddCounter("psync_releases_total",
                                     "(step, chunk)s released to their sync groups.", job));
  PSYNC_ADD(syncs_done_,
            r->AddCounter("psync_sync_done_total",
                          "SyncDone reports accepted (one per rank per release).", job));
  PSYNC_ADD(skipped_steps_,
            r->AddCounter("psync_skipped_steps_total", "Steps every rank skipped.", job));
  PSYNC_ADD(violations_, r->AddCounter("psync_violations_total",
                                       "Protocol violations by kind (early_sync, repeated_sync, "
                                       "checksum_mismatch, conflicting_duplicate, "
                                       "skip_disagreement, other).",
                                       {"job", "kind"}));
  PSYNC_ADD(stalls_, r->AddCounter("psync_stalls_total",
                                   "Chunks that waited past their learned deadline.", job));
  PSYNC_ADD(rejected_,
            r->AddCounter("psync_rejected_total",
                          "Messages refused as bad input (state unchanged); job=\"\" counts those "
                          "for no live job (unknown, ended or evicted).",
                          job));
  PSYNC_ADD(jobs_finished_, r->AddCounter("psync_jobs_finished_total",
                                          "Jobs that left the coordinator, by how (ended: EndJob "
                                          "or every rank finished; evicted: idle).",
                                          {"how"}));
  PSYNC_ADD(aborts_, r->AddCounter("psync_aborts_total", "Generations aborted.", job));
  PSYNC_ADD(joins_, r->AddCounter("psync_joins_total", "Joins, reconnects included.", job));
  PSYNC_ADD(lost_ranks_, r->AddCounter("psync_ranks_lost_total",
                                       "Ranks declared lost (no session past the lease).", job));
  PSYNC_ADD(release_wait_, r->AddHistogram("psync_release_wait_seconds",
                                           "Time from a chunk's first check-in to its release.",
                                           job, LatencyBuckets()));
  PSYNC_ADD(stage_wait_, r->AddHistogram("psync_stage_wait_seconds",
                                         "Time from each contributor's check-in to the release.",
                                         job, LatencyBuckets()));
  PSYNC_ADD(sync_duration_, r->AddHistogram("psync_sync_duration_seconds",
                                            "Time from a release to the last member's SyncDone.",
                                            job, LatencyBuckets()));
  PSYNC_ADD(jobs_, r->AddGauge("psync_jobs", "Live jobs the coordinator holds."));
  PSYNC_ADD(active_ranks_, r->AddGauge("psync_active_ranks",
                                       "Ranks joined in the job's current generation.", job));
  PSYNC_ADD(sessions_, r->AddGauge("psync_sessions_connected", "Attached Session streams.", job));
  PSYNC_ADD(generation_, r->AddGauge("psync_job_generation", "Current generation.", job));
  PSYNC_ADD(step_, r->AddGauge("psync_job_step", "Lowest step any rank still has to finish.", job));
  PSYNC_ADD(chunks_waiting_, r->AddGauge("psync_chunks_waiting",
                                         "Chunks with check-ins waiting for contributors.", job));
  PSYNC_ADD(top_straggler_, r->AddGauge("psync_straggler_top_score_seconds",
                                        "The highest rank straggler score of the job.", job));
  PSYNC_ADD(missing_, r->AddGauge("psync_missing_contributors",
                                  "(rank, optimizer) contributors missing from waiting chunks, "
                                  "summed over the chunks.",
                                  job));
  PSYNC_ADD(nodes_missing_,
            r->AddGauge("psync_nodes_missing",
                        "Nodes with a contributor missing from a waiting chunk.", job));
  PSYNC_ADD(node_missing_, r->AddGauge("psync_node_missing_contributors",
                                       "Missing contributors of the nodes that miss the most "
                                       "(at most --metrics_node_series nodes per job).",
                                       {"job", "node"}));
  PSYNC_ADD(lock_wait_, r->AddCounter("psync_coordinator_lock_wait_seconds_total",
                                      "Time calls that change state waited for a lock (every "
                                      "job's, and the one over the set of jobs), summed.",
                                      {}));
  PSYNC_ADD(lock_held_, r->AddCounter("psync_coordinator_lock_held_seconds_total",
                                      "Time calls that change state held a lock (every job's, "
                                      "and the one over the set of jobs), summed.",
                                      {}));
  PSYNC_ADD(job_lock_held_,
            r->AddCounter("psync_job_lock_held_seconds_total",
                          "Time the job's check-ins, SyncDones and node batches held its lock "
                          "(near 1 s per second: the job's lock is what limits it).",
                          job));
  PSYNC_ADD(job_lock_wait_, r->AddCounter("psync_job_lock_wait_seconds_total",
                                          "Time the job's messages waited for its lock, summed "
                                          "over the waiting threads.",
                                          job));
  PSYNC_ADD(checkins_by_chunk_,
            r->AddCounter("psync_checkins_by_chunk_total",
                          "Check-ins of a node's or relay's runs recorded chunk by chunk on "
                          "several threads at once (--apply_threads), over every job.",
                          {}));
  PSYNC_ADD(delivering_,
            r->AddCounter("psync_coordinator_delivering_seconds_total",
                          "Time spent handing decisions to streams and event sinks, one "
                          "decision at a time in decision order (near 1 s per second: delivery "
                          "is what limits the coordinator).",
                          {}));
  PSYNC_ADD(decision_delivery_,
            r->AddHistogram("psync_decision_delivery_seconds",
                            "Per message whose decisions carry notices (a release, several when "
                            "one batch completes several chunks, a skipped step, an abort): from "
                            "the decisions to their last notice queued to its stream (the wait "
                            "for earlier deliveries, and their own fan-out).",
                            {}, metrics::QueueWaitBuckets()));
#undef PSYNC_ADD
  return absl::OkStatus();
}

void CoordinatorMetrics::OnEvents(const std::vector<core::Event>& events) {
  using core::EventKind;
  absl::MutexLock lock(&mu_);
  // Events come in runs of one job; check-ins and SyncDones, the bulk, are counted per run and
  // added once, and consecutive check-ins of one chunk (a node's batch) share one lookup of its
  // open check-in times.
  const std::string* run_job = nullptr;
  std::vector<std::string> job;
  metrics::Counter* checkins = nullptr;
  metrics::Counter* syncs_done = nullptr;
  double run_checkins = 0;
  double run_syncs_done = 0;
  auto flush_counts = [&] {
    if (run_checkins > 0) checkins->Add(run_checkins);
    if (run_syncs_done > 0) syncs_done->Add(run_syncs_done);
    run_checkins = 0;
    run_syncs_done = 0;
  };
  // The open check-in times of the last chunk a check-in of this run was counted for; reset
  // whenever open_checkins_ changes otherwise (its values move on a rehash).
  std::vector<CheckinsAt>* open_times = nullptr;
  uint64_t open_generation = 0;
  core::Step open_step = 0;
  core::ChunkId open_chunk = 0;
  for (const core::Event& e : events) {
    if (run_job == nullptr || *run_job != e.job_id) {
      flush_counts();
      run_job = &e.job_id.str();
      job = {e.job_id.str()};
      checkins = nullptr;  // looked up at the run's first check-in: a run may have none
      syncs_done = nullptr;
      open_times = nullptr;
    }
    switch (e.kind) {
      case EventKind::kCheckin: {
        if (checkins == nullptr) checkins = checkins_->WithLabels(job);
        run_checkins += core::RankCount(e);
        if (open_times == nullptr || open_generation != e.generation || open_step != *e.step ||
            open_chunk != *e.chunk) {
          open_times = nullptr;
          const OpenChunkView key(e.job_id.str(), e.generation, *e.step, *e.chunk);
          auto open = open_checkins_.find(key);
          if (open != open_checkins_.end()) {
            open_times = &open->second;
          } else if (open_checkins_.size() < kMaxOpenChunks) {
            open_times =
                &open_checkins_[OpenChunk{e.job_id.str(), e.generation, *e.step, *e.chunk}];
          }
          open_generation = e.generation;
          open_step = *e.step;
          open_chunk = *e.chunk;
        }
        if (open_times != nullptr) {
          const uint64_t count = core::RankCount(e);
          if (!open_times->empty() && open_times->back().time == e.time) {
            open_times->back().count += count;  // a batch's records share their time
          } else {
            open_times->push_back({e.time, count});
          }
        }
        break;
      }
      case EventKind::kDuplicate:
        duplicates_->WithLabels(job)->Increment();
        break;
      case EventKind::kRelease: {
        releases_->WithLabels(job)->Increment();
        release_wait_->WithLabels(job)->Observe(absl::ToDoubleSeconds(e.duration));
        auto open =
            open_checkins_.find(OpenChunkView(e.job_id.str(), e.generation, *e.step, *e.chunk));
        if (open != open_checkins_.end()) {
          metrics::Histogram* h = stage_wait_->WithLabels(job);
          for (const CheckinsAt& at : open->second) {
            h->Observe(absl::ToDoubleSeconds(e.time - at.time), at.count);
          }
          open_checkins_.erase(open);
          open_times = nullptr;
        }
        break;
      }
      case EventKind::kSyncDone:
        if (syncs_done == nullptr) syncs_done = syncs_done_->WithLabels(job);
        run_syncs_done += core::RankCount(e);
        break;
      case EventKind::kSyncComplete:
        sync_duration_->WithLabels(job)->Observe(absl::ToDoubleSeconds(e.duration));
        break;
      case EventKind::kStepSkipped:
        skipped_steps_->WithLabels(job)->Increment();
        break;
      case EventKind::kViolation:
        violations_->WithLabels({e.job_id, core::ViolationKind(e)})->Increment();
        break;
      case EventKind::kStall:
        stalls_->WithLabels(job)->Increment();
        break;
      case EventKind::kRejected:
        // A rejection for no live job (generation 0) must not create a series per job id.
        rejected_->WithLabels({e.generation == 0 ? std::string() : e.job_id.str()})->Increment();
        break;
      case EventKind::kJobEnded:
      case EventKind::kJobEvicted:
        flush_counts();
        ForgetJob(e.job_id);
        run_job = nullptr;  // `checkins`, `syncs_done` and `open_times` pointed into freed state
        jobs_finished_->WithLabels({e.kind == EventKind::kJobEnded ? "ended" : "evicted"})
            ->Increment();
        break;
      case EventKind::kAbort:
        aborts_->WithLabels(job)->Increment();
        break;
      case EventKind::kJoin:
        joins_->WithLabels(job)->Increment();
        break;
      case EventKind::kGeneration:
        // Chunks of the old generation will never be released.
        absl::erase_if(open_checkins_,
                       [&](const auto& open) { return open.first.job == e.job_id; });
        open_times = nullptr;
        break;
      case EventKind::kRankLost:
        lost_ranks_->WithLabels(job)->Increment();
        break;
      case EventKind::kSkipVote:
        break;
    }
  }
  flush_counts();
}

void CoordinatorMetrics::ForgetJob(const std::string& job) {
  absl::erase_if(open_checkins_, [&](const auto& open) { return open.first.job == job; });
  registry_->EraseSeries("job", job);
}

void CoordinatorMetrics::Collect() {
  static const std::vector<std::string> kLiveStates = {"FORMING", "RUNNING", "DEGRADED", "ABORTED"};
  const std::vector<JobStatusView> jobs =
      coordinator_->ListJobs(kLiveStates, ViewDetail::kMissingByNode);
  jobs_->Get()->Set(static_cast<double>(jobs.size()));
  // Counters that mirror the coordinator's own totals: each is raised to the total.
  const LoadTimes load = coordinator_->load_times();
  RaiseTo(lock_wait_->Get(), load.lock_wait);
  RaiseTo(lock_held_->Get(), load.lock_held);
  RaiseTo(delivering_->Get(), load.delivering);
  checkins_by_chunk_->Get()->Add(static_cast<double>(load.checkins_by_chunk) -
                                 checkins_by_chunk_->Get()->Value());
  for (const JobStatusView& view : jobs) {
    const std::vector<std::string> job = {view.snapshot.job_id};
    RaiseTo(job_lock_held_->WithLabels(job), view.lock_held);
    RaiseTo(job_lock_wait_->WithLabels(job), view.lock_wait);
    active_ranks_->WithLabels(job)->Set(view.snapshot.ranks_joined);
    sessions_->WithLabels(job)->Set(view.sessions_connected);
    generation_->WithLabels(job)->Set(static_cast<double>(view.snapshot.generation));
    step_->WithLabels(job)->Set(static_cast<double>(view.snapshot.min_rank_step));
    int waiting = 0;
    for (const core::ChunkSnapshot& c : view.snapshot.chunks) waiting += c.state == "WAITING";
    chunks_waiting_->WithLabels(job)->Set(waiting);
    top_straggler_->WithLabels(job)->Set(
        view.stragglers.empty() ? 0 : view.stragglers[0].score_seconds);
    CollectMissing(view);
  }
}

void CoordinatorMetrics::CollectMissing(const JobStatusView& view) {
  const std::string& job = view.snapshot.job_id;
  const std::vector<uint32_t>& per_node = view.missing_by_node;
  uint64_t missing = 0;
  for (const core::ChunkSnapshot& c : view.snapshot.chunks) {
    if (c.state == "WAITING") missing += c.missing_count;
  }
  std::vector<uint32_t> nodes;
  for (uint32_t n = 0; n < per_node.size(); ++n) {
    if (per_node[n] > 0) nodes.push_back(n);
  }
  missing_->WithLabels({job})->Set(static_cast<double>(missing));
  nodes_missing_->WithLabels({job})->Set(static_cast<double>(nodes.size()));
  // The nodes missing the most (ties: node order); the series of the nodes that dropped out go.
  const size_t shown = std::min(nodes.size(), node_series_);
  std::partial_sort(nodes.begin(), nodes.begin() + shown, nodes.end(), [&](uint32_t a, uint32_t b) {
    return per_node[a] != per_node[b] ? per_node[a] > per_node[b] : a < b;
  });
  node_missing_->EraseWithPrefix({job});
  for (size_t i = 0; i < shown; ++i) {
    node_missing_->WithLabels({job, view.nodes.names[nodes[i]]})->Set(per_node[nodes[i]]);
  }
}

}  // namespace psync::server

// CoordinatorMetrics: the coordinator's Prometheus metrics, all derived from the one event stream
// (it is an EventSink of the Coordinator) and, for gauges, from job snapshots read at scrape time.
//
// Labels are bounded: `job` (the live jobs: a job's series are freed when it ends or is evicted;
// rejections not attributable to a live job count under job=""), for violations a fixed `kind`,
// and `node` on psync_node_missing_contributors only, for at most `node_series` nodes per job
// (those with the most missing contributors at the scrape); never a rank or a step. Metric names
// follow Prometheus conventions (psync_ prefix, _total counters, _seconds histograms). Thread-safe.
// Does not own the Coordinator or the Registry; must be removed as an event sink (the destructor
// does it) before either goes away.
#ifndef PSYNC_SERVER_COORDINATOR_METRICS_H_
#define PSYNC_SERVER_COORDINATOR_METRICS_H_

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "serve/metrics/registry.h"
#include "server/owner/coordinator.h"

namespace psync::server {

class CoordinatorMetrics final : public EventSink {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> Create(Coordinator* coordinator,
                                                                    metrics::Registry* registry,
                                                                    size_t node_series = 10);
  ~CoordinatorMetrics() override;

  void OnEvents(const std::vector<core::Event>& events) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  CoordinatorMetrics(Coordinator* coordinator, metrics::Registry* registry, size_t node_series)
      : coordinator_(coordinator), registry_(registry), node_series_(node_series) {}
  // The job left the coordinator: its series and open chunks are freed.
  void ForgetJob(const std::string& job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Register(metrics::Registry* registry);
  void Collect();

  // The missing-contributor gauges of one job's view.
  void CollectMissing(const JobStatusView& view);

  Coordinator* const coordinator_;
  metrics::Registry* const registry_;
  const size_t node_series_;

  metrics::CounterFamily* checkins_ = nullptr;
  metrics::CounterFamily* duplicates_ = nullptr;
  metrics::CounterFamily* releases_ = nullptr;
  metrics::CounterFamily* syncs_done_ = nullptr;
  metrics::CounterFamily* skipped_steps_ = nullptr;
  metrics::CounterFamily* violations_ = nullptr;
  metrics::CounterFamily* stalls_ = nullptr;
  metrics::CounterFamily* rejected_ = nullptr;
  metrics::CounterFamily* aborts_ = nullptr;
  metrics::CounterFamily* joins_ = nullptr;
  metrics::CounterFamily* lost_ranks_ = nullptr;
  metrics::CounterFamily* jobs_finished_ = nullptr;
  metrics::CounterFamily* lock_wait_ = nullptr;
  metrics::CounterFamily* lock_held_ = nullptr;
  metrics::CounterFamily* delivering_ = nullptr;
  metrics::CounterFamily* checkins_by_chunk_ = nullptr;
  metrics::HistogramFamily* decision_delivery_ = nullptr;
  metrics::CounterFamily* job_lock_held_ = nullptr;
  metrics::CounterFamily* job_lock_wait_ = nullptr;
  metrics::HistogramFamily* release_wait_ = nullptr;
  metrics::HistogramFamily* stage_wait_ = nullptr;
  metrics::HistogramFamily* sync_duration_ = nullptr;
  metrics::GaugeFamily* jobs_ = nullptr;
  metrics::GaugeFamily* active_ranks_ = nullptr;
  metrics::GaugeFamily* sessions_ = nullptr;
  metrics::GaugeFamily* generation_ = nullptr;
  metrics::GaugeFamily* step_ = nullptr;
  metrics::GaugeFamily* chunks_waiting_ = nullptr;
  metrics::GaugeFamily* top_straggler_ = nullptr;
  metrics::GaugeFamily* missing_ = nullptr;
  metrics::GaugeFamily* nodes_missing_ = nullptr;
  metrics::GaugeFamily* node_missing_ = nullptr;

  // (job, generation, step, chunk) of a chunk not yet released; looked up by a view of the job id
  // so that counting a check-in copies no string.
  using OpenChunkView = std::tuple<absl::string_view, uint64_t, core::Step, core::ChunkId>;
  struct OpenChunk {
    std::string job;
    uint64_t generation;
    core::Step step;
    core::ChunkId chunk;
  };
  struct OpenChunkHash {
    using is_transparent = void;
    size_t operator()(const OpenChunkView& k) const { return absl::Hash<OpenChunkView>()(k); }
    size_t operator()(const OpenChunk& k) const {
      return (*this)(OpenChunkView(k.job, k.generation, k.step, k.chunk));
    }
  };
  struct OpenChunkEq {
    using is_transparent = void;
    static OpenChunkView View(const OpenChunk& k) { return {k.job, k.generation, k.step, k.chunk}; }
    static const OpenChunkView& View(const OpenChunkView& k) { return k; }
    template <typename A, typename B>
    bool operator()(const A& a, const B& b) const {
      return View(a) == View(b);
    }
  };

  absl::Mutex mu_;
  // Check-in times of chunks not yet released, with how many check-ins came at each (a merged
  // record's ranks share its time): observed per time, not per rank, at the release.
  struct CheckinsAt {
    absl::Time time;
    uint64_t count = 0;
  };
  absl::flat_hash_map<OpenChunk, std::vector<CheckinsAt>, OpenChunkHash, OpenChunkEq> open_checkins_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_COORDINATOR_METRICS_H_

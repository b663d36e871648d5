// CoordinatorMetrics: the coordinator's Prometheus metrics, all derived from the one event stream
// (it is an EventSink of the Coordinator) and, for gauges, from job snapshots read at scrape time.
//
// Labels are bounded: `job`, and for violations a fixed `kind`; never a rank or a step. Metric
// names follow Prometheus conventions (psync_ prefix, _total counters, _seconds histograms).
// Thread-safe. Does not own the Coordinator or the Registry; must be removed as an event sink
// (the destructor does it) before either goes away.
#ifndef PSYNC_SERVER_COORDINATOR_METRICS_H_
#define PSYNC_SERVER_COORDINATOR_METRICS_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/coordinator.h"
#include "server/metrics/registry.h"

namespace psync::server {

class CoordinatorMetrics final : public EventSink {
 public:
  static absl::StatusOr<std::unique_ptr<CoordinatorMetrics>> Create(Coordinator* coordinator,
                                                                     metrics::Registry* registry);
  ~CoordinatorMetrics() override;

  void OnEvents(const std::vector<core::Event>& events) override ABSL_LOCKS_EXCLUDED(mu_);


 private:
  explicit CoordinatorMetrics(Coordinator* coordinator) : coordinator_(coordinator) {}
  absl::Status Register(metrics::Registry* registry);
  void Collect();

  Coordinator* const coordinator_;

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

  absl::Mutex mu_;
  // Check-in times of chunks not yet released: (job, generation, step, chunk) -> times.
  std::map<std::tuple<std::string, uint64_t, core::Step, core::ChunkId>, std::vector<absl::Time>>
      open_checkins_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::server

#endif  // PSYNC_SERVER_COORDINATOR_METRICS_H_

// psync::metrics::Registry: the coordinator's Prometheus metrics, rendered in
// the text exposition format 0.0.4 for GET /metrics.
//
// Usage:
//   Registry registry;
//   CounterFamily* checkins = *registry.AddCounter(
//       "psync_checkins_total", "Check-ins received.", {"job", "chunk"});
//   Counter* c = checkins->WithLabels({"job-a", "3"});  // Keep the pointer.
//   c->Increment();
//   registry.AddCollector([&] { missing->Get()->Set(tracker.Missing()); });
//   std::string text = registry.Render();
//
// Registration validates names and fails with INVALID_ARGUMENT naming the
// bad name: metric names must match [a-zA-Z_:][a-zA-Z0-9_:]*, counter names
// must end in "_total", label names must match [a-zA-Z_][a-zA-Z0-9_]*, must
// not start with "__", must not repeat, and histograms may not use "le";
// histogram bounds must be strictly increasing and not NaN (a trailing +Inf
// is dropped: it is always implicit). A name that collides with a series
// of an existing family (including a histogram's _bucket, _sum and _count)
// fails with ALREADY_EXISTS. On error nothing is registered.
//
// Thread-safety: every method may be called concurrently. Families and their
// children are owned by the registry; the pointers it returns stay valid
// until it is destroyed. Output is deterministic: families sorted by name,
// series by label values.

#ifndef PSYNC_SERVE_METRICS_REGISTRY_H_
#define PSYNC_SERVE_METRICS_REGISTRY_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "serve/metrics/exposition.h"
#include "serve/metrics/family.h"
#include "serve/metrics/metric.h"

namespace psync::metrics {

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // A family of counters; `name` must end in "_total".
  absl::StatusOr<CounterFamily*> AddCounter(absl::string_view name, absl::string_view help,
                                            std::vector<std::string> label_names = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<GaugeFamily*> AddGauge(absl::string_view name, absl::string_view help,
                                        std::vector<std::string> label_names = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // A family of histograms sharing the bucket `upper_bounds`.
  absl::StatusOr<HistogramFamily*> AddHistogram(absl::string_view name, absl::string_view help,
                                                std::vector<std::string> label_names,
                                                std::vector<double> upper_bounds)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Registers `collector`, run by every Render() before any family is
  // rendered, in registration order, one Render at a time. It typically
  // reads a snapshot and sets gauges. It must not call Render().
  void AddCollector(std::function<void()> collector) ABSL_LOCKS_EXCLUDED(mu_);

  // EraseWithPrefix (family.h) on every family whose first label is `label`: frees the series of
  // label=value (e.g. job="a" once job a ended). Their pointers become invalid.
  void EraseSeries(absl::string_view label, const std::string& value) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs the collectors, then returns every family in the text format.
  // Families without labels always render (starting at 0); a labeled family
  // renders once it has a series.
  std::string Render() ABSL_LOCKS_EXCLUDED(render_mu_, mu_);

  // The HTTP Content-Type of Render()'s output.
  static constexpr absl::string_view kContentType = kExpositionContentType;

 private:
  // Checks `name` and `label_names` and that none of `series_names` is taken.
  absl::Status Validate(absl::string_view name, const std::vector<std::string>& label_names,
                        const std::vector<std::string>& series_names, bool is_histogram) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  template <typename T>
  absl::StatusOr<Family<T>*> Add(absl::string_view name, absl::string_view help,
                                 std::vector<std::string> label_names,
                                 std::vector<std::string> series_names,
                                 typename Family<T>::Factory factory) ABSL_LOCKS_EXCLUDED(mu_);

  // Serializes Render() so collectors never interleave.
  absl::Mutex render_mu_ ABSL_ACQUIRED_BEFORE(mu_);

  // State below is protected by mu_.
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyBase>> families_ ABSL_GUARDED_BY(mu_);
  // Every sample name the families emit, to reject collisions.
  absl::flat_hash_set<std::string> series_names_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> collectors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psync::metrics

#endif  // PSYNC_SERVE_METRICS_REGISTRY_H_

// A metric family: a name, help text, fixed label names, and one child
// series (Counter, Gauge or Histogram) per distinct tuple of label values.
//
// Families are created and owned by a Registry (registry.h), which has
// validated the name and label names. Thread-safety: all methods may be
// called concurrently. Children are created on first use and never freed
// before the family, so a pointer returned by WithLabels stays valid for the
// registry's lifetime (unless erased with EraseWithPrefix); callers on hot
// paths should keep that pointer rather than look it up per update.

#ifndef PSYNC_SERVE_METRICS_FAMILY_H_
#define PSYNC_SERVE_METRICS_FAMILY_H_

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "serve/metrics/metric.h"

namespace psync::metrics {

// What every family shares, and what the registry renders through.
class FamilyBase {
 public:
  virtual ~FamilyBase() = default;
  FamilyBase(const FamilyBase&) = delete;
  FamilyBase& operator=(const FamilyBase&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  const std::vector<std::string>& label_names() const { return label_names_; }

  // Appends the family in the text format: HELP and TYPE lines, then every
  // exported series ordered by label values. Appends nothing when no series
  // is exported.
  virtual void Render(std::string* out) const = 0;

  // Frees every series whose label values begin with `prefix` (e.g. {job} for the series of a job
  // that ended), so that a long-running process does not keep one series per finished job.
  // Unlike Remove, pointers to those children become invalid: only for series whose pointers
  // nobody keeps past this call. WithLabels creates them afresh (from zero).
  virtual void EraseWithPrefix(const std::vector<std::string>& prefix) = 0;

 protected:
  FamilyBase(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}

  // INVALID_ARGUMENT unless `label_values` has one value per label name.
  absl::Status CheckArity(const std::vector<std::string>& label_values) const;
  // Aborts the process with a message naming the family; used by WithLabels,
  // where a wrong number of values is a programming error.
  [[noreturn]] void DieOnArity(const absl::Status& status) const;
  // Appends the HELP and TYPE lines.
  void RenderHeader(absl::string_view type, std::string* out) const;

 private:
  const std::string name_;
  const std::string help_;
  const std::vector<std::string> label_names_;
};

namespace internal {
// Type names and sample lines per metric kind (family.cc).
absl::string_view TypeName(const Counter*);
absl::string_view TypeName(const Gauge*);
absl::string_view TypeName(const Histogram*);
void AppendSamples(const std::string& name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Counter& counter,
                   std::string* out);
void AppendSamples(const std::string& name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Gauge& gauge,
                   std::string* out);
void AppendSamples(const std::string& name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Histogram& histogram,
                   std::string* out);
}  // namespace internal

template <typename T>
class Family final : public FamilyBase {
 public:
  using Factory = std::function<std::unique_ptr<T>()>;

  // Called by Registry; `factory` makes a fresh child.
  Family(std::string name, std::string help, std::vector<std::string> label_names, Factory factory)
      : FamilyBase(std::move(name), std::move(help), std::move(label_names)),
        factory_(std::move(factory)) {}

  // Returns the child for `label_values` (one per label name, in order),
  // creating it on first use, and exports it (again, after Remove). Never
  // null. A wrong number of values aborts the process: the label names are
  // fixed at registration, so that is a bug at the call site.
  T* WithLabels(const std::vector<std::string>& label_values) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::StatusOr<T*> child = TryWithLabels(label_values);
    if (!child.ok()) DieOnArity(child.status());
    return *child;
  }

  // Like WithLabels, but a wrong number of values is returned as
  // INVALID_ARGUMENT, for label values that come from input.
  absl::StatusOr<T*> TryWithLabels(const std::vector<std::string>& label_values)
      ABSL_LOCKS_EXCLUDED(mu_) {
    if (absl::Status status = CheckArity(label_values); !status.ok()) {
      return status;
    }
    absl::MutexLock lock(&mu_);
    Child& child = children_[label_values];
    if (child.metric == nullptr) child.metric = factory_();
    child.exported = true;
    return child.metric.get();
  }

  // The only child of a family without labels.
  T* Get() ABSL_LOCKS_EXCLUDED(mu_) { return WithLabels({}); }

  // Stops exporting the series for `label_values` (e.g. a finished job). The
  // child object stays alive and keeps its value, so pointers to it remain
  // valid; WithLabels for the same values exports it again. Unknown values
  // are ignored.
  void Remove(const std::vector<std::string>& label_values) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    auto it = children_.find(label_values);
    if (it != children_.end()) it->second.exported = false;
  }

  // Remove for every series: collectors that rebuild a family from a snapshot
  // call this first, then WithLabels(...)->Set(...) for what still exists.
  void RemoveAll() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    for (auto& [values, child] : children_) child.exported = false;
  }

  void EraseWithPrefix(const std::vector<std::string>& prefix) override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    // Children are ordered by label values: those with the prefix are one contiguous range.
    auto it = children_.lower_bound(prefix);
    while (it != children_.end() && it->first.size() >= prefix.size() &&
           std::equal(prefix.begin(), prefix.end(), it->first.begin())) {
      it = children_.erase(it);
    }
  }

  void Render(std::string* out) const override ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    bool header_written = false;
    for (const auto& [values, child] : children_) {
      if (!child.exported) continue;
      if (!header_written) {
        RenderHeader(internal::TypeName(static_cast<const T*>(nullptr)), out);
        header_written = true;
      }
      internal::AppendSamples(name(), label_names(), values, *child.metric, out);
    }
  }

 private:
  struct Child {
    std::unique_ptr<T> metric;
    bool exported = false;
  };

  const Factory factory_;
  mutable absl::Mutex mu_;
  // Ordered by label values, which orders the rendered series.
  std::map<std::vector<std::string>, Child> children_ ABSL_GUARDED_BY(mu_);
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;

}  // namespace psync::metrics

#endif  // PSYNC_SERVE_METRICS_FAMILY_H_

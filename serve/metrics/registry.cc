#include "serve/metrics/registry.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psync::metrics {

absl::Status Registry::Validate(absl::string_view name, const std::vector<std::string>& label_names,
                                const std::vector<std::string>& series_names,
                                bool is_histogram) const {
  if (!IsValidMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric name \"", name, "\" is invalid: it must match [a-zA-Z_:][a-zA-Z0-9_:]*"));
  }
  absl::flat_hash_set<absl::string_view> seen;
  for (const std::string& label : label_names) {
    if (!IsValidLabelName(label)) {
      return absl::InvalidArgumentError(
          absl::StrCat("label name \"", label, "\" of metric \"", name,
                       "\" is invalid: it must match [a-zA-Z_][a-zA-Z0-9_]*"));
    }
    if (absl::StartsWith(label, "__")) {
      return absl::InvalidArgumentError(
          absl::StrCat("label name \"", label, "\" of metric \"", name,
                       "\" is reserved: names starting with \"__\" are "
                       "for Prometheus itself"));
    }
    if (is_histogram && label == "le") {
      return absl::InvalidArgumentError(absl::StrCat("label name \"le\" of histogram \"", name,
                                                     "\" is reserved for bucket bounds"));
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("label name \"", label, "\" of metric \"", name, "\" repeats"));
    }
  }
  for (const std::string& series : series_names) {
    if (series_names_.contains(series)) {
      return absl::AlreadyExistsError(absl::StrCat("metric \"", name,
                                                   "\" collides with the existing "
                                                   "series \"",
                                                   series, "\""));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<Family<T>*> Registry::Add(absl::string_view name, absl::string_view help,
                                         std::vector<std::string> label_names,
                                         std::vector<std::string> series_names,
                                         typename Family<T>::Factory factory) {
  Family<T>* family = nullptr;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status status =
            Validate(name, label_names, series_names, std::is_same_v<T, Histogram>);
        !status.ok()) {
      return status;
    }
    auto owned = std::make_unique<Family<T>>(std::string(name), std::string(help),
                                             std::move(label_names), std::move(factory));
    family = owned.get();
    families_.emplace(std::string(name), std::move(owned));
    for (std::string& series : series_names) {
      series_names_.insert(std::move(series));
    }
  }
  // A family without labels has exactly one series: export it from the
  // start, at zero.
  if (family->label_names().empty()) family->Get();
  return family;
}

absl::StatusOr<CounterFamily*> Registry::AddCounter(absl::string_view name, absl::string_view help,
                                                    std::vector<std::string> label_names) {
  if (IsValidMetricName(name) && (!absl::EndsWith(name, "_total") || name == "_total")) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter name \"", name, "\" must end in \"_total\""));
  }
  return Add<Counter>(name, help, std::move(label_names), {std::string(name)},
                      [] { return std::make_unique<Counter>(); });
}

absl::StatusOr<GaugeFamily*> Registry::AddGauge(absl::string_view name, absl::string_view help,
                                                std::vector<std::string> label_names) {
  return Add<Gauge>(name, help, std::move(label_names), {std::string(name)},
                    [] { return std::make_unique<Gauge>(); });
}

absl::StatusOr<HistogramFamily*> Registry::AddHistogram(absl::string_view name,
                                                        absl::string_view help,
                                                        std::vector<std::string> label_names,
                                                        std::vector<double> upper_bounds) {
  if (!upper_bounds.empty() && std::isinf(upper_bounds.back()) && upper_bounds.back() > 0) {
    upper_bounds.pop_back();  // +Inf is implicit.
  }
  for (size_t i = 0; i < upper_bounds.size(); ++i) {
    if (!std::isfinite(upper_bounds[i]) || (i > 0 && !(upper_bounds[i - 1] < upper_bounds[i]))) {
      return absl::InvalidArgumentError(
          absl::StrCat("bucket bounds of histogram \"", name,
                       "\" must be finite and strictly increasing; bound ", i, " is ",
                       FormatValue(upper_bounds[i])));
    }
  }
  std::string base(name);
  return Add<Histogram>(name, help, std::move(label_names),
                        {base, base + "_bucket", base + "_sum", base + "_count"},
                        [upper_bounds = std::move(upper_bounds)] {
                          return std::make_unique<Histogram>(upper_bounds);
                        });
}

void Registry::AddCollector(std::function<void()> collector) {
  if (!collector) return;
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string Registry::Render() {
  absl::MutexLock render_lock(&render_mu_);
  std::vector<std::function<void()>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
  }
  // Run without mu_, so a collector may look up or even add families.
  for (const auto& collector : collectors) collector();
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) family->Render(&out);
  return out;
}

void Registry::EraseSeries(absl::string_view label, const std::string& value) {
  absl::MutexLock lock(&mu_);
  for (auto& [name, family] : families_) {
    if (!family->label_names().empty() && family->label_names()[0] == label) {
      family->EraseWithPrefix({value});
    }
  }
}

}  // namespace psync::metrics

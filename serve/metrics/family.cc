#include "serve/metrics/family.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "serve/metrics/exposition.h"

namespace psync::metrics {

absl::Status FamilyBase::CheckArity(const std::vector<std::string>& label_values) const {
  if (label_values.size() == label_names_.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("metric \"", name_, "\" has ", label_names_.size(),
                                                 " label names but got ", label_values.size(),
                                                 " label values"));
}

void FamilyBase::DieOnArity(const absl::Status& status) const {
  std::fprintf(stderr, "psync::metrics: %s\n", std::string(status.message()).c_str());
  std::abort();
}

void FamilyBase::RenderHeader(absl::string_view type, std::string* out) const {
  absl::StrAppend(out, "# HELP ", name_, " ", EscapeHelp(help_), "\n", "# TYPE ", name_, " ", type,
                  "\n");
}

namespace internal {
namespace {

void AppendSample(absl::string_view name, const std::vector<std::string>& label_names,
                  const std::vector<std::string>& label_values, double value, std::string* out) {
  out->append(name.data(), name.size());
  AppendLabels(label_names, label_values, out);
  absl::StrAppend(out, " ", FormatValue(value), "\n");
}

}  // namespace

absl::string_view TypeName(const Counter*) { return "counter"; }
absl::string_view TypeName(const Gauge*) { return "gauge"; }
absl::string_view TypeName(const Histogram*) { return "histogram"; }

void AppendSamples(const std::string& name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Counter& counter,
                   std::string* out) {
  AppendSample(name, label_names, label_values, counter.Value(), out);
}

void AppendSamples(const std::string& name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Gauge& gauge,
                   std::string* out) {
  AppendSample(name, label_names, label_values, gauge.Value(), out);
}

void AppendSamples(const std::string& name, const std::vector<std::string>& label_names,
                   const std::vector<std::string>& label_values, const Histogram& histogram,
                   std::string* out) {
  const Histogram::Snapshot snapshot = histogram.Collect();
  std::vector<std::string> bucket_names = label_names;
  bucket_names.push_back("le");
  std::vector<std::string> bucket_values = label_values;
  bucket_values.emplace_back();
  const std::string bucket = name + "_bucket";
  for (size_t i = 0; i < snapshot.cumulative_counts.size(); ++i) {
    bucket_values.back() =
        i < snapshot.upper_bounds.size() ? FormatValue(snapshot.upper_bounds[i]) : "+Inf";
    AppendSample(bucket, bucket_names, bucket_values,
                 static_cast<double>(snapshot.cumulative_counts[i]), out);
  }
  AppendSample(name + "_sum", label_names, label_values, snapshot.sum, out);
  AppendSample(name + "_count", label_names, label_values, static_cast<double>(snapshot.count),
               out);
}

}  // namespace internal
}  // namespace psync::metrics

// Pieces of the Prometheus text exposition format, version 0.0.4:
// https://prometheus.io/docs/instrumenting/exposition_formats/
//
// Pure functions with no state: safe to call from any thread. They never
// fail; validation functions return bool and callers build the error.

#ifndef PSYNC_SERVE_METRICS_EXPOSITION_H_
#define PSYNC_SERVE_METRICS_EXPOSITION_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psync::metrics {

// The Content-Type of a text exposition.
inline constexpr absl::string_view kExpositionContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// True if `name` matches [a-zA-Z_:][a-zA-Z0-9_:]*.
bool IsValidMetricName(absl::string_view name);

// True if `name` matches [a-zA-Z_][a-zA-Z0-9_]*. Names starting with "__"
// pass here but are reserved; the registry rejects them.
bool IsValidLabelName(absl::string_view name);

// Escapes a label value: backslash, double quote and line feed become \\,
// \" and \n.
std::string EscapeLabelValue(absl::string_view value);

// Escapes HELP text: backslash and line feed become \\ and \n.
std::string EscapeHelp(absl::string_view help);

// Formats a sample value (or an "le" bound) the way Prometheus clients do:
// the shortest text that reads back as the same double ("1", "0.25",
// "1e+21"), and "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

// Appends `{name1="value1",...}` (escaped) to `out`, or nothing when there
// are no labels. `names` and `values` have the same size.
void AppendLabels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                  std::string* out);

}  // namespace psync::metrics

#endif  // PSYNC_SERVE_METRICS_EXPOSITION_H_

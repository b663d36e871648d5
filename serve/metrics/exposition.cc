#include "serve/metrics/exposition.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace psync::metrics {
namespace {

bool IsNameStart(char c, bool allow_colon) {
  return absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' ||
         (allow_colon && c == ':');
}

bool IsNameChar(char c, bool allow_colon) {
  return IsNameStart(c, allow_colon) || absl::ascii_isdigit(static_cast<unsigned char>(c));
}

bool IsValidName(absl::string_view name, bool allow_colon) {
  if (name.empty() || !IsNameStart(name[0], allow_colon)) return false;
  for (char c : name) {
    if (!IsNameChar(c, allow_colon)) return false;
  }
  return true;
}

std::string Escape(absl::string_view text, bool escape_quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '"':
        out += escape_quote ? "\\\"" : "\"";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

bool IsValidMetricName(absl::string_view name) { return IsValidName(name, /*allow_colon=*/true); }

bool IsValidLabelName(absl::string_view name) { return IsValidName(name, /*allow_colon=*/false); }

std::string EscapeLabelValue(absl::string_view value) {
  return Escape(value, /*escape_quote=*/true);
}

std::string EscapeHelp(absl::string_view help) { return Escape(help, /*escape_quote=*/false); }

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));  // Integers, fast.
  }
  char buffer[32];
  // The shortest of %.1g .. %.17g that reads back exactly.
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

void AppendLabels(const std::vector<std::string>& names, const std::vector<std::string>& values,
                  std::string* out) {
  if (names.empty()) return;
  out->push_back('{');
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append(names[i]);
    out->append("=\"");
    out->append(EscapeLabelValue(values[i]));
    out->push_back('"');
  }
  out->push_back('}');
}

}  // namespace psync::metrics

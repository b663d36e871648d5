#include "worker/compute/backend_checks.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace psync {
namespace worker {
namespace {

struct NamedRange {
  absl::string_view name;
  uintptr_t begin;
  size_t bytes;
};

template <typename T>
NamedRange RangeOf(absl::string_view name, absl::Span<const T> span) {
  return {name, reinterpret_cast<uintptr_t>(span.data()), span.size() * sizeof(T)};
}

// Empty ranges overlap nothing.
absl::Status CheckDisjoint(const std::vector<NamedRange>& ranges) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      const NamedRange& a = ranges[i];
      const NamedRange& b = ranges[j];
      if (a.bytes == 0 || b.bytes == 0) continue;
      if (a.begin < b.begin + b.bytes && b.begin < a.begin + a.bytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(a.name, " and ", b.name, " overlap; they must be disjoint"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckStagedRegion(ParamDtype dtype, const void* staged, size_t staged_bytes,
                               size_t num_elements) {
  if (absl::Status s = CheckParamDtype(dtype); !s.ok()) return s;
  const int64_t expected = StagedBytes(dtype, static_cast<int64_t>(num_elements));
  if (static_cast<int64_t>(staged_bytes) != expected) {
    return absl::InvalidArgumentError(absl::StrCat("staged has ", staged_bytes, " bytes; ",
                                                   ParamDtypeName(dtype), " needs ", expected,
                                                   " bytes for ", num_elements, " elements"));
  }
  if (dtype == ParamDtype::kBf16 && reinterpret_cast<uintptr_t>(staged) % 2 != 0) {
    return absl::InvalidArgumentError("staged must be 2-byte aligned for bf16");
  }
  return absl::OkStatus();
}

bool FiniteAtLeast(float x, float lo) { return std::isfinite(x) && x >= lo; }

}  // namespace

absl::Status CheckParamDtype(ParamDtype dtype) {
  if (dtype == ParamDtype::kBf16 || dtype == ParamDtype::kMxfp8) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("dtype ", static_cast<int>(dtype),
                                                 " is not a ParamDtype (bf16 = 1, mxfp8 = 2)"));
}

absl::Status CheckAdamParams(const AdamParams& hp) {
  if (!FiniteAtLeast(hp.lr, 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("lr is ", hp.lr, "; must be finite and >= 0"));
  }
  if (!(hp.beta1 >= 0.0f && hp.beta1 < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("beta1 is ", hp.beta1, "; must be in [0, 1)"));
  }
  if (!(hp.beta2 >= 0.0f && hp.beta2 < 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("beta2 is ", hp.beta2, "; must be in [0, 1)"));
  }
  if (!(std::isfinite(hp.eps) && hp.eps > 0.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("eps is ", hp.eps, "; must be finite and > 0"));
  }
  if (!FiniteAtLeast(hp.weight_decay, 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight_decay is ", hp.weight_decay, "; must be finite and >= 0"));
  }
  return absl::OkStatus();
}

absl::Status CheckAdamStepArgs(const AdamParams& hp, int64_t step,
                               absl::Span<const float> main_param, absl::Span<const float> grad,
                               absl::Span<const float> exp_avg, absl::Span<const float> exp_avg_sq,
                               ParamDtype dtype, absl::Span<const uint8_t> staged) {
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat("step is ", step, "; must be >= 1"));
  }
  if (absl::Status s = CheckAdamParams(hp); !s.ok()) return s;
  const size_t n = main_param.size();
  if (grad.size() != n || exp_avg.size() != n || exp_avg_sq.size() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("main_param, grad, exp_avg and exp_avg_sq must have equal sizes; got ", n,
                     ", ", grad.size(), ", ", exp_avg.size(), ", ", exp_avg_sq.size()));
  }
  if (absl::Status s = CheckStagedRegion(dtype, staged.data(), staged.size(), n); !s.ok()) {
    return s;
  }
  return CheckDisjoint({RangeOf("main_param", main_param), RangeOf("grad", grad),
                        RangeOf("exp_avg", exp_avg), RangeOf("exp_avg_sq", exp_avg_sq),
                        RangeOf("staged", staged)});
}

absl::Status CheckDequantizeArgs(ParamDtype dtype, absl::Span<const uint8_t> staged,
                                 absl::Span<const float> weights) {
  if (absl::Status s = CheckStagedRegion(dtype, staged.data(), staged.size(), weights.size());
      !s.ok()) {
    return s;
  }
  return CheckDisjoint({RangeOf("staged", staged), RangeOf("weights", weights)});
}

absl::Status CheckCopyArgs(const void* src, size_t src_bytes, const void* dst, size_t dst_bytes) {
  if (src_bytes != dst_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("copy source has ", src_bytes, " bytes but destination has ", dst_bytes));
  }
  return CheckDisjoint({{"copy source", reinterpret_cast<uintptr_t>(src), src_bytes},
                        {"copy destination", reinterpret_cast<uintptr_t>(dst), dst_bytes}});
}

absl::Status CheckFillSyntheticArgs(int64_t first_index, size_t size) {
  if (first_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("first_index is ", first_index, "; must be >= 0"));
  }
  if (static_cast<uint64_t>(size) >
      static_cast<uint64_t>(std::numeric_limits<int64_t>::max() - first_index)) {
    return absl::InvalidArgumentError("first_index + out.size() overflows int64");
  }
  return absl::OkStatus();
}

}  // namespace worker
}  // namespace psync

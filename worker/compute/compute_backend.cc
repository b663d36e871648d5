#include "worker/compute/compute_backend.h"

#include "worker/compute/backend_checks.h"

namespace psync {
namespace worker {

absl::Status ComputeBackend::AdamStepAndStage(const AdamParams& hp, int64_t step,
                                              absl::Span<float> main_param,
                                              absl::Span<const float> grad,
                                              absl::Span<float> exp_avg,
                                              absl::Span<float> exp_avg_sq, ParamDtype dtype,
                                              absl::Span<uint8_t> staged) {
  if (absl::Status s =
          CheckAdamStepArgs(hp, step, main_param, grad, exp_avg, exp_avg_sq, dtype, staged);
      !s.ok()) {
    return s;
  }
  return DoAdamStepAndStage(hp, step, main_param, grad, exp_avg, exp_avg_sq, dtype, staged);
}

absl::Status ComputeBackend::DequantizeCopy(ParamDtype dtype, absl::Span<const uint8_t> staged,
                                            absl::Span<float> weights) {
  if (absl::Status s = CheckDequantizeArgs(dtype, staged, weights); !s.ok()) return s;
  return DoDequantizeCopy(dtype, staged, weights);
}

absl::Status ComputeBackend::FillSynthetic(uint64_t seed, int64_t step, int64_t rank,
                                           int64_t first_index, absl::Span<float> out) {
  if (absl::Status s = CheckFillSyntheticArgs(first_index, out.size()); !s.ok()) return s;
  return DoFillSynthetic(seed, step, rank, first_index, out);
}

absl::Status ComputeBackend::CopyBytesFromHost(const void* host, size_t host_bytes, void* dst,
                                               size_t dst_bytes) {
  if (absl::Status s = CheckCopyArgs(host, host_bytes, dst, dst_bytes); !s.ok()) return s;
  return DoCopyBytesFromHost(host, host_bytes, dst);
}

absl::Status ComputeBackend::CopyBytesToHost(const void* src, size_t src_bytes, void* host,
                                             size_t host_bytes) {
  if (absl::Status s = CheckCopyArgs(src, src_bytes, host, host_bytes); !s.ok()) return s;
  return DoCopyBytesToHost(src, src_bytes, host);
}

}  // namespace worker
}  // namespace psync

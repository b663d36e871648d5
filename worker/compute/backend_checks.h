// Argument checks shared by every ComputeBackend implementation.
//
// Each function returns OK or INVALID_ARGUMENT with a message that names the argument and the
// allowed range, so every backend rejects the same inputs with the same words. They read only the
// span addresses and sizes, never the memory, so they work for device memory too. Thread-safe.

#ifndef PSYNC_WORKER_COMPUTE_BACKEND_CHECKS_H_
#define PSYNC_WORKER_COMPUTE_BACKEND_CHECKS_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/compute/adam_update.h"
#include "worker/compute/formats.h"

namespace psync {
namespace worker {

// dtype is one of the ParamDtype enumerators.
absl::Status CheckParamDtype(ParamDtype dtype);

// Ranges documented on AdamParams.
absl::Status CheckAdamParams(const AdamParams& hp);

// Everything ComputeBackend::AdamStepAndStage requires.
absl::Status CheckAdamStepArgs(const AdamParams& hp, int64_t step,
                               absl::Span<const float> main_param, absl::Span<const float> grad,
                               absl::Span<const float> exp_avg, absl::Span<const float> exp_avg_sq,
                               ParamDtype dtype, absl::Span<const uint8_t> staged);

// Everything ComputeBackend::DequantizeCopy requires.
absl::Status CheckDequantizeArgs(ParamDtype dtype, absl::Span<const uint8_t> staged,
                                 absl::Span<const float> weights);

// Equal sizes and no overlap, for CopyFromHost / CopyToHost.
absl::Status CheckCopyArgs(const void* src, size_t src_bytes, const void* dst, size_t dst_bytes);

// first_index >= 0 and first_index + size does not overflow.
absl::Status CheckFillSyntheticArgs(int64_t first_index, size_t size);

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_BACKEND_CHECKS_H_

// The AdamW element update, shared bit-for-bit by the CPU backend and the CUDA kernels.
//
// For step t >= 1, gradient g, first and second moments m and v and parameter p (all fp32):
//   m' = beta1 * m + (1 - beta1) * g
//   v' = beta2 * v + (1 - beta2) * g * g
//   update = (m' / bc1) / (sqrt(v' / bc2) + eps) + weight_decay * p
//   p' = p - lr * update
// with the bias corrections bc1 = 1 - beta1^t and bc2 = 1 - beta2^t. Weight decay is decoupled
// (AdamW, Loshchilov & Hutter); this equals PyTorch's AdamW and Apex's FusedAdam in adam_w_mode.
//
// Determinism: the per-call constants are computed once on the host in double precision and
// rounded to fp32 (MakeAdamConstants). Every element operation is a single IEEE-rounded fp32
// operation in the order written above: the device uses the _rn intrinsics, which nvcc never
// fuses into FMA, and host code that includes this header must be compiled with
// -ffp-contract=off (the BUILD targets do that). CPU and CUDA results are therefore identical.
//
// Thread-safe (pure). Compiles under nvcc (no Abseil here).

#ifndef PSYNC_WORKER_COMPUTE_ADAM_UPDATE_H_
#define PSYNC_WORKER_COMPUTE_ADAM_UPDATE_H_

#include <cmath>
#include <cstdint>

#include "worker/compute/host_device.h"

namespace psync {
namespace worker {

// Optimizer hyper-parameters. Valid ranges (checked by the backends): lr >= 0 and finite,
// 0 <= beta1 < 1, 0 <= beta2 < 1, eps > 0 and finite, weight_decay >= 0 and finite.
struct AdamParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// The fp32 constants of one optimizer step.
struct AdamConstants {
  float lr;
  float beta1;
  float one_minus_beta1;
  float beta2;
  float one_minus_beta2;
  float eps;
  float weight_decay;
  float bias_correction1;  // 1 - beta1^step
  float bias_correction2;  // 1 - beta2^step
};

// Host only. `step` is 1-based (the first optimizer step is 1).
inline AdamConstants MakeAdamConstants(const AdamParams& hp, int64_t step) {
  const double t = static_cast<double>(step);
  AdamConstants c;
  c.lr = hp.lr;
  c.beta1 = hp.beta1;
  c.one_minus_beta1 = static_cast<float>(1.0 - static_cast<double>(hp.beta1));
  c.beta2 = hp.beta2;
  c.one_minus_beta2 = static_cast<float>(1.0 - static_cast<double>(hp.beta2));
  c.eps = hp.eps;
  c.weight_decay = hp.weight_decay;
  c.bias_correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta1), t));
  c.bias_correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(hp.beta2), t));
  return c;
}

namespace adam_internal {

// Single correctly rounded fp32 operations that are never contracted into FMA.
PSYNC_HOST_DEVICE inline float Mul(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PSYNC_HOST_DEVICE inline float Add(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
PSYNC_HOST_DEVICE inline float Sub(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
PSYNC_HOST_DEVICE inline float Div(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
PSYNC_HOST_DEVICE inline float Sqrt(float a) {
#ifdef __CUDA_ARCH__
  return __fsqrt_rn(a);
#else
  return std::sqrt(a);
#endif
}

}  // namespace adam_internal

// Updates one element in place: *m and *v become m' and v'; returns p'.
PSYNC_HOST_DEVICE inline float AdamUpdate(const AdamConstants& c, float p, float g, float* m,
                                          float* v) {
  namespace op = adam_internal;
  const float m_next = op::Add(op::Mul(c.beta1, *m), op::Mul(c.one_minus_beta1, g));
  const float v_next = op::Add(op::Mul(c.beta2, *v), op::Mul(c.one_minus_beta2, op::Mul(g, g)));
  const float denom = op::Add(op::Sqrt(op::Div(v_next, c.bias_correction2)), c.eps);
  const float update =
      op::Add(op::Div(op::Div(m_next, c.bias_correction1), denom), op::Mul(c.weight_decay, p));
  *m = m_next;
  *v = v_next;
  return op::Sub(p, op::Mul(c.lr, update));
}

}  // namespace worker
}  // namespace psync

#endif  // PSYNC_WORKER_COMPUTE_ADAM_UPDATE_H_

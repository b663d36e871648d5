#include "worker/reference_model.h"

#include "absl/strings/str_cat.h"
#include "worker/compute/formats.h"
#include "worker/synthetic_model.h"

namespace psync {
namespace worker {
namespace {

// Encodes and decodes `values` in `dtype`, as staging and the param sync's dequantization do.
std::vector<float> RoundTrip(ParamDtype dtype, const std::vector<float>& values) {
  std::vector<uint8_t> staged(StagedBytes(dtype, static_cast<int64_t>(values.size())));
  std::vector<float> out(values.size());
  // Sizes match by construction: neither call can fail.
  EncodeStaged(dtype, values, absl::MakeSpan(staged)).IgnoreError();
  DecodeStaged(dtype, staged, absl::MakeSpan(out)).IgnoreError();
  return out;
}

}  // namespace

std::vector<float> InitialMainParams(const ModelConfig& config, uint64_t seed, int chunk,
                                     ParamKind kind) {
  const BufferLayout layout = config.Layout(kind);
  std::vector<float> out(layout.padded_elements());
  for (int64_t e = 0; e < layout.padded_elements(); ++e) {
    out[e] = InitialParam(seed, chunk, kind, config.ep_rank(), e, layout.real_elements());
  }
  return out;
}

std::vector<float> InitialWeights(const ModelConfig& config, uint64_t seed, int chunk,
                                  ParamKind kind) {
  return RoundTrip(config.dtype, InitialMainParams(config, seed, chunk, kind));
}

ReferenceModel::ReferenceModel(const ModelConfig& config, uint64_t seed, const AdamParams& adam)
    : config_(config), seed_(seed), adam_(adam) {
  states_.resize(config_.num_chunks * 2);
  for (int c = 0; c < config_.num_chunks; ++c) {
    for (ParamKind kind : kParamKinds) {
      State& s = states_[c * 2 + static_cast<int>(kind)];
      s.main_param = InitialMainParams(config_, seed_, c, kind);
      s.exp_avg.assign(s.main_param.size(), 0.0f);
      s.exp_avg_sq.assign(s.main_param.size(), 0.0f);
      s.expected = RoundTrip(config_.dtype, s.main_param);
    }
  }
}

absl::Status ReferenceModel::Step(int64_t step) {
  if (step != next_step_) {
    return absl::FailedPreconditionError(
        absl::StrCat("reference: step ", step, " out of order (next is ", next_step_, ")"));
  }
  const AdamConstants constants = MakeAdamConstants(adam_, step + 1);
  std::vector<float> sum;
  std::vector<float> grad;
  for (int c = 0; c < config_.num_chunks; ++c) {
    for (ParamKind kind : kParamKinds) {
      State& s = states_[c * 2 + static_cast<int>(kind)];
      const int64_t n = static_cast<int64_t>(s.main_param.size());
      const int64_t real = config_.RealElements(kind);
      sum.assign(n, 0.0f);
      grad.resize(n);
      for (int member : config_.GroupMembers(kind)) {
        FillExactGradients(seed_, step, member, c, kind, 0, real, absl::MakeSpan(grad));
        for (int64_t e = 0; e < n; ++e) sum[e] += grad[e];
      }
      for (int64_t e = 0; e < n; ++e) {
        s.main_param[e] =
            AdamUpdate(constants, s.main_param[e], sum[e], &s.exp_avg[e], &s.exp_avg_sq[e]);
      }
      s.expected = RoundTrip(config_.dtype, s.main_param);
    }
  }
  ++next_step_;
  return absl::OkStatus();
}

absl::Span<const float> ReferenceModel::ExpectedWeights(int chunk, ParamKind kind) const {
  return state(chunk, kind).expected;
}

absl::Span<const float> ReferenceModel::MainParams(int chunk, ParamKind kind) const {
  return state(chunk, kind).main_param;
}

}  // namespace worker
}  // namespace psync

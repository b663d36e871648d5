#include "worker/compute/cpu_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "absl/strings/str_cat.h"
#include "worker/compute/adam_update.h"
#include "worker/compute/scalar_formats.h"
#include "worker/compute/synthetic.h"

namespace psync {
namespace worker {
namespace {

constexpr size_t kAlignment = 256;

class HostBuffer final : public DeviceBuffer {
 public:
  explicit HostBuffer(absl::Span<uint8_t> bytes) : DeviceBuffer(bytes) {}
  ~HostBuffer() override { std::free(bytes().data()); }
};

class CpuBackend final : public ComputeBackend {
 public:
  absl::string_view Name() const override { return "cpu"; }

  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t num_bytes) override {
    if (num_bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat("num_bytes is ", num_bytes, "; must be >= 0"));
    }
    // aligned_alloc needs a size that is a multiple of the alignment, and non-zero.
    const size_t rounded =
        (static_cast<size_t>(num_bytes) + kAlignment - 1) / kAlignment * kAlignment;
    void* data = std::aligned_alloc(kAlignment, std::max(rounded, kAlignment));
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot allocate ", num_bytes, " bytes of host memory"));
    }
    std::memset(data, 0, static_cast<size_t>(num_bytes));
    return std::unique_ptr<DeviceBuffer>(std::make_unique<HostBuffer>(
        absl::Span<uint8_t>(static_cast<uint8_t*>(data), static_cast<size_t>(num_bytes))));
  }

  absl::Status DoAdamStepAndStage(const AdamParams& hp, int64_t step, absl::Span<float> main_param,
                                  absl::Span<const float> grad, absl::Span<float> exp_avg,
                                  absl::Span<float> exp_avg_sq, ParamDtype dtype,
                                  absl::Span<uint8_t> staged) override {
    const AdamConstants c = MakeAdamConstants(hp, step);
    const int64_t n = main_param.size();
    if (dtype == ParamDtype::kBf16) {
      for (int64_t i = 0; i < n; ++i) {
        const float p = AdamUpdate(c, main_param[i], grad[i], &exp_avg[i], &exp_avg_sq[i]);
        main_param[i] = p;
        const uint16_t code = EncodeBf16(p);
        staged[2 * i] = static_cast<uint8_t>(code & 0xFF);
        staged[2 * i + 1] = static_cast<uint8_t>(code >> 8);
      }
      return absl::OkStatus();
    }
    // MXFP8: update one 32-element block, then encode it with the block's scale.
    const Mxfp8Layout layout{n};
    uint8_t* elements = staged.data() + layout.elements_offset();
    uint8_t* scales = staged.data() + layout.scales_offset();
    for (int64_t block = 0; block < layout.num_blocks(); ++block) {
      const int64_t begin = block * kMxfp8BlockSize;
      const int64_t end = std::min<int64_t>(begin + kMxfp8BlockSize, n);
      uint32_t amax_bits = 0;
      for (int64_t i = begin; i < end; ++i) {
        main_param[i] = AdamUpdate(c, main_param[i], grad[i], &exp_avg[i], &exp_avg_sq[i]);
        amax_bits = std::max(amax_bits, AbsBits(main_param[i]));
      }
      const uint8_t scale = Mxfp8ScaleFromAmaxBits(amax_bits);
      scales[block] = scale;
      for (int64_t i = begin; i < end; ++i) {
        elements[i] = EncodeMxfp8Element(main_param[i], scale);
      }
    }
    return absl::OkStatus();
  }

  absl::Status DoDequantizeCopy(ParamDtype dtype, absl::Span<const uint8_t> staged,
                                absl::Span<float> weights) override {
    return DecodeStaged(dtype, staged, weights);
  }

  absl::Status Zero(absl::Span<uint8_t> region) override {
    if (!region.empty()) std::memset(region.data(), 0, region.size());
    return absl::OkStatus();
  }

  absl::Status DoFillSynthetic(uint64_t seed, int64_t step, int64_t rank, int64_t first_index,
                               absl::Span<float> out) override {
    const uint64_t key = SyntheticStreamKey(seed, step, rank);
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = SyntheticValue(key, first_index + static_cast<int64_t>(i));
    }
    return absl::OkStatus();
  }

 private:
  absl::Status DoCopyBytesFromHost(const void* host, size_t host_bytes, void* dst) override {
    return Copy(host, host_bytes, dst);
  }
  absl::Status DoCopyBytesToHost(const void* src, size_t src_bytes, void* host) override {
    return Copy(src, src_bytes, host);
  }

  static absl::Status Copy(const void* src, size_t bytes, void* dst) {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<ComputeBackend> NewCpuBackend() { return std::make_unique<CpuBackend>(); }

}  // namespace worker
}  // namespace psync

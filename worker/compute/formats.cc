#include "worker/compute/formats.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psync {
namespace worker {
namespace {

absl::Status SizeMismatch(absl::string_view what, int64_t region_bytes, int64_t expected_bytes,
                          int64_t num_values) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": region has ", region_bytes,
                                                 " bytes, expected ", expected_bytes, " for ",
                                                 num_values, " values"));
}

}  // namespace

absl::string_view ParamDtypeName(ParamDtype dtype) {
  switch (dtype) {
    case ParamDtype::kBf16:
      return "bf16";
    case ParamDtype::kMxfp8:
      return "mxfp8";
  }
  return "unknown";
}

absl::StatusOr<ParamDtype> ParseParamDtype(absl::string_view name) {
  if (name == "bf16") return ParamDtype::kBf16;
  if (name == "mxfp8") return ParamDtype::kMxfp8;
  return absl::InvalidArgumentError(
      absl::StrCat("param dtype '", name, "' is not one of: bf16, mxfp8"));
}

int64_t StagedBytes(ParamDtype dtype, int64_t num_elements) {
  return dtype == ParamDtype::kBf16 ? 2 * num_elements : Mxfp8Layout{num_elements}.total_bytes();
}

absl::Status EncodeBf16(absl::Span<const float> values, absl::Span<uint8_t> out) {
  const int64_t n = values.size();
  if (static_cast<int64_t>(out.size()) != 2 * n) {
    return SizeMismatch("EncodeBf16", out.size(), 2 * n, n);
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t code = EncodeBf16(values[i]);
    out[2 * i] = static_cast<uint8_t>(code & 0xFF);
    out[2 * i + 1] = static_cast<uint8_t>(code >> 8);
  }
  return absl::OkStatus();
}

absl::Status DecodeBf16(absl::Span<const uint8_t> in, absl::Span<float> values) {
  const int64_t n = values.size();
  if (static_cast<int64_t>(in.size()) != 2 * n) {
    return SizeMismatch("DecodeBf16", in.size(), 2 * n, n);
  }
  for (int64_t i = 0; i < n; ++i) {
    values[i] = DecodeBf16(static_cast<uint16_t>(in[2 * i] | (in[2 * i + 1] << 8)));
  }
  return absl::OkStatus();
}

absl::Status EncodeMxfp8(absl::Span<const float> values, absl::Span<uint8_t> out) {
  const Mxfp8Layout layout{static_cast<int64_t>(values.size())};
  if (static_cast<int64_t>(out.size()) != layout.total_bytes()) {
    return SizeMismatch("EncodeMxfp8", out.size(), layout.total_bytes(), layout.num_elements);
  }
  uint8_t* elements = out.data() + layout.elements_offset();
  uint8_t* scales = out.data() + layout.scales_offset();
  for (int64_t block = 0; block < layout.num_blocks(); ++block) {
    const int64_t begin = block * kMxfp8BlockSize;
    const int64_t end = std::min<int64_t>(begin + kMxfp8BlockSize, layout.num_elements);
    uint32_t amax_bits = 0;
    for (int64_t i = begin; i < end; ++i) amax_bits = std::max(amax_bits, AbsBits(values[i]));
    const uint8_t scale = Mxfp8ScaleFromAmaxBits(amax_bits);
    scales[block] = scale;
    for (int64_t i = begin; i < end; ++i) elements[i] = EncodeMxfp8Element(values[i], scale);
  }
  return absl::OkStatus();
}

absl::Status DecodeMxfp8(absl::Span<const uint8_t> in, absl::Span<float> values) {
  const Mxfp8Layout layout{static_cast<int64_t>(values.size())};
  if (static_cast<int64_t>(in.size()) != layout.total_bytes()) {
    return SizeMismatch("DecodeMxfp8", in.size(), layout.total_bytes(), layout.num_elements);
  }
  const uint8_t* elements = in.data() + layout.elements_offset();
  const uint8_t* scales = in.data() + layout.scales_offset();
  for (int64_t i = 0; i < layout.num_elements; ++i) {
    values[i] = DecodeMxfp8Element(elements[i], scales[i / kMxfp8BlockSize]);
  }
  return absl::OkStatus();
}

absl::Status EncodeStaged(ParamDtype dtype, absl::Span<const float> values,
                          absl::Span<uint8_t> out) {
  return dtype == ParamDtype::kBf16 ? EncodeBf16(values, out) : EncodeMxfp8(values, out);
}

absl::Status DecodeStaged(ParamDtype dtype, absl::Span<const uint8_t> in,
                          absl::Span<float> values) {
  return dtype == ParamDtype::kBf16 ? DecodeBf16(in, values) : DecodeMxfp8(in, values);
}

}  // namespace worker
}  // namespace psync

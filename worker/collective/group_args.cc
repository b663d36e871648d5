#include "worker/collective/group_args.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace psync {
namespace worker {
namespace {

bool IsGroupNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
         c == ':';
}

}  // namespace

absl::Status ValidateGroupArgs(absl::string_view group, int rank, int size,
                               const KeyValueStore* store, absl::Duration timeout) {
  if (group.empty() || group.size() > kMaxGroupNameLength) {
    return absl::InvalidArgumentError(absl::StrCat("group: name must have 1..", kMaxGroupNameLength,
                                                   " characters, got ", group.size()));
  }
  for (char c : group) {
    if (!IsGroupNameChar(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("group: \"", absl::CHexEscape(group),
                       "\" may only contain letters, digits, '_', '-', '.' "
                       "and ':'"));
    }
  }
  if (size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("size: must be >= 1, got ", size));
  }
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank: must be in [0, ", size - 1, "] for size ", size, ", got ", rank));
  }
  if (store == nullptr) {
    return absl::InvalidArgumentError("store: must not be null");
  }
  if (timeout < absl::Milliseconds(1) || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout: must be finite and >= 1ms, got ", absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

absl::Status CheckAllGatherArgs(const void* send, const void* recv, size_t bytes_per_rank,
                                int size) {
  if (send == nullptr || recv == nullptr) {
    return absl::InvalidArgumentError("AllGather: send and recv must not be null");
  }
  if (bytes_per_rank > SIZE_MAX / static_cast<size_t>(size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllGather: bytes_per_rank * size overflows: ", bytes_per_rank));
  }
  return absl::OkStatus();
}

absl::Status CheckReduceScatterArgs(const float* send, const float* recv, size_t count_per_rank,
                                    int size) {
  if (send == nullptr || recv == nullptr) {
    return absl::InvalidArgumentError("ReduceScatterSum: send and recv must not be null");
  }
  if (count_per_rank > SIZE_MAX / sizeof(float) / size) {
    return absl::InvalidArgumentError(
        absl::StrCat("ReduceScatterSum: count_per_rank * size overflows: ", count_per_rank));
  }
  return absl::OkStatus();
}

std::string GroupKeyPrefix(absl::string_view backend, absl::string_view group) {
  return absl::StrCat("collective/", backend, "/", group, "/");
}

}  // namespace worker
}  // namespace psync

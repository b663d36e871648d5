#include "worker/collective/group_args.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace psync {
namespace worker {
namespace {

bool IsGroupNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
         c == '-' || c == '.' || c == ':';
}

}  // namespace

absl::Status ValidateGroupArgs(absl::string_view group, int rank, int size,
                               const KeyValueStore* store,
                               absl::Duration timeout) {
  if (group.empty() || group.size() > kMaxGroupNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("group: name must have 1..", kMaxGroupNameLength,
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
    return absl::InvalidArgumentError(
        absl::StrCat("size: must be >= 1, got ", size));
  }
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat("rank: must be in [0, ",
                                                   size - 1, "] for size ",
                                                   size, ", got ", rank));
  }
  if (store == nullptr) {
    return absl::InvalidArgumentError("store: must not be null");
  }
  if (timeout < absl::Milliseconds(1) || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timeout: must be finite and >= 1ms, got ",
                     absl::FormatDuration(timeout)));
  }
  return absl::OkStatus();
}

std::string GroupKeyPrefix(absl::string_view backend, absl::string_view group) {
  return absl::StrCat("collective/", backend, "/", group, "/");
}

}  // namespace worker
}  // namespace psync

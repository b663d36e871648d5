// How the JobTracker's files name contributors and checksums in error messages and events, so
// that every file words them the same way. Pure inline functions; thread-safe; own nothing.
// Internal to the job_tracker library.
#ifndef PSYNC_SERVER_CORE_TRACKER_TEXT_H_
#define PSYNC_SERVER_CORE_TRACKER_TEXT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "server/core/types.h"

namespace psync::core::internal {

// "rank 3 expert"
inline std::string Describe(const Contributor& c) {
  return absl::StrCat("rank ", c.rank, " ", c.optimizer);
}

// "0x2a", or "none" for a check-in without a shard checksum.
inline std::string ChecksumText(const std::optional<uint64_t>& checksum) {
  return checksum ? absl::StrFormat("%#x", *checksum) : "none";
}

// "{dp:0x2a,edp0:0x7}"
inline std::string ChecksumsText(absl::Span<const GroupChecksum> checksums) {
  return absl::StrCat("{",
                      absl::StrJoin(checksums, ",",
                                    [](std::string* out, const GroupChecksum& g) {
                                      absl::StrAppend(out, g.group, ":",
                                                      absl::StrFormat("%#x", g.checksum));
                                    }),
                      "}");
}

}  // namespace psync::core::internal

#endif  // PSYNC_SERVER_CORE_TRACKER_TEXT_H_

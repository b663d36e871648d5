#include "serve/version.h"

#include "absl/strings/str_cat.h"
#include "serve/version_stamp.h"

namespace psync::serve {

// Keep in step with python/psync/__init__.py's __version__ (//tests/service:version_test checks).
absl::string_view PsyncVersion() { return "0.1.0"; }

absl::string_view PsyncCommit() { return PSYNC_COMMIT; }

std::string VersionLine(absl::string_view program) {
  return absl::StrCat(program, " ", PsyncVersion(), " (commit ", PsyncCommit(), ")");
}

}  // namespace psync::serve

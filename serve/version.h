// The psync release and the commit a binary was built from, for --version (every daemon, psyncctl)
// and the Python package (psync.__version__ carries the same release). Thread-safe (constants).
#ifndef PSYNC_SERVE_VERSION_H_
#define PSYNC_SERVE_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"

namespace psync::serve {

// The release, e.g. "0.1.0".
absl::string_view PsyncVersion();
// The commit (12 hex digits, "-dirty" when built with uncommitted changes; "unknown" outside a
// checkout).
absl::string_view PsyncCommit();
// "<program> <release> (commit <commit>)", what --version prints.
std::string VersionLine(absl::string_view program);

}  // namespace psync::serve

#endif  // PSYNC_SERVE_VERSION_H_

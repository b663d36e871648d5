// The psync daemons' command line: --help lists every flag of the daemon with its default, in the
// groups the README uses; --version prints the release and the commit (version.h). Abseil's own
// --help lists only flags of a file named after the program (none: they live in main.cc), and its
// --version a build mode; --helpfull still lists every flag linked in (Abseil's and gRPC's too).
//
// Thread-compatible: call once, first thing in main.
#ifndef PSYNC_SERVE_FLAG_HELP_H_
#define PSYNC_SERVE_FLAG_HELP_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace psync::serve {

// A titled group of flags, by name (without the dashes).
struct FlagGroup {
  std::string title;
  std::vector<std::string> flags;
};

// The --help text: `usage`, then each group's flags (`--name=<default>` and its help), then any
// flag defined in a file ending in `flags_file` that no group names, under "Other".
std::string FlagHelpText(absl::string_view usage, absl::Span<const FlagGroup> groups,
                         absl::string_view flags_file);

// Parses the command line (absl::ParseCommandLine). --help (or -help) prints FlagHelpText to
// stdout and exits 0; --version prints VersionLine(program) and exits 0.
void ParseDaemonFlags(int argc, char** argv, absl::string_view program, absl::string_view usage,
                      absl::Span<const FlagGroup> groups, absl::string_view flags_file);

}  // namespace psync::serve

#endif  // PSYNC_SERVE_FLAG_HELP_H_

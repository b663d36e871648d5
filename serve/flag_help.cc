#include "serve/flag_help.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "serve/version.h"

namespace psync::serve {

namespace {

void AppendFlag(const absl::CommandLineFlag& flag, std::string* out) {
  absl::StrAppend(out, "  --", flag.Name(), "=", flag.DefaultValue(), "\n      ", flag.Help(),
                  "\n");
}

}  // namespace

std::string FlagHelpText(absl::string_view usage, absl::Span<const FlagGroup> groups,
                         absl::string_view flags_file) {
  std::string out = absl::StrCat(usage, "\n");
  absl::flat_hash_set<std::string> listed;
  for (const FlagGroup& group : groups) {
    absl::StrAppend(&out, "\n", group.title, ":\n");
    for (const std::string& name : group.flags) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      if (flag == nullptr) continue;  // not linked into this binary
      AppendFlag(*flag, &out);
      listed.insert(name);
    }
  }
  std::vector<const absl::CommandLineFlag*> others;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::EndsWith(flag->Filename(), flags_file) && !listed.contains(std::string(name))) {
      others.push_back(flag);
    }
  }
  std::sort(others.begin(), others.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  if (!others.empty()) {
    absl::StrAppend(&out, "\nOther:\n");
    for (const absl::CommandLineFlag* flag : others) AppendFlag(*flag, &out);
  }
  absl::StrAppend(&out,
                  "\n--version prints the release and commit; --helpfull lists every flag linked "
                  "in, Abseil's and gRPC's too.\n");
  return out;
}

void ParseDaemonFlags(int argc, char** argv, absl::string_view program, absl::string_view usage,
                      absl::Span<const FlagGroup> groups, absl::string_view flags_file) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help") {
      const std::string text = FlagHelpText(usage, groups, flags_file);
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::exit(0);
    }
  }
  absl::FlagsUsageConfig config;
  const std::string version = VersionLine(program);
  config.version_string = [version] { return version + "\n"; };
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);
}

}  // namespace psync::serve

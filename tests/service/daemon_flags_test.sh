#!/usr/bin/env bash
# The daemons' command line as a user meets it first: --help exits 0 and lists every flag defined
# in the daemon's main.cc, each with its default, every one in a titled group (none under
# "Other"); --version prints "<program> <release> (commit <commit>)", the release being the Python
# package's __version__ (psyncctl's --version too).
set -euo pipefail
root="${TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/${TEST_WORKSPACE:-psync}"
fail() { echo "daemon_flags_test: $*" >&2; exit 1; }
release=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$root/python/psync/__init__.py")
[[ -n $release ]] || fail "no __version__ in python/psync/__init__.py"

check() {  # PROGRAM BINARY MAIN_CC
  local program=$1 binary=$2 main=$3 help version names name
  help=$("$binary" --help) || fail "$program --help exited $?"
  names=$(tr '\n' ' ' <"$main" | grep -oE 'ABSL_FLAG\([^,]+, *[a-z0-9_]+' | sed 's/.*, *//')
  [[ $(wc -w <<<"$names") -ge 5 ]] || fail "found only '$names' in $main"
  for name in $names; do
    grep -qE "^  --$name=" <<<"$help" || fail "$program --help does not list --$name"
  done
  ! grep -q '^Other:' <<<"$help" || fail "$program --help has ungrouped flags: $help"
  version=$("$binary" --version) || fail "$program --version exited $?"
  [[ $version =~ ^$program\ ${release//./\\.}\ \(commit\ ([0-9a-f]{12}(-dirty)?|unknown)\)$ ]] ||
    fail "$program --version printed '$version'"
  echo "$program: $(wc -w <<<"$names") flags listed; $version"
}
check psync-coordinator "$root/server/psync-coordinator" "$root/server/main.cc"
check psync-agent "$root/agent/psync-agent" "$root/agent/main.cc"
version=$("$root/client/psyncctl" --version) || fail "psyncctl --version exited $?"
[[ $version =~ ^psyncctl\ ${release//./\\.}\ \(commit\ ([0-9a-f]{12}(-dirty)?|unknown)\)$ ]] ||
  fail "psyncctl --version printed '$version'"
echo "$version"

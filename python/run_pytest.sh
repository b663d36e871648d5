#!/usr/bin/env bash
# Runs Debian's pytest (/usr/bin/python3) over the test files given, inside Bazel's runfiles, with
# the C ABI library and the coordinator binary from the build.
set -euo pipefail
root="${TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/${TEST_WORKSPACE:-psync}"
export PSYNC_LIB="$root/client/c_api/libpsync_c.so"
export PSYNC_COORDINATOR="$root/server/psync-coordinator"
export PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
cd "$root"
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$@"

#!/usr/bin/env bash
# Type-checks the psync package with Debian's mypy, strict (the package ships py.typed: its hints
# are part of its interface).
set -euo pipefail
root="${TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/${TEST_WORKSPACE:-psync}"
[[ -d $root ]] || root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/python"
exec /usr/bin/mypy --strict --cache-dir="${TEST_TMPDIR:-$(mktemp -d)}/mypy" psync

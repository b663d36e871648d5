#!/usr/bin/env bash
# The wheel as a user installs it: builds it (build_wheel.sh) from the built libpsync_c.so, checks
# what it carries (only psync_* exported, every dependency bundled, nothing resolved outside the
# package but glibc and the C++ runtime), installs it with pip into a fresh venv (no system site packages, no PSYNC_LIB,
# no bazel-bin on any path), then runs the Python suite with that venv's interpreter, which imports
# torch and grpc (Debian's, appended at the end of sys.path so that the venv's psync comes first)
# before psync: the wheel's gRPC, Protobuf and Abseil live beside torch's and grpcio's in one
# process.
#   python/wheel_test.sh [pytest args]   (a Bazel test: //python:wheel_test)
set -euo pipefail
root="${TEST_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}/${TEST_WORKSPACE:-psync}"
[[ -d $root ]] || root=$(cd "$(dirname "$0")/.." && pwd)
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail() { echo "wheel_test: $*" >&2; exit 1; }

wheel=$("$root/python/build_wheel.sh" "$root/client/c_api/libpsync_c.so" "$tmp/dist")
echo "wheel_test: built $(basename "$wheel")"
[[ $(basename "$wheel") =~ ^psync-[0-9.]+-py3-none-manylinux_2_[0-9]+_x86_64\.whl$ ]] ||
  fail "unexpected wheel name $(basename "$wheel")"

/usr/bin/python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --no-index --no-deps "$wheel"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
lib=$site/psync/libpsync_c.so
[[ -f $site/psync/py.typed ]] || fail "py.typed is missing"

# Only the C ABI is exported.
others=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^psync_' || true)
[[ -z $others ]] || fail "libpsync_c.so exports more than psync_*: $others"
# Every dependency resolves inside the package, or is glibc's or the C++ runtime.
outside=$(env -u LD_LIBRARY_PATH ldd "$lib" | awk '$2 == "=>" {print $1, $3}' |
  grep -vE '^(libc|libm|libdl|libpthread|librt|libresolv|libstdc\+\+|libgcc_s)\.so' |
  grep -v "$site/psync/.libs/" || true)
[[ -z $outside ]] || fail "resolved outside the wheel: $outside"

cd "$tmp"
cp -r "$root/python/tests" "$tmp/tests"
env -u PSYNC_LIB -u PYTHONPATH PSYNC_TEST_INSTALLED=1 \
  PSYNC_COORDINATOR="$root/server/psync-coordinator" PYTHONDONTWRITEBYTECODE=1 \
  "$tmp/venv/bin/python" - "$site" "$@" <<'PY'
import sys

site = sys.argv[1]
sys.path.append("/usr/lib/python3/dist-packages")  # Debian's torch, grpcio and pytest, last
import grpc  # noqa: E402
import torch  # noqa: E402
import pytest  # noqa: E402

import psync  # noqa: E402

assert psync.__file__.startswith(site), f"psync imported from {psync.__file__}, not {site}"
print(f"wheel_test: psync {psync.__version__} from {psync.__file__}, torch {torch.__version__}, "
      f"grpc {grpc.__version__}")
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "tests"] + sys.argv[2:]))
PY

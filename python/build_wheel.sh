#!/usr/bin/env bash
# Builds the psync wheel from the package sources beside this script and a built libpsync_c.so, as
# auditwheel would repair it: every shared library the library needs, but glibc's and the C++
# runtime (libstdc++, libgcc_s: the process's own, as manylinux wheels use them), is copied into
# psync/.libs under a name of its own (lib<name>-psync.so.<version>, so that a library of the same
# name the process already loaded, e.g. torch's or the system's, never stands in for it), and run
# paths point at $ORIGIN. The platform tag is manylinux_<glibc>_x86_64 for the newest glibc symbol
# version any of them needs; the C++ runtime must be GCC 12's or newer (GLIBCXX_3.4.30, as on
# Debian 12 and Ubuntu 22.04). Needs patchelf, objdump, python3-build, python3-wheel, setuptools.
#   python/build_wheel.sh LIBPSYNC_C_SO OUT_DIR
# Prints the wheel's path.
set -euo pipefail
if [[ $# -ne 2 ]]; then sed -n 2,9p "$0" >&2; exit 2; fi
here=$(cd "$(dirname "$0")" && pwd)
lib=$(readlink -f "$1")
mkdir -p "$2"
out=$(cd "$2" && pwd)
python=${PYTHON:-/usr/bin/python3}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

mkdir -p "$stage/psync/.libs"
cp "$here"/psync/*.py "$here/psync/py.typed" "$stage/psync/"
cp "$here/pyproject.toml" "$stage/"
cat >"$stage/README.md" <<'README'
psync: the client of the psync coordinator, which gates each model chunk's param sync (all-gather)
until every declared contributor (dense and expert optimizers, every rank) has staged, and releases
it exactly once. See the project's docs/python.md.
README
install -m 755 "$lib" "$stage/psync/libpsync_c.so"

# glibc's libraries and the C++ runtime stay the system's (the platform tag says which glibc).
is_system() {
  case $1 in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libresolv.so.* | libutil.so.* | libstdc++.so.* | libgcc_s.so.*) return 0 ;;
  esac
  return 1
}
bundled_name() {  # libfoo.so.1.2 -> libfoo-psync.so.1.2
  local base=${1%%.so*}
  echo "$base-psync.so${1#"$base".so}"
}
declare -A renamed=()
while read -r name path; do
  is_system "$name" && continue
  [[ -f $path ]] || { echo "build_wheel: $name not found ($path)" >&2; exit 1; }
  renamed[$name]=$(bundled_name "$name")
  install -m 755 "$(readlink -f "$path")" "$stage/psync/.libs/${renamed[$name]}"
done < <(ldd "$lib" | awk '$2 == "=>" {print $1, $3}')

replace_needed() {  # FILE: point its DT_NEEDED entries at the renamed copies
  local args=() needed
  for needed in $(patchelf --print-needed "$1"); do
    [[ -n ${renamed[$needed]:-} ]] && args+=(--replace-needed "$needed" "${renamed[$needed]}")
  done
  if [[ ${#args[@]} -gt 0 ]]; then patchelf "${args[@]}" "$1"; fi
}
for name in "${!renamed[@]}"; do
  f=$stage/psync/.libs/${renamed[$name]}
  patchelf --set-soname "${renamed[$name]}" "$f"
  replace_needed "$f"
  patchelf --set-rpath '$ORIGIN' "$f"
done
replace_needed "$stage/psync/libpsync_c.so"
patchelf --set-rpath '$ORIGIN/.libs' "$stage/psync/libpsync_c.so"

# Every dependency now resolves inside the package or to the system's glibc and C++ runtime.
while read -r name arrow path _; do
  [[ $arrow == "=>" ]] || continue
  is_system "$name" && continue
  if [[ $path != "$stage/psync/.libs/"* ]]; then
    echo "build_wheel: $name resolves to $path, not to the bundled copy" >&2
    exit 1
  fi
done < <(env -u LD_LIBRARY_PATH ldd "$stage/psync/libpsync_c.so")

glibc=$(objdump -T "$stage/psync/libpsync_c.so" "$stage"/psync/.libs/* |
  grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)
platform=manylinux_2_${glibc#GLIBC_2.}_x86_64
printf '[bdist_wheel]\npython_tag = py3\nplat_name = %s\n' "$platform" >"$stage/setup.cfg"
(cd "$stage" && "$python" -m build --no-isolation --wheel --outdir "$out" . >"$stage/build.log" 2>&1) ||
  { cat "$stage/build.log" >&2; exit 1; }
ls -t "$out"/psync-*-py3-none-"$platform".whl | head -1

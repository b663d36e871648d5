#!/usr/bin/env bash
# Builds the psync image with podman from three built binaries (tools/image builds them with Bazel;
# the image test passes its own).
#   build_image.sh BIN_DIR TAG
# BIN_DIR holds psync-coordinator, psync-agent and psyncctl. The base (Debian bookworm minbase with
# the packages of runtime-packages) is made with debootstrap from the host's Debian mirror once and
# cached as a tarball in $PSYNC_IMAGE_CACHE (default /var/cache/psync-image), keyed on the package
# list: later builds import it (or find it in podman's storage) in seconds. Prints the image ID.
# Needs root (debootstrap, rootful podman).
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
bin_dir=$1
tag=$2
export PATH="$PATH:/usr/sbin:/sbin"
export CONTAINERS_CONF="$here/containers.conf"
cache=${PSYNC_IMAGE_CACHE:-/var/cache/psync-image}
suite=bookworm
mirror=$(grep -hoE 'https?://[^ ]*debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* \
  2>/dev/null | grep -v security | head -1 | tr -d ' ' || true)
mirror=${mirror:-http://deb.debian.org/debian}

mapfile -t packages < <(grep -vE '^\s*(#|$)' "$here/runtime-packages")
key=$( (echo "$suite"; printf '%s\n' "${packages[@]}") | sha256sum | cut -c1-16)
base="localhost/psync-base:$key"
tarball="$cache/psync-base-$key.tar"

if ! podman image exists "$base"; then
  if [[ ! -s $tarball ]]; then
    echo "build_image: making the base ($suite minbase + ${#packages[@]} packages) from $mirror" >&2
    mkdir -p "$cache"
    root=$(mktemp -d "$cache/root.XXXXXX")
    trap 'rm -rf "$root"' EXIT
    include=$(IFS=,; echo "${packages[*]}")
    debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" \
      >"$cache/debootstrap.log" 2>&1 || {
      tail -20 "$cache/debootstrap.log" >&2; exit 1; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*
    partial=$(mktemp "$cache/partial.XXXXXX")
    tar -C "$root" --numeric-owner -cf "$partial" .
    mv "$partial" "$tarball"
    rm -rf "$root"
    trap - EXIT
  fi
  podman import --quiet "$tarball" "$base" >/dev/null
fi

context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
for b in psync-coordinator psync-agent psyncctl; do
  install -m 0755 "$bin_dir/$b" "$context/$b"
  strip --strip-debug "$context/$b" 2>/dev/null || true
done
cp "$here/Containerfile" "$context/Containerfile"
podman build --quiet --pull=never --build-arg "BASE=$base" -t "$tag" -f "$context/Containerfile" \
  "$context"

#!/usr/bin/env bash
# Installs the pinned npm packages of package-lock.json (kubernetes-types, typescript, yaml) into a
# cache folder keyed on the lock file, once, then runs validate.mjs over deploy/k8s.
#   run.sh PSYNC_COORDINATOR PSYNC_AGENT PSYNCCTL
# The cache is $PSYNC_NPM_CACHE (default /var/cache/psync-npm). Fails when npm cannot install them
# (no registry reachable): the manifests are then not validated.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
[[ $# -eq 3 ]] || { echo "usage: run.sh PSYNC_COORDINATOR PSYNC_AGENT PSYNCCTL" >&2; exit 2; }
bins=()
for b in "$@"; do bins+=("$(readlink -f "$b")"); done
# shellcheck source=../../npm_packages.sh
source "$here/../../npm_packages.sh"
cache=$(npm_packages "$here" "the Kubernetes manifests were")
cp "$here/validate.mjs" "$here/operator-types.ts" "$cache/"
exec node "$cache/validate.mjs" "$here/.." "${bins[@]}"

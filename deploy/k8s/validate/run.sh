#!/usr/bin/env bash
# Installs the pinned npm packages of package-lock.json (kubernetes-types, typescript, yaml) into a
# cache folder keyed on the lock file, once, then runs validate.mjs over deploy/k8s.
#   run.sh PSYNC_COORDINATOR PSYNC_AGENT PSYNCCTL
# The cache is $PSYNC_NPM_CACHE (default /var/cache/psync-npm). Fails when npm cannot install them
# (no registry reachable): the manifests are then not validated.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
[[ $# -eq 3 ]] || { echo "usage: run.sh PSYNC_COORDINATOR PSYNC_AGENT PSYNCCTL" >&2; exit 2; }
for tool in node npm; do
  command -v "$tool" >/dev/null || {
    echo "FAIL: $tool not found (tools/bootstrap --with-test-tools installs it)"; exit 1; }
done
bins=()
for b in "$@"; do bins+=("$(readlink -f "$b")"); done
key=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
cache=${PSYNC_NPM_CACHE:-/var/cache/psync-npm}/$key
if [[ ! -f $cache/node_modules/.installed ]]; then
  mkdir -p "$(dirname "$cache")"
  staging=$(mktemp -d "$(dirname "$cache")/staging.XXXXXX")
  cp "$here/package.json" "$here/package-lock.json" "$staging/"
  if ! (cd "$staging" && HOME="$staging" npm ci --ignore-scripts --no-audit --no-fund \
        --cache "$staging/.npm" >"$staging/npm.log" 2>&1); then
    cat "$staging/npm.log"
    echo "FAIL: npm ci of deploy/k8s/validate/package-lock.json failed (is the npm registry" \
      "reachable?); the Kubernetes manifests were not validated"
    rm -rf "$staging"
    exit 1
  fi
  touch "$staging/node_modules/.installed"
  # A concurrent run may have filled the cache first: keep its copy.
  if [[ -f $cache/node_modules/.installed ]]; then
    rm -rf "$staging"
  else
    rm -rf "$cache"
    mv -T "$staging" "$cache"
  fi
fi
cp "$here/validate.mjs" "$here/operator-types.ts" "$cache/"
exec node "$cache/validate.mjs" "$here/.." "${bins[@]}"

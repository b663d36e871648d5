#!/usr/bin/env bash
# Installs the pinned npm packages of package-lock.json (@grafana/schema, typescript) into a cache
# folder keyed on the lock file, once, then runs validate.mjs over deploy/grafana/psync-dashboard.json.
#   run.sh [DASHBOARD_JSON]
# The cache is $PSYNC_NPM_CACHE (default /var/cache/psync-npm). Fails when npm cannot install them
# (no registry reachable): the dashboard is then not validated.
set -euo pipefail
here=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
[[ $# -le 1 ]] || { echo "usage: run.sh [DASHBOARD_JSON]" >&2; exit 2; }
dashboard=$(readlink -f "${1:-$here/../psync-dashboard.json}")
[[ -f $dashboard ]] || { echo "FAIL: $dashboard is missing"; exit 1; }
for tool in node npm; do
  command -v "$tool" >/dev/null || {
    echo "FAIL: $tool not found (tools/bootstrap --with-test-tools installs it)"; exit 1; }
done
key=$(cat "$here/package.json" "$here/package-lock.json" | sha256sum | cut -c1-16)
cache=${PSYNC_NPM_CACHE:-/var/cache/psync-npm}/$key
if [[ ! -f $cache/node_modules/.installed ]]; then
  mkdir -p "$(dirname "$cache")"
  staging=$(mktemp -d "$(dirname "$cache")/staging.XXXXXX")
  cp "$here/package.json" "$here/package-lock.json" "$staging/"
  if ! (cd "$staging" && HOME="$staging" npm ci --ignore-scripts --no-audit --no-fund \
        --cache "$staging/.npm" >"$staging/npm.log" 2>&1); then
    cat "$staging/npm.log"
    echo "FAIL: npm ci of deploy/grafana/validate/package-lock.json failed (is the npm registry" \
      "reachable?); the Grafana dashboard was not validated"
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
exec node "$here/validate.mjs" "$cache/node_modules" "$dashboard"

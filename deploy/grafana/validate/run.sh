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
# shellcheck source=../../npm_packages.sh
source "$here/../../npm_packages.sh"
cache=$(npm_packages "$here" "the Grafana dashboard was")
exec node "$here/validate.mjs" "$cache/node_modules" "$dashboard"

# Sourced by the deploy checks that need pinned npm packages (k8s/validate, grafana/validate).
#   npm_packages DIR WHAT  -> prints the folder holding DIR's packages (node_modules inside)
# Installs DIR/package.json + DIR/package-lock.json (npm ci, no scripts) once into a cache folder
# keyed on both files: $PSYNC_NPM_CACHE, default /var/cache/psync-npm. Concurrent runs may race:
# the first to finish keeps its copy. When node or npm is missing or npm cannot install them (no
# registry reachable) it says so, names WHAT was therefore not checked, and exits 1.
npm_packages() {
  local dir=$1 what=$2 tool key cache staging
  for tool in node npm; do
    command -v "$tool" >/dev/null || {
      echo "FAIL: $tool not found (tools/bootstrap --with-test-tools installs it)" >&2; exit 1; }
  done
  key=$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -c1-16)
  cache=${PSYNC_NPM_CACHE:-/var/cache/psync-npm}/$key
  if [[ ! -f $cache/node_modules/.installed ]]; then
    mkdir -p "$(dirname "$cache")"
    staging=$(mktemp -d "$(dirname "$cache")/staging.XXXXXX")
    cp "$dir/package.json" "$dir/package-lock.json" "$staging/"
    if ! (cd "$staging" && HOME="$staging" npm ci --ignore-scripts --no-audit --no-fund \
          --cache "$staging/.npm" >"$staging/npm.log" 2>&1); then
      cat "$staging/npm.log" >&2
      echo "FAIL: npm ci of $dir/package-lock.json failed (is the npm registry reachable?);" \
        "$what not checked" >&2
      rm -rf "$staging"
      exit 1
    fi
    touch "$staging/node_modules/.installed"
    if [[ -f $cache/node_modules/.installed ]]; then
      rm -rf "$staging"
    else
      rm -rf "$cache"
      mv -T "$staging" "$cache"
    fi
  fi
  echo "$cache"
}

#!/usr/bin/env bash
# promtool checks alerts.yml and prometheus.yml and runs the rules' unit tests (alerts_test.yml).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
if ! command -v promtool >/dev/null; then
  echo "FAIL: promtool not found (Debian's prometheus package; tools/bootstrap installs it)"
  exit 1
fi
promtool check rules alerts.yml
promtool check config prometheus.yml
promtool test rules alerts_test.yml

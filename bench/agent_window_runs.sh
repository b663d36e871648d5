#!/bin/bash
# The node agent's flush window: real psync-agent processes of 8 ranks each, --flush_window=0
# (write whatever is queued as soon as the writer is free) against the default 20ms (a check-in a
# release may wait for is still written at once), alternated in one session with one build
# (bench/real_agent_runs.sh: 256 ranks paced, 1,024 in a burst; RANKS_PACED, RANKS_BURST).
# Appends to OUT_DIR/real-agents.jsonl (docs/performance.md, "Real node agents").
#   bench/agent_window_runs.sh BIN_DIR [OUT_DIR]
set -u
if [ $# -lt 1 ]; then sed -n 2,7p "$0" >&2; exit 2; fi
exec "$(dirname "$0")/real_agent_runs.sh" "window-0=$1,--flush_window=0" \
  "window-20ms=$1,--flush_window=20ms" "${2:-${OUT:-/tmp}}"

#!/usr/bin/env bash
# Megatron-core with and without psync on a GPU host: a coordinator, then train_megatron.py with
# Megatron's own param sync and with psync's (psync.megatron), the same seeds; prints each run's
# RESULT line and the comparison (compare.py). Every process is bounded by `timeout`. OVERLAP=1
# runs both with DDP's overlap_param_gather (train_megatron.py --overlap; logs and results named
# *-overlap).
#   MEGATRON=DIR (holding megatron/core) PSYNC_COORDINATOR=BIN [OVERLAP=1] \
#     examples/megatron/run.sh [STEPS]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
steps=${1:-50}
python=${PYTHON:-python3}
export PYTHONPATH=$MEGATRON${PYTHONPATH:+:$PYTHONPATH}
export NCCL_NVLS_ENABLE=0
out=${OUT:-/tmp}
overlap=() suffix=
if [[ ${OVERLAP:-0} == 1 ]]; then overlap=(--overlap) suffix=-overlap; fi
port_file=$(mktemp)
timeout 600 "$PSYNC_COORDINATOR" --listen=127.0.0.1:0 --port_file="$port_file" --http_listen= \
  >"$out/coordinator.log" 2>&1 &
coordinator=$!
for _ in $(seq 100); do [[ -s $port_file ]] && break; sleep 0.1; done
target=127.0.0.1:$(cat "$port_file")
for mode in megatron psync megatron psync; do
  timeout 240 "$python" "$here/train_megatron.py" --mode=$mode --target="$target" \
    --job="megatron-$mode$suffix-$RANDOM" --steps="$steps" ${overlap[@]+"${overlap[@]}"} \
    >"$out/$mode$suffix.log" 2>&1
  echo "$mode$suffix rc=$?"
  grep '^RESULT ' "$out/$mode$suffix.log" | sed 's/^RESULT //' >>"$out/results$suffix.jsonl"
done
kill "$coordinator"
"$python" "$here/compare.py" "$out/results$suffix.jsonl"

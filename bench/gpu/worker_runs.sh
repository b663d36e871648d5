#!/usr/bin/env bash
# Copy into the bundle folder (see worker/README.md, "GPU") and run there on the GPU machine;
# BENCH_ONLY=1 stops after the step-time runs.
# Worker runs on 2 GPUs: step time coordinated vs local-deferred (alternated), then correctness
# (bf16, MXFP8, naive) and the GPU trainer test. Every job is bounded; rank log tails printed.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
PORT_FILE=$(mktemp -u /tmp/psync-port.XXXXXX)
./psync-coordinator --listen=127.0.0.1:0 --port_file=$PORT_FILE --http_listen= 2>/tmp/coordinator.log &
for i in $(seq 100); do [ -s $PORT_FILE ] && break; sleep 0.1; done; T=127.0.0.1:$(cat $PORT_FILE)
echo "coordinator at $T"
job() { limit=$1; name=$2; shift 2; pids=(); for r in 0 1; do timeout $limit ./psync-worker --target=$T --job=$name \
  --world_size=2 --rank=$r --expert_parallel=1 --compute=cuda --collective=nccl --timeout_s=30 "$@" \
  > /tmp/$name.$r.log 2>&1 &
  pids+=($!); done; wait "${pids[@]}"; echo "== $name: $*"; for r in 0 1; do tail -n ${TAIL:-3} /tmp/$name.$r.log | cut -c1-400; done; }
B="--bench --steps=60 --warmup_steps=5 --chunks=4 --buckets=4 --dense_elements=67108864 --expert_elements=67108864"
export TAIL=0
for round in 1 2 3 4; do
  for dt in bf16 mxfp8; do
    if [ $((round % 2)) = 1 ]; then order="coord deferred"; else order="deferred coord"; fi
    for m in $order; do
      if [ $m = coord ]; then job 90 bench-coord-$dt-$round $B --dtype=$dt
      else job 90 bench-deferred-$dt-$round $B --dtype=$dt --sync=local-deferred --report=false; fi
    done
  done
done
grep -H "step median\| result: \|all-gather" /tmp/bench-*.log | sed 's|/tmp/||'
[ -n "$BENCH_ONLY" ] && exit 0
export TAIL=3
V="--dense_elements=4194304 --expert_elements=4194304 --steps=5"
job 60 cuda-bf16 --dtype=bf16 $V
job 60 cuda-mxfp8 --dtype=mxfp8 $V
job 60 cuda-naive --dtype=bf16 --sync=naive $V
job 60 cuda-naive-mx --dtype=mxfp8 --sync=naive $V
timeout 20 ./psync-worker --target=$T --job=cuda-naive --audit | tail -n 12
timeout 120 ./trainer_gpu_test 2>&1 | tail -n 25
tail -5 /tmp/coordinator.log
kill %1 2>/dev/null

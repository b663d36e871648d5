#!/usr/bin/env bash
# Copy into the bundle folder with nccl_collective_test, allgather_bench (this tree),
# allgather_bench_base (the previous version, built the same way), torch_allgather.py and lib/ (see
# docs/performance-gpu.md), then run it there on the GPU machine. Uses every GPU it sees.
# The NCCL tests, then the all-gather timings alternated per round: before, waiting, enqueue-only
# (threads, then one process per GPU), torch. Every process is bounded.
cd "$(dirname "$0")"
export NCCL_NVLS_ENABLE=0 LD_LIBRARY_PATH=$PWD/lib
nvidia-smi -L; N=$(nvidia-smi -L | wc -l)
OUT=${OUT:-/tmp}
timeout 240 ./nccl_collective_test 2>&1 | tail -n 40 | tee $OUT/test.log
# One process per GPU (as torch runs), enqueue-only; rank 0 prints.
procs() {
  local dir; dir=$(mktemp -d)
  for r in $(seq 0 $((N - 1))); do
    timeout 60 ./allgather_bench --ranks=$N --rank=$r --store_dir=$dir --iters=$ITERS --sizes_mib=$SIZES "$@" &
  done
  wait; rm -rf $dir
}
ROUNDS=${ROUNDS:-2}; ITERS=${ITERS:-50}; SIZES=${SIZES:-1,4,16,64,256}
for round in $(seq $ROUNDS); do
  echo "== round $round: base (wait, before this change)"; timeout 60 ./allgather_bench_base --ranks=$N --iters=$ITERS --sizes_mib=$SIZES
  echo "== round $round: wait"; timeout 60 ./allgather_bench --ranks=$N --iters=$ITERS --sizes_mib=$SIZES
  echo "== round $round: enqueue_only"; timeout 60 ./allgather_bench --ranks=$N --iters=$ITERS --sizes_mib=$SIZES --enqueue_only
  echo "== round $round: enqueue_only, one process per GPU"; procs --enqueue_only
  echo "== round $round: torch"; timeout 120 python3 torch_allgather.py --iters $ITERS --sizes_mib $SIZES 2>&1 | grep -v Warning
done 2>&1 | tee $OUT/bench.log

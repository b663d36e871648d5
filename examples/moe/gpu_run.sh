#!/usr/bin/env bash
# The MoE example on a GPU host (NCCL, MXFP8), from a bundle of the C++ side built on Debian 12
# (.bundle: libpsync_c.so, psync-coordinator and their gRPC/Protobuf/Abseil/OpenSSL libraries; see
# examples/moe/README.md). Uses every GPU of the host (1: one rank, EP 1; 2: two ranks, EP 2) and
# the host's own Python and PyTorch. Writes the launcher's output and figures under $OUT (or
# ./gpu-out). Every step is bounded by `timeout`. SECTIONS (default correctness,time,wide) picks
# the runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bundle=$PWD/.bundle
export LD_LIBRARY_PATH=$bundle${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NVLS_ENABLE=0
export PSYNC_LIB=$bundle/libpsync_c.so PSYNC_COORDINATOR=$bundle/psync-coordinator
python=${PYTHON:-python3}
gpus=$(nvidia-smi -L | wc -l)
world=$((gpus >= 2 ? 2 : 1))
ep=$world
sections=,${SECTIONS:-correctness,time,wide},
{
  nvidia-smi -L
  $python -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
} | tee "$out/host.txt"
# Correctness: the three modes, 100 steps, the example's shape (hidden 128), MXFP8.
[[ $sections == *,correctness,* ]] && timeout 150 $python examples/moe/launch.py --backend=nccl --dtype=mxfp8 --world=$world \
  --expert_parallel=$ep --steps=100 --overlap=both --run_timeout=60 \
  --summary_json="$out/moe.json" 2>&1 | tee "$out/moe.txt" || true
# Step time: reference and coordinated, overlap off and on, in rounds of alternating order; the
# example's shape, then a wider model (hidden 1024, FFN 4096, 4096 tokens per rank).
[[ $sections == *,time,* ]] && timeout 200 $python examples/moe/launch.py --backend=nccl \
  --dtype=mxfp8 --world=$world --expert_parallel=$ep --steps=100 --overlap=both \
  --modes=reference,coordinated --repeat=3 \
  --run_timeout=40 --summary_json="$out/moe-time.json" 2>&1 | tee "$out/moe-time.txt" || true
[[ $sections == *,wide,* ]] && timeout 200 $python examples/moe/launch.py --backend=nccl \
  --dtype=mxfp8 --world=$world --expert_parallel=$ep --steps=100 --overlap=both \
  --modes=reference,coordinated --repeat=2 \
  --run_timeout=45 --train_args="--hidden=1024 --ffn=4096 --tokens=4096 --lr=1e-3" \
  --summary_json="$out/moe-wide.json" 2>&1 | tee "$out/moe-wide.txt" || true

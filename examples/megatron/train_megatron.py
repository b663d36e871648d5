"""One rank of a small MoE GPT trained with Megatron-core's own DDP, DistributedOptimizer and
ChainedOptimizer (a dense and an expert DistributedOptimizer), its param sync either Megatron's
(`--mode=megatron`) or released by psync (`--mode=psync`, psync.megatron.MegatronParamSync).

On one GPU Megatron builds the expert DistributedOptimizer only for parameters marked
`allreduce = False` (expert parallelism marks them; at expert_model_parallel_size=1 nothing does),
so the expert weights are marked here before DDP wraps the model. Local layer spec (no Transformer
Engine), bf16 (Float16Module), overlap_param_gather off unless `--overlap`: then DDP's
overlap_param_gather is on and the training loop is the same, as in Megatron's: DDP's forward
pre-hooks (registered by DDP) finish the param all-gathers, per bucket group in Megatron's mode,
per chunk once psync released it in psync's; at the end `disable_forward_pre_hook()` syncs what is
left, as Megatron's training loop does. Prints one JSON line: the loss and the time of every step.
    python3 train_megatron.py --mode=psync --target=127.0.0.1:7070 --job=J --steps=50 [--overlap]
Needs megatron/core on PYTHONPATH (NVIDIA/Megatron-LM), torch with CUDA and NCCL.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import torch

from megatron.core import parallel_state
from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
from megatron.core.models.gpt.gpt_model import GPTModel
from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
from megatron.core.transformer.module import Float16Module
from megatron.core.transformer.transformer_config import TransformerConfig

SEED = 1234
VOCAB = 1024
SEQ = 128
BATCH = 4


def build(args):
    model_parallel_cuda_manual_seed(SEED)
    torch.manual_seed(SEED)
    config = TransformerConfig(
        num_layers=2, hidden_size=args.hidden, ffn_hidden_size=4 * args.hidden,
        num_attention_heads=8, num_moe_experts=4, moe_router_topk=2,
        moe_ffn_hidden_size=2 * args.hidden, moe_token_dispatcher_type="alltoall",
        add_bias_linear=False, bf16=True, params_dtype=torch.bfloat16,
        use_cpu_initialization=True, hidden_dropout=0.0, attention_dropout=0.0)
    spec = get_gpt_layer_local_spec(num_experts=4, moe_grouped_gemm=False)
    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=VOCAB,
                     max_sequence_length=SEQ).cuda()
    experts = 0
    for name, param in model.named_parameters():
        if ".experts." in name:
            param.allreduce = False  # what expert parallelism would mark
            experts += 1
    model = Float16Module(config, model)
    ddp_config = DistributedDataParallelConfig(
        use_distributed_optimizer=True, overlap_param_gather=args.overlap,
        overlap_grad_reduce=False, grad_reduce_in_fp32=True)
    model = DistributedDataParallel(config, ddp_config, model)
    optimizer = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True, use_distributed_optimizer=True,
                        overlap_param_gather=args.overlap),
        [model])
    return model, optimizer, experts


def batch(step: int):
    g = torch.Generator().manual_seed(SEED + step)
    tokens = torch.randint(0, VOCAB, (BATCH, SEQ + 1), generator=g).cuda()
    position_ids = torch.arange(SEQ).repeat(BATCH, 1).cuda()
    mask = torch.tril(torch.ones(SEQ, SEQ, dtype=torch.bool)).logical_not().cuda()
    return tokens[:, :-1], tokens[:, 1:], position_ids, mask.view(1, 1, SEQ, SEQ)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["megatron", "psync"], required=True)
    p.add_argument("--target", default="")
    p.add_argument("--job", default="megatron")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--port", type=int, default=29511)
    p.add_argument("--overlap", action="store_true",
                   help="DDP overlap_param_gather: the forward pre-hooks finish the param sync")
    args = p.parse_args()
    torch.distributed.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{args.port}", rank=0, world_size=1)
    torch.cuda.set_device(0)
    parallel_state.initialize_model_parallel(1, 1)
    model, optimizer, experts = build(args)
    children = [type(o).__name__ for o in getattr(optimizer, "chained_optimizers", [optimizer])]
    sync = client = None
    if args.mode == "psync":
        import psync
        import psync.megatron
        plan = [psync.ChunkPlan(chunk=0, optimizers=["dense", "expert"],
                                groups={"dp": [0], "edp": [0]})]
        client = psync.Client(args.target, job=args.job, rank=0, world_size=1, chunks=plan,
                              call_timeout=30)
        sync = psync.megatron.MegatronParamSync(client, optimizer, [model])
    losses, times = [], []
    for step in range(args.steps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        model.zero_grad_buffer()
        optimizer.zero_grad()
        input_ids, labels, position_ids, mask = batch(step)
        loss = model(input_ids, position_ids, mask, labels=labels).float().mean()
        loss.backward()
        model.finish_grad_sync()
        ok, _, _ = optimizer.step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
        assert ok, f"step {step}: the optimizer skipped the update"
    if args.overlap:
        model.disable_forward_pre_hook()  # the last step's param sync, as Megatron's loop ends
    result = {"mode": args.mode, "children": children, "expert_params": experts,
              "losses": losses, "step_s": times}
    if args.overlap:
        result["overlap"] = True
    if sync is not None and client is not None:
        sync.flush()
        result["gathers"] = sync.gathers
        result["audit_totals"] = client.audit()["jobTotals"]
        if args.overlap:  # how often a pre-hook needed a chunk before its directive had arrived
            result["directive_waits"] = sync.gate.directive_waits
            result["directive_wait_s"] = sync.gate.directive_wait_seconds
        client.close()
    print("RESULT " + json.dumps(result), flush=True)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()

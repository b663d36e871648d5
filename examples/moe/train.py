"""One rank of a small MoE training run whose param syncs reproduce (or, with psync, prevent)
Megatron-LM #4800. Started by examples/moe/launch.py, one process per rank.

The model has the shape of Megatron-LM's test_mxfp8_moe: L layers (default 4) of hidden size H
(128), each a dense block (LayerNorm, Linear, GELU) and an MoE block (LayerNorm, a top-k router,
E experts of Linear-GELU-Linear), then a Linear head. Expert parallel EP: rank r holds the experts
of EP rank r % EP; tokens reach the experts of the other EP ranks of its EP group through
all-gathers (forward) and all-reduces (backward). Dense parameters are data-parallel over all
ranks (sync group "dp"), expert parameters over their expert-data-parallel group ("edp<k>").
The task: regress a fixed random teacher network's output from random inputs (seeded per step and
rank), so the loss falls.

Every layer is one model chunk (the head belongs to the last). Per chunk and kind (dense, expert)
one DistOpt shard: fp32 main params, Adam state, sharded over the kind's group; gradients are
flattened into a grad buffer and reduce-scattered (NCCL: reduce_scatter_tensor; Gloo in
PyTorch 1.13 has none: all_reduce, then each rank takes its shard: the same sums); the updated
shard is staged (bf16, or MXFP8 on GPUs) and the chunk's param sync all-gathers the staged shards
and copies them into the model weights. Modes (--mode):

  reference    separate param buffers; each chunk synced once after both DistOpts (no coordinator)
  naive        the param buffer is the grad buffer (reuse_grad_buf_for_mxfp8_param_ag), and each
               DistOpt syncs a chunk right after its own step (Megatron before #4800): the expert
               buffer is gathered before it was staged (garbage), then the zeroed dense buffer
               (zeros)
  coordinated  shared buffer, and psync.torch.ParamSyncGate runs each chunk's sync once the
               coordinator released it, once per step

After every sync execution (naive) and before every optimizer step, each rank compares its shard
of the model weights with what its DistOpt staged and says what went wrong (zeros, garbage). The
rank writes its losses, step times, verdict and final weights to --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import formats  # noqa: E402

KINDS = ("dense", "expert")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["reference", "naive", "coordinated"], required=True)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world_size", type=int, required=True)
    p.add_argument("--init", required=True, help="torch.distributed init_method (file://... or tcp://...)")
    p.add_argument("--target", default="", help="psync coordinator (naive, coordinated)")
    p.add_argument("--job", default="moe")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
    p.add_argument("--dtype", choices=["bf16", "mxfp8"], default="bf16")
    p.add_argument("--overlap", action="store_true", help="overlap_param_gather (coordinated, "
                   "reference): gathers waited per chunk in forward pre-hooks")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--ffn", type=int, default=256)
    p.add_argument("--experts", type=int, default=2)
    p.add_argument("--expert_parallel", type=int, default=2)
    p.add_argument("--topk", type=int, default=1)
    p.add_argument("--tokens", type=int, default=64, help="tokens per rank per step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--timeout", type=float, default=120.0, help="collective / directive timeout")
    p.add_argument("--out", required=True, help="directory for rank<r>.json and rank<r>.pt")
    return p.parse_args()


# -- expert parallel collectives -------------------------------------------------------------------

class _GatherEP(torch.autograd.Function):
    """Forward: the EP group's tensors concatenated; backward: the summed gradient's own part."""

    @staticmethod
    def forward(ctx, x, group, size, index):
        ctx.group, ctx.size, ctx.index = group, size, index
        parts = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        n = grad.shape[0] // ctx.size
        return grad[ctx.index * n:(ctx.index + 1) * n], None, None, None


class _ReduceScatterEP(torch.autograd.Function):
    """Forward: the sum over the EP group, own part; backward: the gradients gathered."""

    @staticmethod
    def forward(ctx, y, group, size, index):
        ctx.group, ctx.size, ctx.index = group, size, index
        y = y.contiguous().clone()
        dist.all_reduce(y, group=group)
        n = y.shape[0] // size
        return y[index * n:(index + 1) * n].clone()

    @staticmethod
    def backward(ctx, grad):
        parts = [torch.empty_like(grad) for _ in range(ctx.size)]
        dist.all_gather(parts, grad.contiguous(), group=ctx.group)
        return torch.cat(parts), None, None, None


# -- the model -------------------------------------------------------------------------------------

class Expert(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Layer(nn.Module):
    def __init__(self, args, ep):
        super().__init__()
        self.ep = ep
        self.topk = args.topk
        self.norm1 = nn.LayerNorm(args.hidden)
        self.proj = nn.Linear(args.hidden, args.hidden)
        self.norm2 = nn.LayerNorm(args.hidden)
        self.router = nn.Linear(args.hidden, args.experts)
        # Every rank builds all experts (same random stream), then keeps its own.
        experts = [Expert(args.hidden, args.ffn) for _ in range(args.experts)]
        self.expert_ids = ep.local_experts
        self.experts = nn.ModuleList([experts[e] for e in self.expert_ids])

    def forward(self, x):
        x = x + F.gelu(self.proj(self.norm1(x)))
        h = self.norm2(x)
        probs = F.softmax(self.router(h), dim=-1)
        top, index = probs.topk(self.topk, dim=-1)
        gates = torch.zeros_like(probs).scatter(1, index, top)
        if self.ep.size > 1:
            h = _GatherEP.apply(h, self.ep.group, self.ep.size, self.ep.index)
            gates = _GatherEP.apply(gates, self.ep.group, self.ep.size, self.ep.index)
        y = sum(expert(h) * gates[:, e:e + 1] for e, expert in zip(self.expert_ids, self.experts))
        if self.ep.size > 1:
            y = _ReduceScatterEP.apply(y, self.ep.group, self.ep.size, self.ep.index)
        return x + y


class Model(nn.Module):
    def __init__(self, args, ep):
        super().__init__()
        self.layers = nn.ModuleList([Layer(args, ep) for _ in range(args.layers)])
        self.head = nn.Linear(args.hidden, args.hidden)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)

    def chunk_params(self, chunk, kind):
        layer = self.layers[chunk]
        if kind == "expert":
            return list(layer.experts.parameters())
        expert_ids = {id(p) for p in layer.experts.parameters()}
        params = [p for p in layer.parameters() if id(p) not in expert_ids]
        if chunk == len(self.layers) - 1:
            params += list(self.head.parameters())
        return params


class Groups:
    """Process groups: dense data-parallel (all ranks), expert parallel, expert data-parallel."""

    def __init__(self, world, rank, ep_size, experts):
        if world % ep_size or experts % ep_size:
            raise SystemExit("--expert_parallel must divide the world size and --experts")
        all_ranks = list(range(world))
        self.dp_ranks = all_ranks
        self.dp = dist.new_group(all_ranks)
        self.size = ep_size
        self.index = rank % ep_size
        ep_groups = [dist.new_group(list(range(b, b + ep_size))) for b in range(0, world, ep_size)]
        self.group = ep_groups[rank // ep_size]
        edp = [[r for r in all_ranks if r % ep_size == k] for k in range(ep_size)]
        edp_groups = [dist.new_group(ranks) for ranks in edp]
        self.edp_ranks = edp[self.index]
        self.edp = edp_groups[self.index]
        self.edp_name = f"edp{self.index}"
        per = experts // ep_size
        self.local_experts = list(range(self.index * per, (self.index + 1) * per))


# -- the distributed optimizer's shard of one (chunk, kind) ------------------------------------------

class Shard:
    def __init__(self, args, params, group, group_ranks, rank, name, reuse, device):
        self.params = params
        self.group = group
        self.name = name
        self.size = len(group_ranks)
        self.index = group_ranks.index(rank)
        self.dtype = args.dtype
        self.nccl = args.backend == "nccl"
        self.numel = sum(p.numel() for p in params)
        quantum = self.size * formats.BLOCK
        self.padded = -(-self.numel // quantum) * quantum
        self.shard = self.padded // self.size
        self.staged_bytes = formats.staged_bytes(self.dtype, self.shard)
        flat = torch.zeros(self.padded, dtype=torch.float32, device=device)
        flat[:self.numel] = torch.cat([p.detach().reshape(-1) for p in params])
        lo = self.index * self.shard
        self.main = flat[lo:lo + self.shard].clone()
        self.exp_avg = torch.zeros_like(self.main)
        self.exp_avg_sq = torch.zeros_like(self.main)
        self.expected = self.main.clone()  # what this rank's part of the weights must hold
        self.grad_buffer = torch.zeros(self.padded, dtype=torch.float32, device=device)
        self.reuse = reuse
        # The all-gather's output (size * staged bytes), then this rank's staged shard (its input):
        # inside the grad buffer when reused, else a param buffer of its own.
        param_bytes = (self.size + 1) * self.staged_bytes
        if reuse:
            self.param_buffer = self.grad_buffer.view(torch.uint8)
            assert param_bytes <= self.param_buffer.numel()
        else:
            self.param_buffer = torch.zeros(param_bytes, dtype=torch.uint8, device=device)
        self.send = self.param_buffer[self.size * self.staged_bytes:param_bytes]
        self.recv = self.param_buffer[:self.size * self.staged_bytes]
        self.main_grad = torch.zeros_like(self.main)

    def accumulate_grads(self):
        if not self.reuse:
            self.grad_buffer.zero_()  # with reuse the last param sync zeroed it
        self.grad_buffer[:self.numel] += torch.cat([p.grad.reshape(-1) for p in self.params])

    def reduce_scatter(self):
        if self.nccl:
            dist.reduce_scatter_tensor(self.main_grad, self.grad_buffer, group=self.group)
        else:
            dist.all_reduce(self.grad_buffer, group=self.group)
            lo = self.index * self.shard
            self.main_grad.copy_(self.grad_buffer[lo:lo + self.shard])

    def adam_and_stage(self, step, lr, beta1=0.9, beta2=0.999, eps=1e-8):
        g = self.main_grad
        self.exp_avg.mul_(beta1).add_(g, alpha=1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(g, g, value=1 - beta2)
        t = step + 1
        denom = (self.exp_avg_sq / (1 - beta2 ** t)).sqrt_().add_(eps)
        self.main.addcdiv_(self.exp_avg, denom, value=-lr / (1 - beta1 ** t))
        formats.encode(self.dtype, self.main, self.send)
        self.expected = formats.decode(self.dtype, self.send, self.shard).clone()

    def start_gather(self):
        if self.nccl:
            return dist.all_gather_into_tensor(self.recv, self.send, group=self.group,
                                               async_op=True)
        parts = list(self.recv.split(self.staged_bytes))
        return dist.all_gather(parts, self.send, group=self.group, async_op=True)

    def finish_gather(self, work):
        """Waits for the gather, decodes it into the weights; returns the gathered values."""
        work.wait()
        parts = self.recv.split(self.staged_bytes)
        flat = torch.cat([formats.decode(self.dtype, part, self.shard) for part in parts])
        offset = 0
        with torch.no_grad():
            for p in self.params:
                p.copy_(flat[offset:offset + p.numel()].view_as(p))
                offset += p.numel()
        return flat[:self.numel]

    def my_weights(self):
        flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        flat = F.pad(flat, (0, self.padded - self.numel))
        lo = self.index * self.shard
        return flat[lo:lo + self.shard]


def checksum(values: torch.Tensor) -> int:
    """A position-weighted sum of the fp32 bit patterns, modulo 2^64: the same bytes give the same
    value on every rank and device."""
    bits = values.contiguous().view(torch.int32).to(torch.int64)
    weights = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64) % 65521 + 1
    return int((bits * weights).sum().item()) & ((1 << 64) - 1)


def diagnose(weights: torch.Tensor, expected: torch.Tensor):
    """None when equal (bitwise), else how they differ."""
    wrong = weights.view(torch.int32) != expected.view(torch.int32)
    n_wrong = int(wrong.sum().item())
    if n_wrong == 0:
        return None
    zeros = int((wrong & (weights == 0)).sum().item())
    nonfinite = int((~torch.isfinite(weights)).sum().item())
    how = "zeros" if zeros == n_wrong else "garbage"
    err = (weights[wrong] - expected[wrong]).abs()
    return {"how": how, "wrong": n_wrong, "of": weights.numel(), "zeros": zeros,
            "nonfinite": nonfinite, "max_abs_error": float(err.max().item())}


# -- the training loop ---------------------------------------------------------------------------------

class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = args.rank
        self.device = torch.device("cpu")
        if args.backend == "nccl":
            self.device = torch.device("cuda", args.rank % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        dist.init_process_group(args.backend, init_method=args.init, rank=args.rank,
                                 world_size=args.world_size,
                                 timeout=datetime.timedelta(seconds=args.timeout))
        self.groups = Groups(args.world_size, args.rank, args.expert_parallel, args.experts)
        torch.manual_seed(args.seed)
        self.model = Model(args, self.groups).to(self.device)
        reuse = args.mode != "reference"
        self.shards = []
        for c in range(args.layers):
            self.shards.append({
                "dense": Shard(args, self.model.chunk_params(c, "dense"), self.groups.dp,
                               self.groups.dp_ranks, self.rank, "dp", reuse, self.device),
                "expert": Shard(args, self.model.chunk_params(c, "expert"), self.groups.edp,
                                self.groups.edp_ranks, self.rank, self.groups.edp_name, reuse,
                                self.device),
            })
        gen = torch.Generator().manual_seed(args.seed + 7)
        self.teacher = [torch.randn(args.hidden, args.hidden, generator=gen) / math.sqrt(args.hidden)
                        for _ in range(2)]
        self.client = None
        if args.mode != "reference":
            self.client = self.connect()
        self.gate = None
        if args.mode != "naive":
            import psync.torch as pst
            self.gate = pst.ParamSyncGate(self.client, args.layers, self.start_sync,
                                          self.finish_sync, overlap=args.overlap,
                                          directive_timeout=args.timeout)
            if args.overlap:
                self.gate.register_forward_pre_hooks(self.model.layers)
        self.problems = []  # what verification found
        self.early_answers = 0
        self.executions = [0] * args.layers

    def connect(self):
        import psync
        groups = {"dp": self.groups.dp_ranks, self.groups.edp_name: self.groups.edp_ranks}
        plan = [psync.ChunkPlan(chunk=c, optimizers=list(KINDS), groups=groups)
                for c in range(self.args.layers)]
        return psync.Client(self.args.target, job=self.args.job, rank=self.rank,
                            world_size=self.args.world_size, chunks=plan,
                            call_timeout=self.args.timeout)

    def batch(self, step):
        gen = torch.Generator().manual_seed(self.args.seed * 1_000_003 + step * 1009 + self.rank)
        x = torch.randn(self.args.tokens, self.args.hidden, generator=gen)
        y = torch.tanh(x @ self.teacher[0]) @ self.teacher[1]
        return x.to(self.device), y.to(self.device)

    # The param sync of one chunk: both kinds' gathers, then the weights, then (reuse) zeros.
    def start_sync(self, chunk):
        return {kind: self.shards[chunk][kind].start_gather() for kind in KINDS}

    def finish_sync(self, chunk, works):
        sums = {}
        for kind in KINDS:
            shard = self.shards[chunk][kind]
            sums[shard.name] = checksum(shard.finish_gather(works[kind]))
        for kind in KINDS:
            if self.shards[chunk][kind].reuse:
                self.shards[chunk][kind].grad_buffer.zero_()
        return sums

    def verify(self, step, when, chunks=None):
        for c in (range(self.args.layers) if chunks is None else chunks):
            for kind in KINDS:
                shard = self.shards[c][kind]
                problem = diagnose(shard.my_weights(), shard.expected)
                if problem:
                    problem.update(step=step, chunk=c, kind=kind, when=when)
                    self.problems.append(problem)

    def naive_sync(self, step, chunk, staged):
        sums = self.finish_sync(chunk, self.start_sync(chunk))
        self.executions[chunk] += 1
        n = self.executions[chunk]
        waiting = [k for k in KINDS if k not in staged]
        when = f"sync {n} of step {step}" + (
            f", run before the {' and '.join(waiting)} DistOpt staged" if waiting else "")
        self.verify(step, when, [chunk])
        try:
            self.client.sync_done(step, chunk, sums, n)
        except Exception as e:  # noqa: BLE001: the coordinator refuses an early sync
            import psync
            if isinstance(e, psync.PsyncError) and e.code == psync.StatusCode.FAILED_PRECONDITION:
                self.early_answers += 1
            else:
                raise
        return sums

    def run(self):
        args = self.args
        losses, times = [], []
        self.psync_seconds = []  # per step: host time in the psync client's calls (the gate's)
        for step in range(args.steps):
            start = time.perf_counter()
            client_before = self.gate.client_seconds if self.gate is not None else 0.0
            x, y = self.batch(step)
            out = self.model(x)
            loss = F.mse_loss(out, y)
            (loss / args.world_size).backward()
            for c in range(args.layers):
                for kind in KINDS:
                    self.shards[c][kind].accumulate_grads()
            for p in self.model.parameters():
                p.grad = None
            for c in range(args.layers):
                for kind in KINDS:
                    self.shards[c][kind].reduce_scatter()
            verify_start = time.perf_counter()
            self.verify(step - 1, "before the optimizer of the next step")
            verify_seconds = time.perf_counter() - verify_start
            if args.mode == "naive":
                self.executions = [0] * args.layers
                staged = [set() for _ in range(args.layers)]
                final_sums = [None] * args.layers
                for kind in KINDS:
                    for c in range(args.layers):
                        self.shards[c][kind].adam_and_stage(step, args.lr)
                        staged[c].add(kind)
                        self.client.staged(step, c, kind)
                        final_sums[c] = self.naive_sync(step, c, staged[c])
                for c in range(args.layers):  # the final count, once the chunk was released
                    self.client.wait_directive(step, c, args.timeout)
                    self.client.sync_done(step, c, final_sums[c], self.executions[c])
            else:
                for kind in KINDS:
                    for c in range(args.layers):
                        self.shards[c][kind].adam_and_stage(step, args.lr)
                        self.gate.staged(step, c, kind)
                self.gate.end_step(step)
            total = loss.detach().clone()
            dist.all_reduce(total)
            losses.append(float(total.item()) / args.world_size)
            if self.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start - verify_seconds)
            if self.gate is not None:
                self.psync_seconds.append(self.gate.client_seconds - client_before)
        if self.gate is not None:
            self.gate.flush()
        self.verify(args.steps - 1, "at the end of the run")
        return losses, times

    def finish(self, losses, times):
        out = Path(self.args.out)
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu() for k, v in self.model.state_dict().items()}
        torch.save(state, out / f"rank{self.rank}.pt")
        # The JSON keeps the first 200 findings; the printed summary counts all of them.
        result = {
            "rank": self.rank, "mode": self.args.mode, "overlap": self.args.overlap,
            "losses": losses, "step_seconds": times, "problems": self.problems[:200],
            "problem_count": len(self.problems), "early_answers": self.early_answers,
        }
        if self.gate is not None:
            result["directive_waits"] = self.gate.directive_waits
            result["psync_seconds"] = self.psync_seconds
            result["directive_wait_seconds"] = self.gate.directive_wait_seconds
        if self.client is not None:
            info = self.client.info()
            result["directives_received"] = info.directives_received
            self.client.finish()
        (out / f"rank{self.rank}.json").write_text(json.dumps(result))
        return result


def summarize(rank, problems, steps):
    """One line per chunk and kind that went wrong."""
    lines = []
    seen = {}
    for p in problems:
        key = (p["chunk"], p["kind"], p["how"])
        seen.setdefault(key, []).append(p)
    for (chunk, kind, how), items in sorted(seen.items()):
        first = items[0]
        steps_wrong = len({p["step"] for p in items})
        lines.append(
            f"rank {rank} chunk {chunk} {kind} weights: {how} ({steps_wrong} of {steps} steps; "
            f"first at step {first['step']}, {first['when']}: {first['wrong']}/{first['of']} "
            f"elements wrong, {first['zeros']} zero, {first['nonfinite']} non-finite, largest "
            f"error {first['max_abs_error']:.3g})")
    return lines


def main():
    args = parse_args()
    trainer = Trainer(args)
    losses, times = trainer.run()
    trainer.finish(losses, times)
    dist.barrier()
    dist.destroy_process_group()
    lines = summarize(args.rank, trainer.problems, args.steps)
    for line in lines:
        print(line, flush=True)
    verdict = "FAIL: weights differ from the staged params" if lines else "OK: weights verified"
    print(f"rank {args.rank} {args.mode}: {verdict} after each of {args.steps} steps; "
          f"loss {losses[0]:.6f} -> {losses[-1]:.6f}", flush=True)
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())

"""psync.megatron against a stand-in for Megatron-core with its method names and call order.

The stand-in has the shape psync.megatron drives (megatron/core at NVIDIA/Megatron-LM d98e8a64):
a ChainedOptimizer whose step() runs each child DistributedOptimizer's step_with_ready_grads();
a child that stages its params and then, unless `_defer_param_sync` or overlap_param_gather,
gathers every bucket group of every model chunk, dense and expert; a bucket group whose gather
copies the staged buffer into the weights and then zeroes it (the shared buffer of
reuse_grad_buf_for_mxfp8_param_ag). That is the order before Megatron-LM #4800's fix: the dense
optimizer's gather runs before the expert one staged, and the expert one's gathers zeros.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Dict, List

import pytest
import torch

import psync
import psync.megatron
from psync import ChunkPlan

CHUNKS = 2
ELEMENTS = 6


def staged_value(step: int, kind: str, chunk: int) -> torch.Tensor:
    base = {"dense": 1.0, "expert": 100.0}[kind]
    return torch.full((ELEMENTS,), base + 10 * step + chunk, dtype=torch.bfloat16)


class BucketGroup:
    """One bucket: `staging` is where its optimizer stages (the shared buffer), `param_data` the
    gathered weights. A gather copies, then zeroes the staging."""

    def __init__(self) -> None:
        self.staging = torch.zeros(ELEMENTS, dtype=torch.bfloat16)
        self.buckets = [SimpleNamespace(param_data=torch.zeros(ELEMENTS, dtype=torch.bfloat16))]
        self.gathers = 0

    def start_param_sync(self, force_sync: bool = False) -> None:
        self.buckets[0].param_data.copy_(self.staging)
        self.staging.zero_()
        self.gathers += 1


class ModelChunk:
    def __init__(self, overlap: bool = False) -> None:
        self.ddp_config = SimpleNamespace(overlap_param_gather=overlap)
        self.bucket_groups = [BucketGroup()]
        self.expert_parallel_bucket_groups = [BucketGroup()]

    def _start_bucket_group_param_sync(self, bucket_group: BucketGroup, force_sync: bool) -> None:
        bucket_group.start_param_sync(force_sync=force_sync)


class DistributedOptimizer:
    def __init__(self, kind: str, model_chunks: List[ModelChunk], clock: Dict[str, int]) -> None:
        self.kind = kind
        self.model_chunks = model_chunks
        self.ddp_config = model_chunks[0].ddp_config
        self.clock = clock

    def _group(self, chunk: ModelChunk) -> BucketGroup:
        groups = chunk.bucket_groups if self.kind == "dense" else chunk.expert_parallel_bucket_groups
        return groups[0]

    def step_with_ready_grads(self) -> bool:
        for c, chunk in enumerate(self.model_chunks):
            self._group(chunk).staging.copy_(staged_value(self.clock["step"], self.kind, c))
        should_sync = not self.ddp_config.overlap_param_gather and not getattr(
            self, "_defer_param_sync", False)
        if should_sync:
            for chunk in self.model_chunks:
                for group in chunk.bucket_groups + chunk.expert_parallel_bucket_groups:
                    chunk._start_bucket_group_param_sync(group, force_sync=False)
        return True


class ChainedOptimizer:
    def __init__(self, children: List[DistributedOptimizer], clock: Dict[str, int],
                 found_inf_steps=()) -> None:
        self.chained_optimizers = children
        self.config = SimpleNamespace(overlap_param_gather_with_optimizer_step=False)
        self.clock = clock
        self.found_inf_steps = set(found_inf_steps)

    def _should_defer_mxfp8_param_sync(self) -> bool:
        return False  # the order before #4800's fix

    def _step(self) -> bool:
        success = True
        for optimizer in self.chained_optimizers:
            success &= optimizer.step_with_ready_grads()
        return success

    def step_with_ready_grads(self) -> bool:
        if self._should_defer_mxfp8_param_sync():
            raise AssertionError("psync.megatron turns the deferred path off")
        return self._step()

    def step(self):
        if self.clock["step"] in self.found_inf_steps:
            return False, None, None
        return self.step_with_ready_grads(), 1.0, 0


def build(overlap: bool = False, found_inf_steps=()):
    clock = {"step": 0}
    chunks = [ModelChunk(overlap) for _ in range(CHUNKS)]
    children = [DistributedOptimizer("dense", chunks, clock),
                DistributedOptimizer("expert", chunks, clock)]
    return chunks, ChainedOptimizer(children, clock, found_inf_steps), clock


def weights_wrong(chunks: List[ModelChunk], step: int) -> List[str]:
    wrong = []
    for c, chunk in enumerate(chunks):
        for kind, groups in (("dense", chunk.bucket_groups),
                             ("expert", chunk.expert_parallel_bucket_groups)):
            if not torch.equal(groups[0].buckets[0].param_data, staged_value(step, kind, c)):
                wrong.append(f"chunk {c} {kind}")
    return wrong


def connect(coordinator, job: str) -> psync.Client:
    plan = [ChunkPlan(chunk=c, optimizers=["dense", "expert"], groups={"dp": [0], "edp": [0]})
            for c in range(CHUNKS)]
    return psync.Client(coordinator.target, job=job, rank=0, world_size=1, chunks=plan,
                        call_timeout=10)


def test_the_stand_in_without_psync_writes_zeros_into_the_dense_weights():
    # The control: the pre-#4800 order really is wrong in the stand-in.
    chunks, optimizer, clock = build()
    optimizer.step()
    assert weights_wrong(chunks, 0) == ["chunk 0 dense", "chunk 1 dense"]
    assert not torch.any(chunks[0].bucket_groups[0].buckets[0].param_data)
    assert chunks[0].bucket_groups[0].gathers == 2  # once per child: twice a step


def test_each_chunk_is_gathered_once_per_step_after_both_optimizers_staged(coordinator):
    chunks, optimizer, clock = build()
    with connect(coordinator, "megatron") as client:
        sync = psync.megatron.MegatronParamSync(client, optimizer, chunks)
        for step in range(4):
            clock["step"] = step
            optimizer.step()
            assert weights_wrong(chunks, step) == [], f"step {step}"
        sync.flush()
        audit = client.audit()
    for chunk in chunks:
        assert [g.gathers for g in chunk.bucket_groups + chunk.expert_parallel_bucket_groups] == \
            [4, 4]
    assert sync.gathers == {0: 4, 1: 4}
    totals = audit["jobTotals"]
    assert (int(totals["released"]), int(totals["complete"])) == (4 * CHUNKS, 4 * CHUNKS)
    for name in ("doubleReleases", "earlySyncs", "repeatedSyncs", "checksumMismatches"):
        assert int(totals.get(name, 0)) == 0, name
    assert [(int(r.get("step", 0)), r.get("chunk", 0), r["releases"]) for r in audit["records"]] == \
        [(s, c, 1) for s in range(4) for c in range(CHUNKS)]


def test_a_step_megatron_skips_is_a_skip_and_nothing_is_gathered(coordinator):
    chunks, optimizer, clock = build(found_inf_steps={1})
    with connect(coordinator, "megatron-skip") as client:
        sync = psync.megatron.MegatronParamSync(client, optimizer, chunks)
        for step in range(3):
            clock["step"] = step
            optimizer.step()
            if step != 1:
                assert weights_wrong(chunks, step) == [], f"step {step}"
        sync.flush()
        status = client.job_status()
        audit = client.audit()
    assert sync.gathers == {0: 2, 1: 2}
    assert int(audit["jobTotals"]["released"]) == 2 * CHUNKS
    assert int(status["counters"]["skippedSteps"]) == 1


def test_without_a_coordinator_the_same_schedule_runs():
    chunks, optimizer, clock = build()
    psync.megatron.MegatronParamSync(None, optimizer, chunks)
    for step in range(2):
        clock["step"] = step
        optimizer.step()
        assert weights_wrong(chunks, step) == []
    assert [g.gathers for g in chunks[1].bucket_groups] == [2]


def test_overlap_param_gather_is_refused_naming_the_setting():
    chunks, optimizer, _ = build(overlap=True)
    with pytest.raises(ValueError, match=r"model_chunks\[0\]\.ddp_config\.overlap_param_gather"):
        psync.megatron.MegatronParamSync(None, optimizer, chunks)


def test_names_must_match_the_chained_optimizers():
    chunks, optimizer, _ = build()
    with pytest.raises(ValueError, match="names: 1 given for 2 optimizers"):
        psync.megatron.MegatronParamSync(None, optimizer, chunks, names=["dense"])

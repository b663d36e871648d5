"""psync.megatron against a stand-in for Megatron-core with its method names and call order.

The stand-in has the shape psync.megatron drives (megatron/core at NVIDIA/Megatron-LM d98e8a64):
a ChainedOptimizer whose step() runs each child DistributedOptimizer's step_with_ready_grads();
a child that stages its params and then, unless `_defer_param_sync` or overlap_param_gather,
gathers every bucket group of every model chunk, dense and expert; a bucket group whose gather
copies the staged buffer into the weights and whose post-processing (`_post_param_sync`) then zeroes
it (the shared buffer of reuse_grad_buf_for_mxfp8_param_ag; it also makes a second gather of a step
write zeros). That is the order before Megatron-LM #4800's fix: the dense optimizer's gather runs
before the expert one staged, and the expert one's gathers zeros.

With overlap_param_gather the stand-in is Megatron's DDP: the optimizer step gathers nothing; a
gather dispatched without force_sync is asynchronous (its values land in the weights when its
`param_gather_handle` is waited for); every module has DDP's forward pre-hook, which calls
`finish_param_sync` of the bucket group of each of its params (with `skip_next_bucket_dispatch` when
align_param_gather); `finish_param_sync` dispatches the group itself when `param_gather_dispatched`
is False, waits for its handle, dispatches `next_param_gather_bucket_group` unless told not to (or
it was dispatched) and runs `_post_param_sync`; finish_grad_sync clears `param_gather_dispatched`.
A chunk has two dense bucket groups and one expert one; as in Megatron, the first layer's param is
in the last dense bucket group, whose next is the one before. Every gather is logged with the
optimizers that had staged the chunk for the step whose values it gathers.
"""

from __future__ import annotations

import threading
import time
import warnings
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Dict, FrozenSet, List, Optional, Set

import pytest
import torch

import psync
import psync.megatron
from psync import ChunkPlan

CHUNKS = 2
ELEMENTS = 6
BOTH = frozenset({"dense", "expert"})


def staged_value(step: int, kind: str, chunk: int, index: int = 0) -> torch.Tensor:
    base = {"dense": 1.0, "expert": 100.0}[kind]
    return torch.full((ELEMENTS,), base + 10 * step + chunk + 50 * index, dtype=torch.bfloat16)


@dataclass(frozen=True)
class Gather:
    chunk: int
    group: str  # "dense0", "dense1", "expert0"
    staged_step: Optional[int]  # the step whose staged values it gathers (None: nothing staged)
    staged_by: FrozenSet[str]  # the optimizers that had staged the chunk for that step


class Handle:
    """An asynchronous gather in flight: its values land in the weights when waited for."""

    def __init__(self, group: "BucketGroup", values: torch.Tensor) -> None:
        self.group = group
        self.values = values

    def wait(self) -> None:
        self.group.buckets[0].param_data.copy_(self.values)


class BucketGroup:
    """One bucket: `staging` is where its optimizer stages (the shared buffer), `param_data` the
    gathered weights."""

    def __init__(self, chunk: "ModelChunk", kind: str, index: int) -> None:
        self.chunk = chunk
        self.kind = kind
        self.index = index
        self.ddp_config = chunk.ddp_config
        self.staging = torch.zeros(ELEMENTS, dtype=torch.bfloat16)
        self.staged_step: Optional[int] = None
        self.buckets = [SimpleNamespace(param_data=torch.zeros(ELEMENTS, dtype=torch.bfloat16))]
        self.gathers = 0
        self.param_gather_dispatched = False
        self.param_gather_handle: Optional[Handle] = None
        self.next_param_gather_bucket_group: Optional[BucketGroup] = None

    def start_param_sync(self, force_sync: bool = False) -> None:
        if force_sync:
            if self.param_gather_handle is not None:
                self.param_gather_handle.wait()
                self.param_gather_handle = None
                self._post_param_sync()
                return
        else:
            assert self.param_gather_handle is None, "dispatched while a gather is in flight"
        self.gathers += 1
        self.chunk.log.append(Gather(
            self.chunk.index, f"{self.kind}{self.index}", self.staged_step,
            frozenset(self.chunk.staged_by.get(self.staged_step, set()))))
        handle = Handle(self, self.staging.clone())
        if self.ddp_config.overlap_param_gather and not force_sync:
            self.param_gather_handle = handle
        else:
            handle.wait()
            self.param_gather_handle = None
        if force_sync and self.ddp_config.overlap_param_gather:
            self._post_param_sync()
        self.param_gather_dispatched = True

    def finish_param_sync(self, skip_next_bucket_dispatch: bool = False) -> None:
        assert self.ddp_config.overlap_param_gather
        if not self.param_gather_dispatched:
            self.start_param_sync()
        if self.param_gather_handle is not None:
            self.param_gather_handle.wait()
            self.param_gather_handle = None
            following = self.next_param_gather_bucket_group
            if following is not None and not skip_next_bucket_dispatch:
                if following.param_gather_dispatched:
                    warnings.warn("the next bucket's parameter all-gather was already dispatched")
                else:
                    following.start_param_sync()
            self._post_param_sync()

    def _post_param_sync(self) -> None:
        self.staging.zero_()


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class ModelChunk(torch.nn.Module):
    """A DistributedDataParallel model chunk: attention, MLP and expert layers."""

    def __init__(self, index: int, overlap: bool = False, align: bool = False) -> None:
        super().__init__()
        self.index = index
        self.ddp_config = SimpleNamespace(overlap_param_gather=overlap, align_param_gather=align,
                                          use_distributed_optimizer=True)
        self.overlap_param_gather_with_optimizer_step = False
        self.log: List[Gather] = []
        self.staged_by: Dict[Optional[int], Set[str]] = {}
        self.layers = torch.nn.ModuleList([Layer(), Layer(), Layer()])
        self.bucket_groups = [BucketGroup(self, "dense", 0), BucketGroup(self, "dense", 1)]
        self.expert_parallel_bucket_groups = [BucketGroup(self, "expert", 0)]
        self.param_to_bucket_group = {self.layers[0].weight: self.bucket_groups[1],
                                      self.layers[1].weight: self.bucket_groups[0],
                                      self.layers[2].weight: self.expert_parallel_bucket_groups[0]}
        if overlap:
            for groups in (self.bucket_groups, self.expert_parallel_bucket_groups):
                for i in range(1, len(groups)):
                    groups[len(groups) - i].next_param_gather_bucket_group = \
                        groups[len(groups) - i - 1]
            for module in self.modules():
                module.register_forward_pre_hook(self._make_forward_pre_hook())

    def all_bucket_groups(self) -> List[BucketGroup]:
        return self.bucket_groups + self.expert_parallel_bucket_groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def _make_forward_pre_hook(self):
        def hook(module, *unused):
            for param in module.parameters(recurse=False):
                if param in self.param_to_bucket_group:
                    self.param_to_bucket_group[param].finish_param_sync(
                        skip_next_bucket_dispatch=self.ddp_config.align_param_gather or
                        self.overlap_param_gather_with_optimizer_step)
        return hook

    def _start_bucket_group_param_sync(self, bucket_group: BucketGroup, force_sync: bool) -> None:
        bucket_group.start_param_sync(force_sync=force_sync)
        if self.ddp_config.overlap_param_gather:
            return
        bucket_group._post_param_sync()

    def start_param_sync(self, *unused: Any, force_sync: bool = False,
                         force_dispatch: bool = False) -> None:
        if not force_sync and self.overlap_param_gather_with_optimizer_step and not force_dispatch:
            return
        for bucket_group in self.all_bucket_groups():
            self._start_bucket_group_param_sync(bucket_group, force_sync=force_sync)

    def finish_grad_sync(self) -> None:
        for bucket_group in self.all_bucket_groups():
            bucket_group.param_gather_dispatched = False


class DistributedOptimizer:
    def __init__(self, kind: str, model_chunks: List[ModelChunk], clock: Dict[str, int]) -> None:
        self.kind = kind
        self.model_chunks = model_chunks
        self.ddp_config = model_chunks[0].ddp_config
        self.clock = clock

    def _groups(self, chunk: ModelChunk) -> List[BucketGroup]:
        return chunk.bucket_groups if self.kind == "dense" else chunk.expert_parallel_bucket_groups

    def step_with_ready_grads(self) -> bool:
        step = self.clock["step"]
        for chunk in self.model_chunks:
            for group in self._groups(chunk):
                group.staging.copy_(staged_value(step, self.kind, chunk.index, group.index))
                group.staged_step = step
            chunk.staged_by.setdefault(step, set()).add(self.kind)
        should_sync = not self.ddp_config.overlap_param_gather and not getattr(
            self, "_defer_param_sync", False)
        if should_sync:
            for chunk in self.model_chunks:
                for group in chunk.all_bucket_groups():
                    chunk._start_bucket_group_param_sync(group, force_sync=False)
        return True


class ChainedOptimizer:
    def __init__(self, children: List[DistributedOptimizer], clock: Dict[str, int],
                 found_inf_steps=(), overlap_with_optimizer_step: bool = False) -> None:
        self.chained_optimizers = children
        self.config = SimpleNamespace(
            overlap_param_gather_with_optimizer_step=overlap_with_optimizer_step)
        self.clock = clock
        self.found_inf_steps = set(found_inf_steps)

    def _should_defer_mxfp8_param_sync(self) -> bool:
        return False  # the order before #4800's fix

    def _step(self) -> bool:
        success = True
        for index, optimizer in enumerate(self.chained_optimizers):
            success &= optimizer.step_with_ready_grads()
            if self.config.overlap_param_gather_with_optimizer_step and index == 0:
                optimizer.model_chunks[0].start_param_sync(force_dispatch=True)
        return success

    def step_with_ready_grads(self) -> bool:
        if self._should_defer_mxfp8_param_sync():
            raise AssertionError("psync.megatron turns the deferred path off")
        return self._step()

    def step(self):
        if self.clock["step"] in self.found_inf_steps:
            return False, None, None
        return self.step_with_ready_grads(), 1.0, 0


def build(overlap: bool = False, found_inf_steps=(), align: bool = False,
          overlap_with_optimizer_step: bool = False):
    clock = {"step": 0}
    chunks = [ModelChunk(c, overlap, align) for c in range(CHUNKS)]
    chunks[0].overlap_param_gather_with_optimizer_step = overlap_with_optimizer_step
    children = [DistributedOptimizer("dense", chunks, clock),
                DistributedOptimizer("expert", chunks, clock)]
    return chunks, ChainedOptimizer(children, clock, found_inf_steps,
                                    overlap_with_optimizer_step), clock


def weights_wrong(chunks: List[ModelChunk], step: int) -> List[str]:
    wrong = []
    for chunk in chunks:
        for kind, groups in (("dense", chunk.bucket_groups),
                             ("expert", chunk.expert_parallel_bucket_groups)):
            if any(not torch.equal(g.buckets[0].param_data,
                                   staged_value(step, kind, chunk.index, g.index))
                   for g in groups):
                wrong.append(f"chunk {chunk.index} {kind}")
    return wrong


def gathers(chunks: List[ModelChunk]) -> List[Gather]:
    return [g for chunk in chunks for g in chunk.log]


def early(chunks: List[ModelChunk]) -> List[Gather]:
    """The gathers that ran before every optimizer had staged the chunk for their step."""
    return [g for g in gathers(chunks) if g.staged_step is None or g.staged_by != BOTH]


def gathered_steps(chunks: List[ModelChunk]) -> Dict[str, List[Optional[int]]]:
    """For each bucket group, the steps whose values its gathers gathered, in order."""
    out: Dict[str, List[Optional[int]]] = {}
    for g in gathers(chunks):
        out.setdefault(f"chunk {g.chunk} {g.group}", []).append(g.staged_step)
    return out


def forward(chunks: List[ModelChunk], align: bool = False) -> None:
    x = torch.zeros(1)
    for chunk in chunks:
        if align:
            chunk.start_param_sync()  # what align_param_gather's param_sync_func does
        chunk(x)


def finish_grad_sync(chunks: List[ModelChunk]) -> None:
    for chunk in chunks:
        chunk.finish_grad_sync()


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
    assert Gather(0, "dense0", 0, frozenset({"dense"})) in early(chunks)


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
        assert [g.gathers for g in chunk.all_bucket_groups()] == [4, 4, 4]
    assert early(chunks) == []
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
    assert [g.gathers for g in chunks[1].bucket_groups] == [2, 2]


# -- overlap_param_gather ---------------------------------------------------------------------


def two_ranks(coordinator, job: str):
    plan = [ChunkPlan(chunk=c, optimizers=["dense", "expert"], groups={"dp": [0, 1], "edp": [0, 1]})
            for c in range(CHUNKS)]
    return [psync.Client(coordinator.target, job=job, rank=r, world_size=2, chunks=plan,
                         call_timeout=10) for r in (0, 1)]


def test_overlap_the_stand_in_without_psync_gathers_from_its_forward_pre_hooks():
    # The control: Megatron's pre-hooks dispatch by themselves (a group not dispatched yet, then
    # the next one), also before anything was staged, and the optimizer step gathers nothing.
    chunks, optimizer, clock = build(overlap=True)
    x = torch.zeros(1)
    chunks[0].layers[0](x)  # its param is in dense1: dispatched, waited; dense0 dispatched next
    assert [(g.gathers, g.param_gather_handle is None) for g in chunks[0].all_bucket_groups()] == \
        [(1, False), (1, True), (0, True)]
    chunks[0].layers[1](x)
    chunks[0].layers[2](x)
    assert [g.gathers for g in chunks[0].all_bucket_groups()] == [1, 1, 1]
    assert early(chunks[:1]) == [Gather(0, "dense1", None, frozenset()),
                                 Gather(0, "dense0", None, frozenset()),
                                 Gather(0, "expert0", None, frozenset())]
    for step in range(3):
        clock["step"] = step
        forward(chunks)
        finish_grad_sync(chunks)
        optimizer.step()
    forward(chunks)
    assert weights_wrong(chunks, 2) == []
    assert all(g.gathers == 4 for chunk in chunks for g in chunk.all_bucket_groups())


@pytest.mark.parametrize("align", [False, True], ids=["hooks", "align_param_gather"])
def test_overlap_each_bucket_group_is_gathered_once_per_step_after_every_optimizer_staged(
        coordinator, align):
    chunks, optimizer, clock = build(overlap=True, align=align)
    with connect(coordinator, f"megatron-overlap-{align}") as client:
        sync = psync.megatron.MegatronParamSync(client, optimizer, chunks, directive_timeout=10)
        for step in range(4):
            clock["step"] = step
            forward(chunks, align)  # the weights of the previous step
            if step > 0:
                assert weights_wrong(chunks, step - 1) == [], f"step {step}"
            finish_grad_sync(chunks)
            optimizer.step()
            for chunk in chunks:  # released chunks dispatched, asynchronously, not waited for
                assert chunk.staged_by[step] == BOTH
                for g in chunk.all_bucket_groups():
                    assert g.gathers in (step, step + 1)
                    assert (g.param_gather_handle is not None) == (g.gathers == step + 1)
        sync.flush()  # the last step's syncs, without a forward
        assert weights_wrong(chunks, 3) == []
        audit = client.audit()
    assert early(chunks) == []
    assert gathered_steps(chunks) == {f"chunk {c} {g}": [0, 1, 2, 3] for c in range(CHUNKS)
                                      for g in ("dense0", "dense1", "expert0")}
    assert sync.gathers == {0: 4, 1: 4}
    assert all(g.param_gather_handle is None for c in chunks for g in c.all_bucket_groups())
    # SyncDone's checksums are those of the gathered values (taken after the gathers finished).
    for c in range(CHUNKS):
        dense = psync.megatron._fold(psync.megatron.checksum(staged_value(3, "dense", c, 0)),
                                     psync.megatron.checksum(staged_value(3, "dense", c, 1)))
        assert sync.gate.checksums[c] == {"dp": dense, "edp": psync.megatron.checksum(
            staged_value(3, "expert", c, 0))}
    totals = audit["jobTotals"]
    assert (int(totals["released"]), int(totals["complete"])) == (4 * CHUNKS, 4 * CHUNKS)
    for name in ("doubleReleases", "earlySyncs", "repeatedSyncs", "checksumMismatches"):
        assert int(totals.get(name, 0)) == 0, name


@pytest.mark.parametrize("align", [False, True], ids=["hooks", "align_param_gather"])
def test_overlap_a_chunk_is_gathered_only_once_every_rank_staged_it_and_its_forward_waits(
        coordinator, align):
    chunks, optimizer, clock = build(overlap=True, align=align)
    me, other = two_ranks(coordinator, f"megatron-overlap-held-{align}")
    sync = psync.megatron.MegatronParamSync(me, optimizer, chunks, directive_timeout=5)
    x = torch.zeros(1)
    for step in range(2):
        clock["step"] = step
        forward(chunks, align)  # step 0: nothing to gather yet; step 1: step 0's, already done
        finish_grad_sync(chunks)
        assert len(gathers(chunks)) == 3 * CHUNKS * step
        start = time.monotonic()
        optimizer.step()  # the pre-#4800 order: dense reports before expert stages
        assert time.monotonic() - start < 2, "the optimizer step waited for the coordinator"
        assert len(gathers(chunks)) == 3 * CHUNKS * step  # the other rank has not staged
        # The other rank stages chunk 0, and chunk 1 with its dense optimizer only.
        other.staged_batch([(step, 0, "dense"), (step, 0, "expert"), (step, 1, "dense")])
        other.wait_directive(step, 0, 10)
        if align:
            chunks[0].start_param_sync()
        chunks[0](x)  # released: runs
        assert weights_wrong(chunks[:1], step) == []
        assert chunks[1].staged_by[step] == BOTH and all(
            g.gathers == step for g in chunks[1].all_bucket_groups())
        errors: List[BaseException] = []

        def forward_chunk_1() -> None:
            try:
                if align:
                    chunks[1].start_param_sync()
                chunks[1](x)
            except BaseException as e:  # noqa: BLE001 - handed to the test's thread
                errors.append(e)

        thread = threading.Thread(target=forward_chunk_1)
        thread.start()
        thread.join(0.5)
        assert thread.is_alive(), "chunk 1's forward ran before chunk 1 was released"
        assert all(g.gathers == step for g in chunks[1].all_bucket_groups())
        other.staged(step, 1, "expert")
        thread.join(10)
        assert not thread.is_alive() and errors == []
        assert weights_wrong(chunks, step) == []
        sync.gate.settle()  # this rank's checksums, read from the device, and its SyncDones
        for c in range(CHUNKS):
            if c:
                other.wait_directive(step, c, 10)
            other.sync_done(step, c, dict(sync.gate.checksums[c]))
    sync.flush()
    totals = me.audit()["jobTotals"]
    me.close()
    other.close()
    assert early(chunks) == []
    assert all(steps == [0, 1] for steps in gathered_steps(chunks).values())
    assert (int(totals["released"]), int(totals["complete"])) == (2 * CHUNKS, 2 * CHUNKS)
    for name in ("doubleReleases", "earlySyncs", "repeatedSyncs", "checksumMismatches"):
        assert int(totals.get(name, 0)) == 0, name


def test_overlap_a_step_megatron_skips_is_a_skip_and_its_forward_gathers_nothing(coordinator):
    chunks, optimizer, clock = build(overlap=True, found_inf_steps={1})
    with connect(coordinator, "megatron-overlap-skip") as client:
        sync = psync.megatron.MegatronParamSync(client, optimizer, chunks, directive_timeout=10)
        for step in range(3):
            clock["step"] = step
            before = len(gathers(chunks))
            forward(chunks)
            if step == 2:  # after the skipped step: no gather (Megatron's hooks would dispatch)
                assert len(gathers(chunks)) == before
                assert weights_wrong(chunks, 0) == []
            finish_grad_sync(chunks)
            optimizer.step()
        forward(chunks)
        assert weights_wrong(chunks, 2) == []
        sync.flush()
        status = client.job_status()
        audit = client.audit()
    assert sync.gathers == {0: 2, 1: 2}
    assert early(chunks) == []
    assert all(steps == [0, 2] for steps in gathered_steps(chunks).values())
    assert int(audit["jobTotals"]["released"]) == 2 * CHUNKS
    assert int(status["counters"]["skippedSteps"]) == 1


def test_overlap_without_a_coordinator_dispatches_at_the_step_and_the_forward_waits():
    # No coordinator: every chunk is released by the step; its gathers are dispatched there,
    # asynchronously (handles in flight, the weights not written yet), and waited for by the hooks.
    chunks, optimizer, clock = build(overlap=True)
    sync = psync.megatron.MegatronParamSync(None, optimizer, chunks)
    for step in range(3):
        clock["step"] = step
        forward(chunks)
        finish_grad_sync(chunks)
        optimizer.step()
        groups = [g for chunk in chunks for g in chunk.all_bucket_groups()]
        assert all(g.param_gather_handle is not None and g.gathers == step + 1 for g in groups)
        assert weights_wrong(chunks, step) == [f"chunk {c} {k}" for c in range(CHUNKS)
                                               for k in ("dense", "expert")]
        forward(chunks[:1])
        assert weights_wrong(chunks[:1], step) == []
        assert all(g.param_gather_handle is not None for g in chunks[1].all_bucket_groups())
    forward(chunks)
    assert weights_wrong(chunks, 2) == [] and early(chunks) == []
    assert all(steps == [0, 1, 2] for steps in gathered_steps(chunks).values())
    assert sync.gathers == {0: 3, 1: 3}


def test_overlap_disable_forward_pre_hook_param_sync_waits_for_the_release_and_gathers_nothing():
    # DDP.disable_forward_pre_hook(param_sync=True) calls start_param_sync(force_sync=True).
    chunks, optimizer, clock = build(overlap=True)
    psync.megatron.MegatronParamSync(None, optimizer, chunks)
    chunks[0].start_param_sync(force_sync=True)  # before the first step: nothing to sync
    assert gathers(chunks) == []
    optimizer.step()
    for chunk in chunks:
        chunk.start_param_sync(force_sync=True)
    assert weights_wrong(chunks, 0) == [] and early(chunks) == []
    assert all(steps == [0] for steps in gathered_steps(chunks).values())


def test_overlap_with_optimizer_step_gathers_early_and_is_refused():
    # The control: chunk 0 is dispatched right after the dense optimizer stepped.
    chunks, optimizer, clock = build(overlap=True, overlap_with_optimizer_step=True)
    optimizer.step()
    assert Gather(0, "dense0", 0, frozenset({"dense"})) in early(chunks)
    chunks, optimizer, _ = build(overlap=True, overlap_with_optimizer_step=True)
    with pytest.raises(ValueError, match="overlap_param_gather_with_optimizer_step is True"):
        psync.megatron.MegatronParamSync(None, optimizer, chunks)


def test_overlap_refuses_mxfp8_buffer_reuse_and_chunks_that_disagree():
    chunks, optimizer, _ = build(overlap=True)
    chunks[1].ddp_config = SimpleNamespace(overlap_param_gather=True,
                                           reuse_grad_buf_for_mxfp8_param_ag=True)
    with pytest.raises(ValueError, match=r"model_chunks\[1\]\.ddp_config: "
                                         "reuse_grad_buf_for_mxfp8_param_ag"):
        psync.megatron.MegatronParamSync(None, optimizer, chunks)
    chunks, optimizer, _ = build(overlap=True)
    chunks[1].ddp_config = SimpleNamespace(overlap_param_gather=False)
    with pytest.raises(ValueError, match="disagree on ddp_config.overlap_param_gather"):
        psync.megatron.MegatronParamSync(None, optimizer, chunks)


def test_names_must_match_the_chained_optimizers():
    chunks, optimizer, _ = build()
    with pytest.raises(ValueError, match="names: 1 given for 2 optimizers"):
        psync.megatron.MegatronParamSync(None, optimizer, chunks, names=["dense"])

"""psync.megatron: Megatron-core's param sync, released by psync once per chunk per step.

Megatron-core's `ChainedOptimizer` steps a dense and an expert `DistributedOptimizer` over the same
DDP model chunks. Without `overlap_param_gather`, each `DistributedOptimizer` starts the param
all-gather of every bucket group of every chunk, dense and expert, right after its own step
(`DistributedOptimizer.step_with_ready_grads`): the first optimizer's sync runs before the second
has staged, and with MXFP8 params gathered through the grad buffer
(`reuse_grad_buf_for_mxfp8_param_ag`) it also zeroes that shared buffer (Megatron-LM #4800). Megatron
fixed it in the `ChainedOptimizer` for that case; `MegatronParamSync` makes the coordinator decide
it, in every case, and lets the cluster see it (who is missing, the sync audit):

    import psync, psync.megatron
    plan = [psync.ChunkPlan(c, ["dense", "expert"], {"dp": dp_ranks, "edp": edp_ranks})
            for c in range(len(model_chunks))]
    client = psync.Client(target, job=job, rank=rank, world_size=world, chunks=plan)
    sync = psync.megatron.MegatronParamSync(client, optimizer, model_chunks)
    for step in range(steps):
        ...forward, backward...
        optimizer.step()   # each DistributedOptimizer reports (step, chunk, name) staged after its
                           # step; then each chunk's bucket groups are gathered once, when released
    sync.flush()

How, with Megatron's own switches: every child `DistributedOptimizer` gets `_defer_param_sync`
(so it never starts a sync itself) and the `ChainedOptimizer` never takes its deferred-MXFP8 path
(which would start the syncs itself); each child's `step_with_ready_grads` reports its staging for
every chunk (asynchronously) once it returns; the chained `step_with_ready_grads` then runs each
chunk's sync through `psync.torch.ParamSyncGate` (without overlap, waiting for each directive in
chunk order): after the chunk's directive, every bucket group of the chunk (`bucket_groups` and
`expert_parallel_bucket_groups`) is gathered once, as Megatron's own deferred sync does
(`DistributedDataParallel._start_bucket_group_param_sync`), and SyncDone carries a checksum of the
gathered buffers per sync group (`dense_group` for the dense bucket groups, `expert_group` for the
expert ones). A step Megatron skips (found_inf) is reported as a skip.

With `overlap_param_gather=True` (DDP's config) the optimizer step reports its staging the same
way and does not wait for the coordinator: `ParamSyncGate(overlap=True)` dispatches, in chunk order,
the gathers of each chunk whose directive has arrived, asynchronously (Megatron's own dispatch,
`force_sync=False`, so each bucket group holds a `param_gather_handle`). Megatron's forward
pre-hooks stay as they are; what they call is gated per chunk:

* each bucket group's `finish_param_sync` (which the pre-hook of a module calls for each of its
  params, as do `ensure_params_ready`'s callbacks) becomes `gate.wait_chunk(c)` for its chunk c: the
  chunk's directive is waited for if it has not arrived (and chunks before it are completed first,
  in order), its gathers are dispatched if they were not, then Megatron's own `finish_param_sync` of
  every bucket group of the chunk waits for its handle and runs `_post_param_sync` (with
  `skip_next_bucket_dispatch`, since the chunk's other bucket groups were dispatched with it), and
  only then is the checksum taken and SyncDone reported. Megatron's own dispatches from the pre-hook
  (a bucket group not yet dispatched, and `next_param_gather_bucket_group`) never run: only a
  release gathers, so no chunk is gathered before psync released it and no bucket group twice in a
  step. A forward before the first step, or after a step Megatron skipped, gathers nothing (the
  weights are the last synced ones), as without overlap;
* the chunk's `start_param_sync` (what `align_param_gather`'s `param_sync_func` and
  `disable_forward_pre_hook(param_sync=True)` call) dispatches nothing itself: with `force_sync` it
  is `gate.wait_chunk(c)`, without it returns (the release dispatches the chunk).

The first pre-hook of chunk c waits for all of the chunk's bucket groups (SyncDone is per chunk),
where Megatron waits per bucket group; the checksums are computed on the device in stream order
and read when the next step begins, so the pre-hook does not wait for the device. A directive that arrives after the step's end is picked up by the chunk's
pre-hook, which then dispatches and waits at once.

Refused with ValueError:
* `overlap_param_gather_with_optimizer_step`: the `ChainedOptimizer` dispatches chunk 0's gathers
  itself right after its first child stepped, before the second one staged and before psync
  released the chunk (the early sync psync exists to prevent), and the pre-hooks then skip the
  next bucket group's dispatch, relying on that one;
* `reuse_grad_buf_for_mxfp8_param_ag` with `overlap_param_gather`: the params are then staged into
  the shared buffer by the training loop (`prepare_model_params_for_param_sync`, after the optimizer
  step), not by the step whose staging psync reports;
* model chunks that disagree on `overlap_param_gather`.

Not thread-safe: use it from the training loop's thread. Runs against the shape of Megatron-core's
classes (attribute and method names of megatron/core/optimizer and megatron/core/distributed at
NVIDIA/Megatron-LM d98e8a64, 2026-08-22), with and without `overlap_param_gather`, against a
stand-in (python/tests/test_megatron.py) and Megatron-core itself (examples/megatron).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import psync
from psync.torch import ParamSyncGate


def checksum_tensor(values: Any) -> Any:
    """checksum(values) as a one-element tensor on the values' device, computed in stream order
    (the host does not wait for the device)."""
    import torch

    flat = values.detach().contiguous().view(-1)
    raw = flat.view(torch.uint8)
    if raw.numel() % 4:
        raw = torch.nn.functional.pad(raw, (0, 4 - raw.numel() % 4))
    words = raw.view(torch.int32).to(torch.int64)
    weights = torch.arange(words.numel(), device=words.device, dtype=torch.int64) % 65521 + 1
    return (words * weights).sum()


def checksum(values: Any) -> int:
    """A position-weighted sum of the buffer's 32-bit words modulo 2^64: the same bytes give the
    same value on every rank and device (a buffer of an odd number of 16-bit values is padded)."""
    return int(checksum_tensor(values).item()) & ((1 << 64) - 1)


def _fold(total: Optional[int], value: int) -> int:
    return value if total is None else (total * 1000003 + value) & ((1 << 64) - 1)


class MegatronParamSync:
    """Takes the param sync of a Megatron-core (Chained)Optimizer out of its hands and runs it when
    the coordinator releases each chunk (see the module docstring)."""

    def __init__(self, client: Optional[psync.Client], optimizer: Any, model_chunks: Sequence[Any],
                 *, names: Optional[Sequence[str]] = None, dense_group: str = "dp",
                 expert_group: str = "edp", first_step: int = 0,
                 directive_timeout: float = 300.0):
        """`optimizer`: a ChainedOptimizer (or one DistributedOptimizer); `model_chunks`: the DDP
        model chunks, chunk c of the psync plan being model_chunks[c]; `names`: the psync optimizer
        name of each child, in `chained_optimizers` order (default "dense", then "expert"); the
        first optimizer.step() is step `first_step`. With `client=None` the same schedule runs
        without a coordinator (each chunk synced once per step, after every child stepped). With
        `overlap_param_gather`, build it before anything takes a chunk's `start_param_sync`
        (`param_sync_func` of align_param_gather): a bound method taken before is not gated."""
        self.children: List[Any] = list(getattr(optimizer, "chained_optimizers", [optimizer]))
        self.names = list(names) if names is not None else ["dense", "expert"][:len(self.children)]
        if len(self.names) != len(self.children):
            raise ValueError(f"names: {len(self.names)} given for {len(self.children)} optimizers")
        self.model_chunks = list(model_chunks)
        self.overlap = self._overlap_param_gather(optimizer)
        self.client = client
        self.dense_group = dense_group
        self.expert_group = expert_group
        self.step = first_step  # the step the next optimizer.step() is
        self.gathers: Dict[int, int] = {c: 0 for c in range(len(self.model_chunks))}
        self._stepped = False  # a child stepped during the current optimizer.step()
        self.gate = ParamSyncGate(client, len(self.model_chunks), self._start_sync,
                                  self._finish_sync, overlap=self.overlap,
                                  directive_timeout=directive_timeout)
        # With overlap: Megatron's finish_param_sync of each bucket group of chunk c (run by the
        # gate after chunk c's gathers were dispatched); the bucket groups' and the chunks' own
        # entry points are replaced by gated ones.
        self._megatron_finish: Dict[int, List[Callable[..., Any]]] = {}
        if self.overlap:
            for c, model_chunk in enumerate(self.model_chunks):
                self._megatron_finish[c] = []
                for bucket_group in self._bucket_groups(c):
                    self._megatron_finish[c].append(bucket_group.finish_param_sync)
                    bucket_group.finish_param_sync = self._gated_finish(c)
                model_chunk.start_param_sync = self._gated_start(c)
        for child, name in zip(self.children, self.names):
            child._defer_param_sync = True  # Megatron's switch (#4800): no sync of its own
            child.step_with_ready_grads = self._reporting_step(child.step_with_ready_grads, name)
        if hasattr(optimizer, "_should_defer_mxfp8_param_sync"):
            optimizer._should_defer_mxfp8_param_sync = lambda: False
        # The chained step (or the one DistributedOptimizer's, after its report) then syncs.
        optimizer.step_with_ready_grads = self._syncing_step(optimizer.step_with_ready_grads)
        optimizer.step = self._counted_step(optimizer.step)

    def flush(self) -> None:
        """Runs the syncs still outstanding (with overlap, those no forward pre-hook needed yet),
        waits for every report's answer; raises the first refusal (PsyncError)."""
        self.gate.flush()

    def _overlap_param_gather(self, optimizer: Any) -> bool:
        """The model chunks' `ddp_config.overlap_param_gather`; raises ValueError for the settings
        not supported (see the module docstring)."""
        if getattr(getattr(optimizer, "config", None), "overlap_param_gather_with_optimizer_step",
                   False):
            raise ValueError("optimizer.config.overlap_param_gather_with_optimizer_step is True: "
                             "chunk 0 would be gathered before psync releases it")
        overlaps = []
        for c, chunk in enumerate(self.model_chunks):
            if getattr(chunk, "overlap_param_gather_with_optimizer_step", False):
                raise ValueError(f"model_chunks[{c}].overlap_param_gather_with_optimizer_step is "
                                 "True: it would be gathered before psync releases it")
            ddp_config = getattr(chunk, "ddp_config", None)
            overlap = bool(getattr(ddp_config, "overlap_param_gather", False))
            if overlap and getattr(ddp_config, "reuse_grad_buf_for_mxfp8_param_ag", False):
                raise ValueError(f"model_chunks[{c}].ddp_config: reuse_grad_buf_for_mxfp8_param_ag "
                                 "with overlap_param_gather stages the params after the optimizer "
                                 "step (prepare_model_params_for_param_sync); not supported")
            overlaps.append(overlap)
        if len(set(overlaps)) > 1:
            raise ValueError("model_chunks disagree on ddp_config.overlap_param_gather: "
                             f"{overlaps}")
        return bool(overlaps) and overlaps[0]

    # -- the optimizer's calls, wrapped ---------------------------------------------------------

    def _reporting_step(self, step_with_ready_grads: Callable[[], bool],
                        name: str) -> Callable[[], bool]:
        def step_and_report() -> bool:
            ok = step_with_ready_grads()
            if ok:
                self._stepped = True
                for c in range(len(self.model_chunks)):
                    self.gate.staged(self.step, c, name)
            return ok
        return step_and_report

    def _syncing_step(self, step_with_ready_grads: Callable[[], bool]) -> Callable[[], bool]:
        def step_and_sync() -> bool:
            ok = step_with_ready_grads()
            if ok:
                self.gate.end_step(self.step)
            return ok
        return step_and_sync

    def _counted_step(self, step: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._stepped = False
            result = step(*args, **kwargs)
            if not self._stepped and self.client is not None:
                # No child stepped (found_inf: Megatron skipped the update): every rank skips,
                # after the SyncDones of the step before.
                self.gate.settle()
                self.client.skip(self.step, "the optimizer skipped the update (found_inf)")
            self.step += 1
            return result
        return counted

    def _gated_finish(self, chunk: int) -> Callable[..., None]:
        def finish_param_sync(skip_next_bucket_dispatch: bool = False) -> None:
            # Megatron's forward pre-hook: the chunk's released sync runs (or has run) to the end;
            # nothing else is dispatched (see the module docstring).
            self.gate.wait_chunk(chunk)
        return finish_param_sync

    def _gated_start(self, chunk: int) -> Callable[..., None]:
        def start_param_sync(*_unused: Any, force_sync: bool = False,
                             force_dispatch: bool = False) -> None:
            if force_sync:
                self.gate.wait_chunk(chunk)
        return start_param_sync

    # -- one chunk's sync ------------------------------------------------------------------------

    def _bucket_groups(self, chunk: int) -> List[Any]:
        model_chunk = self.model_chunks[chunk]
        return (list(getattr(model_chunk, "bucket_groups", [])) +
                list(getattr(model_chunk, "expert_parallel_bucket_groups", [])))

    def _start_sync(self, chunk: int) -> None:
        model_chunk = self.model_chunks[chunk]
        for group in self._bucket_groups(chunk):
            model_chunk._start_bucket_group_param_sync(group, force_sync=False)
        self.gathers[chunk] += 1

    def _finish_sync(self, chunk: int, _handle: Any) -> Callable[[], Mapping[str, int]]:
        for megatron_finish in self._megatron_finish.get(chunk, []):
            # Overlap: waits for the bucket group's handle and runs its _post_param_sync; every
            # bucket group of the chunk was dispatched by _start_sync, so none is dispatched here.
            megatron_finish(skip_next_bucket_dispatch=True)
        # The checksums are computed on the device now, in stream order after the gathers, and read
        # when the gate reports SyncDone (the next step's start): no host wait for the device here.
        model_chunk = self.model_chunks[chunk]
        tensors: Dict[str, List[Any]] = {}
        for attribute, group in (("bucket_groups", self.dense_group),
                                 ("expert_parallel_bucket_groups", self.expert_group)):
            for bucket_group in getattr(model_chunk, attribute, []):
                for bucket in bucket_group.buckets:
                    tensors.setdefault(group, []).append(checksum_tensor(bucket.param_data))

        def read() -> Mapping[str, int]:
            sums: Dict[str, int] = {}
            for group, values in tensors.items():
                total: Optional[int] = None
                for value in values:
                    total = _fold(total, int(value.item()) & ((1 << 64) - 1))
                if total is not None:
                    sums[group] = total
            return sums
        return read

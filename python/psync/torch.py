"""psync.torch: gate a Megatron-style distributed optimizer's param sync with psync.

A training step of a model whose parameters are sharded by distributed optimizers (DistOpts: a
dense one and, in MoE models, an expert one) ends with each DistOpt stepping its shards and
*staging* the result for every model chunk; then each chunk's *param sync* all-gathers the staged
shards of every DistOpt into the model weights. When the DistOpts share one param buffer per chunk
(Megatron's `reuse_grad_buf_for_mxfp8_param_ag`), a chunk may be synced only once every DistOpt
staged it, and only once per step (Megatron-LM #4800). `ParamSyncGate` makes the coordinator
decide that:

    gate = ParamSyncGate(client, num_chunks, start_sync, finish_sync, overlap=True)
    gate.register_forward_pre_hooks(chunk_modules)          # overlap: wait per chunk
    for step in range(steps):
        loss = model(batch).backward(); reduce_scatter_grads()
        for opt in (dense_opt, expert_opt):
            for chunk in range(num_chunks):
                opt.step_and_stage(chunk)
                gate.staged(step, chunk, opt.name)           # asynchronous report
        gate.end_step(step)
    gate.flush()

`start_sync(chunk)` launches the chunk's param all-gathers (torch.distributed, async_op=True) and
returns a handle with `wait()`; `finish_sync(chunk, handle)` waits for them, copies the gathered
values into the weights (and zeroes a shared buffer), and returns the checksum of the weights per
sync group ({"dp": ..., "edp0": ...}), which is reported in SyncDone. It may instead return a
function giving those checksums later (e.g. reading a checksum computed on the device, stream-ordered
after the gather): the gate calls it when the next step begins, or at flush, and reports SyncDone
then, so the loop never waits for the device to read a checksum.

Without overlap, `end_step` waits for each chunk's directive (in chunk order), runs its sync and
reports SyncDone. With overlap (Megatron's `overlap_param_gather`), `staged` and `end_step` only
launch the gathers of chunks whose directive has already arrived, and the forward pre-hook of
chunk c makes sure chunk c's gather was launched (waiting for its directive only if it has not
arrived) and has finished before the chunk's forward runs: the step never waits for the
coordinator unless a chunk's weights are needed before its release.

Gathers are launched in chunk order on every rank, so collectives on a process group are issued in
the same order everywhere. Every chunk is synced at most once per step: it is launched once per
step, after the one directive the client hands out for it. With `client=None` the gate runs the same
schedule with no coordinator: a chunk is released when `end_step` is called (the reference
without psync). Not thread-safe: use it from the training loop's thread.
"""

from __future__ import annotations

import collections
import time
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import psync

StartSync = Callable[[int], Any]
# The checksums of a finished sync per sync group, or a function that returns them later: the gate
# calls it when the next step begins (or at flush) and reports SyncDone then, so a checksum
# computed on the device is read without making the host wait for the device in the middle of the
# loop (the function must return what the gathered values were when the sync finished).
Checksums = Union[Mapping[str, int], Callable[[], Mapping[str, int]]]
FinishSync = Callable[[int, Any], Checksums]


class ParamSyncGate:
    """Runs each chunk's param sync when the coordinator releases it, once per step."""

    def __init__(self, client: Optional[psync.Client], num_chunks: int, start_sync: StartSync,
                 finish_sync: FinishSync, *, overlap: bool = False,
                 directive_timeout: float = 300.0):
        self.client = client
        self.num_chunks = num_chunks
        self.overlap = overlap
        self.directive_timeout = directive_timeout
        self._start = start_sync
        self._finish = finish_sync
        self._step: Optional[int] = None  # the step whose syncs are outstanding
        self._ended = False  # end_step was called for _step
        self._next_launch = 0  # chunks below it were launched for _step
        self._handles: Dict[int, Any] = {}
        self._reports: Deque[psync.Pending] = collections.deque()
        # Finished syncs whose checksums are read later: (step, chunk, checksums function).
        self._deferred: List[Tuple[int, int, Callable[[], Mapping[str, int]]]] = []
        self.directive_waits = 0  # times a directive had not arrived when it was needed
        # Host time the loop spent in the psync client's calls (reports, polls, answers), and the
        # part of it blocked on a directive that had not arrived: what psync itself adds to a step
        # (the syncs' own start_sync / finish_sync time is not in it).
        self.client_seconds = 0.0
        self.directive_wait_seconds = 0.0
        self.checksums: Dict[int, Mapping[str, int]] = {}

    # -- the loop's calls ---------------------------------------------------------------------

    def staged(self, step: int, chunk: int, optimizer: str, checksum: Optional[int] = None) -> None:
        """`optimizer` staged `chunk` for `step`: reported without waiting. The first call of a
        step finishes what is left of the previous step's syncs."""
        self._begin(step)
        if self.client is not None:
            start = time.perf_counter()
            self._reports.append(self.client.staged_async(step, chunk, optimizer, checksum))
            self.client_seconds += time.perf_counter() - start
            if self.overlap:
                self._launch_ready()
        self._check_reports(block=False)

    def end_step(self, step: int) -> None:
        """Every DistOpt staged every chunk of `step`. Without overlap: wait for each chunk's
        directive, sync it, report SyncDone. With overlap: launch what is released; the forward
        pre-hooks do the rest."""
        self._begin(step)
        self._ended = True
        if self.overlap:
            self._launch_ready()
        else:
            self._complete_through(self.num_chunks - 1)

    def wait_chunk(self, chunk: int) -> None:
        """Makes sure `chunk`'s sync of the outstanding step has run (the forward pre-hook)."""
        if self._step is not None and self._ended:
            self._complete_through(chunk)

    def settle(self) -> None:
        """Reports now the SyncDones whose checksums were deferred (see FinishSync), e.g. before
        the rank reports a skip of its next step, which the coordinator takes only after them."""
        self._report_deferred()

    def register_forward_pre_hooks(self, chunk_modules: Sequence[Any]) -> List[Any]:
        """Registers on chunk_modules[c] a forward pre-hook that calls wait_chunk(c)."""
        handles = []
        for c, module in enumerate(chunk_modules):
            handles.append(module.register_forward_pre_hook(
                lambda _module, _inputs, c=c: self.wait_chunk(c)))
        return handles

    def flush(self) -> None:
        """Runs every outstanding sync and waits for every report's answer; raises the first
        refusal (PsyncError)."""
        if self._step is not None and self._ended:
            self._complete_through(self.num_chunks - 1)
        self._report_deferred()
        self._check_reports(block=True)

    # -- internals -------------------------------------------------------------------------------

    def _begin(self, step: int) -> None:
        if self._step == step:
            return
        if self._step is not None:
            if not self._ended:
                raise RuntimeError(f"step {step} began before end_step({self._step})")
            self._complete_through(self.num_chunks - 1)
        self._report_deferred()
        self._step = step
        self._ended = False
        self._next_launch = 0
        self._handles.clear()

    def _directive(self, chunk: int, block: bool) -> bool:
        """True when (step, chunk) is released (its directive arrived, or no coordinator and
        end_step was called); waits for it when `block`. Called once per launch, and a chunk is
        launched once per step (_next_launch), so a chunk runs at most once per step; the client
        hands each directive out once."""
        if self.client is None:
            return self._ended
        # Every caller runs after _begin, which set _step.
        assert self._step is not None, "_directive called before a step began"
        start = time.perf_counter()
        try:
            if self.client.poll_directive(self._step, chunk) is not None:
                return True
            if not block:
                return False
            self.directive_waits += 1
            wait_start = time.perf_counter()
            self.client.wait_directive(self._step, chunk, self.directive_timeout)
            self.directive_wait_seconds += time.perf_counter() - wait_start
            return True
        finally:
            self.client_seconds += time.perf_counter() - start

    def _launch(self, chunk: int) -> None:
        self._handles[chunk] = self._start(chunk)
        self._next_launch = chunk + 1

    def _launch_ready(self) -> None:
        while self._next_launch < self.num_chunks and self._directive(self._next_launch, False):
            self._launch(self._next_launch)

    def _complete_through(self, last: int) -> None:
        """Runs the syncs of chunks 0..last that have not run: each is launched (after its
        directive) if it was not, then finished and reported."""
        for chunk in range(last + 1):
            if chunk >= self._next_launch:
                if not self._directive(chunk, True):
                    raise RuntimeError(f"chunk {chunk} needed before end_step({self._step})")
                self._launch(chunk)
            if chunk not in self._handles:
                continue
            # Every caller runs after _begin, which set _step.
            assert self._step is not None, "_complete_through called before a step began"
            checksums = self._finish(chunk, self._handles.pop(chunk))
            if callable(checksums):
                self._deferred.append((self._step, chunk, checksums))
            else:
                self._report_sync_done(self._step, chunk, checksums)

    def _report_sync_done(self, step: int, chunk: int, checksums: Mapping[str, int]) -> None:
        self.checksums[chunk] = checksums
        if self.client is not None:
            start = time.perf_counter()
            self._reports.append(self.client.sync_done_async(step, chunk, dict(checksums), 1))
            self.client_seconds += time.perf_counter() - start

    def _report_deferred(self) -> None:
        """Reads the checksums of the syncs finished with a checksums function, in the order they
        finished, and reports their SyncDones."""
        deferred, self._deferred = self._deferred, []
        for step, chunk, read in deferred:
            self._report_sync_done(step, chunk, read())

    def _check_reports(self, block: bool) -> None:
        # Answers arrive in the order the reports were sent (one Session), so the oldest report
        # is the first to be done: checking stops at the first outstanding one, and each report
        # is looked at once after its answer.
        start = time.perf_counter()
        try:
            while self._reports and (block or self._reports[0].done()):
                self._reports.popleft().result(timeout=self.directive_timeout if block else 0)
        finally:
            self.client_seconds += time.perf_counter() - start

"""psync.torch.ParamSyncGate with a real coordinator and recorded (fake) param syncs: each chunk is
synced once per step, only after the coordinator released it, in chunk order; with overlap the
sync is launched on release and finished in the chunk's forward pre-hook."""

from __future__ import annotations

import pytest
import torch

import psync
from psync import ChunkPlan
from psync.torch import ParamSyncGate

CHUNKS = 3


class Recorder:
    def __init__(self):
        self.events = []

    def start(self, chunk):
        self.events.append(("start", chunk))
        return chunk

    def finish(self, chunk, handle):
        assert handle == chunk
        self.events.append(("finish", chunk))
        return {"dp": 100 + chunk}


def two_ranks(coordinator, job):
    plan = [ChunkPlan(chunk=c, optimizers=["dense", "expert"], groups={"dp": [0, 1]})
            for c in range(CHUNKS)]
    return [psync.Client(coordinator.target, job=job, rank=r, world_size=2, chunks=plan,
                         call_timeout=10) for r in (0, 1)]


def test_each_chunk_syncs_once_after_release(coordinator):
    me, other = two_ranks(coordinator, "gate")
    rec = Recorder()
    gate = ParamSyncGate(me, CHUNKS, rec.start, rec.finish, directive_timeout=10)
    for step in range(2):
        for kind in ("dense", "expert"):
            for c in range(CHUNKS):
                gate.staged(step, c, kind)
        # The other rank has not staged: nothing may be released yet.
        assert me.poll_directive(step, 0) is None
        other.staged_batch([(step, c, k) for c in range(CHUNKS) for k in ("dense", "expert")])
        gate.end_step(step)
        assert rec.events == [(e, c) for c in range(CHUNKS) for e in ("start", "finish")]
        rec.events.clear()
        for c in range(CHUNKS):
            other.wait_directive(step, c, 10)
            other.sync_done(step, c, {"dp": 100 + c})
    gate.flush()
    records = me.audit()["records"]
    assert [(r["releases"], r["syncsDone"], r["complete"], r["checksumMismatch"])
            for r in records] == [(1, 2, True, False)] * (2 * CHUNKS)
    me.finish()
    other.finish()


def test_overlap_launches_on_release_and_finishes_in_the_forward_pre_hook(coordinator):
    me, other = two_ranks(coordinator, "gate-overlap")
    rec = Recorder()
    gate = ParamSyncGate(me, CHUNKS, rec.start, rec.finish, overlap=True, directive_timeout=1)
    layers = torch.nn.ModuleList([torch.nn.Identity() for _ in range(CHUNKS)])
    gate.register_forward_pre_hooks(layers)
    other.staged_batch([(0, c, k) for c in range(CHUNKS) for k in ("dense", "expert")])
    for kind in ("dense", "expert"):
        for c in range(CHUNKS):
            if (c, kind) != (CHUNKS - 1, "expert"):
                gate.staged(0, c, kind)
    # The last check-in that releases the last chunk goes around the gate, so that its directive
    # is consumed here before the gate polls again: the gate must then wait for it itself.
    me.staged(0, CHUNKS - 1, "expert")
    me.wait_directive(0, CHUNKS - 1, 10)
    gate.end_step(0)
    # Nothing finished before the forward pass; launches only in chunk order.
    assert all(e == "start" for e, _ in rec.events)
    assert [c for _, c in rec.events] == list(range(len(rec.events)))
    layers[0](torch.zeros(1))
    assert ("finish", 0) in rec.events and ("finish", 1) not in rec.events
    assert ("finish", CHUNKS - 1) not in rec.events
    with pytest.raises(psync.PsyncError) as e:  # chunk 2's directive was taken above
        layers[CHUNKS - 1](torch.zeros(1))
    assert e.value.code == psync.StatusCode.DEADLINE_EXCEEDED
    me.close()
    other.close()


def test_deferred_checksums_are_read_when_the_next_step_begins(coordinator):
    # finish_sync returns a function: the gate reads it when the next step begins (not during
    # end_step), reports SyncDone with what it returns, and the audit matches the other rank's.
    me, other = two_ranks(coordinator, "gate-deferred")
    reads = []

    def finish(chunk, handle):
        def read():
            reads.append(chunk)
            return {"dp": 100 + chunk}
        return read

    gate = ParamSyncGate(me, CHUNKS, lambda c: c, finish, directive_timeout=10)
    for step in range(2):
        other.staged_batch([(step, c, k) for c in range(CHUNKS) for k in ("dense", "expert")])
        for kind in ("dense", "expert"):
            for c in range(CHUNKS):
                gate.staged(step, c, kind)
                if step == 1 and (kind, c) == ("dense", 0):
                    # The first report of step 1 began it: step 0's checksums were read first.
                    assert reads == list(range(CHUNKS))
        gate.end_step(step)
        assert reads == list(range(CHUNKS)) * step  # this step's: not read yet
        for c in range(CHUNKS):
            other.wait_directive(step, c, 10)
            other.sync_done(step, c, {"dp": 100 + c})
    gate.flush()
    assert reads == list(range(CHUNKS)) * 2
    assert gate.checksums == {c: {"dp": 100 + c} for c in range(CHUNKS)}
    records = me.audit()["records"]
    assert [(r["releases"], r["syncsDone"], r["complete"], r["checksumMismatch"])
            for r in records] == [(1, 2, True, False)] * (2 * CHUNKS)
    me.finish()
    other.finish()

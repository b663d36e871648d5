"""psync.Client against a real coordinator process: the flow of a step, refusals with their exact
codes, a coordinator restart (kill -9) in the middle of a step, and waits that leave the GIL."""

from __future__ import annotations

import ctypes
import threading
import time

import pytest

import psync
from psync import ChunkPlan, PsyncError, StatusCode, _native


def plan(world: int, chunks: int, optimizers=("dense", "expert")):
    return [ChunkPlan(chunk=c, optimizers=list(optimizers), groups={"dp": list(range(world))})
            for c in range(chunks)]


def connect(coordinator, job, rank=0, world=1, chunks=1, **kw):
    return psync.Client(coordinator.target, job=job, rank=rank, world_size=world,
                        chunks=plan(world, chunks), call_timeout=10, **kw)


def test_a_step_releases_each_chunk_once_and_the_audit_is_clean(coordinator):
    a = connect(coordinator, "flow", rank=0, world=2, chunks=2)
    b = connect(coordinator, "flow", rank=1, world=2, chunks=2)
    for client in (a, b):
        client.staged(0, 0, "dense")
        client.staged_batch([(0, 0, "expert"), (0, 1, "dense", 7)])
    assert a.poll_directive(0, 1) is None  # chunk 1 still misses both expert check-ins
    released_after = int(time.time() * 1e6)  # chunk 1's last check-ins are not sent yet
    pendings = [c.staged_async(0, 1, "expert") for c in (a, b)]
    for p in pendings:
        p.result(timeout=10)
        assert p.done()
    for client in (a, b):
        for chunk in (0, 1):
            d = client.wait_directive(0, chunk, timeout=10)
            assert (d.step, d.chunk, d.generation) == (0, chunk, 1)
            # Decided by the coordinator (same host, same clock) before the directive was read.
            assert 0 < d.released_unix_micros <= int(time.time() * 1e6)
            if chunk == 1:
                assert d.released_unix_micros >= released_after
            client.sync_done_async(0, chunk, {"dp": 1234 + chunk}).result(timeout=10)
        # Handed out once: a second wait for the same chunk waits again.
        with pytest.raises(PsyncError) as e:
            client.wait_directive(0, 0, timeout=0.05)
        assert e.value.code == StatusCode.DEADLINE_EXCEEDED
        info = client.info()
        assert info.directives_received == 2 and info.connected and info.generation == 1
    audit = a.audit()
    records = audit["records"]
    assert [(int(r["step"]), r["chunk"], r["releases"], r["syncsDone"], r["complete"])
            for r in records] == [(0, 0, 1, 2, True), (0, 1, 1, 2, True)]
    assert all(r["earlySyncs"] == 0 and r["repeatedSyncs"] == 0 for r in records)
    a.finish()
    b.finish()


def test_the_context_manager_leaves_the_job_and_every_rank_leaving_ends_it(coordinator):
    with connect(coordinator, "leave", rank=0, world=2) as a, \
            connect(coordinator, "leave", rank=1, world=2) as b:
        assert psync.get_job_status(coordinator.target, "leave")["state"] != "ENDED"
    assert psync.get_job_status(coordinator.target, "leave")["state"] == "ENDED"
    with pytest.raises(PsyncError) as e:
        a.staged(0, 0, "dense")
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    with pytest.raises(PsyncError) as e:
        connect(coordinator, "leave", rank=0, world=2)
    assert e.value.code == StatusCode.FAILED_PRECONDITION
    assert "has ended" in e.value.message
    del b


@pytest.mark.parametrize("kwargs, code, words", [
    (dict(world_size=0), StatusCode.INVALID_ARGUMENT, "world_size"),
    (dict(rank=5), StatusCode.INVALID_ARGUMENT, "rank"),
    (dict(job=""), StatusCode.INVALID_ARGUMENT, "job_id"),
    (dict(rank=-1), StatusCode.INVALID_ARGUMENT, "rank must be an int"),
    (dict(call_timeout=0), StatusCode.INVALID_ARGUMENT, "call_timeout"),
    (dict(target=""), StatusCode.INVALID_ARGUMENT, "target"),
])
def test_a_bad_join_raises_the_exact_code(coordinator, kwargs, code, words):
    args = dict(target=coordinator.target, job="bad", rank=0, world_size=2, chunks=plan(2, 1),
                call_timeout=5)
    args.update(kwargs)
    with pytest.raises(PsyncError) as e:
        psync.Client(**args)
    assert e.value.code == code
    assert words in e.value.message


def test_an_unreachable_coordinator_is_unavailable(coordinator):
    target = coordinator.target
    coordinator.kill()
    with pytest.raises(PsyncError) as e:
        psync.Client(target, job="gone", rank=0, world_size=1, chunks=plan(1, 1),
                     call_timeout=0.5)
    assert e.value.code == StatusCode.UNAVAILABLE


def test_refused_reports_raise_the_coordinators_code_and_change_nothing(coordinator):
    client = connect(coordinator, "refuse", world=1, chunks=1)
    cases = [
        (lambda: client.staged(0, 0, "bogus"), StatusCode.INVALID_ARGUMENT, "bogus"),
        (lambda: client.staged(0, 3, "dense"), StatusCode.INVALID_ARGUMENT, "chunk"),
        (lambda: client.staged(5, 0, "dense"), StatusCode.OUT_OF_RANGE, "too far ahead"),
        (lambda: client.sync_done(0, 0, {"dp": 1}), StatusCode.FAILED_PRECONDITION, ""),
        (lambda: client.staged_async(0, 0, "bogus").result(10), StatusCode.INVALID_ARGUMENT,
         "bogus"),
        (lambda: client.staged(-1, 0, "dense"), StatusCode.INVALID_ARGUMENT, "step must be"),
        (lambda: client.staged(0, 0, 3), StatusCode.INVALID_ARGUMENT, "optimizer must be"),
        (lambda: client.sync_done(0, 0, {"dp": -2}), StatusCode.INVALID_ARGUMENT, "checksum"),
        (lambda: client.wait_directive(0, 0, timeout=-1), StatusCode.INVALID_ARGUMENT,
         "timeout"),
        (lambda: client.wait_directive(0, 0, timeout=0.05), StatusCode.DEADLINE_EXCEEDED, ""),
    ]
    for call, code, words in cases:
        with pytest.raises(PsyncError) as e:
            call()
        assert e.value.code == code, (words, e.value)
        assert words in e.value.message
    status = client.job_status()
    assert int(status["counters"].get("checkins", 0)) == 0  # nothing was applied
    # The same client still works.
    client.staged_batch([(0, 0, "dense"), (0, 0, "expert")])
    assert client.wait_directive(0, 0, timeout=10).chunk == 0
    client.finish()


def test_a_coordinator_restart_mid_step_is_survived_and_the_directive_comes_once(coordinator):
    a = connect(coordinator, "restart", rank=0, world=2, chunks=1)
    b = connect(coordinator, "restart", rank=1, world=2, chunks=1)
    a.staged_batch([(0, 0, "dense"), (0, 0, "expert")])
    b.staged(0, 0, "dense")
    coordinator.kill()  # kill -9 half-way through step 0: b's expert check-in is missing
    coordinator.start()  # the same port, no state
    b.staged(0, 0, "expert")  # re-attaches, resumes, and completes the chunk
    for client in (a, b):
        d = client.wait_directive(0, 0, timeout=20)
        assert (d.step, d.chunk) == (0, 0)
        client.sync_done(0, 0, {"dp": 99})
        with pytest.raises(PsyncError) as e:
            client.wait_directive(0, 0, timeout=0.2)
        assert e.value.code == StatusCode.DEADLINE_EXCEEDED
        info = client.info()
        assert info.directives_received == 1
        assert info.resumes == 1 and info.reconnects >= 1
        assert info.generation == 2  # the restarted coordinator resumed the job in generation 2
    records = a.audit()["records"]
    assert [(r["releases"], r["syncsDone"], r["complete"]) for r in records] == [(1, 2, True)]
    # Step 1 runs normally after the restart.
    for client in (a, b):
        client.staged_batch([(1, 0, "dense"), (1, 0, "expert")])
    for client in (a, b):
        assert client.wait_directive(1, 0, timeout=10).step == 1
    a.finish()
    b.finish()


def _count_while_waiting(wait) -> int:
    """How far another Python thread counts while `wait` blocks in a foreign call."""
    counter = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counter[0] += 1

    seen = {}
    thread = threading.Thread(target=count)
    thread.start()
    try:
        seen["before"] = counter[0]
        wait()
        seen["after"] = counter[0]
    finally:
        stop.set()
        thread.join()
    return seen["after"] - seen["before"]


def _baseline() -> int:
    """How far the counter gets while the waiting thread sleeps (time.sleep leaves the GIL) for
    as long as the waits below: what "other threads run" looks like on this machine now."""
    return _count_while_waiting(lambda: time.sleep(WAIT_S))


WAIT_S = 2.0


def test_a_blocked_wait_lets_other_python_threads_run(coordinator):
    client = connect(coordinator, "gil", world=1, chunks=1)

    def wait():
        with pytest.raises(PsyncError) as e:
            client.wait_directive(0, 0, timeout=WAIT_S)
        assert e.value.code == StatusCode.DEADLINE_EXCEEDED

    baseline = _baseline()
    advanced = _count_while_waiting(wait)
    # A wait that held the GIL would let the counter move at most one switch interval (5 ms of
    # the 2 s, 0.25%); a released GIL lets it count about as far as during a sleep.
    assert baseline > 100_000, baseline
    assert advanced > baseline // 10, (advanced, baseline)
    client.finish()


def test_the_gil_test_fails_when_the_wait_holds_the_gil(coordinator):
    """The control: the same wait through ctypes.PyDLL (which keeps the GIL) stops the counter."""
    client = connect(coordinator, "gil-held", world=1, chunks=1)
    held = _native.load(ctypes.PyDLL)

    def wait():
        status = _native.Status()
        code = held.psync_wait_directive(client._handle, 0, 0, WAIT_S, None, ctypes.byref(status))
        assert code == StatusCode.DEADLINE_EXCEEDED

    baseline = _baseline()
    assert _count_while_waiting(wait) < baseline // 10
    client.finish()

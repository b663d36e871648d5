"""psync: the Python binding of the psync client (a training rank's link to the coordinator).

It binds the one C++ client (client/client.h) through its C ABI (client/c_api/psync_c.h), loaded
with ctypes: joining, reconnecting, re-attaching, re-sending, resuming after a coordinator restart
and dropping repeated directives all happen there, not here. This module converts arguments,
raises `PsyncError` for every refusal and keeps no protocol state of its own.

    import psync
    plan = [psync.ChunkPlan(chunk=c, optimizers=["dense", "expert"],
                            groups={"dp": [0, 1]}) for c in range(2)]
    with psync.Client("127.0.0.1:7070", job="run1", rank=0, world_size=2, chunks=plan) as client:
        client.staged(0, 0, "dense")
        client.staged(0, 0, "expert")
        directive = client.wait_directive(0, 0, timeout=30)
        ...  # the chunk's param all-gather, once
        client.sync_done(0, 0, {"dp": checksum})

Blocking calls (connect, the blocking reports, wait_directive, finish) release the GIL while
they wait: other Python threads run. Every method is thread-safe.
"""

from __future__ import annotations

import ctypes
import enum
import json
from dataclasses import dataclass, field
from types import TracebackType
from typing import (Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Type, Union,
                    cast)

from . import _native

__version__ = "0.1.0"

__all__ = [
    "ChunkPlan", "Client", "ClientInfo", "Directive", "Pending", "PsyncError", "StatusCode",
    "TlsOptions", "__version__", "get_audit", "get_job_status",
]

_U64 = 1 << 64
_U32 = 1 << 32
# A wait with no timeout still passes a finite one to the library.
_FOREVER = 10.0 * 365 * 24 * 3600


class StatusCode(enum.IntEnum):
    """google.rpc.Code, as carried by every answer of the coordinator and the client."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class PsyncError(Exception):
    """A refusal: `code` (StatusCode) and `message` exactly as the client or coordinator gave
    them. What to do by code: INVALID_ARGUMENT fix the input, FAILED_PRECONDITION fix the order,
    ABORTED join again (a new Client), DEADLINE_EXCEEDED a wait ran out, UNAVAILABLE the
    coordinator could not be reached in time (see client/client.h)."""

    def __init__(self, code: int, message: str):
        try:
            self.code: Union[StatusCode, int] = StatusCode(code)
        except ValueError:
            self.code = code
        self.message = message
        name = self.code.name if isinstance(self.code, StatusCode) else str(code)
        super().__init__(f"{name}: {message}")


def _check(code: int, status: _native.Status) -> None:
    if code != 0:
        raise PsyncError(code, status.message.decode("utf-8", "replace"))


def _invalid(message: str) -> PsyncError:
    return PsyncError(StatusCode.INVALID_ARGUMENT, message)


def _uint(value: Any, name: str, limit: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < limit:
        bits = 64 if limit == _U64 else 32
        raise _invalid(f"{name} must be an int in [0, 2**{bits}), got {value!r}")
    return value


def _text(value: Any, name: str) -> bytes:
    if not isinstance(value, str):
        raise _invalid(f"{name} must be a str, got {type(value).__name__}")
    return value.encode("utf-8")


def _seconds(value: Optional[float], name: str) -> float:
    if value is None:
        return _FOREVER
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise _invalid(f"{name} must be a number of seconds >= 0 or None, got {value!r}")
    return float(min(value, _FOREVER))


@dataclass(frozen=True)
class TlsOptions:
    """Channel security, PEM text. `root_certs`: the CA of the coordinator's certificate (empty:
    the system's); `cert_chain` / `private_key`: this rank's certificate for mutual TLS;
    `target_name_override`: the name to check the coordinator's certificate against."""

    root_certs: str = ""
    cert_chain: str = ""
    private_key: str = ""
    target_name_override: str = ""

    def _struct(self) -> _native.Tls:
        return _native.Tls(self.root_certs.encode(), self.cert_chain.encode(),
                           self.private_key.encode(), self.target_name_override.encode())


def _tls_pointer(tls: Optional[TlsOptions]) -> Any:
    return ctypes.byref(tls._struct()) if tls is not None else None


@dataclass(frozen=True)
class ChunkPlan:
    """This rank's part in one model chunk: the optimizers of this rank that stage it (none when
    it contributes nothing) and the sync groups it belongs to, name -> every rank of the group."""

    chunk: int
    optimizers: Sequence[str] = ()
    groups: Mapping[str, Sequence[int]] = field(default_factory=dict)

    def to_json(self) -> Dict[str, Any]:
        return {
            "chunk": self.chunk,
            "optimizers": list(self.optimizers),
            "groups": [{"name": n, "ranks": list(r)} for n, r in sorted(self.groups.items())],
        }


@dataclass(frozen=True)
class Directive:
    """A chunk's sync directive: run the chunk's param sync now, once."""

    generation: int
    step: int
    chunk: int
    sequence: int
    last_rank: int
    last_optimizer: str
    wait_micros: int
    # When the coordinator decided the release (microseconds since the Unix epoch, its clock; 0 from
    # an older coordinator): time.time() * 1e6 minus this is the release's age in the loop.
    released_unix_micros: int = 0


@dataclass(frozen=True)
class ClientInfo:
    """The client's generation, next step, rank, connection and counters (ClientStats)."""

    generation: int
    next_step: int
    rank: int
    connected: bool
    directives_received: int
    duplicate_directives_dropped: int
    stale_notices_dropped: int
    reconnects: int
    messages_resent: int
    resumes: int


StagedItem = Union[Tuple[int, int, str], Tuple[int, int, str, Optional[int]]]


class Pending:
    """The answer of an asynchronous report, to come. `result(timeout)` waits for it (releasing the
    GIL) and raises PsyncError for a refusal; `done()` looks without waiting."""

    def __init__(self, client: "Client", ticket: int):
        self._client = client
        self._ticket = ticket
        self._answer: Optional[Tuple[int, str]] = None

    def _take(self, timeout: float) -> bool:
        if self._answer is None:
            status = _native.Status()
            answered = ctypes.c_int32()
            code = self._client._lib.psync_wait_ticket(self._client._h(), self._ticket, timeout,
                                                       ctypes.byref(answered),
                                                       ctypes.byref(status))
            if not answered.value:
                if code == StatusCode.DEADLINE_EXCEEDED:
                    return False
                _check(code, status)
            self._answer = (code, status.message.decode("utf-8", "replace"))
        return True

    def done(self) -> bool:
        """True once the answer arrived (it is then kept here)."""
        return self._take(0.0)

    def result(self, timeout: Optional[float] = None) -> None:
        """Waits up to `timeout` seconds (None: until answered); raises PsyncError with the
        refusal, or DEADLINE_EXCEEDED when no answer came in time (the report stays queued)."""
        if not self._take(_seconds(timeout, "timeout")):
            raise PsyncError(StatusCode.DEADLINE_EXCEEDED,
                             f"no answer within {timeout} s (the report is still queued)")
        assert self._answer is not None, "_take returned True without keeping the answer"
        code, message = self._answer
        if code != 0:
            raise PsyncError(code, message)

    def __del__(self) -> None:
        if self._answer is None and getattr(self, "_client", None) is not None:
            handle = self._client._handle
            if handle:
                self._client._lib.psync_forget_ticket(handle, self._ticket)


class Client:
    """One training rank's link to the coordinator (psync::Client). Connects in the constructor:
    joins job `job` as `rank` of `world_size` with this rank's plan (`chunks`), opens and attaches
    the rank's Session. Raises PsyncError: INVALID_ARGUMENT for bad arguments or a plan the
    coordinator refuses as malformed, FAILED_PRECONDITION for a plan that conflicts with other
    ranks', UNAVAILABLE when the coordinator could not be reached within `call_timeout`.

    As a context manager it leaves the job cleanly on exit (finish(): Leave with finished, so the
    job ends once every rank finished); after an exception it only closes."""

    def __init__(self, target: str, job: str, rank: int, world_size: int,
                 chunks: Sequence[ChunkPlan], *, num_chunks: Optional[int] = None,
                 first_step: int = 0, incarnation: str = "", token: str = "",
                 tls: Optional[TlsOptions] = None, call_timeout: float = 30.0):
        self._handle: Optional[int] = None
        self._lib = _native.load()
        self.target = target
        self.job = job
        self.tls = tls
        if not isinstance(target, str) or not target:
            raise _invalid("target must be a non-empty str (host:port)")
        if not isinstance(job, str):
            raise _invalid("job must be a str")
        plans = list(chunks)
        for p in plans:
            if not isinstance(p, ChunkPlan):
                raise _invalid(f"chunks must hold ChunkPlan values, got {type(p).__name__}")
        plan = {
            "jobId": job,
            "worldSize": _uint(world_size, "world_size", _U32),
            "rank": _uint(rank, "rank", _U32),
            "numChunks": _uint(num_chunks if num_chunks is not None else len(plans),
                               "num_chunks", _U32),
            "chunks": [p.to_json() for p in plans],
            "firstStep": str(_uint(first_step, "first_step", _U64)),
            "incarnation": incarnation,
            "token": token,
        }
        if isinstance(call_timeout, bool) or not isinstance(call_timeout, (int, float)) \
                or not call_timeout > 0:
            raise _invalid(f"call_timeout must be a number of seconds > 0, got {call_timeout!r}")
        status = _native.Status()
        handle = self._lib.psync_connect(target.encode(), json.dumps(plan).encode(),
                                         _tls_pointer(tls), float(call_timeout),
                                         ctypes.byref(status))
        if not handle:
            raise PsyncError(status.code, status.message.decode("utf-8", "replace"))
        self._handle = handle
        self.rank = rank
        self.world_size = world_size

    # -- reports -----------------------------------------------------------------------------

    @staticmethod
    def _staged_arrays(items: Iterable[StagedItem]) -> Tuple[
            int, "ctypes.Array[ctypes.c_uint64]", "ctypes.Array[ctypes.c_uint32]",
            "ctypes.Array[ctypes.c_char_p]", "ctypes.Array[ctypes.c_uint8]",
            "ctypes.Array[ctypes.c_uint64]"]:
        # Each row's length and values are checked here, whatever the caller passed.
        rows: List[Sequence[Any]] = list(items)
        if not rows:
            raise _invalid("no check-ins given")
        n = len(rows)
        steps = (ctypes.c_uint64 * n)()
        chunks = (ctypes.c_uint32 * n)()
        optimizers = (ctypes.c_char_p * n)()
        has = (ctypes.c_uint8 * n)()
        sums = (ctypes.c_uint64 * n)()
        for i, row in enumerate(rows):
            if not 3 <= len(row) <= 4:
                raise _invalid(f"check-in {i} must be (step, chunk, optimizer[, checksum])")
            steps[i] = _uint(row[0], "step", _U64)
            chunks[i] = _uint(row[1], "chunk", _U32)
            optimizers[i] = _text(row[2], "optimizer")
            checksum = row[3] if len(row) == 4 else None
            if checksum is not None:
                has[i] = 1
                sums[i] = _uint(checksum, "checksum", _U64)
        return n, steps, chunks, optimizers, has, sums

    def staged(self, step: int, chunk: int, optimizer: str,
               checksum: Optional[int] = None) -> None:
        """`optimizer` of this rank staged `chunk` for `step`; waits for the coordinator's answer
        (at most call_timeout) and raises PsyncError for a refusal."""
        self.staged_batch([(step, chunk, optimizer, checksum)])

    def staged_batch(self, items: Iterable[StagedItem]) -> None:
        """Several check-ins (step, chunk, optimizer[, checksum]) in one message, all or none."""
        arrays = self._staged_arrays(items)
        status = _native.Status()
        _check(self._lib.psync_report_staged(self._h(), *arrays, ctypes.byref(status)), status)

    def staged_async(self, step: int, chunk: int, optimizer: str,
                     checksum: Optional[int] = None) -> Pending:
        """As staged(), without waiting: returns at once; the answer comes in the Pending."""
        return self.staged_batch_async([(step, chunk, optimizer, checksum)])

    def staged_batch_async(self, items: Iterable[StagedItem]) -> Pending:
        arrays = self._staged_arrays(items)
        ticket = ctypes.c_uint64()
        status = _native.Status()
        _check(self._lib.psync_report_staged_async(self._h(), *arrays, ctypes.byref(ticket),
                                                   ctypes.byref(status)), status)
        return Pending(self, ticket.value)

    @staticmethod
    def _checksum_arrays(checksums: Optional[Mapping[str, int]]) -> Tuple[
            int, "ctypes.Array[ctypes.c_char_p]", "ctypes.Array[ctypes.c_uint64]"]:
        items = sorted((checksums or {}).items())
        n = len(items)
        groups = (ctypes.c_char_p * max(n, 1))()
        sums = (ctypes.c_uint64 * max(n, 1))()
        for i, (group, value) in enumerate(items):
            groups[i] = _text(group, "group")
            sums[i] = _uint(value, f"checksum of group {group!r}", _U64)
        return n, groups, sums

    def sync_done(self, step: int, chunk: int, checksums: Optional[Mapping[str, int]] = None,
                  executions: int = 1) -> None:
        """This rank ran the sync of (step, chunk): one checksum per sync group it belongs to
        (group name -> unsigned 64-bit value); `executions` counts this run (above 1 the
        coordinator records a repeated sync)."""
        n, groups, sums = self._checksum_arrays(checksums)
        status = _native.Status()
        _check(self._lib.psync_sync_done(self._h(), _uint(step, "step", _U64),
                                         _uint(chunk, "chunk", _U32), n, groups, sums,
                                         _uint(executions, "executions", _U32),
                                         ctypes.byref(status)), status)

    def sync_done_async(self, step: int, chunk: int,
                        checksums: Optional[Mapping[str, int]] = None,
                        executions: int = 1) -> Pending:
        n, groups, sums = self._checksum_arrays(checksums)
        ticket = ctypes.c_uint64()
        status = _native.Status()
        _check(self._lib.psync_sync_done_async(self._h(), _uint(step, "step", _U64),
                                               _uint(chunk, "chunk", _U32), n, groups, sums,
                                               _uint(executions, "executions", _U32),
                                               ctypes.byref(ticket), ctypes.byref(status)),
               status)
        return Pending(self, ticket.value)

    def skip(self, step: int, reason: str) -> None:
        """This rank skips `step` (found_inf, ...); every rank must, before staging for it."""
        status = _native.Status()
        _check(self._lib.psync_skip_step(self._h(), _uint(step, "step", _U64),
                                         _text(reason, "reason"), ctypes.byref(status)), status)

    def skip_async(self, step: int, reason: str) -> Pending:
        ticket = ctypes.c_uint64()
        status = _native.Status()
        _check(self._lib.psync_skip_step_async(self._h(), _uint(step, "step", _U64),
                                               _text(reason, "reason"), ctypes.byref(ticket),
                                               ctypes.byref(status)), status)
        return Pending(self, ticket.value)

    # -- directives --------------------------------------------------------------------------

    def wait_directive(self, step: int, chunk: int, timeout: Optional[float] = None) -> Directive:
        """The directive of (step, chunk), once (a second wait for the same pair waits again).
        Raises PsyncError DEADLINE_EXCEEDED when it does not arrive within `timeout` seconds;
        ABORTED once the generation was aborted; the client's status once it failed or closed.
        Releases the GIL while it waits."""
        d = _native.DirectiveStruct()
        status = _native.Status()
        _check(self._lib.psync_wait_directive(self._h(), _uint(step, "step", _U64),
                                              _uint(chunk, "chunk", _U32),
                                              _seconds(timeout, "timeout"), ctypes.byref(d),
                                              ctypes.byref(status)), status)
        return Directive(d.generation, d.step, d.chunk, d.sequence, d.last_rank,
                         d.last_optimizer.decode("utf-8", "replace"), d.wait_micros,
                         d.released_unix_micros)

    def poll_directive(self, step: int, chunk: int) -> Optional[Directive]:
        """The directive of (step, chunk) if it has arrived (handed out once), else None."""
        try:
            return self.wait_directive(step, chunk, 0.0)
        except PsyncError as e:
            if e.code == StatusCode.DEADLINE_EXCEEDED:
                return None
            raise

    def wait_step_skipped(self, step: int, timeout: Optional[float] = None) -> None:
        """Returns once every rank skipped `step`; errors as wait_directive."""
        status = _native.Status()
        _check(self._lib.psync_wait_step_skipped(self._h(), _uint(step, "step", _U64),
                                                 _seconds(timeout, "timeout"),
                                                 ctypes.byref(status)), status)

    # -- status ------------------------------------------------------------------------------

    def info(self) -> ClientInfo:
        """Generation, next step, connection and counters (reconnects, resumes, directives)."""
        s = _native.InfoStruct()
        status = _native.Status()
        _check(self._lib.psync_get_info(self._h(), ctypes.byref(s), ctypes.byref(status)), status)
        return ClientInfo(s.generation, s.next_step, s.rank, bool(s.connected),
                          s.directives_received, s.duplicate_directives_dropped,
                          s.stale_notices_dropped, s.reconnects, s.messages_resent, s.resumes)

    @property
    def incarnation(self) -> str:
        out = ctypes.c_void_p()
        status = _native.Status()
        _check(self._lib.psync_get_incarnation(self._h(), ctypes.byref(out),
                                               ctypes.byref(status)), status)
        return _native.take_string(out)

    def pending_reports(self) -> int:
        """Asynchronous reports whose answer has not arrived yet."""
        return int(self._lib.psync_tickets_pending(self._h()))

    def job_status(self, timeout: float = 10.0) -> Dict[str, Any]:
        """The coordinator's JobStatus of this job (proto3 JSON as a dict)."""
        return get_job_status(self.target, self.job, tls=self.tls, timeout=timeout)

    def audit(self, timeout: float = 10.0) -> Dict[str, Any]:
        """The coordinator's sync audit of this job (GetAuditResponse as a dict)."""
        return get_audit(self.target, self.job, tls=self.tls, timeout=timeout)

    # -- lifecycle ---------------------------------------------------------------------------

    def finish(self) -> None:
        """This rank completed its run: Leave with finished, then close (the client is closed
        either way). Raises PsyncError with the Leave's refusal."""
        status = _native.Status()
        _check(self._lib.psync_finish(self._h(), ctypes.byref(status)), status)

    def close(self) -> None:
        """Closes the Session (waits still blocked return CANCELLED). Idempotent."""
        if self._handle:
            self._lib.psync_close(self._handle)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if exc_type is None:
            self.finish()
        else:
            self.close()

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._lib.psync_client_free(handle)

    def _h(self) -> int:
        if not self._handle:
            raise PsyncError(StatusCode.FAILED_PRECONDITION, "the client was freed")
        return self._handle


def _query(fn_name: str, target: str, job: str, tls: Optional[TlsOptions],
           timeout: float) -> Dict[str, Any]:
    lib = _native.load()
    out = ctypes.c_void_p()
    status = _native.Status()
    code = getattr(lib, fn_name)(_text(target, "target"), _tls_pointer(tls), _text(job, "job"),
                                 _seconds(timeout, "timeout"), ctypes.byref(out),
                                 ctypes.byref(status))
    _check(code, status)
    return cast(Dict[str, Any], json.loads(_native.take_string(out) or "{}"))


def get_job_status(target: str, job: str, *, tls: Optional[TlsOptions] = None,
                   timeout: float = 10.0) -> Dict[str, Any]:
    """GetJobStatus of `job` on the coordinator at `target`, as a dict (proto3 JSON names).
    `target` may be a comma-separated list of replicas: the query goes to the job's owner."""
    return _query("psync_get_job_status", target, job, tls, timeout)


def get_audit(target: str, job: str, *, tls: Optional[TlsOptions] = None,
              timeout: float = 10.0) -> Dict[str, Any]:
    """GetAudit of `job` on the coordinator at `target`, as a dict (proto3 JSON names).
    `target` may be a comma-separated list of replicas: the query goes to the job's owner."""
    return _query("psync_get_audit", target, job, tls, timeout)

"""Loads libpsync_c.so (client/c_api/psync_c.h) with ctypes and declares its functions.

The library is found at $PSYNC_LIB, else next to this package (psync/libpsync_c.so, as the wheel
installs it), else in the Bazel output (bazel-bin/client/c_api/libpsync_c.so of the repository
holding this file). The wheel's copy carries every shared library it needs (psync/.libs, renamed so
that they never stand in for the process's own): it is loaded with RTLD_DEEPBIND, so that its gRPC,
Protobuf and Abseil bind to those copies even when torch or grpcio loaded others first.
ctypes.CDLL releases the GIL around every foreign call, so a call that blocks (a wait for a
directive) never stops the interpreter's other threads.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Callable, Optional

ABI_VERSION = 2
# The folder, beside the wheel's libpsync_c.so, of the shared libraries it carries.
BUNDLED_LIBRARIES = ".libs"
STATUS_MESSAGE_BYTES = 2048


class Status(ctypes.Structure):
    _fields_ = [("code", ctypes.c_int32), ("message", ctypes.c_char * STATUS_MESSAGE_BYTES)]


class Tls(ctypes.Structure):
    _fields_ = [
        ("root_certs_pem", ctypes.c_char_p),
        ("cert_chain_pem", ctypes.c_char_p),
        ("private_key_pem", ctypes.c_char_p),
        ("target_name_override", ctypes.c_char_p),
    ]


class DirectiveStruct(ctypes.Structure):
    _fields_ = [
        ("generation", ctypes.c_uint64),
        ("step", ctypes.c_uint64),
        ("chunk", ctypes.c_uint32),
        ("sequence", ctypes.c_uint64),
        ("last_rank", ctypes.c_uint32),
        ("last_optimizer", ctypes.c_char * 72),
        ("wait_micros", ctypes.c_int64),
        ("released_unix_micros", ctypes.c_int64),
    ]


class InfoStruct(ctypes.Structure):
    _fields_ = [
        ("generation", ctypes.c_uint64),
        ("next_step", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("connected", ctypes.c_int32),
        ("directives_received", ctypes.c_uint64),
        ("duplicate_directives_dropped", ctypes.c_uint64),
        ("stale_notices_dropped", ctypes.c_uint64),
        ("reconnects", ctypes.c_uint64),
        ("messages_resent", ctypes.c_uint64),
        ("resumes", ctypes.c_uint64),
    ]


def library_path() -> Path:
    """Where libpsync_c.so is loaded from (see the module docstring)."""
    env = os.environ.get("PSYNC_LIB")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parent
    beside = here / "libpsync_c.so"
    if beside.exists():
        return beside
    return here.parent.parent / "bazel-bin" / "client" / "c_api" / "libpsync_c.so"


_P = ctypes.POINTER
_u64, _u32, _i32, _dbl = ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int32, ctypes.c_double
_str, _size = ctypes.c_char_p, ctypes.c_size_t
_handle = ctypes.c_void_p

_SIGNATURES = {
    "psync_abi_version": (_i32, []),
    "psync_connect": (_handle, [_str, _str, _P(Tls), _dbl, _P(Status)]),
    "psync_client_free": (None, [_handle]),
    "psync_report_staged": (
        _i32,
        [_handle, _size, _P(_u64), _P(_u32), _P(_str), _P(ctypes.c_uint8), _P(_u64), _P(Status)],
    ),
    "psync_report_staged_async": (
        _i32,
        [
            _handle, _size, _P(_u64), _P(_u32), _P(_str), _P(ctypes.c_uint8), _P(_u64),
            _P(_u64), _P(Status),
        ],
    ),
    "psync_sync_done": (
        _i32, [_handle, _u64, _u32, _size, _P(_str), _P(_u64), _u32, _P(Status)]
    ),
    "psync_sync_done_async": (
        _i32, [_handle, _u64, _u32, _size, _P(_str), _P(_u64), _u32, _P(_u64), _P(Status)]
    ),
    "psync_skip_step": (_i32, [_handle, _u64, _str, _P(Status)]),
    "psync_skip_step_async": (_i32, [_handle, _u64, _str, _P(_u64), _P(Status)]),
    "psync_wait_ticket": (_i32, [_handle, _u64, _dbl, _P(_i32), _P(Status)]),
    "psync_forget_ticket": (None, [_handle, _u64]),
    "psync_tickets_pending": (_u64, [_handle]),
    "psync_wait_directive": (_i32, [_handle, _u64, _u32, _dbl, _P(DirectiveStruct), _P(Status)]),
    "psync_wait_step_skipped": (_i32, [_handle, _u64, _dbl, _P(Status)]),
    "psync_finish": (_i32, [_handle, _P(Status)]),
    "psync_close": (None, [_handle]),
    "psync_get_info": (_i32, [_handle, _P(InfoStruct), _P(Status)]),
    "psync_get_incarnation": (_i32, [_handle, _P(ctypes.c_void_p), _P(Status)]),
    "psync_get_job_status": (_i32, [_str, _P(Tls), _str, _dbl, _P(ctypes.c_void_p), _P(Status)]),
    "psync_get_audit": (_i32, [_str, _P(Tls), _str, _dbl, _P(ctypes.c_void_p), _P(Status)]),
    "psync_string_free": (None, [ctypes.c_void_p]),
}

_lib: Optional[ctypes.CDLL] = None


def load(loader: Callable[..., ctypes.CDLL] = ctypes.CDLL) -> ctypes.CDLL:
    """The library with its signatures declared (loaded once with ctypes.CDLL; another `loader`,
    e.g. ctypes.PyDLL, loads a separate handle)."""
    global _lib
    if loader is ctypes.CDLL and _lib is not None:
        return _lib
    path = library_path()
    if not path.exists():
        raise OSError(
            f"psync: {path} not found; build it (bazel build //client/c_api:libpsync_c.so) "
            "or set PSYNC_LIB to its path")
    mode = ctypes.RTLD_LOCAL
    if (path.parent / BUNDLED_LIBRARIES).is_dir():
        mode |= os.RTLD_DEEPBIND
    lib = loader(str(path), mode=mode)
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    version = lib.psync_abi_version()
    if version != ABI_VERSION:
        raise OSError(f"psync: {path} has C ABI version {version}, this package wants {ABI_VERSION}")
    if loader is ctypes.CDLL:
        _lib = lib
    return lib


def take_string(pointer: ctypes.c_void_p) -> str:
    """Copies a string the library returned and frees it."""
    if not pointer.value:
        return ""
    try:
        return ctypes.string_at(pointer.value).decode("utf-8", "replace")
    finally:
        load().psync_string_free(pointer)

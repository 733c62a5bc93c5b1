"""rma: one-sided remote memory access from Python.

A process registers memory and hands out a token; any peer holding the
token reads from or writes into that memory, and no code of the owner runs
for each transfer::

    import rma

    with rma.Engine(listen="0.0.0.0:0") as e:        # owner
        buf = e.register(bytearray(1 << 20))
        print(buf.advertise())                        # send this to peers

    with rma.Engine() as e:                           # peer
        remote = e.remote(token)
        data = bytearray(remote.length)
        remote.read_into(data, timeout=5)
        remote.write_from(b"hello", timeout=5)

The package binds ``librma`` with ctypes (standard library only).  The
library is found through ``RMA_LIBRARY``, next to the package, where
``make install`` put it, in a source checkout's ``build/``, or on the
system's library path.
"""
from __future__ import annotations

import ctypes
import os
from typing import List, NamedTuple

from . import _lib
from ._lib import lib
from .batch import Batch
from .engine import (NO_DEADLINE, Access, Buffer, BufferLike, CacheStats, Engine, Remote,
                     RouteInfo)
from .errors import BatchError, OpFailure, RmaError, RmaTimeoutError, strerror

__all__ = [
    "Access", "Batch", "BatchError", "Buffer", "BufferLike", "CacheStats", "Engine",
    "NO_DEADLINE",
    "OpFailure", "Remote", "RmaError", "RmaTimeoutError", "RouteInfo", "TransportInfo",
    "crc32c", "library_path", "read_secret_file", "set_log_level", "strerror",
    "transports", "version",
]

#: the librma file in use
library_path: str = _lib.path or ""


def version() -> str:
    """librma's version, "X.Y.Z"."""
    return lib.rma_version().decode()


class TransportInfo(NamedTuple):
    name: str
    level: int
    available: bool
    detail: str
    options: str


def transports() -> List[TransportInfo]:
    """One entry per transport compiled into librma."""
    n = lib.rma_transports(None, 0)
    arr = (_lib.RmaTransportInfo * max(n, 1))()
    n = min(lib.rma_transports(arr, n), n)

    def s(b: bytes) -> str:
        return (b or b"").decode()
    return [TransportInfo(s(t.name), t.level, bool(t.available), s(t.detail), s(t.options))
            for t in arr[:n]]


def crc32c(data: BufferLike, crc: int = 0) -> int:
    """crc32c (Castagnoli) of a buffer, continuing from crc: the checksum the
    rma CLI prints."""
    mv = memoryview(data)
    if not mv.c_contiguous:
        raise TypeError("crc32c needs contiguous memory")
    if mv.readonly:  # ctypes takes addresses of writable exports only
        mv = memoryview(bytearray(mv))
    arr = (ctypes.c_char * mv.nbytes).from_buffer(mv)
    return lib.rma_crc32c(crc, ctypes.addressof(arr), mv.nbytes)

def read_secret_file(path: "os.PathLike[str] | str") -> bytes:
    """The shared secret in a file, read as the rma CLI's ``--secret-file``
    reads it: the first line without its line ending, other bytes (spaces
    too) kept, for :class:`Engine`'s ``secret``.  Raises ``ValueError`` if
    that line is empty."""
    with open(path, "rb") as f:
        line = f.readline()
    secret = line.split(b"\n", 1)[0].split(b"\r", 1)[0]
    if not secret:
        raise ValueError(f"{os.fspath(path)}: the first line is empty")
    return secret


_LEVELS = {"error": 0, "warn": 1, "info": 2, "debug": 3}


def set_log_level(level: str) -> None:
    """Process-wide: rma's messages at or above level (error, warn, info,
    debug) go to stderr.  RMA_LOG does the same at engine creation."""
    if level not in _LEVELS:
        raise ValueError(f"log level {level!r}: use {', '.join(_LEVELS)}")
    lib.rma_set_log(_LEVELS[level], None, None)

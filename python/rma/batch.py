"""Batches: many reads and writes run under one deadline."""
from __future__ import annotations

import ctypes
import errno as _errno
from typing import TYPE_CHECKING, Dict, List, NamedTuple, Optional, Union

from . import _lib
from ._lib import lib
from .engine import Buffer, BufferLike, Local, Remote, timeout_ms
from .errors import BatchError, OpFailure, check, error, strerror

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine


class _Op(NamedTuple):
    kind: int
    remote: Remote
    local: Union[Buffer, BufferLike]
    remote_offset: int
    local_offset: int
    length: Optional[int]  # None: whole-buffer size rule, checked at submit


class Batch:
    """Reads and writes collected, then run together by :meth:`submit`.

    Each op names a remote window, a local buffer (a registered
    :class:`~rma.Buffer` or any buffer-protocol object, registered for the
    batch's duration), offsets into both and a length.  No order among the
    ops is promised.
    """

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine
        self._ops: List[_Op] = []

    def __len__(self) -> int:
        return len(self._ops)

    def _add(self, kind: int, remote: Remote, local: Union[Buffer, BufferLike],
             remote_offset: int, local_offset: int, length: Optional[int]) -> int:
        if remote.engine is not self.engine:
            raise ValueError("the remote was parsed by another engine")
        if min(remote_offset, local_offset, length or 0) < 0:
            raise ValueError("offsets and length must not be negative")
        self._ops.append(_Op(kind, remote, local, remote_offset, local_offset, length))
        return len(self._ops) - 1

    def read_into(self, remote: Remote, local: Union[Buffer, BufferLike], *,
                  remote_offset: int = 0, local_offset: int = 0,
                  length: Optional[int] = None, _whole: bool = False) -> int:
        """Add a read of ``length`` bytes (default: the rest of the window
        from ``remote_offset``) from the remote window into ``local`` at
        ``local_offset``.  Returns the op's index."""
        if length is None:
            length = max(remote.length - remote_offset, 0)
        return self._add(_lib.RMA_OP_GET, remote, local, remote_offset, local_offset,
                         None if _whole else length)

    def write_from(self, remote: Remote, local: Union[Buffer, BufferLike], *,
                   remote_offset: int = 0, local_offset: int = 0,
                   length: Optional[int] = None, _whole: bool = False) -> int:
        """Add a write of ``length`` bytes (default: the rest of ``local``
        from ``local_offset``) from ``local`` into the remote window at
        ``remote_offset``.  Returns the op's index."""
        if length is None and not _whole:
            size = local.nbytes if isinstance(local, Buffer) else memoryview(local).nbytes
            length = max(size - local_offset, 0)
        return self._add(_lib.RMA_OP_PUT, remote, local, remote_offset, local_offset, length)

    def _prepare(self):
        """Register the locals; returns (ops array, locals, early results).

        An op that fails before it reaches the library (the size rule of a
        whole-buffer op) gets its -errno in early results."""
        n = len(self._ops)
        arr = (_lib.RmaOp * max(n, 1))()
        early: Dict[int, int] = {}
        locals_: Dict[int, Local] = {}
        # One registration per object; writable if any op reads into it.
        read_into = {id(op.local) for op in self._ops if op.kind == _lib.RMA_OP_GET}
        try:
            for i, op in enumerate(self._ops):
                key = id(op.local)
                if key not in locals_:
                    locals_[key] = Local(self.engine, op.local, writes=key in read_into)
                loc = locals_[key]
                length = op.length
                if length is None:  # Monarch's size rules
                    if op.kind == _lib.RMA_OP_GET:
                        length = op.remote.length
                        if loc.nbytes < length:
                            early[i] = -_errno.EMSGSIZE
                    else:
                        length = loc.nbytes
                        if op.remote.length < length:
                            early[i] = -_errno.EMSGSIZE
                c = arr[i]
                c.kind = op.kind
                c.local = loc.region  # None: plain memory at addr
                c.addr = loc.addr
                c.remote = op.remote._handle()
                if i not in early:
                    c.local_off = op.local_offset
                    c.remote_off = op.remote_offset
                    c.len = length
        except BaseException:
            for loc in locals_.values():
                loc.close()
            raise
        return arr, list(locals_.values()), early

    def _finish(self, results: List[int]) -> List[int]:
        failures = [OpFailure(i, "read" if op.kind == _lib.RMA_OP_GET else "write",
                              -r, strerror(r))
                    for i, (op, r) in enumerate(zip(self._ops, results)) if r < 0]
        if failures:
            raise BatchError(failures, results)
        return results

    def submit(self, timeout: Optional[float] = None) -> List[int]:
        """Run every op under one deadline of ``timeout`` seconds (None: the
        engine's default) and wait.  Returns the bytes each op moved; if any
        failed raises :class:`~rma.BatchError` listing each failed op by
        index and reason."""
        n = len(self._ops)
        if n == 0:
            return []
        arr, locals_, early = self._prepare()
        try:
            results = (ctypes.c_int64 * n)()
            # Ops already failed ride along as zero-length ops, so indices
            # stay those of the batch; their result is replaced below.
            rc = lib.rma_submit(self.engine._handle(), arr, n, timeout_ms(timeout),
                                results, None, 0)
            check(rc, "submitting the batch")
        finally:
            for loc in locals_:
                loc.close()
        out = list(results)
        for i, err in early.items():
            out[i] = err
        return self._finish(out)

    async def submit_async(self, timeout: Optional[float] = None) -> List[int]:
        """:meth:`submit` for asyncio: the ops are posted and the event loop
        waits on the engine's completion fd; ops the completion queue has no
        room for are posted as it drains.  Cancelling the awaiting task
        does not cancel the ops; their local buffers stay registered until
        they complete (each by its deadline)."""
        n = len(self._ops)
        if n == 0:
            return []
        disp = self.engine._dispatcher()
        arr, locals_, early = self._prepare()

        def cleanup() -> None:
            for loc in locals_:
                loc.close()
        try:
            fut = disp.post(arr, n, timeout_ms(timeout), skip=set(early), cleanup=cleanup)
        except BaseException:
            cleanup()  # nothing was posted
            raise
        results = await fut
        for i, err in early.items():
            results[i] = err
        return self._finish(results)

"""asyncio support: completions of posted ops, read from the engine's
completion fd by the event loop (loop.add_reader)."""
from __future__ import annotations

import asyncio
import ctypes
import errno as _errno
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Set, Tuple

from . import _lib
from ._lib import lib

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

_POLL_MAX = 64


class _Group:
    """The ops of one posted batch: a future resolved when all complete."""

    def __init__(self, fut: "asyncio.Future[List[int]]", n: int,
                 cleanup: Optional[Callable[[], object]]) -> None:
        self.fut = fut
        self.results = [0] * n
        self.left = n
        self.cleanup = cleanup

    def done_one(self, i: int, result: int) -> None:
        self.results[i] = result
        self.left -= 1
        if self.left:
            return
        # Only now is no op using the local buffers any more.
        if self.cleanup is not None:
            self.cleanup()
        if not self.fut.done():
            self.fut.set_result(self.results)


class Dispatcher:
    """Posts ops with rma_post and routes their completions to futures.

    Lives on one event loop; the engine makes one on first async use."""

    def __init__(self, engine: "Engine", loop: asyncio.AbstractEventLoop) -> None:
        self.engine = engine
        self.loop = loop
        self.fd = engine.completion_fd()
        self.pending: Dict[int, Tuple[_Group, int]] = {}
        self.next_id = 1
        self.comps = (_lib.RmaCompletion * _POLL_MAX)()
        loop.add_reader(self.fd, self.drain)

    def post(self, ops: "ctypes.Array[_lib.RmaOp]", n: int, timeout_ms: int,
             skip: Set[int], cleanup: Optional[Callable[[], object]] = None
             ) -> "asyncio.Future[List[int]]":
        """Post ops[0..n) (except those in skip, which complete with 0 at
        once) with one deadline; the future gets each op's result."""
        group = _Group(self.loop.create_future(), n, cleanup)
        e = self.engine._handle()
        todo = [i for i in range(n) if i not in skip]
        for i in skip:
            group.done_one(i, 0)
        for i in todo:
            ops[i].user_data = self.next_id
            self.pending[self.next_id] = (group, i)
            self.next_id += 1
        size = ctypes.sizeof(_lib.RmaOp)
        err = ctypes.c_int(0)
        k = 0
        while k < len(todo):
            # Post the contiguous run starting at todo[k].
            run = 1
            while k + run < len(todo) and todo[k + run] == todo[k] + run:
                run += 1
            first = ctypes.cast(ctypes.addressof(ops) + todo[k] * size,
                                ctypes.POINTER(_lib.RmaOp))
            rc = lib.rma_post(e, first, run, timeout_ms, ctypes.byref(err))
            if rc < 0:
                bad, code, posted = todo[k], rc, 0
            elif rc < run:
                bad, code, posted = todo[k + rc], err.value, rc
            else:
                k += run
                continue
            if code >= 0:
                code = -_errno.EIO  # a library that did not say why
            # Ops before the bad one are posted; the bad one fails now.
            self.pending.pop(ops[bad].user_data, None)
            group.done_one(bad, code)
            k += posted + 1
        return group.fut

    def drain(self) -> None:
        """The completion fd is readable: hand every completion to its op."""
        e = self.engine._ptr
        if e is None:
            return
        if self.engine.manual_progress:
            lib.rma_progress(e, 0)
        while True:
            n = lib.rma_poll(e, self.comps, _POLL_MAX)
            for c in self.comps[:max(n, 0)]:
                entry = self.pending.pop(c.user_data, None)
                if entry is not None:
                    entry[0].done_one(entry[1], c.result)
            # Back to sleep on the fd: the progress thread drives until
            # the next poll (without rma_arm, only after the lease).
            if n < _POLL_MAX and lib.rma_arm(e) != -_errno.EAGAIN:
                return

    def close(self) -> None:
        """Before the engine is destroyed, after its shutdown cancelled
        every op: deliver those completions and stop watching the fd."""
        self.drain()
        try:
            self.loop.remove_reader(self.fd)
        except Exception:
            pass  # the loop may be closed already

"""asyncio support: completions of posted ops, read from the engine's
completion fd by the event loop (loop.add_reader)."""
from __future__ import annotations

import asyncio
import collections
import ctypes
import errno as _errno
import math
import time
from typing import TYPE_CHECKING, Callable, Deque, Dict, List, Optional, Set, Tuple

from . import _lib
from ._lib import lib

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

_POLL_MAX = 64
_RETRY_S = 0.005  # how soon ops that found no room are posted again


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


class _Waiting:
    """Ops of one posted batch, todo[k:] not yet posted."""

    def __init__(self, group: _Group, ops: "ctypes.Array[_lib.RmaOp]",
                 todo: List[int], timeout_ms: int, deadline: Optional[float]) -> None:
        self.group = group
        self.ops = ops
        self.todo = todo
        self.k = 0
        self.timeout_ms = timeout_ms
        self.deadline = deadline  # time.monotonic(), or None: none or the default


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
        self.waiting: Deque[_Waiting] = collections.deque()
        self.retry: Optional[asyncio.TimerHandle] = None
        loop.add_reader(self.fd, self.drain)

    def post(self, ops: "ctypes.Array[_lib.RmaOp]", n: int, timeout_ms: int,
             skip: Set[int], cleanup: Optional[Callable[[], object]] = None
             ) -> "asyncio.Future[List[int]]":
        """Post ops[0..n) (except those in skip, which complete with 0 at
        once) with one deadline; the future gets each op's result.  Ops the
        completion queue has no room for are posted as completions free it."""
        self.engine._handle()  # raises if closed
        group = _Group(self.loop.create_future(), n, cleanup)
        todo = [i for i in range(n) if i not in skip]
        for i in skip:
            group.done_one(i, 0)
        for i in todo:
            ops[i].user_data = self.next_id
            self.pending[self.next_id] = (group, i)
            self.next_id += 1
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        self.waiting.append(_Waiting(group, ops, todo, timeout_ms, deadline))
        self.post_waiting()
        return group.fut

    def fail(self, w: "_Waiting", i: int, code: int) -> None:
        self.pending.pop(w.ops[i].user_data, None)
        w.group.done_one(i, code)

    def post_waiting(self) -> None:
        """Post the ops not yet posted, oldest first, until rma_post says the
        completion queue is full (drain() calls again once it has room)."""
        e = self.engine._ptr
        if e is None:
            return
        size = ctypes.sizeof(_lib.RmaOp)
        err = ctypes.c_int(0)
        while self.waiting:
            w = self.waiting[0]
            tmo = w.timeout_ms
            if w.deadline is not None:
                # The batch's one deadline, for ops posted late too.
                left = w.deadline - time.monotonic()
                if left <= 0:
                    self.waiting.popleft()
                    for i in w.todo[w.k:]:
                        self.fail(w, i, -_errno.ETIMEDOUT)
                    continue
                tmo = min(max(1, math.ceil(left * 1000)), 2**31 - 1)
            while w.k < len(w.todo):
                # Post the contiguous run starting at todo[k].
                k, run = w.k, 1
                while k + run < len(w.todo) and w.todo[k + run] == w.todo[k] + run:
                    run += 1
                first = ctypes.cast(ctypes.addressof(w.ops) + w.todo[k] * size,
                                    ctypes.POINTER(_lib.RmaOp))
                rc = lib.rma_post(e, first, run, tmo, ctypes.byref(err))
                if rc == run:
                    w.k += run
                    continue
                # Ops before the bad one are posted.
                code = rc if rc < 0 else err.value
                w.k += max(rc, 0)
                if code == -_errno.EAGAIN:
                    self.retry_later()
                    return  # the queue is full: the rest wait for room
                if code >= 0:
                    code = -_errno.EIO  # a library that did not say why
                self.fail(w, w.todo[w.k], code)
                w.k += 1
            self.waiting.popleft()

    def retry_later(self) -> None:
        """No room now.  Completions that make some call post_waiting
        again (drain), but slots held by ops that timed out with transfers
        still out come back with no completion: look again soon as well,
        which also fails a waiting batch once its deadline has passed."""
        if self.retry is None:
            self.retry = self.loop.call_later(_RETRY_S, self._retry)

    def _retry(self) -> None:
        self.retry = None
        self.post_waiting()

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
            if n > 0 and self.waiting:
                self.post_waiting()  # the queue has room again
            # Back to sleep on the fd: the progress thread drives until
            # the next poll (without rma_arm, only after the lease).
            if n < _POLL_MAX and lib.rma_arm(e) != -_errno.EAGAIN:
                return

    def close(self) -> None:
        """Before the engine is destroyed, after its shutdown cancelled
        every op: deliver those completions and stop watching the fd."""
        if self.retry is not None:
            self.retry.cancel()
            self.retry = None
        # Ops never posted are cancelled with the rest.
        while self.waiting:
            w = self.waiting.popleft()
            for i in w.todo[w.k:]:
                self.fail(w, i, -_errno.ECANCELED)
        self.drain()
        try:
            self.loop.remove_reader(self.fd)
        except Exception:
            pass  # the loop may be closed already

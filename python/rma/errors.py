"""Exceptions raised by the rma package.

Every failure of the C library arrives as an :class:`RmaError` carrying the
positive ``errno`` and rma's own message for it (``rma_strerror``).
"""
from __future__ import annotations

import errno as _errno
from typing import List, NamedTuple, Optional, Sequence

from ._lib import lib


def strerror(err: int) -> str:
    """rma's message for an errno (the sign is ignored)."""
    return lib.rma_strerror(-abs(err)).decode()


class RmaError(OSError):
    """A call into librma failed.

    ``errno`` is the positive error number, ``strerror`` rma's message for it.
    ``context`` says what was being done, when known.
    """

    def __init__(self, err: int, context: Optional[str] = None) -> None:
        err = abs(err)
        msg = strerror(err)
        super().__init__(err, msg)
        self.context = context

    def __str__(self) -> str:
        name = _errno.errorcode.get(self.errno, str(self.errno))
        text = f"[{name}] {self.strerror}"
        return f"{self.context}: {text}" if self.context else text


class RmaTimeoutError(RmaError, TimeoutError):
    """An op or a connection ran past its deadline (``ETIMEDOUT``)."""


def error(err: int, context: Optional[str] = None) -> RmaError:
    """The exception for a negative (or positive) errno."""
    cls = RmaTimeoutError if abs(err) == _errno.ETIMEDOUT else RmaError
    return cls(err, context)


def check(rc: int, context: Optional[str] = None) -> int:
    """Return rc if it is not negative, else raise its :class:`RmaError`."""
    if rc < 0:
        raise error(rc, context)
    return rc


class OpFailure(NamedTuple):
    """One failed op of a batch."""

    index: int   #: position of the op in the batch, from 0
    kind: str    #: "read" or "write"
    errno: int   #: positive errno
    message: str #: rma's message for it


class BatchError(RmaError):
    """Some ops of a :class:`~rma.Batch` failed.

    ``failures`` lists each failed op (index, kind, errno, message);
    ``results`` has one entry per op: bytes moved, or ``-errno``.  ``errno``
    is that of the first failure.
    """

    def __init__(self, failures: Sequence[OpFailure], results: List[int]) -> None:
        super().__init__(failures[0].errno if failures else _errno.EIO)
        self.failures = list(failures)
        self.results = results

    def __str__(self) -> str:
        lines = [f"{len(self.failures)} of {len(self.results)} ops failed:"]
        for f in self.failures:
            name = _errno.errorcode.get(f.errno, str(f.errno))
            lines.append(f"  op {f.index} ({f.kind}): [{name}] {f.message}")
        return "\n".join(lines)

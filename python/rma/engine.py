"""Engines, registered buffers and remotes."""
from __future__ import annotations

import ctypes
import sys
import enum
import errno as _errno
import math
import os
import threading
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple, Union

from . import _lib
from ._lib import lib
from .errors import BatchError, RmaError, check, error

if TYPE_CHECKING:  # pragma: no cover
    from .batch import Batch
    from ._aio import Dispatcher

#: Anything with the buffer protocol: bytearray, memoryview, mmap.mmap,
#: array.array, a C-contiguous numpy array.
BufferLike = Any

#: Pass as a timeout for "no deadline".
NO_DEADLINE = math.inf


class Access(enum.IntFlag):
    """Remote access granted on a buffer or an advertisement."""

    NONE = 0   #: local use only (or, in advertise(): the buffer's own access)
    READ = _lib.RMA_ACCESS_REMOTE_READ    #: peers may read (get) from it
    WRITE = _lib.RMA_ACCESS_REMOTE_WRITE  #: peers may write (put) into it
    RW = READ | WRITE


AccessLike = Union[Access, int, str]


def _access(a: AccessLike) -> int:
    """Access flags from an Access, an int or one of "", "r", "w", "rw"."""
    if isinstance(a, str):
        table = {"": 0, "r": Access.READ, "w": Access.WRITE, "rw": Access.RW, "wr": Access.RW}
        if a not in table:
            raise ValueError(f"access {a!r}: use 'r', 'w' or 'rw'")
        return int(table[a])
    return int(a)


def timeout_ms(timeout: Optional[float]) -> int:
    """Seconds (None: the engine's default; math.inf: none) to rma's ms."""
    if timeout is None:
        return 0
    if timeout == math.inf:
        return _lib.RMA_NONE
    if not timeout > 0:
        raise ValueError(f"timeout must be > 0 seconds, None or math.inf, not {timeout!r}")
    # Round up: a short timeout must not become 0, which means "default".
    return min(max(1, math.ceil(timeout * 1000)), 2**31 - 1)


def wait_ms(seconds: float) -> int:
    """A wait in seconds (0: none; math.inf: as long as it takes) to rma's ms."""
    if seconds == math.inf:
        return _lib.RMA_NONE
    if not seconds >= 0:
        raise ValueError(f"a wait must be >= 0 seconds or math.inf, not {seconds!r}")
    # Round up, as timeout_ms does: a short wait must not become no wait.
    return min(math.ceil(seconds * 1000), 2**31 - 1)


def _export(obj: BufferLike, what: str) -> Tuple[ctypes.Array, int]:
    """Export obj's memory without copying; returns (holder, nbytes).

    The holder keeps a writable export of obj open: while it lives obj
    cannot be resized or closed (bytearray, mmap raise BufferError), so the
    address stays valid.
    """
    mv = memoryview(obj)
    if mv.readonly:
        raise TypeError(f"{what} needs a writable buffer, not read-only {type(obj).__name__}")
    if not mv.c_contiguous:
        raise TypeError(f"{what} needs contiguous memory")
    n = mv.nbytes
    mv.release()
    holder = (ctypes.c_char * n).from_buffer(obj)
    return holder, n


class Buffer:
    """Memory registered with an :class:`Engine` (see :meth:`Engine.register`).

    The buffer keeps the registered object alive, and the engine keeps the
    buffer, until :meth:`release` or the engine closes, even if the caller
    drops every reference: peers holding an advertisement may still write.
    """

    def __init__(self, engine: "Engine", obj: Optional[BufferLike], access: int,
                 alloc: int = 0) -> None:
        self.engine = engine
        self.access = Access(access)
        region = ctypes.c_void_p()
        if obj is None:  # Engine.alloc: the engine's memory
            addr = ctypes.c_void_p()
            check(lib.rma_region_alloc(engine._handle(), alloc, access,
                                       ctypes.byref(region), ctypes.byref(addr)),
                  f"allocating {alloc} bytes")
            self._holder = (ctypes.c_char * alloc).from_address(addr.value)
            self.nbytes = alloc
            self.obj = memoryview(self._holder).cast("B")
            self._alloc = True
        else:
            self._holder, self.nbytes = _export(obj, "register()")
            self.obj = obj
            self._alloc = False
            check(lib.rma_region_register(engine._handle(), ctypes.addressof(self._holder),
                                          self.nbytes, access, ctypes.byref(region)),
                  f"registering {self.nbytes} bytes")
        self._region: Optional[int] = region.value

    @property
    def registered(self) -> bool:
        """Whether the memory is still registered."""
        return self._region is not None

    def __len__(self) -> int:
        return self.nbytes

    def __repr__(self) -> str:
        state = "registered" if self.registered else "released"
        return f"<rma.Buffer {self.nbytes} bytes {self.access!s} {state}>"

    def _handle(self) -> int:
        if self._region is None:
            raise error(_errno.EINVAL, "the buffer was released")
        return self._region

    def advertise(self, offset: int = 0, length: int = 0, access: AccessLike = 0) -> str:
        """Advertise [offset, offset+length) (length 0: to the end) and return
        the token (one word of ``[A-Za-z0-9_-]``) that peers pass to
        :meth:`Engine.remote`.  ``access`` (0: the buffer's) may only narrow
        the buffer's access.  Raises :class:`RmaError` (``ERANGE``: window
        outside the buffer; ``EACCES``: access wider than the buffer's)."""
        if offset < 0 or length < 0:
            raise error(_errno.ERANGE, "negative offset or length")
        text = ctypes.create_string_buffer(_lib.RMA_ADVERTISEMENT_TEXT_MAX)
        check(lib.rma_advertise_text(self._handle(), offset, length, _access(access),
                                     text, len(text)), "advertising")
        return text.value.decode()

    def release(self) -> None:
        """Revoke every advertisement of the buffer and unregister it.  When
        it returns no peer reads or writes the memory any more, and the
        object may be resized, closed or freed.  Calling it again is a no-op."""
        if self._region is None:
            return
        if self._alloc and isinstance(self.obj, memoryview):
            # Release unmaps engine memory: refuse while views of it live
            # (as mmap.close does), or they would point at nothing.
            try:
                self.obj.release()
            except BufferError:
                raise BufferError("release(): views of the allocated memory are still "
                                  "alive (memoryview, numpy array); drop them first") from None
            if sys.getrefcount(self._holder) > 2:  # ours and the call's
                self.obj = memoryview(self._holder).cast("B")
                raise BufferError("release(): views of the allocated memory are still "
                                  "alive (memoryview, numpy array); drop them first")
        region, self._region = self._region, None
        if self.engine._ptr is not None:
            lib.rma_region_release(region)
        self.engine._forget(self)
        self._holder = None  # type: ignore[assignment]  # ends the export
        self.obj = None

    def _dropped(self) -> None:
        """The engine freed the region (engine close)."""
        self._region = None
        self._holder = None  # type: ignore[assignment]
        self.obj = None

    def __enter__(self) -> "Buffer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class Local:
    """The local side of an op: a registered Buffer, or an object registered
    for the op's duration (copied first when it is read-only and only read),
    or, on an engine made with ``cache_plain=True``, an object named by
    address (``region`` None, ``addr`` set) and registered through the
    engine's registration cache."""

    def __init__(self, engine: "Engine", obj: Union[Buffer, BufferLike], writes: bool) -> None:
        self.temp: Optional[Buffer] = None
        self.engine = engine
        self.addr: Optional[int] = None
        self._holder: Optional[ctypes.Array] = None
        self._copied = False
        if isinstance(obj, Buffer):
            if obj.engine is not engine:
                raise ValueError("the buffer is registered with another engine")
            self.region: Optional[int] = obj._handle()
            self.nbytes = obj.nbytes
            return
        if not writes and memoryview(obj).readonly:
            obj = bytearray(obj)  # a put only reads it: a copy will do
            self._copied = True
        what = "reading into it" if writes else "writing from it"
        try:
            if engine.cache_plain:
                self._holder, self.nbytes = _export(obj, what)
                self.addr = ctypes.addressof(self._holder)
                self.region = None
                return
            self.temp = Buffer(engine, obj, 0)
        except TypeError as e:
            raise TypeError(f"{what}: {e}") from None
        self.region = self.temp._handle()
        self.nbytes = self.temp.nbytes

    def close(self) -> None:
        if self.temp is not None:
            t, self.temp = self.temp, None
            t.release()
        if self._holder is not None:
            # Our own copy dies now: its range must not stay cached.
            if self._copied and self.engine._ptr is not None:
                lib.rma_mem_invalidate(self.engine._ptr, self.addr, self.nbytes)
            self._holder = None


class RouteInfo(NamedTuple):
    """How an engine reaches a remote's owner (see :attr:`Remote.route`)."""

    transport: str
    level: int
    state: int
    error: int
    why: str


class Remote:
    """A decoded advertisement, used through the engine that parsed it (or a
    plain libfabric peer's window: :meth:`Engine.remote_from_fabric`)."""

    def __init__(self, engine: "Engine", token: Union[str, bytes],
                 _ptr: Optional[int] = None) -> None:
        if isinstance(token, str):
            token = token.strip().encode()
        ptr = ctypes.c_void_p(_ptr)
        if _ptr is None:
            check(lib.rma_remote_parse(token, ctypes.byref(ptr)), "parsing the advertisement")
        self._ptr: Optional[int] = ptr.value
        self.engine = engine
        #: the token it was decoded from ("" for a plain fabric peer)
        self.token = token.decode()
        #: bytes in the advertised window
        self.length: int = lib.rma_remote_length(self._ptr)
        #: what the advertisement allows
        self.access = Access(lib.rma_remote_access(self._ptr))

    def __repr__(self) -> str:
        return f"<rma.Remote {self.length} bytes {self.access!s}>"

    def __len__(self) -> int:
        return self.length

    def _handle(self) -> int:
        if self._ptr is None:
            raise error(_errno.EINVAL, "the remote was closed")
        return self._ptr

    def close(self) -> None:
        """Free the decoded advertisement (ops in flight keep what they need)."""
        if self._ptr is not None:
            lib.rma_remote_free(self._ptr)
            self._ptr = None

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def fabric(self, transport: str = "ofi") -> Tuple[bytes, int, int]:
        """The triple a plain libfabric initiator needs to reach this window:
        (fabric address, rkey, remote address of byte 0), from the entry of
        ``transport`` ("ofi", or "ofi:tcp" for that provider).  ``ENOENT``
        if the advertisement has none."""
        addr = ctypes.create_string_buffer(256)
        key, base = ctypes.c_uint64(), ctypes.c_uint64()
        n = check(lib.rma_remote_to_fabric(self._handle(), transport.encode(), addr,
                                           len(addr), ctypes.byref(key), ctypes.byref(base)),
                  "reading the fabric address")
        return addr.raw[:n], key.value, base.value

    def connect(self, timeout: Optional[float] = None) -> None:
        """Connect to the owner now rather than at the first op."""
        check(lib.rma_peer_connect(self.engine._handle(), self._handle(), timeout_ms(timeout)),
              "connecting")

    def disconnect(self, timeout: Optional[float] = None) -> None:
        """Wait up to timeout for ops to the owner, cancel the rest, drop the
        connections (a later op connects again)."""
        rc = lib.rma_peer_remove(self.engine._handle(), self._handle(), timeout_ms(timeout))
        if rc != -_errno.ENOENT:
            check(rc, "disconnecting")

    @property
    def route(self) -> RouteInfo:
        """The transport and connection state ops to the owner use now."""
        info = _lib.RmaRouteInfo()
        check(lib.rma_peer_route(self.engine._handle(), self._handle(), ctypes.byref(info)),
              "routing")
        return RouteInfo((info.transport or b"").decode(), info.level, info.state,
                         info.error, info.why.decode(errors="replace"))

    def read_into(self, local: Union[Buffer, BufferLike], timeout: Optional[float] = None) -> int:
        """Read the whole advertised window into the start of ``local`` and
        return the bytes moved.  ``local`` must be at least as big as the
        window (else ``EMSGSIZE``); it is a registered :class:`Buffer` or any
        writable buffer-protocol object (registered for the call)."""
        loc = Local(self.engine, local, writes=True)
        try:
            if loc.region is None:
                rc = lib.rma_read_into_mem(self.engine._handle(), loc.addr, loc.nbytes,
                                           self._handle(), timeout_ms(timeout))
            else:
                rc = lib.rma_read_into(self.engine._handle(), loc.region, self._handle(),
                                       timeout_ms(timeout))
            return check(rc, f"reading {self.length} bytes into {loc.nbytes}")
        finally:
            loc.close()

    def write_from(self, local: Union[Buffer, BufferLike], timeout: Optional[float] = None) -> int:
        """Write the whole of ``local`` into the start of the advertised
        window and return the bytes moved.  The window must be at least as
        big (else ``EMSGSIZE``).  ``local`` may be read-only (it is then
        copied)."""
        loc = Local(self.engine, local, writes=False)
        try:
            if loc.region is None:
                rc = lib.rma_write_from_mem(self.engine._handle(), loc.addr, loc.nbytes,
                                            self._handle(), timeout_ms(timeout))
            else:
                rc = lib.rma_write_from(self.engine._handle(), loc.region, self._handle(),
                                        timeout_ms(timeout))
            return check(rc, f"writing {loc.nbytes} bytes into {self.length}")
        finally:
            loc.close()

    async def read_into_async(self, local: Union[Buffer, BufferLike],
                              timeout: Optional[float] = None) -> int:
        """:meth:`read_into` for asyncio: waits on the engine's completion fd."""
        from .batch import Batch
        b = Batch(self.engine)
        b.read_into(self, local, length=self.length, _whole=True)
        try:
            return (await b.submit_async(timeout))[0]
        except BatchError as e:
            raise error(e.errno, "reading") from None

    async def write_from_async(self, local: Union[Buffer, BufferLike],
                               timeout: Optional[float] = None) -> int:
        """:meth:`write_from` for asyncio: waits on the engine's completion fd."""
        from .batch import Batch
        b = Batch(self.engine)
        b.write_from(self, local, _whole=True)
        try:
            return (await b.submit_async(timeout))[0]
        except BatchError as e:
            raise error(e.errno, "writing") from None


class CacheStats(NamedTuple):
    """The registration cache's counters (see :meth:`Engine.cache_stats`)."""

    hits: int           #: ops that found their range registered
    misses: int         #: ops that registered a range
    evictions: int      #: ranges dropped to stay within the bounds
    invalidations: int  #: ranges dropped by :meth:`Engine.invalidate`
    entries: int        #: ranges registered now
    bytes: int          #: their bytes
    in_use: int         #: ranges used by ops in flight
    deferred: int       #: dropped ranges waiting for their ops


class Engine:
    """An rma engine: it registers memory, serves it to peers, and moves
    bytes to and from remotes.  Use it as a context manager, or call
    :meth:`close`.

    ``transports``: a spec string ("tcp", "tcp:listen=0.0.0.0:7000") or a
    list of them (None: every available one).  ``listen``: "HOST:PORT" the
    tcp listener binds (None: 127.0.0.1 on any port); one that cannot be
    bound (in use, on no interface here) raises :class:`RmaError` with
    ``EADDRINUSE`` or ``EADDRNOTAVAIL``.  ``advertise``: the
    host peers should connect to (None: the listen address, or for 0.0.0.0
    and [::] the default route's interface).  ``secret``: shared
    secret peers must prove (str or bytes; None: ``RMA_SECRET`` or none).
    ``timeout``: default op deadline in seconds.  ``RMA_*`` environment
    variables override these, as for every rma program.

    ``cache_plain``: objects that are not registered :class:`Buffer` s are
    named to the library by address and registered through its
    registration cache, which keeps them registered after the op (bounded
    by ``cache_entries`` ranges and ``cache_bytes``; 0: the defaults).
    Call :meth:`invalidate` on such an object before it is freed, resized
    or its memory remapped.  Without it (the default) each op registers
    and releases its object.
    """

    def __init__(self, transports: Union[None, str, Iterable[str]] = None,
                 listen: Optional[str] = None, secret: Union[None, str, bytes] = None,
                 *, timeout: Optional[float] = None, stripes: int = 0,
                 queue_depth: int = 0, cq_depth: int = 0, max_msg_size: int = 0,
                 manual_progress: bool = False,
                 advertise: Optional[str] = None, cache_plain: bool = False,
                 cache_entries: int = 0, cache_bytes: int = 0) -> None:
        self._ptr: Optional[int] = None
        self._lock = threading.Lock()
        self._buffers: Set[Buffer] = set()
        self._aio: Optional["Dispatcher"] = None
        if transports is not None and not isinstance(transports, str):
            transports = ",".join(transports)
        if isinstance(secret, str):
            secret = secret.encode()
        if secret is not None and b"\0" in secret:
            raise ValueError("the secret must not contain NUL bytes")
        cfg = _lib.RmaConfig()  # zeroed: every field its default
        cfg.size = ctypes.sizeof(_lib.RmaConfig)
        cfg.transports = transports.encode() if transports else None
        cfg.listen = listen.encode() if listen else None
        cfg.advertise = advertise.encode() if advertise else None
        cfg.secret = secret or None
        cfg.flags = _lib.RMA_ENGINE_MANUAL_PROGRESS if manual_progress else 0
        cfg.queue_depth = queue_depth
        cfg.cq_depth = cq_depth
        cfg.stripes = stripes
        cfg.max_msg_size = max_msg_size
        cfg.timeout_ms = timeout_ms(timeout)
        cfg.cache_entries = cache_entries
        cfg.cache_bytes = cache_bytes
        self.manual_progress = manual_progress
        self.cache_plain = cache_plain
        ptr = ctypes.c_void_p()
        rc = lib.rma_engine_create(ctypes.byref(cfg), ctypes.byref(ptr))
        if rc < 0:
            # Name the listen address where it is the cause (in use, on no
            # interface here, a privileged port); RMA_LISTEN wins, as in C.
            at = os.environ.get("RMA_LISTEN") or listen
            if at and -rc in (_errno.EADDRINUSE, _errno.EADDRNOTAVAIL, _errno.EACCES):
                raise error(rc, f"creating the engine: cannot listen on {at}")
            raise error(rc, "creating the engine")
        self._ptr = ptr.value

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<rma.Engine {'closed' if self._ptr is None else 'open'}>"

    def _handle(self) -> int:
        if self._ptr is None:
            raise error(_errno.ESHUTDOWN, "the engine is closed")
        return self._ptr

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self, drain: float = 0) -> None:
        """Cancel what is in flight (after up to ``drain`` seconds;
        :data:`NO_DEADLINE`: once every op has ended by its own deadline),
        release every buffer and free the engine.  No other call on the
        engine may be running.  Calling it again is a no-op."""
        if self._ptr is None:
            return
        lib.rma_engine_shutdown(self._ptr, wait_ms(drain))
        if self._aio is not None:
            self._aio.close()  # delivers the cancelled ops' completions
            self._aio = None
        lib.rma_engine_destroy(self._ptr)
        self._ptr = None
        with self._lock:
            buffers, self._buffers = self._buffers, set()
        for b in buffers:
            b._dropped()

    def _forget(self, b: Buffer) -> None:
        with self._lock:
            self._buffers.discard(b)

    def register(self, obj: BufferLike, access: AccessLike = Access.RW) -> Buffer:
        """Register a writable, contiguous buffer-protocol object (bytearray,
        memoryview, mmap, array.array, numpy array) without copying.  The
        engine keeps it alive until :meth:`Buffer.release` or :meth:`close`.
        ``access`` says what peers may do (default: read and write)."""
        b = Buffer(self, obj, _access(access))
        with self._lock:
            self._buffers.add(b)
        return b

    def alloc(self, nbytes: int, access: AccessLike = Access.RW) -> Buffer:
        """Allocate and register ``nbytes`` of shared memory owned by the
        engine (``rma_region_alloc``); same-host peers map it once and copy
        without a system call per op.  Its bytes are ``buffer.obj``, a
        writable memoryview (``numpy.frombuffer(buffer.obj, ...)`` works).
        :meth:`Buffer.release` unmaps the memory, so it raises BufferError
        while other views of it are alive; closing the engine unmaps it
        whatever views remain."""
        if nbytes <= 0:
            raise ValueError(f"nbytes must be > 0, not {nbytes!r}")
        b = Buffer(self, None, _access(access), alloc=nbytes)
        with self._lock:
            self._buffers.add(b)
        return b

    @property
    def buffers(self) -> List[Buffer]:
        """The buffers registered now."""
        with self._lock:
            return list(self._buffers)

    def remote(self, token: Union[str, bytes]) -> Remote:
        """Decode a token from :meth:`Buffer.advertise` (``EBADMSG`` if it is
        malformed)."""
        self._handle()
        return Remote(self, token)

    def remote_from_fabric(self, transport: str, address: Union[bytes, str], rkey: int,
                           remote_addr: int, length: int = 0) -> Remote:
        """A window of a plain libfabric peer (no rma engine), named by the
        triple it hands out: its fabric address (bytes, or hex text), the key
        of its registration and the remote address of the window's byte 0.
        ``transport`` is a spec with the peer's provider ("ofi:tcp");
        ``length`` 0 means unknown (the peer's fabric checks bounds; the
        remote's ``length`` is then 2**64 - 1, so give ops a length).  An
        engine with a secret refuses such a peer (``EACCES``)."""
        self._handle()
        if isinstance(address, str):
            address = bytes.fromhex(address)
        ptr = ctypes.c_void_p()
        check(lib.rma_remote_from_fabric(transport.encode(), address, len(address), rkey,
                                         remote_addr, length, ctypes.byref(ptr)),
              "naming the fabric peer")
        return Remote(self, b"", _ptr=ptr.value)

    def batch(self) -> "Batch":
        """A new, empty :class:`~rma.Batch` of reads and writes."""
        from .batch import Batch
        return Batch(self)

    def cache_stats(self) -> CacheStats:
        """A snapshot of the registration cache's counters."""
        st = _lib.RmaCacheStats()
        check(lib.rma_cache_stats(self._handle(), ctypes.byref(st)), "reading cache stats")
        return CacheStats(*(getattr(st, f) for f in CacheStats._fields))

    def invalidate(self, obj: Union[BufferLike, int], length: int = 0) -> int:
        """Drop cached registrations overlapping an object's memory (or
        ``length`` bytes at address ``obj``) before it is freed, resized or
        remapped.  Ranges still used by ops in flight go when those end.
        Returns how many ranges were dropped."""
        if isinstance(obj, int):
            addr, n = obj, length
        else:
            holder, n = _export(obj, "invalidate()")
            addr = ctypes.addressof(holder)
            del holder
        return check(lib.rma_mem_invalidate(self._handle(), addr, n), "invalidating")

    def completion_fd(self) -> int:
        """The engine's completion fd (readable when completions wait); owned
        by the engine.  The asyncio methods wait on it."""
        return check(lib.rma_completion_fd(self._handle()))

    def arm(self) -> bool:
        """Before sleeping on :meth:`completion_fd` after polling: True if
        the progress thread now drives (sleep), False if completions wait
        (poll them first)."""
        rc = lib.rma_arm(self._handle())
        if rc == -_errno.EAGAIN:
            return False
        check(rc)
        return True

    def progress(self, timeout: float = 0) -> int:
        """Drive progress once (needed only with ``manual_progress``), waiting
        up to ``timeout`` seconds (:data:`NO_DEADLINE`: until there is some)
        for activity."""
        return check(lib.rma_progress(self._handle(), wait_ms(timeout)))

    def _dispatcher(self) -> "Dispatcher":
        from ._aio import Dispatcher
        import asyncio
        loop = asyncio.get_running_loop()
        if self._aio is None:
            self._aio = Dispatcher(self, loop)
        elif self._aio.loop is not loop:
            # A loop that ended (asyncio.run returned) leaves nothing to wait
            # for on it; a live one with ops pending keeps the engine.
            if self._aio.pending and not self._aio.loop.is_closed():
                raise RuntimeError("this engine has ops waiting in another event loop")
            self._aio.close()
            self._aio = Dispatcher(self, loop)
        return self._aio

"""Loading librma and declaring its C interface for ctypes.

The library is looked for, in order:

1. ``RMA_LIBRARY``: a path to ``librma.so`` (or ``librma.so.0``);
2. next to this package (``rma/librma.so.0`` or ``rma/librma.so``), for a
   package shipped together with its library;
3. the library of the package's own prefix, which ``make install`` (or
   ``cmake --install``) records relative to the package (``_install.py``),
   so that a moved or copied prefix still finds it;
4. the build tree of a source checkout: ``python/rma`` -> ``build/librma.so``
   (``RMA_BUILD`` names another build folder);
5. the system's search path (``ldconfig``, ``LD_LIBRARY_PATH``).

The structs below mirror ``include/rma.h`` field by field.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import List, Optional

_HERE = os.path.dirname(os.path.abspath(__file__))


class RmaConfig(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("transports", ctypes.c_char_p),
        ("listen", ctypes.c_char_p),
        ("secret", ctypes.c_char_p),
        ("flags", ctypes.c_uint),
        ("queue_depth", ctypes.c_uint),
        ("cq_depth", ctypes.c_uint),
        ("stripes", ctypes.c_uint),
        ("max_msg_size", ctypes.c_uint64),
        ("timeout_ms", ctypes.c_int),
        ("spin_us", ctypes.c_int),
        ("advertise", ctypes.c_char_p),
        ("cache_entries", ctypes.c_uint),
        ("cache_bytes", ctypes.c_uint64),
        ("poll_lease_us", ctypes.c_int),
    ]


class RmaOp(ctypes.Structure):
    _fields_ = [
        ("kind", ctypes.c_uint),
        ("flags", ctypes.c_uint),
        ("local", ctypes.c_void_p),
        ("local_off", ctypes.c_uint64),
        ("remote", ctypes.c_void_p),
        ("remote_off", ctypes.c_uint64),
        ("len", ctypes.c_uint64),
        ("user_data", ctypes.c_uint64),
        ("addr", ctypes.c_void_p),
        ("reserved", ctypes.c_uint64 * 1),
    ]


class RmaCompletion(ctypes.Structure):
    _fields_ = [
        ("user_data", ctypes.c_uint64),
        ("result", ctypes.c_int64),
        ("crc32c", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
    ]


class RmaCacheStats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "hits", "misses", "evictions", "invalidations", "entries", "bytes",
        "in_use", "deferred")]


class RmaTransportInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("level", ctypes.c_int),
        ("available", ctypes.c_int),
        ("detail", ctypes.c_char_p),
        ("options", ctypes.c_char_p),
    ]


class RmaRouteInfo(ctypes.Structure):
    _fields_ = [
        ("transport", ctypes.c_char_p),
        ("level", ctypes.c_int),
        ("state", ctypes.c_int),
        ("error", ctypes.c_int),
        ("why", ctypes.c_char * 192),
    ]


# Constants from rma.h.
RMA_ACCESS_REMOTE_READ = 1
RMA_ACCESS_REMOTE_WRITE = 2
RMA_ENGINE_MANUAL_PROGRESS = 1
RMA_OP_PUT = 1
RMA_OP_GET = 2
RMA_OP_CRC = 2
RMA_COMPLETION_CRC = 1
RMA_ADVERTISEMENT_TEXT_MAX = 700
RMA_NONE = -1

_vp = ctypes.c_void_p
_i = ctypes.c_int
_u64 = ctypes.c_uint64
_sz = ctypes.c_size_t

# name: (restype, argtypes)
_PROTOTYPES = {
    "rma_engine_create": (_i, [ctypes.POINTER(RmaConfig), ctypes.POINTER(_vp)]),
    "rma_engine_shutdown": (_i, [_vp, _i]),
    "rma_engine_destroy": (None, [_vp]),
    "rma_engine_address": (_i, [_vp, _vp, _sz]),
    "rma_region_register": (_i, [_vp, _vp, _sz, ctypes.c_uint, ctypes.POINTER(_vp)]),
    "rma_region_alloc": (_i, [_vp, _sz, ctypes.c_uint, ctypes.POINTER(_vp), ctypes.POINTER(_vp)]),
    "rma_region_release": (_i, [_vp]),
    "rma_advertise_text": (_i, [_vp, _u64, _u64, ctypes.c_uint, ctypes.c_char_p, _sz]),
    "rma_remote_parse": (_i, [ctypes.c_char_p, ctypes.POINTER(_vp)]),
    "rma_remote_free": (None, [_vp]),
    "rma_remote_length": (_u64, [_vp]),
    "rma_remote_access": (ctypes.c_uint, [_vp]),
    "rma_remote_from_fabric": (_i, [ctypes.c_char_p, _vp, _sz, _u64, _u64, _u64,
                                    ctypes.POINTER(_vp)]),
    "rma_remote_to_fabric": (_i, [_vp, ctypes.c_char_p, _vp, _sz, ctypes.POINTER(_u64),
                                  ctypes.POINTER(_u64)]),
    "rma_peer_connect": (_i, [_vp, _vp, _i]),
    "rma_peer_remove": (_i, [_vp, _vp, _i]),
    "rma_peer_route": (_i, [_vp, _vp, ctypes.POINTER(RmaRouteInfo)]),
    "rma_post": (_i, [_vp, ctypes.POINTER(RmaOp), _sz, _i, ctypes.POINTER(_i)]),
    "rma_poll": (_i, [_vp, ctypes.POINTER(RmaCompletion), _sz]),
    "rma_arm": (_i, [_vp]),
    "rma_progress": (_i, [_vp, _i]),
    "rma_completion_fd": (_i, [_vp]),
    "rma_submit": (_i, [_vp, ctypes.POINTER(RmaOp), _sz, _i,
                        ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p, _sz]),
    "rma_read_into": (ctypes.c_int64, [_vp, _vp, _vp, _i]),
    "rma_write_from": (ctypes.c_int64, [_vp, _vp, _vp, _i]),
    "rma_read_into_mem": (ctypes.c_int64, [_vp, _vp, _sz, _vp, _i]),
    "rma_write_from_mem": (ctypes.c_int64, [_vp, _vp, _sz, _vp, _i]),
    "rma_mem_invalidate": (_i, [_vp, _vp, _sz]),
    "rma_cache_stats": (_i, [_vp, ctypes.POINTER(RmaCacheStats)]),
    "rma_transports": (_i, [ctypes.POINTER(RmaTransportInfo), _sz]),
    "rma_strerror": (ctypes.c_char_p, [_i]),
    "rma_version": (ctypes.c_char_p, []),
    "rma_crc32c": (ctypes.c_uint32, [ctypes.c_uint32, _vp, _sz]),
    "rma_set_log": (None, [_i, _vp, _vp]),
}


def _candidates() -> List[str]:
    """Every place the library may be, in the order they are tried."""
    out: List[str] = []
    env = os.environ.get("RMA_LIBRARY")
    if env:
        out.append(env)
    out += [os.path.join(_HERE, n) for n in ("librma.so.0", "librma.so")]
    try:
        from . import _install  # written by `make install`
        out.append(_install.LIBRARY)
    except ImportError:
        pass
    root = os.path.dirname(os.path.dirname(_HERE))
    build = os.environ.get("RMA_BUILD") or os.path.join(root, "build")
    out.append(os.path.join(build, "librma.so"))
    found = ctypes.util.find_library("rma")
    out.append(found or "librma.so.0")
    return out


def _load() -> ctypes.CDLL:
    tried: List[str] = []
    for path in _candidates():
        # Names without a slash go to the dynamic linker's search; paths
        # must exist, so a stale candidate does not hide a later one.
        if os.sep in path and not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as err:
            if os.environ.get("RMA_LIBRARY") == path:
                raise ImportError(f"RMA_LIBRARY={path}: {err}") from err
            tried.append(f"{path} ({err})")
            continue
        for name, (res, args) in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
        return lib
    raise ImportError("librma not found; set RMA_LIBRARY to its path or build "
                      "it with `make` (tried: " + "; ".join(tried) + ")")


lib = _load()
path: Optional[str] = getattr(lib, "_name", None)

"""Shared by the Python tests: finds the package from a source checkout and
makes test data.  ctest sets PYTHONPATH and RMA_LIBRARY; by hand,
`python3 -m unittest` or `pytest` from tests/python finds python/ here."""
import os
import random
import sys

_PY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")
if _PY not in sys.path:
    sys.path.insert(0, _PY)

import rma  # noqa: E402

TIMEOUT = 10.0  # seconds: generous; loopback ops take microseconds


def pattern(n: int, seed: int) -> bytes:
    """n reproducible bytes that differ for every seed."""
    return random.Random(seed).randbytes(n)


def pair():
    """An owner engine and a peer engine on loopback."""
    return rma.Engine(transports="tcp"), rma.Engine(transports="tcp")

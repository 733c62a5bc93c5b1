"""The Python binding over verbs on a real device: a write and a read back,
checked byte by byte, and the route that carried them."""
import sys
import unittest

sys.path.insert(0, sys.argv.pop(1))  # the tests/python folder: support.py
import support
from support import TIMEOUT, pattern

import rma


class Verbs(unittest.TestCase):
    def test_roundtrip(self):
        with rma.Engine(transports="verbs") as owner, rma.Engine(transports="verbs") as peer:
            mem = bytearray(4 << 20)
            remote = peer.remote(owner.register(mem).advertise())
            data = pattern(len(mem), 3)
            self.assertEqual(remote.write_from(data, timeout=TIMEOUT), len(mem))
            self.assertEqual(mem, data)
            back = bytearray(len(mem))
            self.assertEqual(remote.read_into(back, timeout=TIMEOUT), len(mem))
            self.assertEqual(back, data)
            self.assertTrue(remote.route.transport.startswith("verbs"), remote.route)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""Engine.alloc: engine-owned shared memory, its views, and its release."""
import unittest

import support
from support import TIMEOUT, pattern

import rma


class Alloc(unittest.TestCase):
    def roundtrip(self, transports):
        owner = rma.Engine(transports=transports)
        peer = rma.Engine(transports=transports)
        try:
            n = 2 * 65536 + 7
            buf = owner.alloc(n)
            self.assertEqual(len(buf), n)
            self.assertEqual(len(buf.obj), n)
            buf.obj[:] = pattern(n, 3)
            remote = peer.remote(buf.advertise())
            back = bytearray(n)
            self.assertEqual(remote.read_into(back, timeout=TIMEOUT), n)
            self.assertEqual(bytes(back), pattern(n, 3))
            self.assertEqual(remote.write_from(pattern(n, 4), timeout=TIMEOUT), n)
            self.assertEqual(bytes(buf.obj), pattern(n, 4))  # landed in place
            remote.close()
            buf.release()
            self.assertFalse(buf.registered)
        finally:
            peer.close()
            owner.close()

    def test_tcp(self):
        self.roundtrip("tcp")

    def test_default_transports(self):
        # shm where this host allows it, else tcp: the bytes agree either way
        self.roundtrip(None)

    def test_release_refused_while_viewed(self):
        e = rma.Engine(transports="tcp")
        try:
            buf = e.alloc(4096)
            part = buf.obj[100:200]  # a slice shares the mapping
            with self.assertRaises(BufferError):
                buf.release()
            self.assertTrue(buf.registered)
            part[0] = 7  # still mapped
            self.assertEqual(buf.obj[100], 7)
            del part
            whole = memoryview(buf.obj)  # an export of the view itself
            with self.assertRaises(BufferError):
                buf.release()
            whole.release()
            buf.release()
            self.assertFalse(buf.registered)
            self.assertIsNone(buf.obj)
            with self.assertRaises(rma.RmaError):
                buf.advertise()
        finally:
            e.close()

    def test_bad_size(self):
        e = rma.Engine(transports="tcp")
        try:
            for n in (0, -1):
                with self.assertRaises(ValueError):
                    e.alloc(n)
        finally:
            e.close()


if __name__ == "__main__":
    unittest.main()

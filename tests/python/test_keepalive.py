"""Registered objects stay alive (and fixed in memory) while registered."""
import gc
import mmap
import unittest
import weakref

import support
from support import TIMEOUT, pattern

import rma


class Bytes(bytearray):
    """A bytearray that can be weakly referenced."""


class KeepAlive(unittest.TestCase):
    def test_alive_until_release(self):
        with rma.Engine(transports="tcp") as owner, rma.Engine(transports="tcp") as peer:
            obj = Bytes(4096)
            ref = weakref.ref(obj)
            buf = owner.register(obj)
            remote = peer.remote(buf.advertise())
            del obj, buf  # the caller keeps nothing
            gc.collect()
            self.assertIsNotNone(ref(), "freed while registered")
            # and peers can still write into it, where the caller left it
            remote.write_from(pattern(4096, 1), timeout=TIMEOUT)
            self.assertEqual(bytes(ref()), pattern(4096, 1))
            (b,) = owner.buffers
            b.release()
            gc.collect()
            self.assertIsNone(ref(), "still held after release")

    def test_alive_until_engine_close(self):
        owner = rma.Engine(transports="tcp")
        obj = Bytes(100)
        ref = weakref.ref(obj)
        buf = owner.register(obj)  # the caller keeps the Buffer, not obj
        del obj
        gc.collect()
        self.assertIsNotNone(ref())
        owner.close()
        gc.collect()
        self.assertFalse(buf.registered)
        self.assertIsNone(ref(), "still held after the engine closed")

    def test_temporary_registration_ends(self):
        with rma.Engine(transports="tcp") as owner, rma.Engine(transports="tcp") as peer:
            remote = peer.remote(owner.register(bytearray(100)).advertise())
            obj = Bytes(100)
            ref = weakref.ref(obj)
            remote.read_into(obj, timeout=TIMEOUT)
            self.assertEqual(peer.buffers, [])
            del obj
            gc.collect()
            self.assertIsNone(ref(), "a temporary registration leaked")

    def test_fixed_while_registered(self):
        """Resizing or closing registered memory is refused, not a crash."""
        with rma.Engine(transports="tcp") as e:
            ba = bytearray(100)
            buf = e.register(ba)
            with self.assertRaises(BufferError):
                ba.extend(b"x" * 10000)
            m = mmap.mmap(-1, 4096)
            mbuf = e.register(m)
            with self.assertRaises(BufferError):
                m.close()
            buf.release()
            mbuf.release()
            ba.extend(b"x")  # free again
            m.close()


if __name__ == "__main__":
    unittest.main()

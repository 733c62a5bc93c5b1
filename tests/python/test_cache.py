"""The registration cache from Python: an engine made with cache_plain=True
names plain objects by address, so a second op on the same object finds
its registration; invalidate() drops it; the structs match the library's."""
import asyncio
import ctypes
import unittest

import support
from support import TIMEOUT, pattern

import rma
from rma import _lib


class Cache(unittest.TestCase):
    def setUp(self):
        self.owner = rma.Engine(transports="tcp")
        self.peer = rma.Engine(transports="tcp", cache_plain=True, cache_entries=8)
        self.target = bytearray(1 << 20)
        self.remote = self.peer.remote(self.owner.register(self.target).advertise())

    def tearDown(self):
        self.peer.close()
        self.owner.close()

    def test_layout(self):
        self.assertEqual(ctypes.sizeof(_lib.RmaCompletion), 24)
        self.assertEqual(ctypes.sizeof(_lib.RmaOp), 72)
        self.assertEqual(ctypes.sizeof(_lib.RmaCacheStats), 64)

    def test_hit_miss_invalidate(self):
        src = bytearray(pattern(1 << 20, 3))
        dst = bytearray(1 << 20)
        self.assertEqual(self.remote.write_from(src, timeout=TIMEOUT), len(src))
        self.assertEqual(self.target, src)
        st = self.peer.cache_stats()
        self.assertEqual((st.misses, st.hits, st.entries, st.in_use), (1, 0, 1, 0))
        self.assertEqual(self.remote.read_into(dst, timeout=TIMEOUT), len(dst))
        self.assertEqual(dst, src)
        self.assertEqual(self.remote.write_from(src, timeout=TIMEOUT), len(src))
        st = self.peer.cache_stats()
        self.assertEqual((st.misses, st.hits, st.entries), (2, 1, 2))
        # dst's range goes too if the two objects share a page (heap).
        dropped = self.peer.invalidate(src)
        self.assertIn(dropped, (1, 2))
        st = self.peer.cache_stats()
        self.assertEqual((st.entries, st.invalidations), (2 - dropped, dropped))
        self.assertEqual(self.remote.write_from(src, timeout=TIMEOUT), len(src))
        self.assertEqual(self.peer.cache_stats().misses, 3)

    def test_readonly_copy_is_not_kept(self):
        """A read-only object is copied for a put; the copy's range goes
        with it."""
        data = pattern(4096, 4)
        self.assertEqual(self.remote.write_from(data, timeout=TIMEOUT), 4096)
        self.assertEqual(bytes(self.target[:4096]), data)
        st = self.peer.cache_stats()
        self.assertEqual((st.misses, st.entries, st.invalidations), (1, 0, 1))

    def test_batch_and_async(self):
        a = bytearray(pattern(65536, 5))
        b = bytearray(65536)
        batch = self.peer.batch()
        batch.write_from(self.remote, a, remote_offset=4096)
        self.assertEqual(batch.submit(timeout=TIMEOUT), [65536])
        batch = self.peer.batch()
        batch.read_into(self.remote, b, remote_offset=4096, length=65536)
        self.assertEqual(asyncio.run(batch.submit_async(timeout=TIMEOUT)), [65536])
        self.assertEqual(a, b)
        st = self.peer.cache_stats()
        self.assertEqual((st.misses, st.in_use), (2, 0))


if __name__ == "__main__":
    unittest.main()

"""Batches: one deadline, one exception naming each failed op."""
import asyncio
import errno
import unittest

import support
from support import TIMEOUT, pattern

import rma


class Batches(unittest.TestCase):
    def setUp(self):
        self.owner, self.peer = support.pair()
        self.rw = bytearray(pattern(4096, 1))
        self.ro = bytearray(pattern(4096, 2))
        self.rw_remote = self.peer.remote(self.owner.register(self.rw).advertise())
        self.ro_remote = self.peer.remote(self.owner.register(self.ro).advertise(access="r"))

    def tearDown(self):
        self.peer.close()
        self.owner.close()

    def test_all_succeed(self):
        local = bytearray(8192)
        b = self.peer.batch()
        b.read_into(self.rw_remote, local)  # whole window at 0
        b.read_into(self.ro_remote, local, local_offset=4096, remote_offset=96, length=4000)
        b.write_from(self.rw_remote, pattern(100, 3), remote_offset=10)
        self.assertEqual(len(b), 3)
        before = bytes(self.rw)
        results = b.submit(timeout=TIMEOUT)
        self.assertEqual(results, [4096, 4000, 100])
        self.assertEqual(local[4096:8096], self.ro[96:])
        self.assertEqual(self.rw[10:110], pattern(100, 3))
        # no order between the read and the write of rw: either view is right
        self.assertIn(bytes(local[:4096]), (before, bytes(self.rw)))

    def make_failing(self, local):
        b = self.peer.batch()
        b.read_into(self.rw_remote, local, length=100)                   # 0 ok
        b.read_into(self.rw_remote, local, remote_offset=4000, length=200)  # 1 ERANGE
        b.write_from(self.rw_remote, pattern(50, 4), remote_offset=200)  # 2 ok
        b.write_from(self.ro_remote, pattern(50, 5))                     # 3 EACCES
        b.read_into(self.ro_remote, local, local_offset=100, length=64)  # 4 ok
        return b

    def check_failures(self, err, local):
        self.assertEqual([(f.index, f.kind, f.errno) for f in err.failures],
                         [(1, "read", errno.ERANGE), (3, "write", errno.EACCES)])
        self.assertEqual(err.errno, errno.ERANGE)
        self.assertEqual(err.results[0], 100)
        self.assertEqual(err.results[1], -errno.ERANGE)
        self.assertEqual(err.results[2], 50)
        self.assertEqual(err.results[3], -errno.EACCES)
        self.assertEqual(err.results[4], 64)
        text = str(err)
        self.assertIn("2 of 5 ops failed", text)
        self.assertIn("op 1 (read)", text)
        self.assertIn("op 3 (write)", text)
        self.assertIn(rma.strerror(errno.EACCES), text)
        self.assertNotIn("op 0", text)
        # the good ops did their work
        self.assertEqual(self.rw[200:250], pattern(50, 4))
        self.assertEqual(self.ro, pattern(4096, 2))
        self.assertEqual(local[100:164], self.ro[:64])

    def test_failures_listed(self):
        local = bytearray(4096)
        with self.assertRaises(rma.BatchError) as cm:
            self.make_failing(local).submit(timeout=TIMEOUT)
        self.check_failures(cm.exception, local)

    def test_failures_listed_async(self):
        local = bytearray(4096)

        async def go():
            return await self.make_failing(local).submit_async(timeout=TIMEOUT)
        with self.assertRaises(rma.BatchError) as cm:
            asyncio.run(go())
        self.check_failures(cm.exception, local)

    def test_size_rule_in_batch(self):
        """A whole-buffer op that breaks the size rule fails alone."""
        b = self.peer.batch()
        b.read_into(self.rw_remote, bytearray(4096))
        b.write_from(self.rw_remote, bytes(5000), _whole=True)
        with self.assertRaises(rma.BatchError) as cm:
            b.submit(timeout=TIMEOUT)
        self.assertEqual(cm.exception.results[0], 4096)
        self.assertEqual(cm.exception.results[1], -errno.EMSGSIZE)

    def test_empty(self):
        self.assertEqual(self.peer.batch().submit(), [])

    def test_foreign_remote(self):
        with self.assertRaises(ValueError):
            self.owner.batch().read_into(self.rw_remote, bytearray(10))


if __name__ == "__main__":
    unittest.main()

"""Monarch's size rules for whole-buffer reads and writes."""
import errno
import unittest

import support
from support import TIMEOUT, pattern

import rma


class SizeRules(unittest.TestCase):
    def setUp(self):
        self.owner, self.peer = support.pair()
        self.target = bytearray(pattern(1000, 1))
        self.remote = self.peer.remote(self.owner.register(self.target).advertise())

    def tearDown(self):
        self.peer.close()
        self.owner.close()

    def test_read_into_bigger_local(self):
        """The whole window lands at the start; the rest of local is untouched."""
        local = bytearray(b"\xee" * 1500)
        self.assertEqual(self.remote.read_into(local, timeout=TIMEOUT), 1000)
        self.assertEqual(local[:1000], self.target)
        self.assertEqual(local[1000:], b"\xee" * 500)

    def test_read_into_equal(self):
        local = bytearray(1000)
        self.assertEqual(self.remote.read_into(local, timeout=TIMEOUT), 1000)
        self.assertEqual(local, self.target)

    def test_read_into_smaller_local(self):
        local = bytearray(b"\xee" * 999)
        with self.assertRaises(rma.RmaError) as cm:
            self.remote.read_into(local, timeout=TIMEOUT)
        self.assertEqual(cm.exception.errno, errno.EMSGSIZE)
        self.assertEqual(local, b"\xee" * 999)

    def test_write_from_smaller_local(self):
        """The whole local lands at the start of the window; the rest stays."""
        before = bytes(self.target)
        data = pattern(600, 2)
        self.assertEqual(self.remote.write_from(data, timeout=TIMEOUT), 600)
        self.assertEqual(self.target[:600], data)
        self.assertEqual(self.target[600:], before[600:])

    def test_write_from_bigger_local(self):
        before = bytes(self.target)
        with self.assertRaises(rma.RmaError) as cm:
            self.remote.write_from(pattern(1001, 3), timeout=TIMEOUT)
        self.assertEqual(cm.exception.errno, errno.EMSGSIZE)
        self.assertEqual(self.target, before)

    def test_async_rules(self):
        """The asyncio forms apply the same rules."""
        import asyncio

        async def go():
            with self.assertRaises(rma.RmaError) as cm:
                await self.remote.read_into_async(bytearray(10), timeout=TIMEOUT)
            self.assertEqual(cm.exception.errno, errno.EMSGSIZE)
            with self.assertRaises(rma.RmaError) as cm:
                await self.remote.write_from_async(bytes(1001), timeout=TIMEOUT)
            self.assertEqual(cm.exception.errno, errno.EMSGSIZE)
            local = bytearray(b"\xee" * 1200)
            self.assertEqual(await self.remote.read_into_async(local, timeout=TIMEOUT), 1000)
            self.assertEqual(local[:1000], self.target)
            self.assertEqual(local[1000:], b"\xee" * 200)
        asyncio.run(go())


if __name__ == "__main__":
    unittest.main()

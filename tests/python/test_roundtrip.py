"""Round trips through every kind of buffer, checked byte by byte."""
import array
import mmap
import unittest

import support
from support import TIMEOUT, pattern

import rma


class RoundTrip(unittest.TestCase):
    def setUp(self):
        self.owner, self.peer = support.pair()

    def tearDown(self):
        self.peer.close()
        self.owner.close()

    def check_kind(self, make):
        """Owner memory made by make(n); the peer writes, then reads back."""
        mem = make(3 * 65536 + 17)  # several chunks' worth plus a ragged tail
        n = memoryview(mem).nbytes  # items may be wider than a byte
        buf = self.owner.register(mem)
        remote = self.peer.remote(buf.advertise())
        self.assertEqual(remote.length, n)
        data = pattern(n, 1)
        self.assertEqual(remote.write_from(data, timeout=TIMEOUT), n)
        self.assertEqual(bytes(memoryview(mem).cast("B")), data)  # landed in place
        back = make(n)
        self.assertEqual(remote.read_into(back, timeout=TIMEOUT), n)
        self.assertEqual(bytes(memoryview(back).cast("B")), data)

    def test_bytearray(self):
        self.check_kind(bytearray)

    def test_memoryview(self):
        self.check_kind(lambda n: memoryview(bytearray(n)))

    def test_mmap(self):
        self.check_kind(lambda n: mmap.mmap(-1, n))

    def test_array(self):
        # 4-byte items: the byte count, not the item count, is the size
        self.check_kind(lambda n: array.array("I", bytes(n - n % 4)))

    def test_numpy(self):
        try:
            import numpy
        except ImportError:
            self.skipTest("numpy is not installed")
        self.check_kind(lambda n: numpy.zeros(n // 8, dtype=numpy.float64))

    def test_registered_local(self):
        """A registered Buffer as the local side, both directions."""
        src = bytearray(pattern(4096, 2))
        dst = bytearray(4096)
        target = bytearray(4096)
        remote = self.peer.remote(self.owner.register(target).advertise())
        with self.peer.register(src, access=0) as s, self.peer.register(dst, access=0) as d:
            remote.write_from(s, timeout=TIMEOUT)
            self.assertEqual(target, src)
            remote.read_into(d, timeout=TIMEOUT)
        self.assertEqual(dst, src)

    def test_window(self):
        """An advertised window: offsets land inside it, nothing outside moves."""
        target = bytearray(pattern(8192, 3))
        before = bytes(target)
        buf = self.owner.register(target)
        remote = self.peer.remote(buf.advertise(offset=1000, length=500))
        self.assertEqual(remote.length, 500)
        data = pattern(500, 4)
        remote.write_from(data, timeout=TIMEOUT)
        self.assertEqual(target[1000:1500], data)
        self.assertEqual(target[:1000], before[:1000])
        self.assertEqual(target[1500:], before[1500:])

    def test_read_only_advertisement(self):
        target = bytearray(pattern(100, 5))
        buf = self.owner.register(target)
        remote = self.peer.remote(buf.advertise(access="r"))
        self.assertEqual(remote.access, rma.Access.READ)
        with self.assertRaises(rma.RmaError) as cm:
            remote.write_from(b"x" * 100, timeout=TIMEOUT)
        self.assertEqual(cm.exception.errno, 13)  # EACCES
        self.assertEqual(target, pattern(100, 5))
        out = bytearray(100)
        remote.read_into(out, timeout=TIMEOUT)
        self.assertEqual(out, target)

    def test_module(self):
        self.assertRegex(rma.version(), r"^\d+\.\d+\.\d+$")
        tcp = [t for t in rma.transports() if t.name == "tcp"]
        self.assertEqual(len(tcp), 1)
        self.assertTrue(tcp[0].available)
        self.assertIn("listen", tcp[0].options)
        with self.assertRaises(ValueError):
            rma.set_log_level("loud")
        rma.set_log_level("warn")
        self.assertTrue(rma.library_path)

    def test_route(self):
        target = self.owner.register(bytearray(64))
        remote = self.peer.remote(target.advertise())
        remote.connect(timeout=TIMEOUT)
        route = remote.route
        self.assertTrue(route.transport.startswith("tcp"), route)
        remote.disconnect(timeout=TIMEOUT)

    def test_crc32c(self):
        # the standard check value of crc32c over "123456789"
        self.assertEqual(rma.crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(rma.crc32c(b"56789", rma.crc32c(b"1234")), 0xE3069283)


if __name__ == "__main__":
    unittest.main()

"""Plain libfabric peers: a window named by (fabric address, rkey, remote
address) instead of a token.  An rma owner's ofi window, read back as its
triple and named by it, carries puts and gets; an engine with a secret
refuses such a peer.  Skips where ofi is not usable."""
import errno
import unittest

import support
from support import TIMEOUT, pattern

import rma


def ofi_usable():
    return any(t.name == "ofi" and t.available for t in rma.transports())


@unittest.skipUnless(ofi_usable(), "ofi is not usable here")
class Fabric(unittest.TestCase):
    def test_triple_round_trip(self):
        with rma.Engine(transports="tcp") as e:
            r = e.remote_from_fabric("ofi:tcp", "0a0b0c", 0x1234, 0x5000, length=4096)
            self.assertEqual(r.token, "")
            self.assertEqual(len(r), 4096)
            self.assertEqual(r.access, rma.Access.RW)
            self.assertEqual(r.fabric("ofi:tcp"), (b"\x0a\x0b\x0c", 0x1234, 0x5000))
            unknown = e.remote_from_fabric("ofi:tcp", b"\x01", 1, 0)
            self.assertEqual(unknown.length, 2**64 - 1)  # not known
            with self.assertRaises(rma.RmaError) as cm:
                e.remote_from_fabric("tcp", b"\x01", 1, 0)
            self.assertEqual(cm.exception.errno, errno.EOPNOTSUPP)

    def test_owner_window_by_its_triple(self):
        with rma.Engine(transports="ofi:tcp") as owner, \
                rma.Engine(transports="ofi:tcp") as peer:
            target = bytearray(64 * 1024)
            tok = owner.register(target).advertise(offset=4096, length=8192)
            addr, key, base = peer.remote(tok).fabric()
            r = peer.remote_from_fabric("ofi:tcp", addr.hex(), key, base, length=8192)
            data = pattern(8192, 5)
            self.assertEqual(r.write_from(data, timeout=TIMEOUT), 8192)
            self.assertEqual(bytes(target[4096:4096 + 8192]), data)
            back = bytearray(8192)
            self.assertEqual(r.read_into(back, timeout=TIMEOUT), 8192)
            self.assertEqual(bytes(back), data)
            # The window's own key: a put past it is the fabric's to refuse.
            wide = peer.remote_from_fabric("ofi:tcp", addr, key, base)
            b = peer.batch()
            b.write_from(wide, pattern(4096, 6), remote_offset=8192)
            with self.assertRaises(rma.BatchError):
                b.submit(timeout=TIMEOUT)
            self.assertEqual(bytes(target[4096 + 8192:4096 + 8192 + 4096]), bytes(4096))

    def test_secret_refuses_plain_peer(self):
        with rma.Engine(transports="tcp", secret="s3cret") as e:
            r = e.remote_from_fabric("ofi:tcp", b"\x02\x00\x01\x02", 7, 0, length=64)
            with self.assertRaises(rma.RmaError) as cm:
                r.write_from(bytes(64), timeout=TIMEOUT)
            self.assertEqual(cm.exception.errno, errno.EACCES)


if __name__ == "__main__":
    unittest.main()

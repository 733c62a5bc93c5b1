"""Errors arrive as exceptions carrying the errno and rma's message."""
import errno
import threading
import time
import unittest

import support
from support import TIMEOUT, pattern

import rma


class Errors(unittest.TestCase):
    def test_bad_token(self):
        with rma.Engine(transports="tcp") as e:
            with self.assertRaises(rma.RmaError) as cm:
                e.remote("rma1-not-a-token")
        err = cm.exception
        self.assertEqual(err.errno, errno.EBADMSG)
        self.assertEqual(err.strerror, rma.strerror(errno.EBADMSG))
        self.assertIn(err.strerror, str(err))
        self.assertIn("EBADMSG", str(err))
        self.assertIsInstance(err, OSError)

    def test_bad_config(self):
        with self.assertRaises(rma.RmaError) as cm:
            rma.Engine(transports="no-such-transport")
        self.assertEqual(cm.exception.errno, errno.ENOENT)
        with self.assertRaises(rma.RmaError) as cm:
            rma.Engine(transports="tcp", listen="not an address")
        self.assertEqual(cm.exception.errno, errno.EINVAL)

    def test_listen_refused(self):
        # A listen address that cannot be served fails the engine, also
        # with every transport (where one that cannot start is skipped).
        import os
        import socket
        os.environ.pop("RMA_LISTEN", None)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            busy = "127.0.0.1:%d" % s.getsockname()[1]
            for transports in (None, "tcp"):
                with self.assertRaises(rma.RmaError) as cm:
                    rma.Engine(listen=busy, transports=transports)
                self.assertEqual(cm.exception.errno, errno.EADDRINUSE)
                self.assertIn(busy, str(cm.exception))
        with self.assertRaises(rma.RmaError) as cm:
            rma.Engine(listen="192.0.2.1:0")  # TEST-NET-1: on no interface
        self.assertEqual(cm.exception.errno, errno.EADDRNOTAVAIL)
        self.assertIn("192.0.2.1:0", str(cm.exception))
        with rma.Engine(listen="127.0.0.1:0"):
            pass
        with rma.Engine():
            pass

    def test_closed_engine(self):
        e = rma.Engine(transports="tcp")
        e.close()
        e.close()  # twice is harmless
        with self.assertRaises(rma.RmaError) as cm:
            e.register(bytearray(10))
        self.assertEqual(cm.exception.errno, errno.ESHUTDOWN)

    def test_released_buffer_refuses_peers(self):
        owner, peer = support.pair()
        with owner, peer:
            target = bytearray(100)
            buf = owner.register(target)
            remote = peer.remote(buf.advertise())
            remote.write_from(b"a" * 100, timeout=TIMEOUT)
            buf.release()
            with self.assertRaises(rma.RmaError) as cm:
                remote.write_from(b"b" * 100, timeout=TIMEOUT)
            self.assertEqual(cm.exception.errno, errno.EKEYREJECTED)
            self.assertEqual(target, b"a" * 100)
            with self.assertRaises(rma.RmaError):
                buf.advertise()

    def test_secret_mismatch(self):
        with rma.Engine(transports="tcp", secret="right") as owner, \
                rma.Engine(transports="tcp", secret="wrong") as peer, \
                rma.Engine(transports="tcp", secret=b"right") as friend:
            target = bytearray(64)
            remote_tok = owner.register(target).advertise()
            with self.assertRaises(rma.RmaError) as cm:
                peer.remote(remote_tok).write_from(b"x" * 64, timeout=TIMEOUT)
            self.assertEqual(cm.exception.errno, errno.EACCES)
            self.assertEqual(target, bytes(64))
            friend.remote(remote_tok).write_from(b"y" * 64, timeout=TIMEOUT)
            self.assertEqual(target, b"y" * 64)

    def test_advertise_outside(self):
        with rma.Engine(transports="tcp") as e:
            buf = e.register(bytearray(100), access="r")
            with self.assertRaises(rma.RmaError) as cm:
                buf.advertise(offset=50, length=51)
            self.assertEqual(cm.exception.errno, errno.ERANGE)
            with self.assertRaises(rma.RmaError) as cm:
                buf.advertise(access="rw")  # wider than the buffer's
            self.assertEqual(cm.exception.errno, errno.EACCES)

    def test_unusable_objects(self):
        with rma.Engine(transports="tcp") as e:
            with self.assertRaisesRegex(TypeError, r"register\(\) needs a writable"):
                e.register(b"read-only bytes")
            with self.assertRaises(TypeError):
                e.register(memoryview(bytearray(100))[::2])  # not contiguous
            remote = e.remote(e.register(bytearray(10)).advertise())
            with self.assertRaises(TypeError):
                remote.read_into(b"read-only" * 2)
            with self.assertRaises(ValueError):
                remote.read_into(bytearray(10), timeout=0)

    def test_no_deadline(self):
        """NO_DEADLINE is a wait with no end for progress and close."""
        owner = rma.Engine(transports="tcp", manual_progress=True)
        peer = rma.Engine(transports="tcp")
        try:
            r = peer.remote(owner.register(bytearray(16)).advertise())
            errs = []

            def connect():
                try:
                    r.connect(timeout=TIMEOUT)
                except rma.RmaError as e:
                    errs.append(e)
            t = threading.Thread(target=connect, daemon=True)
            t.start()
            # returns at the peer's connection, the first activity
            self.assertGreaterEqual(owner.progress(rma.NO_DEADLINE), 0)
            end = time.monotonic() + TIMEOUT
            while t.is_alive() and time.monotonic() < end:
                owner.progress(0.05)
            t.join(1)
            self.assertEqual(errs, [])
            with self.assertRaises(ValueError):
                owner.progress(-1)
        finally:
            peer.close(drain=rma.NO_DEADLINE)
            owner.close(drain=rma.NO_DEADLINE)
        self.assertTrue(peer.closed and owner.closed)

    def test_timeout(self):
        """An owner that never drives progress never answers: the op ends by
        its deadline with RmaTimeoutError (a TimeoutError too)."""
        with rma.Engine(transports="tcp", manual_progress=True) as owner, \
                rma.Engine(transports="tcp", timeout=20) as peer:
            remote = peer.remote(owner.register(bytearray(100)).advertise())
            with self.assertRaises(TimeoutError) as cm:
                remote.read_into(bytearray(100), timeout=0.3)
            self.assertIsInstance(cm.exception, rma.RmaError)
            self.assertEqual(cm.exception.errno, errno.ETIMEDOUT)
            # a tiny timeout stays tiny (0 ms would mean the engine's 20 s)
            t0 = time.monotonic()
            with self.assertRaises(TimeoutError):
                remote.read_into(bytearray(100), timeout=0.0004)
            self.assertLess(time.monotonic() - t0, 5)

if __name__ == "__main__":
    unittest.main()

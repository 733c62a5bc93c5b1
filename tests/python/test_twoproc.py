"""Two processes: the owner in a child, the peer here."""
import asyncio
import errno
import os
import signal
import subprocess
import sys
import time
import unittest

import support
from support import TIMEOUT, pattern

import rma

HERE = os.path.dirname(os.path.abspath(__file__))
SIZE = 1 << 20


class Child:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, cwd=HERE)

    def line(self, prefix):
        line = self.p.stdout.readline()
        if not line.startswith(prefix):
            raise AssertionError(f"child said {line!r}, wanted {prefix!r}")
        return line[len(prefix):].strip()

    def finish(self, prefix):
        self.p.stdin.close()
        out = self.line(prefix)
        self.p.wait(timeout=30)
        self.p.stdout.close()
        return out

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()
        for f in (self.p.stdin, self.p.stdout):
            if f and not f.closed:
                f.close()

    def stop(self):
        """SIGSTOP, and wait until every thread has stopped: the signal is
        only queued when kill() returns."""
        os.kill(self.p.pid, signal.SIGSTOP)
        tasks = f"/proc/{self.p.pid}/task"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            states = []
            for t in os.listdir(tasks):
                with open(f"{tasks}/{t}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            if all(st in ("T", "t") for st in states):
                return
            time.sleep(0.01)
        raise AssertionError("the child did not stop")


class TwoProcesses(unittest.TestCase):
    def setUp(self):
        self.child = Child([sys.executable, "owner_child.py", str(SIZE), "7"])
        self.addCleanup(self.child.kill)
        self.token = self.child.line("token: ")
        self.engine = rma.Engine(transports="tcp")
        self.addCleanup(self.engine.close)
        self.remote = self.engine.remote(self.token)

    def test_round_trip(self):
        self.assertEqual(self.remote.length, SIZE)
        got = bytearray(SIZE)
        self.remote.read_into(got, timeout=TIMEOUT)
        self.assertEqual(got, pattern(SIZE, 7))
        expect = bytearray(got)
        b = self.engine.batch()
        for i, off in enumerate((0, 4096, SIZE - 100)):
            data = pattern(100, 100 + i)
            b.write_from(self.remote, data, remote_offset=off)
            expect[off:off + 100] = data
        b.submit(timeout=TIMEOUT)
        self.remote.read_into(got, timeout=TIMEOUT)
        self.assertEqual(got, expect)
        # the child's own view of its memory agrees
        self.assertEqual(self.child.finish("crc32c: "), f"{rma.crc32c(expect):08x}")

    def test_stopped_owner_times_out(self):
        self.remote.connect(timeout=TIMEOUT)
        self.child.stop()
        try:
            with self.assertRaises(rma.RmaTimeoutError):
                self.remote.read_into(bytearray(SIZE), timeout=0.5)
        finally:
            os.kill(self.child.p.pid, signal.SIGCONT)
        got = bytearray(SIZE)
        self.remote.read_into(got, timeout=TIMEOUT)  # works again
        self.assertEqual(got, pattern(SIZE, 7))

    def test_async_room_held_by_timed_out_ops(self):
        """Ops that time out while their owner is stopped keep their slots
        until it answers: a later async batch finds no room and no
        completion to come, and must still end by its deadline."""
        peer = rma.Engine(transports="tcp", cq_depth=2)
        self.addCleanup(peer.close)
        remote = peer.remote(self.token)
        remote.connect(timeout=TIMEOUT)
        self.child.stop()
        try:
            async def batch(timeout):
                b = peer.batch()
                for i in range(2):
                    b.read_into(remote, bytearray(4096), remote_offset=i * 4096,
                                length=4096)
                return await b.submit_async(timeout=timeout)

            async def go():
                for _ in range(2):  # four slots (2 * cq_depth), all held
                    with self.assertRaises(rma.BatchError):
                        await batch(0.2)
                t0 = time.monotonic()
                with self.assertRaises(rma.BatchError):
                    await asyncio.wait_for(batch(0.3), 10)
                return time.monotonic() - t0
            took = asyncio.run(go())
            self.assertLess(took, 5)
        finally:
            os.kill(self.child.p.pid, signal.SIGCONT)

    def test_dead_owner(self):
        self.remote.read_into(bytearray(SIZE), timeout=TIMEOUT)
        self.child.kill()
        with self.assertRaises(rma.RmaError) as cm:
            self.remote.write_from(b"x", timeout=TIMEOUT)
        self.assertIn(cm.exception.errno, (errno.ECONNRESET, errno.ECONNREFUSED, errno.EPIPE))


@unittest.skipUnless(os.environ.get("RMA_CLI"), "RMA_CLI (the rma tool) not given")
class AgainstTheCli(unittest.TestCase):
    """The package against `rma target`: same library, other program."""

    def test_cli_target(self):
        child = Child([os.environ["RMA_CLI"], "target", "--size", "64K", "--fill", "3",
                       "--transport", "tcp"])
        self.addCleanup(child.kill)
        with rma.Engine(transports="tcp") as e:
            remote = e.remote(child.line("advertisement: "))
            data = pattern(65536, 9)
            remote.write_from(data, timeout=TIMEOUT)
            got = bytearray(65536)
            remote.read_into(got, timeout=TIMEOUT)
            self.assertEqual(got, data)
        self.assertEqual(child.finish("crc32c: "), f"{rma.crc32c(data):08x}")


if __name__ == "__main__":
    unittest.main()

"""asyncio: ops awaited through the engine's completion fd."""
import asyncio
import errno
import unittest

import support
from support import TIMEOUT, pattern

import rma


class Async(unittest.TestCase):
    def run_with(self, coro_fn, manual=False):
        owner = rma.Engine(transports="tcp")
        peer = rma.Engine(transports="tcp", manual_progress=manual)
        try:
            return asyncio.run(coro_fn(owner, peer))
        finally:
            peer.close()
            owner.close()

    def concurrent(self, owner, peer):
        async def go(owner, peer):
            targets = [bytearray(65536) for _ in range(8)]
            remotes = [peer.remote(owner.register(t).advertise()) for t in targets]
            datas = [pattern(65536, i) for i in range(8)]
            n = await asyncio.gather(*(r.write_from_async(d, timeout=TIMEOUT)
                                       for r, d in zip(remotes, datas)))
            self.assertEqual(n, [65536] * 8)
            self.assertEqual([bytes(t) for t in targets], datas)
            outs = [bytearray(65536) for _ in range(8)]
            await asyncio.gather(*(r.read_into_async(o, timeout=TIMEOUT)
                                   for r, o in zip(remotes, outs)))
            self.assertEqual([bytes(o) for o in outs], datas)
            # the loop stayed free while ops ran: other tasks made progress
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)
            t = asyncio.create_task(ticker())
            big = bytearray(8 << 20)
            bigr = peer.remote(owner.register(big).advertise())
            await bigr.write_from_async(pattern(8 << 20, 99), timeout=TIMEOUT)
            t.cancel()
            self.assertGreater(ticks, 0)
            self.assertEqual(big, pattern(8 << 20, 99))
        return go

    def test_concurrent(self):
        self.run_with(self.concurrent(None, None))

    def test_manual_progress(self):
        """With no progress thread the event loop drives the engine."""
        self.run_with(self.concurrent(None, None), manual=True)

    def test_arm(self):
        """arm(): True once every completion is taken (the thread drives)."""
        async def go(owner, peer):
            r = peer.remote(owner.register(bytearray(4096)).advertise())
            self.assertEqual(await r.write_from_async(pattern(4096, 5), timeout=TIMEOUT), 4096)
            self.assertTrue(peer.arm())
        self.run_with(go)

    def test_timeout(self):
        async def go(owner, peer):
            silent = rma.Engine(transports="tcp", manual_progress=True)  # never served
            try:
                r = peer.remote(silent.register(bytearray(10)).advertise())
                with self.assertRaises(rma.RmaTimeoutError):
                    await r.read_into_async(bytearray(10), timeout=0.3)
            finally:
                silent.close()
        self.run_with(go)

    def test_close_cancels(self):
        """Closing the engine completes what waits with ECANCELED."""
        async def go(owner, peer):
            silent = rma.Engine(transports="tcp", manual_progress=True)
            try:
                r = peer.remote(silent.register(bytearray(10)).advertise())
                task = asyncio.create_task(r.read_into_async(bytearray(10), timeout=30))
                await asyncio.sleep(0.1)
                peer.close()
                with self.assertRaises(rma.RmaError) as cm:
                    await asyncio.wait_for(task, 5)
                self.assertEqual(cm.exception.errno, errno.ECANCELED)
            finally:
                silent.close()
        self.run_with(go)

    def test_full_queue(self):
        """More ops than the completion queue holds: the rest are posted as
        completions make room, and every one succeeds."""
        owner = rma.Engine(transports="tcp")
        peer = rma.Engine(transports="tcp", cq_depth=8)
        try:
            data = pattern(32 * 4096, 6)
            r = peer.remote(owner.register(bytearray(data)).advertise())
            outs = [bytearray(4096) for _ in range(32)]

            async def go():
                b = peer.batch()
                for i, o in enumerate(outs):
                    b.read_into(r, o, remote_offset=i * 4096, length=4096)
                return await b.submit_async(timeout=TIMEOUT)
            self.assertEqual(asyncio.run(go()), [4096] * 32)
            self.assertEqual(b"".join(outs), data)
        finally:
            peer.close()
            owner.close()

    def test_loops_in_turn(self):
        """One engine used by one asyncio.run after another."""
        with rma.Engine(transports="tcp") as e:
            target = bytearray(16)
            r = e.remote(e.register(target).advertise())
            for i in range(3):
                asyncio.run(r.write_from_async(bytes([i]) * 16, timeout=TIMEOUT))
                self.assertEqual(target, bytes([i]) * 16)


if __name__ == "__main__":
    unittest.main()

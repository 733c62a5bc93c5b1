#!/usr/bin/env python3
"""Weight sync: one trainer publishes weights, any number of readers pull them.

The trainer registers its weights once and prints a token.  Each reader
reads the whole buffer with one one-sided read; the trainer runs no code
per read.  A 16-byte header (step, crc32c of the weights) lets a reader
spot a read that raced with an update and simply read again.

    # terminal 1 (from the repository root, after `make`)
    PYTHONPATH=python python3 python/examples/weight_sync.py trainer --size 64M
    # terminals 2, 3, ...: paste the token it printed
    PYTHONPATH=python python3 python/examples/weight_sync.py reader TOKEN

Across hosts, start the trainer with --listen 0.0.0.0:7000 and set the same
RMA_SECRET (or --secret-file) on both sides.
"""
import argparse
import signal
import struct
import sys
import time

import rma

HEADER = struct.Struct("<QI4x")  # step, crc32c of the weights, padding


def size_arg(s: str) -> int:
    """Bytes, with binary suffixes: 4096, 64K, 64M, 1G."""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def read_secret(path):
    return rma.read_secret_file(path) if path else None


def trainer(args) -> int:
    mem = bytearray(HEADER.size + args.size)
    weights = memoryview(mem)[HEADER.size:]
    with rma.Engine(listen=args.listen, secret=read_secret(args.secret_file)) as e:
        buf = e.register(mem, access="r")  # readers may only read
        print("token:", buf.advertise(), flush=True)
        step = 0
        try:
            while args.steps == 0 or step < args.steps:
                step += 1
                # "training": new weights in place, then the header that vouches for them
                weights[:8] = step.to_bytes(8, "little")
                weights[-8:] = step.to_bytes(8, "little")
                mem[:HEADER.size] = HEADER.pack(step, rma.crc32c(weights))
                print(f"step {step} published", flush=True)
                time.sleep(args.interval)
            print("done; serving the last weights until Ctrl-C", flush=True)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    return 0


def reader(args) -> int:
    with rma.Engine(secret=read_secret(args.secret_file)) as e:
        remote = e.remote(args.token)
        mem = bytearray(remote.length)
        local = e.register(mem, access=0)  # registered once, reused every pull
        remote.connect(timeout=args.timeout)
        last = 0
        for _ in range(args.count):
            for attempt in range(100):
                t0 = time.perf_counter()
                remote.read_into(local, timeout=args.timeout)
                dt = time.perf_counter() - t0
                step, crc = HEADER.unpack_from(mem)
                if rma.crc32c(memoryview(mem)[HEADER.size:]) == crc:
                    break
                # the read overlapped an update: the next one will not
            else:
                print("weights never settled", file=sys.stderr)
                return 1
            note = "" if step != last else " (unchanged)"
            print(f"step {step}: {len(mem)} bytes in {dt * 1e3:.2f} ms, "
                  f"{len(mem) / dt / 1e6:.0f} MB/s, crc ok after {attempt + 1} read(s){note}")
            last = step
            time.sleep(args.interval)
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    t = sub.add_parser("trainer", help="publish weights and print the token")
    t.add_argument("--size", type=size_arg, default=16 << 20, help="weight bytes (default 16M)")
    t.add_argument("--steps", type=int, default=0, help="updates before stopping (0: forever)")
    t.add_argument("--interval", type=float, default=1.0, help="seconds between updates")
    t.add_argument("--listen", default=None, help="HOST:PORT to serve on (default 127.0.0.1:0)")
    t.add_argument("--secret-file", help="file holding the shared secret")
    r = sub.add_parser("reader", help="pull the weights")
    r.add_argument("token")
    r.add_argument("--count", type=int, default=5, help="pulls (default 5)")
    r.add_argument("--interval", type=float, default=1.0, help="seconds between pulls")
    r.add_argument("--timeout", type=float, default=10.0, help="seconds per read")
    r.add_argument("--secret-file", help="file holding the shared secret")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop like Ctrl-C
    return trainer(args) if args.role == "trainer" else reader(args)


if __name__ == "__main__":
    sys.exit(main())

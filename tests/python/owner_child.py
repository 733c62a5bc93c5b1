"""The owner side of test_twoproc: registers SIZE bytes of pattern SEED,
prints "token: T", serves until stdin ends, then prints "crc32c: HEX" of
its buffer."""
import sys

import support
from support import pattern

import rma


def main() -> int:
    size, seed = int(sys.argv[1]), int(sys.argv[2])
    mem = bytearray(pattern(size, seed))
    with rma.Engine(transports="tcp") as e:
        buf = e.register(mem)
        print("token:", buf.advertise(), flush=True)
        sys.stdin.read()  # until the parent closes our stdin
        buf.release()  # no peer writes after this: the crc is final
        print(f"crc32c: {rma.crc32c(mem):08x}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

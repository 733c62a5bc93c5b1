#!/usr/bin/env python3
"""Server-initiated KV put: the server writes a value straight into the
client's buffer.

The client registers a receive buffer that peers may only write, advertises
it, and sends the key and the token to the server over an ordinary TCP
socket.  The server looks the key up and puts the value into the client's
memory with one one-sided write, then answers with the length and crc32c.

    # terminal 1 (from the repository root, after `make`)
    PYTHONPATH=python python3 python/examples/kv_put.py server --port 7070
    # terminal 2
    PYTHONPATH=python python3 python/examples/kv_put.py client 127.0.0.1:7070 greeting
    PYTHONPATH=python python3 python/examples/kv_put.py client 127.0.0.1:7070 blob

Across hosts: the server's --host 0.0.0.0, the client's --listen 0.0.0.0:0
(the server connects to the client's rma listener), and the same
RMA_SECRET (or --secret-file) on both sides.
"""
import argparse
import json
import signal
import socket
import socketserver
import sys

import rma


def read_secret(path):
    return rma.read_secret_file(path) if path else None


def demo_store():
    blob = bytes((i * 7 + 3) & 0xFF for i in range(1 << 20))
    return {"greeting": b"hello from the kv server\n", "blob": blob}


def server(args) -> int:
    store = demo_store()
    for item in args.value or []:
        key, _, path = item.partition("=")
        with open(path, "rb") as f:
            store[key] = f.read()
    engine = rma.Engine(secret=read_secret(args.secret_file))

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                req = json.loads(line)
                value = store.get(req["key"])
                if value is None:
                    reply = {"ok": False, "error": f"no key {req['key']!r}"}
                else:
                    try:
                        remote = engine.remote(req["token"])
                        # the client's window must hold the value (size rule)
                        n = remote.write_from(value, timeout=10)
                        reply = {"ok": True, "len": n, "crc32c": rma.crc32c(value)}
                    except rma.RmaError as e:
                        reply = {"ok": False, "error": str(e)}
                print(f"{req['key']!r}: {reply}", flush=True)
                self.wfile.write((json.dumps(reply) + "\n").encode())

    socketserver.ThreadingTCPServer.allow_reuse_address = True
    with engine, socketserver.ThreadingTCPServer((args.host, args.port), Handler) as srv:
        host, port = srv.server_address[:2]
        print(f"serving {sorted(store)} on {host}:{port}", flush=True)
        try:
            srv.serve_forever()
        except KeyboardInterrupt:
            pass
    return 0


def client(args) -> int:
    host, _, port = args.server.rpartition(":")
    with rma.Engine(listen=args.listen, secret=read_secret(args.secret_file)) as e:
        mem = bytearray(args.max)
        with e.register(mem, access="w") as buf:  # the server may only write
            token = buf.advertise()
            with socket.create_connection((host, int(port)), timeout=30) as s:
                s.sendall((json.dumps({"key": args.key, "token": token}) + "\n").encode())
                reply = json.loads(s.makefile().readline())
        # released: the server can no longer touch mem
        if not reply["ok"]:
            print(f"error: {reply['error']}", file=sys.stderr)
            return 1
        value = memoryview(mem)[:reply["len"]]
        ok = rma.crc32c(value) == reply["crc32c"]
        print(f"{args.key}: {reply['len']} bytes, crc32c {'ok' if ok else 'MISMATCH'}")
        print(bytes(value[:64]))
        return 0 if ok else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server", help="hold values; put them into clients' buffers")
    s.add_argument("--host", default="127.0.0.1", help="control address (default 127.0.0.1)")
    s.add_argument("--port", type=int, default=7070, help="control port (default 7070; 0: any)")
    s.add_argument("--value", action="append", metavar="KEY=PATH", help="serve a file's bytes")
    s.add_argument("--secret-file", help="file holding the shared secret")
    c = sub.add_parser("client", help="fetch one key into a registered buffer")
    c.add_argument("server", help="the server's control HOST:PORT")
    c.add_argument("key")
    c.add_argument("--max", type=int, default=4 << 20, help="receive buffer bytes (default 4 MiB)")
    c.add_argument("--listen", default=None, help="rma listen HOST:PORT (default 127.0.0.1:0)")
    c.add_argument("--secret-file", help="file holding the shared secret")
    args = p.parse_args()
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop like Ctrl-C
    return server(args) if args.role == "server" else client(args)


if __name__ == "__main__":
    sys.exit(main())

"""The Python examples, each run as its two terminals would run it."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import support

import rma

EXAMPLES = os.path.join(support._PY, "examples")
ENV = dict(os.environ, PYTHONPATH=support._PY + os.pathsep + os.environ.get("PYTHONPATH", ""))


def start(*args):
    return subprocess.Popen([sys.executable, os.path.join(EXAMPLES, args[0]), *args[1:]],
                            stdout=subprocess.PIPE, text=True, env=ENV)


def run(*args):
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, args[0]), *args[1:]],
                          capture_output=True, text=True, env=ENV, timeout=60)


class Examples(unittest.TestCase):
    def serve(self, *args):
        p = start(*args)
        self.addCleanup(lambda: (p.terminate(), p.wait(30), p.stdout.close()))
        return p

    def test_weight_sync(self):
        trainer = self.serve("weight_sync.py", "trainer", "--size", "1M",
                             "--steps", "3", "--interval", "0.05")
        token = trainer.stdout.readline().split()[1]
        for _ in range(2):  # several readers, one after another
            r = run("weight_sync.py", "reader", token, "--count", "2", "--interval", "0.05")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.count("crc ok"), 2, r.stdout)

    def test_kv_put(self):
        server = self.serve("kv_put.py", "server", "--port", "0")
        addr = server.stdout.readline().split()[-1]
        r = run("kv_put.py", "client", addr, "greeting")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("crc32c ok", r.stdout)
        self.assertIn("hello from the kv server", r.stdout)
        r = run("kv_put.py", "client", addr, "blob", "--max", "1000")  # too small
        self.assertEqual(r.returncode, 1)
        self.assertIn("EMSGSIZE", r.stderr)

    @unittest.skipUnless(os.environ.get("RMA_CLI"), "RMA_CLI (the rma tool) not given")
    def test_secret_file_as_the_cli(self):
        """An example and the rma tool read one --secret-file alike: the
        first line, spaces kept."""
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        secret = os.path.join(tmp, "secret")
        with open(secret, "wb") as f:
            f.write(b" two words \r\nnot the secret\n")
        trainer = self.serve("weight_sync.py", "trainer", "--size", "4K", "--steps", "1",
                             "--interval", "30", "--secret-file", secret)
        token = trainer.stdout.readline().split()[1]
        r = subprocess.run([os.environ["RMA_CLI"], "get", token, "--secret-file", secret],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(rma.read_secret_file(secret), b" two words ")
        with open(secret, "wb") as f:
            f.write(b"\nsecret on line two\n")
        with self.assertRaises(ValueError):
            rma.read_secret_file(secret)


if __name__ == "__main__":
    unittest.main()

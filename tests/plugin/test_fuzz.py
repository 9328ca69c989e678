"""Garbage arguments for every procedure the daemon serves, and random
packets: each gets an error reply or a dropped connection, never a crash or
a hang, and the daemon keeps serving."""

import os
import random
import struct
import unittest

from vsnapd import CALL, REMOTE_PROGRAM, DaemonTest, RawClient, decode_error

# Every procedure number in the daemon's tables (rpc/xdr-*.c), plus neighbours.
SERVED = [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
          27, 28, 29, 33, 34, 35, 37, 51, 59, 60, 66, 110, 122, 149, 150, 151, 157, 183, 187,
          196, 200, 201, 212, 231, 234, 258, 273, 293, 316, 317, 342, 344, 350, 360, 361, 426]
ROUNDS = 6


class FuzzTest(DaemonTest):
    def test_garbage_arguments(self):
        rng = random.Random(1234)
        c = RawClient(self.daemon.sock, timeout=10)
        c.open()
        for proc in SERVED:
            for _ in range(ROUNDS):
                size = rng.choice([0, 1, 3, 4, 8, 17, 64, 300, 4096])
                body = bytes(rng.getrandbits(8) for _ in range(size))
                # Large declared lengths inside the body are the classic trap.
                if size >= 8 and rng.random() < 0.5:
                    body = struct.pack(">I", rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 1 << 24])) + body[4:]
                try:
                    status, reply = c.call(proc, body)
                except (ConnectionError, OSError):
                    c = RawClient(self.daemon.sock, timeout=10)   # dropped: fine, go on
                    c.open()
                    continue
                if status == 1:
                    code, _, message = decode_error(reply)
                    self.assertGreater(code, 0)
                    self.assertTrue(message)
        status, _ = c.call(3)
        self.assertEqual(status, 0)
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.log())

    def test_random_packets(self):
        rng = random.Random(99)
        for _ in range(200):
            c = RawClient(self.daemon.sock, timeout=5)
            header = struct.pack(">IIiIII", rng.choice([REMOTE_PROGRAM, 0x6B656570, rng.getrandbits(32)]),
                                 rng.choice([1, 2]), rng.randrange(-5, 500), rng.randrange(0, 8),
                                 rng.getrandbits(32), rng.randrange(0, 4))
            body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 64)))
            c.sock.sendall(struct.pack(">I", 4 + len(header) + len(body)) + header + body)
            c.sock.settimeout(0.2)
            try:
                c.sock.recv(65536)
            except (OSError, ConnectionError):
                pass
            c.close()
        good = RawClient(self.daemon.sock)
        good.open()
        self.assertEqual(good.call(3)[0], 0)
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)

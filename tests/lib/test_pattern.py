#!/usr/bin/python3
"""vsnap-pattern (tests/lib/pattern.c) against an independent Python
implementation, which is itself anchored to published test vectors of
splitmix64 and 64-bit FNV-1a.

usage: test_pattern.py <vsnap-pattern>
"""

import struct
import subprocess
import sys
import unittest

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
FNV_BASIS = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def mix(x):
    z = (x + GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fnv1a(data, h=FNV_BASIS):
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def region_bytes(seed, length):
    words = (length + 7) // 8
    data = b"".join(struct.pack("<Q", mix(seed ^ k)) for k in range(words))
    return data[:length]


def expected(seed, length):
    return "%016x" % fnv1a(region_bytes(seed, length))


class PythonReference(unittest.TestCase):
    """The Python side must be right before it can judge the C side."""

    def test_splitmix64_published_outputs(self):
        # splitmix64 seeded with 0 yields e220a8397b1dcdaf, 6e789e6aa1b965f4,
        # 06c45d188009454f: output n is mix((n - 1) * golden) in our terms.
        got = [mix((i * GOLDEN) & MASK) for i in range(3)]
        self.assertEqual(got, [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F])

    def test_fnv1a_published_vectors(self):
        self.assertEqual(fnv1a(b""), 0xCBF29CE484222325)
        self.assertEqual(fnv1a(b"a"), 0xAF63DC4C8601EC8C)
        self.assertEqual(fnv1a(b"foobar"), 0x85944171F73967E8)


class VsnapPattern(unittest.TestCase):
    def run_tool(self, *args):
        return subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True, timeout=60)

    def checksum(self, seed, length):
        res = self.run_tool(seed, length)
        self.assertEqual(res.returncode, 0, res.stderr)
        return res.stdout.strip()

    def test_empty_region_is_offset_basis(self):
        self.assertEqual(self.checksum(7, 0), "cbf29ce484222325")

    def test_matches_python(self):
        cases = [(0, 8), (7, 8), (7, 16), (1, 4096), (7, 1 << 20), (MASK, 64),
                 (0x0123456789ABCDEF, 520), (3, 13), (5, 1), (9, 7)]
        for seed, length in cases:
            with self.subTest(seed=seed, length=length):
                self.assertEqual(self.checksum(seed, length), expected(seed, length))

    def test_number_forms(self):
        want = expected(0x10, 1 << 20)
        self.assertEqual(self.checksum("0x10", "1M"), want)
        self.assertEqual(self.checksum("16", "1024K"), want)
        self.assertEqual(self.checksum("16", "0x100000"), want)

    def test_seed_changes_checksum(self):
        self.assertNotEqual(self.checksum(7, 4096), self.checksum(8, 4096))

    def test_file_modes(self):
        """--fill-file writes the pattern at an offset, --sum-file reads any
        region back, zeros past the end of the file."""
        import os
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "img")
            with open(path, "wb") as f:
                f.write(b"\xaa" * 8192)
            res = self.run_tool("--fill-file", path, 1024, 4096, 11)
            self.assertEqual(res.returncode, 0, res.stderr)
            data = open(path, "rb").read()
            self.assertEqual(data[:1024], b"\xaa" * 1024)
            self.assertEqual(data[1024:5120], region_bytes(11, 4096))
            self.assertEqual(data[5120:], b"\xaa" * 3072)
            res = self.run_tool("--sum-file", path, 1000, 5000)
            self.assertEqual(res.stdout.strip(), "%016x" % fnv1a(data[1000:6000]))
            res = self.run_tool("--sum-file", path, 8000, 1000)
            self.assertEqual(res.stdout.strip(), "%016x" % fnv1a(data[8000:] + bytes(808)))
            self.assertEqual(self.run_tool("--sum-file", os.path.join(d, "none"), 0, 8).returncode, 1)
            self.assertEqual(self.run_tool("--fill-file", path, 0, 8).returncode, 2)

    def test_bad_input_is_refused_with_a_message(self):
        for args in [("x", 8), (7, "8Q"), (7, "-1"), ("", 8), (7, "99999999999G"), (7,), ()]:
            with self.subTest(args=args):
                res = self.run_tool(*args)
                self.assertEqual(res.returncode, 2)
                self.assertTrue(res.stderr.strip(), "no error message")
                self.assertEqual(res.stdout, "")


if __name__ == "__main__":
    TOOL = sys.argv.pop(1)
    unittest.main(verbosity=2)

"""libvirt's disk <driver> modes through real virsh, each checked where it
acts: cache='none' as O_DIRECT in the shim's open image (/proc fdinfo
flags), writethrough and unsafe as fdatasync calls counted by strace -c
(and the shim's store_flushes), discard='unmap' as holes in the image
(SEEK_HOLE, st_blocks) or, once the disk has layers, as zeroes in the
active overlay with the image untouched, discard='ignore' as no DISCARD
offered, detect_zeroes='unmap' as plain writes of zeros that free space.
The test guest's BLK* commands drive the device; libvirt-tck's own disk
(<driver name='qemu' type='raw' cache='none'/>) is defined and started."""

import os
import re
import subprocess
import tempfile
import unittest
import xml.etree.ElementTree as ET

from disktest import DiskGuest, MIB, PATTERN, disk_domain_xml, file_sum, make_image, pattern_sum, zero_sum
from vsnapd import DaemonTest, needs_guest

import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import curl_api  # noqa: E402

O_DIRECT = 0o40000  # x86-64


def driver(attrs):
    return f"      <driver name='qemu' type='raw' {attrs}/>\n"


def open_flags(pid, path):
    """The open flags (octal, /proc/PID/fdinfo) of pid's descriptors of path."""
    flags = []
    st = os.stat(path)
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            fst = os.stat(f"/proc/{pid}/fd/{fd}")
            if (fst.st_dev, fst.st_ino) != (st.st_dev, st.st_ino):
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                flags.append(int(re.search(r"flags:\s+([0-7]+)", f.read()).group(1), 8))
        except OSError:
            pass
    return flags


def allocated(path):
    return os.stat(path).st_blocks * 512


def is_hole(path, offset, length):
    """Whether [offset, offset + length) of path holds no data (SEEK_DATA skips it)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        try:
            data = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError:  # ENXIO: no data after offset at all
            return True
        return data >= offset + length
    finally:
        os.close(fd)


class Strace:
    """strace -c -f of one process's fdatasync and fsync calls while it runs."""

    def __init__(self, pid):
        fd, self.out = tempfile.mkstemp(prefix="strace-", suffix=".txt")
        os.close(fd)
        self.proc = subprocess.Popen(["strace", "-f", "-c", "-e", "trace=fdatasync,fsync", "-o", self.out,
                                      "-p", str(pid)], stderr=subprocess.PIPE, text=True)
        # strace says "Process N attached" per thread once it traces them.
        self.proc.stderr.readline()

    def stop(self):
        """{syscall: calls}."""
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.proc.stderr.close()
        with open(self.out) as f:
            text = f.read()
        os.unlink(self.out)
        counts = {}
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 5 and words[-1] in ("fdatasync", "fsync"):
                counts[words[-1]] = int(words[3])
        return counts


@needs_guest
@unittest.skipUnless(PATTERN, "VSNAP_PATTERN is not set")
class DiskModesTest(DaemonTest):
    def setUp(self):
        super().setUp()
        self.v = self.daemon.virsh

    def image(self, name, size=16 * MIB):
        return make_image(os.path.join(self.daemon.dir, name), size)

    def start(self, name, disks):
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(disk_domain_xml(name, disks))
        self.v("define", path)
        self.v("start", name)
        g = DiskGuest(os.path.join(self.daemon.state, "run", name, "vsock.sock"))
        self.addCleanup(g.close)
        return g

    def counters(self, name, disk="vda"):
        status, body = curl_api(os.path.join(self.daemon.state, "run", name, "api.sock"), "GET", "vm.counters")
        self.assertEqual(status, 200, body)
        return body[disk]

    def test_libvirt_tck_disk_starts_with_its_image_opened_o_direct(self):
        image = self.image("tck.img")
        extra = "      <boot order='1'/>\n      <address type='virtio-mmio'/>\n"
        g = self.start("tck", [(image, "vda", driver("cache='none'") + extra)])
        disk = ET.fromstring(self.v("dumpxml", "tck").stdout).find("devices/disk")
        self.assertEqual(disk.find("driver").attrib, {"name": "qemu", "type": "raw", "cache": "none"})
        self.assertEqual(disk.find("boot").get("order"), "1")
        self.assertEqual(disk.find("address").get("type"), "virtio-mmio")
        flags = open_flags(self.daemon.shim_pids()["tck"], image)
        self.assertTrue(flags and all(f & O_DIRECT for f in flags), [oct(f) for f in flags])
        # Unaligned guest buffers go through the bounce buffer: data still lands.
        g.fill(0, 512, 3 * 4096 + 512, 9)
        self.assertEqual(g.sum(0, 512, 3 * 4096 + 512), pattern_sum(9, 3 * 4096 + 512))
        self.assertEqual(file_sum(image, 512, 3 * 4096 + 512), pattern_sum(9, 3 * 4096 + 512))

    def test_io_uring_reaches_the_ring_in_the_confined_shim(self):
        """<driver io='io_uring'/>: the daemon's confined shim gets a ring
        past its seccomp lists (the ring's own restrictions), and fills of
        several requests in flight land."""
        image = self.image("ring.img")
        g = self.start("ring", [(image, "vda", driver("cache='none' io='io_uring'"))])
        disk = ET.fromstring(self.v("dumpxml", "ring").stdout).find("devices/disk")
        self.assertEqual(disk.find("driver").get("io"), "io_uring")
        g.fill(0, 0, 8 * MIB, 4)
        self.assertEqual(g.sum(0, 0, 8 * MIB), pattern_sum(4, 8 * MIB))
        self.assertEqual(file_sum(image, 0, 8 * MIB), pattern_sum(4, 8 * MIB))
        c = self.counters("ring")
        self.assertGreater(c["ring_transfers"], 0, c)
        self.assertGreaterEqual(c["ring_max_in_flight"], 2, c)

    def test_default_cache_is_not_o_direct(self):
        image = self.image("plain.img")
        self.start("plain", [(image, "vda")])
        flags = open_flags(self.daemon.shim_pids()["plain"], image)
        self.assertTrue(flags and not any(f & O_DIRECT for f in flags), [oct(f) for f in flags])

    def writes_and_flushes(self, name, cache, writes=8):
        """fdatasync calls of the shim while the guest writes `writes` times, then once while it flushes."""
        image = self.image(name + ".img")
        g = self.start(name, [(image, "vda", driver(f"cache='{cache}'"))])
        self.assertEqual(g.cmd("PING"), "PONG")
        trace = Strace(self.daemon.shim_pids()[name])
        try:
            for i in range(writes):
                g.fill(0, i * 64 * 1024, 64 * 1024, i + 1)
            during_writes = dict(self.counters(name))
            g.flush(0)
        finally:
            syscalls = trace.stop()
        return syscalls.get("fdatasync", 0), during_writes, self.counters(name)

    def test_writethrough_flushes_every_write(self):
        calls, during, after = self.writes_and_flushes("wt", "writethrough")
        # One fdatasync per write request (BLKFILL of 64 KiB is one request or more), one for FLUSH.
        self.assertGreaterEqual(during["store_flushes"], during["write_ops"])
        self.assertGreaterEqual(during["write_ops"], 8)
        self.assertGreaterEqual(calls, during["write_ops"] + 1)
        self.assertEqual(after["store_flushes"], during["store_flushes"] + 1)

    def test_writeback_flushes_only_on_request(self):
        calls, during, after = self.writes_and_flushes("wb", "writeback")
        self.assertEqual(during["store_flushes"], 0)
        self.assertEqual(after["store_flushes"], 1)
        self.assertEqual(calls, 1)

    def test_unsafe_ignores_flush(self):
        calls, during, after = self.writes_and_flushes("un", "unsafe")
        self.assertEqual(after["flush_ops"], 1)  # the guest was answered
        self.assertEqual(after["store_flushes"], 0)
        self.assertEqual(calls, 0)

    def test_discard_unmap_punches_holes_in_the_image(self):
        image = self.image("dis.img")
        g = self.start("dis", [(image, "vda", driver("discard='unmap'"))])
        g.fill(0, 2 * MIB, 4 * MIB, 3)
        g.flush(0)
        before = allocated(image)
        self.assertFalse(is_hole(image, 2 * MIB, 4 * MIB))
        self.assertEqual(g.cmd(f"BLKDISCARD 0 {3 * MIB:#x} {2 * MIB:#x}"), "OK")
        self.assertTrue(is_hole(image, 3 * MIB, 2 * MIB))
        self.assertLessEqual(allocated(image), before - 2 * MIB)
        self.assertEqual(g.sum(0, 3 * MIB, 2 * MIB), zero_sum(2 * MIB))
        self.assertEqual(g.sum(0, 2 * MIB, MIB), pattern_sum(3, MIB))
        disk = ET.fromstring(self.v("dumpxml", "dis").stdout).find("devices/disk")
        self.assertEqual(disk.find("driver").get("discard"), "unmap")

    def test_discard_ignore_offers_no_discard(self):
        image = self.image("ign.img")
        g = self.start("ign", [(image, "vda", driver("discard='ignore'"))])
        g.fill(0, 0, 2 * MIB, 4)
        g.flush(0)
        before = allocated(image)
        self.assertEqual(g.cmd(f"BLKDISCARD 0 0 {2 * MIB:#x}"), "ERR unsupported")
        # WRITE_ZEROES with unmap writes the zeros out: nothing is freed.
        self.assertEqual(g.cmd(f"BLKZERO 0 0 {MIB:#x} 1"), "OK")
        self.assertEqual(g.sum(0, 0, MIB), zero_sum(MIB))
        self.assertFalse(is_hole(image, 0, MIB))
        self.assertGreaterEqual(allocated(image), before)

    def test_discard_unmap_on_layers_records_zeroes_in_the_overlay(self):
        image = self.image("lay.img")
        g = self.start("lay", [(image, "vda", driver("discard='unmap'"))])
        g.fill(0, 0, 4 * MIB, 5)
        g.flush(0)
        image_sum = file_sum(image, 0, 16 * MIB)
        self.v("snapshot-create-as", "lay", "s1")
        overlay = ET.fromstring(self.v("dumpxml", "lay").stdout).find("devices/disk/source").get("file")
        self.assertNotEqual(overlay, image)
        # Blocks only the base holds, and blocks the overlay holds, both discarded.
        g.fill(0, 8 * MIB, 2 * MIB, 6)
        g.flush(0)
        overlay_before = allocated(overlay)
        self.assertEqual(g.cmd(f"BLKDISCARD 0 {MIB:#x} {2 * MIB:#x}"), "OK")
        self.assertEqual(g.cmd(f"BLKDISCARD 0 {8 * MIB:#x} {2 * MIB:#x}"), "OK")
        g.flush(0)
        self.assertEqual(g.sum(0, MIB, 2 * MIB), zero_sum(2 * MIB))
        self.assertEqual(g.sum(0, 8 * MIB, 2 * MIB), zero_sum(2 * MIB))
        self.assertEqual(g.sum(0, 0, MIB), pattern_sum(5, MIB))
        self.assertLessEqual(allocated(overlay), overlay_before - 2 * MIB)
        # The base is never written.
        self.assertEqual(file_sum(image, 0, 16 * MIB), image_sum)
        # The zeroes are part of the next snapshot, and a revert brings them back.
        self.v("snapshot-create-as", "lay", "s2")
        g.fill(0, MIB, 2 * MIB, 7)
        self.v("snapshot-revert", "lay", "s2")
        g2 = DiskGuest(os.path.join(self.daemon.state, "run", "lay", "vsock.sock"))
        self.addCleanup(g2.close)
        self.assertEqual(g2.sum(0, MIB, 2 * MIB), zero_sum(2 * MIB))
        self.assertEqual(file_sum(image, 0, 16 * MIB), image_sum)

    def test_discard_without_unmap_on_layers_keeps_the_blocks_below(self):
        image = self.image("keep.img")
        g = self.start("keep", [(image, "vda")])
        g.fill(0, 0, 2 * MIB, 8)
        self.v("snapshot-create-as", "keep", "s1")
        self.assertEqual(g.cmd(f"BLKDISCARD 0 0 {2 * MIB:#x}"), "OK")
        self.assertEqual(g.sum(0, 0, 2 * MIB), pattern_sum(8, 2 * MIB))

    def test_detect_zeroes_unmap_frees_what_zeros_overwrite(self):
        image = self.image("dz.img")
        g = self.start("dz", [(image, "vda", driver("discard='unmap' detect_zeroes='unmap'"))])
        g.fill(0, 0, 4 * MIB, 2)
        g.flush(0)
        self.assertFalse(is_hole(image, 0, 4 * MIB))
        self.assertEqual(g.cmd(f"BLKFILLZ 0 {MIB:#x} {2 * MIB:#x}"), "OK")
        self.assertGreater(self.counters("dz")["zero_writes"], 0)
        self.assertTrue(is_hole(image, MIB, 2 * MIB))
        self.assertEqual(g.sum(0, MIB, 2 * MIB), zero_sum(2 * MIB))

    def test_detect_zeroes_off_writes_zeros_out(self):
        image = self.image("dzoff.img")
        g = self.start("dzoff", [(image, "vda", driver("discard='unmap' detect_zeroes='off'"))])
        g.fill(0, 0, 4 * MIB, 2)
        self.assertEqual(g.cmd(f"BLKFILLZ 0 {MIB:#x} {2 * MIB:#x}"), "OK")
        g.flush(0)
        self.assertEqual(self.counters("dzoff")["zero_writes"], 0)
        self.assertFalse(is_hole(image, MIB, 2 * MIB))
        self.assertEqual(g.sum(0, MIB, 2 * MIB), zero_sum(2 * MIB))


if __name__ == "__main__":
    unittest.main()

"""One image, one writer, through real virsh: two domains on one image, a
domain on another's base (running or shut off), a shim started by hand on
a running domain's image, and kill -9 of a holder. Every refusal names the
image and, where the daemon knows it, the domain; the domain that had the
image keeps running, its guest's checksums unchanged."""

import os
import signal
import subprocess
import unittest

from disktest import DiskGuest, MIB, PATTERN, disk_domain_xml, file_sum, make_image, pattern_sum
from vsnapd import DaemonTest, needs_guest, wait_for

SHIM = os.environ.get("VSNAP_SHIM", "")
TESTGUEST = os.environ.get("VSNAP_TESTGUEST", "")
REGION = (2 * MIB, MIB)


@needs_guest
@unittest.skipUnless(PATTERN and SHIM, "VSNAP_PATTERN or VSNAP_SHIM is not set")
class DiskLockTest(DaemonTest):
    def setUp(self):
        super().setUp()
        self.v = self.daemon.virsh
        self.image = make_image(os.path.join(self.daemon.dir, "shared.img"), 16 * MIB)
        self.hand_shims = []

    def tearDown(self):
        for p in self.hand_shims:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        super().tearDown()

    def define(self, name, extra=""):
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(disk_domain_xml(name, [(self.image, "vda", extra)]))
        self.v("define", path)

    def guest(self, name):
        return DiskGuest(os.path.join(self.daemon.state, "run", name, "vsock.sock"))

    def start_filled(self, name, seed):
        """Start name, fill REGION of its disk with seed; the guest's sum."""
        self.v("start", name)
        g = self.guest(name)
        try:
            g.fill(0, *REGION, seed)
            g.flush(0)
            return g.sum(0, *REGION)
        finally:
            g.close()

    def guest_sum(self, name):
        g = self.guest(name)
        try:
            return g.sum(0, *REGION)
        finally:
            g.close()

    def refused(self, name, *needles):
        res = self.v("start", name, check=False)
        self.assertNotEqual(res.returncode, 0, f"start {name} was not refused")
        for needle in needles:
            self.assertIn(needle, res.stderr)
        self.assertEqual(self.v("domstate", name).stdout.strip(), "shut off")
        self.assertNotIn(name, self.daemon.shim_pids())
        return res.stderr

    def hand_shim(self, *disk_options, wait=True):
        """The shim as a person would start it, on the image."""
        disk = ",".join(("path=" + self.image,) + disk_options)
        out = subprocess.PIPE if wait else subprocess.DEVNULL
        p = subprocess.Popen([SHIM, "--kernel", TESTGUEST, "--memory", "size=64M", "--disk", disk],
                             stdin=subprocess.DEVNULL, stdout=out, stderr=out, text=True)
        self.hand_shims.append(p)
        if not wait:
            return p
        out, err = p.communicate(timeout=30)
        return p.returncode, err

    def test_second_domain_on_one_image_is_refused(self):
        self.define("a")
        self.define("b")
        want = self.start_filled("a", 7)
        self.assertEqual(want, pattern_sum(7, REGION[1]))
        err = self.refused("b", f"disk image '{self.image}' of disk 'vda' is in use by domain 'a'", "writes it")
        self.assertIn("one writer", err)
        # a runs on, untouched: its guest and the file read what it wrote.
        self.assertEqual(self.v("domstate", "a").stdout.strip(), "running")
        self.assertEqual(self.guest_sum("a"), want)
        self.assertEqual(file_sum(self.image, *REGION), want)
        # A read-only disk on it is refused too while a writes it.
        self.define("c", "      <readonly/>\n")
        self.refused("c", "in use by domain 'a'")
        # Once a stops, b may have it.
        self.v("destroy", "a")
        self.assertEqual(self.start_filled("b", 8), pattern_sum(8, REGION[1]))

    def test_domain_on_another_domains_base_is_refused(self):
        self.define("a")
        self.define("b")
        want = self.start_filled("a", 3)
        self.v("snapshot-create-as", "a", "s1")   # the image is a's base now
        with open(self.image, "rb") as f:
            base = f.read()
        self.refused("b", f"disk image '{self.image}' of disk 'vda' is in use by domain 'a'", "disk layers")
        # Readers may share a base: a read-only disk beside a's layers runs.
        self.define("r", "      <readonly/>\n")
        self.v("start", "r")
        self.assertEqual(self.guest_sum("r"), want)
        self.v("destroy", "r")
        # Shut off, a still has layers over the image (its record), and no
        # lock says so: the daemon's metadata does.
        self.v("destroy", "a")
        self.refused("b", "in use by domain 'a'", "disk layers")
        with open(self.image, "rb") as f:
            self.assertEqual(f.read(), base, "the base image changed")
        # a itself continues on its chain.
        self.v("start", "a")
        self.assertEqual(self.guest_sum("a"), want)

    def test_shim_started_by_hand_on_a_running_domains_image_is_refused(self):
        self.define("a")
        want = self.start_filled("a", 5)
        pid = self.daemon.shim_pids()["a"]
        for options in ((), ("readonly=on",)):
            rc, err = self.hand_shim(*options)
            self.assertNotEqual(rc, 0, err)
            self.assertIn(f"disk image {self.image} is in use", err)
            self.assertIn(f"pid {pid}", err)
        self.assertEqual(self.guest_sum("a"), want)
        self.assertEqual(file_sum(self.image, *REGION), want)

    def test_kill_9_of_the_holder_releases_the_image(self):
        # A holder the daemon does not know: only its lock says so.
        self.define("b")
        holder = self.hand_shim(wait=False)
        wait_for(lambda: self.image_locked(), what="the hand-started shim's lock")
        self.refused("b", f"disk image '{self.image}' of disk 'vda' is locked by process {holder.pid}, "
                     "no domain of this daemon")
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        self.assertEqual(self.start_filled("b", 9), pattern_sum(9, REGION[1]))
        # And a domain's shim killed the same way leaves nothing behind.
        self.define("a")
        os.kill(self.daemon.shim_pids()["b"], signal.SIGKILL)
        wait_for(lambda: self.v("domstate", "b").stdout.strip() == "shut off", timeout=30, what="b shut off")
        self.start_filled("a", 10)
        self.assertEqual(file_sum(self.image, *REGION), pattern_sum(10, REGION[1]))

    def image_locked(self):
        with open("/proc/locks") as f:
            ino = os.stat(self.image).st_ino
            return any(line.split()[5].endswith(f":{ino}") for line in f if "OFDLCK" in line and "->" not in line)


if __name__ == "__main__":
    unittest.main()

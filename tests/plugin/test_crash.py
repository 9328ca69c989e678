"""A domain restored on demand from memory that turns out corrupt: real virsh,
the real shim, the test guest. Save images, snapshot layers whose data was
silently damaged (the daemon's seal still matches), restore --paused, and a
corrupt block among the guest's first pages. In every case the domain ends
shut off (crashed) with a Stopped Crashed event, its shim is gone, the
daemon's log says why, no job is left held (destroy, start, undefine answer
at once), and nothing waits forever: every step has a timeout.

Also: a shim that stops answering its API (SIGSTOP) is killed when a call
times out, and its domain ends shut off (crashed)."""

import os
import signal
import struct
import sys
import time

from vsnapd import DaemonTest, VirshEvents, needs_guest, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import LAYER_DATA_OFFSET, flip_byte, layer_page_offset, wait_command_port  # noqa: E402

MIB = 1 << 20
FILL = (16 * MIB, 8 * MIB)   # the guest's fill region: its working set after a restore
CMDLINE = f"vsnap.fill_mib={FILL[1] // MIB} vsnap.seed=3"
LAYER = "memory-ranges"
GONE_WITHIN_S = 20           # from the restore to the shim gone and the domain shut off
STEP_TIMEOUT_S = 30          # any one virsh command


def save_image_section(path, name):
    """Byte offset of section `name` in a save image (plugin/persist/include/persist/save-image.h)."""
    with open(path, "rb") as f:
        header = f.read(4096)
    assert header[:8] == b"VSNAPSAV", f"{path} is not a save image"
    (nsections,) = struct.unpack_from("<I", header, 16)
    for i in range(nsections):
        entry = 24 + 56 * i
        if header[entry:entry + 32].rstrip(b"\0").decode() == name:
            return struct.unpack_from("<Q", header, entry + 32)[0]
    raise AssertionError(f"{path} has no section {name}")


def corrupt_layer(path, where, start=0):
    """One flipped byte in the fill region's middle, or in the layer's first
    data block (the guest's lowest pages: page tables and code)."""
    if where == "fill":
        offset = layer_page_offset(path, FILL[0] + FILL[1] // 2, start)
        assert offset is not None, "the layer does not hold the fill region"
    else:
        offset = start + LAYER_DATA_OFFSET + 100
    flip_byte(path, offset)


def reseal(layer):
    """What a disk that flips a bit silently leaves behind: the layer's seal
    (common/snapshot: inode, size, mtime, ctime) matches the file again,
    so the daemon does not read the layer before the revert."""
    st = os.stat(layer)
    with open(layer + ".seal", "w") as f:
        f.write(f"{st.st_ino} {st.st_size} {st.st_mtime_ns // 10**9}.{st.st_mtime_ns % 10**9:09d} "
                f"{st.st_ctime_ns // 10**9}.{st.st_ctime_ns % 10**9:09d}\n")


def shims_of(daemon, name):
    """pids of the live (not zombie) shims serving domain name, found by the
    API socket on their command line: the daemon's pid file goes with them."""
    api = os.path.join(daemon.state, "run", name, "api.sock").encode()
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if b"path=" + api not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            pass
    return pids


@needs_guest
class CorruptRestoreTest(DaemonTest):
    def setUp(self):
        super().setUp()
        self.events = None

    def tearDown(self):
        if self.events:
            self.events.stop()
        super().tearDown()

    def v(self, *args, **kw):
        return self.daemon.virsh(*args, timeout=STEP_TIMEOUT_S, **kw)

    def boot(self, name, on_crash="destroy"):
        """Started, and its guest ready: it listens on its command port only
        once its fill region is written."""
        self.define(name, cmdline=CMDLINE, on_crash=on_crash)
        self.v("start", name)
        vsock = os.path.join(self.daemon.state, "run", name, "vsock.sock")
        wait_command_port(vsock, timeout=30, connect_timeout=10).close()

    def watch(self, name):
        self.events = VirshEvents(self.daemon, name, "--event", "lifecycle")

        def probe(attempt):
            self.v("suspend", name)
            self.v("resume", name)
            return "Resumed Unpaused"
        return self.events.wait_registered(probe)

    def assert_crashed(self, name, start, started="Started Restored"):
        """Started, then Stopped Crashed; shut off (crashed), the shim gone,
        the reason in the daemon's log; then destroy, start, destroy and
        undefine all answer: no job was left held."""
        end = self.events.wait_for_line(f"for domain '{name}': Stopped Crashed", after=start,
                                        timeout=GONE_WITHIN_S)
        self.assertIn(started, "\n".join(self.events.lines[start:end]))
        wait_for(lambda: self.state(name) == "shut off (crashed)", timeout=GONE_WITHIN_S,
                 what=f"{name} to read shut off (crashed)")
        wait_for(lambda: not shims_of(self.daemon, name), timeout=GONE_WITHIN_S,
                 what=f"the shim of {name} to be gone")
        self.assertIn("checksum", self.daemon.log(),
                      "the daemon's log does not say why the domain crashed")
        res = self.v("destroy", name, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("not running", res.stderr)
        self.v("start", name)
        self.assertEqual(self.state(name), "running (booted)")
        self.v("destroy", name)
        self.v("undefine", name, "--snapshots-metadata")

    def save_corrupt(self, name, where):
        image = os.path.join(self.daemon.dir, f"{name}.save")
        self.v("save", name, image)
        corrupt_layer(image, where, save_image_section(image, LAYER))
        return image

    def test_restore_of_a_corrupt_save_image(self):
        self.boot("c1")
        start = self.watch("c1")
        image = self.save_corrupt("c1", "fill")
        self.v("restore", image)
        self.assert_crashed("c1", start)

    def test_restore_paused_then_resume(self):
        self.boot("c2")
        start = self.watch("c2")
        image = self.save_corrupt("c2", "fill")
        self.v("restore", image, "--paused")
        time.sleep(0.5)
        self.assertEqual(self.state("c2"), "paused (user)", "nothing reads memory while paused")
        self.v("resume", "c2", check=False)   # the crash may end the domain under it
        self.assert_crashed("c2", start)

    def test_corrupt_first_pages(self):
        self.boot("c3")
        start = self.watch("c3")
        image = self.save_corrupt("c3", "first")
        self.v("restore", image)
        self.assert_crashed("c3", start)

    def test_snapshot_revert_to_a_silently_corrupt_layer(self):
        self.boot("c4")
        self.v("snapshot-create-as", "c4", "s1")
        start = self.watch("c4")
        layer = [os.path.join(root, LAYER) for root, _, files in
                 os.walk(os.path.join(self.daemon.state, "snapshots", "c4")) if LAYER in files][0]
        corrupt_layer(layer, "first")
        reseal(layer)
        self.v("snapshot-revert", "c4", "s1")
        self.assert_crashed("c4", start, started="Started Snapshot")

    def test_on_crash_restart_boots_afresh(self):
        self.boot("c5", on_crash="restart")
        start = self.watch("c5")
        image = self.save_corrupt("c5", "fill")
        self.v("restore", image)
        self.events.wait_for_line("for domain 'c5': Stopped Crashed", after=start,
                                  timeout=GONE_WITHIN_S)
        self.events.wait_for_line("for domain 'c5': Started Booted", after=start,
                                  timeout=GONE_WITHIN_S)
        wait_for(lambda: self.state("c5") == "running (booted)", timeout=GONE_WITHIN_S,
                 what="c5 running again")
        self.assertIn("checksum", self.daemon.log())
        self.v("destroy", "c5")
        self.v("undefine", "c5")


@needs_guest
class UnresponsiveShimTest(DaemonTest):
    def test_a_call_that_times_out_kills_the_shim(self):
        self.define("u1")
        self.daemon.virsh("start", "u1")
        pid = self.daemon.shim_pids()["u1"]
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            res = self.daemon.virsh("suspend", "u1", check=False, timeout=120)
            took = time.monotonic() - t0
            self.assertNotEqual(res.returncode, 0)
            self.assertIn("did not answer", res.stderr)
            self.assertLess(took, 90, "the call waited far beyond its timeout")
            wait_for(lambda: self.state("u1") == "shut off (crashed)", timeout=GONE_WITHIN_S,
                     what="u1 shut off (crashed)")
            wait_for(lambda: not shims_of(self.daemon, "u1"), timeout=GONE_WITHIN_S,
                     what=f"shim {pid} killed")
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.daemon.virsh("start", "u1", timeout=STEP_TIMEOUT_S)
        self.daemon.virsh("destroy", "u1", timeout=STEP_TIMEOUT_S)
        self.daemon.virsh("undefine", "u1", timeout=STEP_TIMEOUT_S)


if __name__ == "__main__":
    import unittest
    unittest.main()

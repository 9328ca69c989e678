"""Clones through libvirt (<vsnap:from domain= snapshot=/>), with real virsh,
python3-libvirt, the shim and the test guest: many clones of one snapshot at
once, each reading the snapshot's memory and disk and holding only what it
wrote; a clone's snapshot as a diff over its origin's, reverted exactly; the
origin's snapshot kept while clones descend from it; definitions that do not
fit the snapshot refused; kills mid-start leaving nothing behind."""

import os
import re
import signal
import threading
import time
import unittest
import uuid as uuidlib
import xml.etree.ElementTree as ET

import libvirt

from disktest import DiskGuest, MIB, PATTERN, disk_xml, make_image, pattern_sum, zero_sum
from vsnapd import AgentReadiness, DaemonTest, domain_xml, needs_guest, wait_for

FILL_BASE, FILL_MIB = 16 * MIB, 4
FILL = (FILL_BASE, FILL_MIB * MIB)           # the origin's boot fill (vsnap.fill_mib)
OWN = (40 * MIB, 1 * MIB)                    # what each clone writes of its own memory
BLK_ORIGIN = (0, 1 * MIB)                    # the origin's disk blocks before the snapshot
CLONES = 10


class EventLoop:
    """libvirt's default event loop on a thread, for python callbacks."""
    started = False

    @classmethod
    def ensure(cls):
        if not cls.started:
            libvirt.virEventRegisterDefaultImpl()
            threading.Thread(target=lambda: [libvirt.virEventRunDefaultImpl() for _ in iter(int, 1)],
                             daemon=True).start()
            cls.started = True


def blk_own(i):
    return (2 * MIB + i * 256 * 1024, 256 * 1024)


def from_metadata(origin, snapshot, restore_mode=None):
    mode = f"<vsnap:restore mode='{restore_mode}'/>" if restore_mode else ""
    return ("  <metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
            f"<vsnap:from domain='{origin}' snapshot='{snapshot}'/>{mode}</vsnap:vsnap></metadata>\n")


def clone_xml(name, image, origin="origin", snapshot="s1", memory_mib=64, vcpus=1, restore_mode=None):
    xml = domain_xml(name, memory_mib=memory_mib, vcpus=vcpus, cmdline=f"vsnap.fill_mib={FILL_MIB} vsnap.seed=3",
                     extra_devices=disk_xml(image, "vda"))
    return xml.replace("  <memory", from_metadata(origin, snapshot, restore_mode) + "  <memory", 1)


@needs_guest
@unittest.skipUnless(PATTERN, "VSNAP_PATTERN is not set")
class CloneBase(DaemonTest):
    """A running origin with a disk, and its snapshot s1 (memory filled,
    the disk's first MiB written)."""

    def setUp(self):
        super().setUp()
        try:
            self.make_origin()
        except BaseException:
            self.daemon.cleanup()   # tearDown does not run after a failed setUp
            raise

    def make_origin(self):
        self.v = self.daemon.virsh
        self.image = make_image(os.path.join(self.daemon.dir, "root.img"), 8 * MIB)
        origin = domain_xml("origin", cmdline=f"vsnap.fill_mib={FILL_MIB} vsnap.seed=3",
                            extra_devices=disk_xml(self.image, "vda"))
        self.v("define", self.write("origin.xml", origin))
        self.v("start", "origin")
        g = self.guest("origin")
        try:
            g.fill(0, *BLK_ORIGIN, 5)
            self.fill_sum = self.mem_sum(g, FILL)
            self.origin_genid = self.genid(g)
        finally:
            g.close()
        self.v("snapshot-create-as", "origin", "s1")

    def write(self, name, text):
        path = os.path.join(self.daemon.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def guest(self, name):
        return DiskGuest(os.path.join(self.daemon.state, "run", name, "vsock.sock"))

    @staticmethod
    def mem_sum(g, region):
        reply = g.cmd(f"SUM {region[0]:#x} {region[1]:#x}")
        assert reply.startswith("SUM "), reply
        return reply[4:]

    @staticmethod
    def genid(g):
        reply = g.cmd("VMGENID")
        assert reply.startswith("VMGENID "), reply
        return reply.split()[1]

    def clone_file(self, name, **kw):
        return self.write(name + ".xml", clone_xml(name, self.image, **kw))

    def check_origin_data(self, g, name):
        self.assertEqual(self.mem_sum(g, FILL), self.fill_sum, f"{name}: the snapshot's memory")
        self.assertEqual(g.sum(0, *BLK_ORIGIN), pattern_sum(5, BLK_ORIGIN[1]), f"{name}: the snapshot's disk")

    def error_of(self, fn):
        with self.assertRaises(libvirt.libvirtError) as cm:
            fn()
        return cm.exception

    @staticmethod
    def pss_mib(pid):
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
        return 0

    def snapshot_ini(self, dom, snap):
        root = os.path.join(self.daemon.state, "snapshots", dom)
        for entry in os.listdir(root):
            path = os.path.join(root, entry, "snapshot.ini")
            if os.path.exists(path):
                with open(path) as f:
                    text = f.read()
                if f"name={snap}\n" in text:
                    fields = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
                    fields["id"] = entry
                    return fields
        raise AssertionError(f"no snapshot {snap} of {dom}")

    def ondemand_stats(self, name):
        out = self.v("domstats", "--state", name).stdout
        return dict(line.strip().split("=", 1) for line in out.splitlines() if "vsnap.ondemand." in line)

    def snapshot_dir(self, dom, snap):
        return os.path.join(self.daemon.state, "snapshots", dom, self.snapshot_ini(dom, snap)["id"])


class CloneTest(CloneBase):
    def test_many_clones_at_once(self):
        names = [f"c{i}" for i in range(CLONES)]
        files = [self.clone_file(n) for n in names]
        failures = []

        def create(path):
            res = self.v("create", path, check=False, timeout=120)
            if res.returncode != 0:
                failures.append(res.stderr)
        threads = [threading.Thread(target=create, args=(f,)) for f in files]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - t0
        self.assertEqual(failures, [], self.daemon.log()[-3000:])
        guests = [self.guest(n) for n in names]
        try:
            for i, g in enumerate(guests):
                self.check_origin_data(g, names[i])
                g.cmd(f"FILL {OWN[0]:#x} {OWN[1]:#x} {100 + i}")
                g.fill(0, *blk_own(i), 200 + i)
            pss = sum(self.pss_mib(pid) for name, pid in self.daemon.shim_pids().items() if name in names)
            print(f"{CLONES} clones created at once through virsh in {elapsed:.2f} s; their shims' PSS "
                  f"{pss:.0f} MiB in all (64 MiB guests)")
            own = [self.mem_sum(g, OWN) for g in guests]
            self.assertEqual(len(set(own)), CLONES, f"each clone holds its own memory: {own}")
            # Each clone is a new VM generation: the guest can tell it is a copy.
            genids = {self.genid(g) for g in guests} | {self.origin_genid}
            self.assertEqual(len(genids), CLONES + 1, genids)
            # Each has its own guest CID: the live XML's, which the guest reads at the restore's reset.
            cids = [g.cmd("CID") for g in guests]
            for n, cid in zip(names, cids):
                live = ET.fromstring(self.v("dumpxml", n).stdout).find("devices/vsock/cid").get("address")
                self.assertEqual(cid, f"CID {live}", n)
            self.assertEqual(len(set(cids)), CLONES, cids)
            for i, g in enumerate(guests):
                self.assertEqual(self.mem_sum(g, OWN), own[i], f"{names[i]} after the others wrote")
                # Its own blocks hold what it wrote; the others' blocks what the image holds.
                for j in range(CLONES):
                    want = pattern_sum(200 + i, blk_own(i)[1]) if i == j else zero_sum(blk_own(j)[1])
                    self.assertEqual(g.sum(0, *blk_own(j)), want, f"{names[i]}: blocks of c{j}")
                self.check_origin_data(g, names[i])
        finally:
            for g in guests:
                g.close()
        # Clones share the snapshot's pages by default, and each has its own identity.
        xml = ET.fromstring(self.v("dumpxml", "c0").stdout)
        mode = xml.find(".//{urn:vsnap:domain:1}restore").get("mode")
        self.assertEqual(mode, "shared")
        macs_uuids = {self.v("domuuid", n).stdout.strip() for n in names}
        self.assertEqual(len(macs_uuids), CLONES)

        # A snapshot of a clone is a diff over the origin's, and reverts exactly.
        g = self.guest("c0")
        try:
            held = (self.mem_sum(g, OWN), g.sum(0, *blk_own(0)))
        finally:
            g.close()
        self.v("snapshot-create-as", "c0", "cs1")
        ini = self.snapshot_ini("c0", "cs1")
        origin_id = self.snapshot_ini("origin", "s1")["id"]
        self.assertEqual(ini.get("layer_parent"), origin_id, f"a diff on the origin's snapshot: {ini}")
        g = self.guest("c0")
        try:
            g.cmd(f"FILL {OWN[0]:#x} {OWN[1]:#x} 77")
            g.fill(0, *blk_own(0), 78)
        finally:
            g.close()
        self.v("snapshot-revert", "c0", "cs1")
        g = self.guest("c0")
        try:
            self.assertEqual((self.mem_sum(g, OWN), g.sum(0, *blk_own(0))), held)
            self.check_origin_data(g, "c0 reverted")
        finally:
            g.close()

        # The origin's snapshot stays while clones descend from it.
        res = self.v("snapshot-delete", "origin", "s1", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("c3", res.stderr)
        self.assertIn("cs1", res.stderr)
        conn = self.daemon.connect()
        try:
            err = self.error_of(lambda: conn.lookupByName("origin").snapshotLookupByName("s1").delete())
            self.assertEqual(err.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        finally:
            conn.close()
        for n in names:
            self.v("destroy", n)
        self.v("snapshot-delete", "origin", "s1")

    def test_ondemand_clones_record_through_the_daemon(self):
        """A clone restored on demand records what its guest touched; its shim
        sees the origin's snapshot read-only, so the daemon writes the record
        there, and the next clone serves it first."""
        record = os.path.join(self.snapshot_dir("origin", "s1"), "workset")
        self.v("create", self.clone_file("q1", restore_mode="ondemand"))
        wait_for(lambda: self.ondemand_stats("q1").get("vsnap.ondemand.record") == "recorded", what="q1's record")
        wait_for(lambda: os.path.exists(record), what="the record in the origin's snapshot")
        with open(os.path.join(self.daemon.state, "run", "q1", "jail.paths")) as f:
            self.assertIn(f"ro {self.snapshot_dir('origin', 's1')}\n", f.read())
        self.v("destroy", "q1")
        self.v("create", self.clone_file("q2", restore_mode="ondemand"))
        wait_for(lambda: "vsnap.ready=yes" in self.v("domstats", "--state", "q2").stdout, what="q2's readiness")
        stats = self.ondemand_stats("q2")
        self.assertEqual(stats.get("vsnap.ondemand.record"), "used", stats)
        self.assertGreater(int(stats["vsnap.ondemand.prefetch_hits"]), 0, stats)
        g = self.guest("q2")
        try:
            self.check_origin_data(g, "q2")
        finally:
            g.close()

    def test_definitions_that_do_not_fit_are_refused(self):
        conn = self.daemon.connect()
        try:
            err = self.error_of(lambda: conn.defineXML(clone_xml("m", self.image, memory_mib=32)))
            self.assertEqual(err.get_error_code(), libvirt.VIR_ERR_CONFIG_UNSUPPORTED)
            self.assertIn("32768 KiB", str(err))
            self.assertIn("65536 KiB", str(err))
            err = self.error_of(lambda: conn.defineXML(clone_xml("v", self.image, vcpus=2)))
            self.assertIn("2 vCPUs", str(err))
            err = self.error_of(lambda: conn.createXML(clone_xml("n", self.image, snapshot="nope"), 0))
            self.assertEqual(err.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN_SNAPSHOT)
            err = self.error_of(lambda: conn.defineXML(clone_xml("o", self.image, origin="nobody")))
            self.assertEqual(err.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN)
            self.assertEqual(sorted(d.name() for d in conn.listAllDomains()), ["origin"])
        finally:
            conn.close()

    def test_defined_clone_starts_from_the_snapshot_again(self):
        self.v("define", self.clone_file("p"))
        EventLoop.ensure()
        conn = self.daemon.connect()
        events = AgentReadiness(conn)
        for run in range(2):
            t0 = time.monotonic()
            self.v("start", "p")
            events.wait_after(t0, timeout=30)   # the agent-lifecycle event: READY
            g = self.guest("p")
            try:
                self.check_origin_data(g, f"p, run {run}")
                g.cmd(f"FILL {FILL[0]:#x} {MIB:#x} 9")
                g.fill(0, *BLK_ORIGIN, 6)
            finally:
                g.close()
            self.v("destroy", "p")
        # The origin's own disk and memory are untouched by the clone's writes.
        g = self.guest("origin")
        try:
            self.check_origin_data(g, "origin")
        finally:
            g.close()
        conn.close()
        res = self.v("undefine", "origin", "--snapshots-metadata", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("'p'", res.stderr)
        self.v("undefine", "p")
        self.v("snapshot-delete", "origin", "s1")

    def test_defined_clone_starts_from_its_own_state(self):
        """A persistent clone's start: its managed save if it has one, else its
        current snapshot, else the origin's snapshot."""
        self.v("define", self.clone_file("p"))
        self.v("start", "p")
        g = self.guest("p")
        try:
            g.cmd(f"FILL {OWN[0]:#x} {OWN[1]:#x} 31")
            g.fill(0, *blk_own(0), 32)
            held = (self.mem_sum(g, OWN), g.sum(0, *blk_own(0)))
        finally:
            g.close()
        self.v("managedsave", "p")
        self.v("start", "p")
        self.assertEqual(self.held(("p")), held, "from its managed save")
        self.v("snapshot-create-as", "p", "ps")
        g = self.guest("p")
        try:
            g.cmd(f"FILL {OWN[0]:#x} {OWN[1]:#x} 33")
        finally:
            g.close()
        self.v("destroy", "p")
        self.v("start", "p")
        self.assertEqual(self.held("p"), held, "from its current snapshot")
        self.v("destroy", "p")
        self.v("snapshot-delete", "p", "ps")
        self.v("start", "p")
        g = self.guest("p")
        try:
            self.check_origin_data(g, "p from the origin again")
            self.assertEqual(g.sum(0, *blk_own(0)), zero_sum(blk_own(0)[1]))
        finally:
            g.close()
        self.v("destroy", "p")
        self.v("undefine", "p")
        self.v("snapshot-delete", "origin", "s1")

    def held(self, name):
        g = self.guest(name)
        try:
            return (self.mem_sum(g, OWN), g.sum(0, *blk_own(0)))
        finally:
            g.close()


if __name__ == "__main__":
    unittest.main()

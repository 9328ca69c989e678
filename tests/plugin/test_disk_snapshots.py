"""Disks across snapshots, save/restore and managed save, through real virsh:
the disk the guest's memory was using comes back with it, a definition whose
disks are not the saved ones is refused naming the disk, and everything the
guest reads is checked against the host's own checksums."""

import hashlib
import os
import unittest
import xml.etree.ElementTree as ET

import libvirt

from disktest import DiskGuest, MIB, PATTERN, disk_domain_xml, file_sum, make_image, pattern_sum, zero_sum
from vsnapd import DaemonTest, needs_guest


@needs_guest
@unittest.skipUnless(PATTERN, "VSNAP_PATTERN is not set")
class DiskSnapshotBase(DaemonTest):
    def setUp(self):
        super().setUp()
        self.v = self.daemon.virsh

    def path(self, name):
        return os.path.join(self.daemon.dir, name)

    def image(self, name, size=16 * MIB):
        return make_image(self.path(name), size)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def define_disks(self, name, disks, **kw):
        self.v("define", self.write(name + ".xml", disk_domain_xml(name, disks, **kw)))

    def guest(self, name):
        return DiskGuest(os.path.join(self.daemon.state, "run", name, "vsock.sock"))

    def with_guest(self, name, fn):
        g = self.guest(name)
        try:
            return fn(g)
        finally:
            g.close()

    def live_disks(self, name):
        return ET.fromstring(self.v("dumpxml", name).stdout).findall("devices/disk")

    def snapshot_dir(self, dom, snap):
        """The directory of snapshot snap (its snapshot.ini names it)."""
        root = os.path.join(self.daemon.state, "snapshots", dom)
        for entry in os.listdir(root):
            ini = os.path.join(root, entry, "snapshot.ini")
            if os.path.exists(ini):
                with open(ini) as f:
                    if f"name={snap}\n" in f.read():
                        return os.path.join(root, entry)
        raise AssertionError(f"no directory for snapshot {snap} of {dom}")

    def live_chain(self, name, target="vda"):
        """The files of a disk in the live XML, top first: <source>, then
        each <backingStore>'s down to the image."""
        for disk in self.live_disks(name):
            if disk.find("target").get("dev") != target:
                continue
            files, node = [], disk
            while node is not None and node.find("source") is not None:
                source = node.find("source")
                files.append(source.get("file") or source.get("dev"))
                node = node.find("backingStore")
            return files
        raise AssertionError(f"{name} has no disk {target}")


class SavedDisksTest(DiskSnapshotBase):
    def test_definitions_with_other_disks_are_refused(self):
        root, other = self.image("root.img"), self.image("other.img")
        self.define_disks("s", [(root, "vda")])
        self.v("start", "s")
        self.with_guest("s", lambda g: g.fill(0, MIB, MIB, 21))
        saved_xml = self.v("dumpxml", "--inactive", "s").stdout
        swapped = self.write("swapped.xml", saved_xml.replace(root, other))
        renamed = self.write("renamed.xml", saved_xml.replace("dev='vda'", "dev='vdb'"))

        # save --xml with another image: refused, the domain runs on.
        res = self.v("save", "s", self.path("refused.save"), "--xml", swapped, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(f"disk 'vda' has image '{root}' in the saved domain, '{other}'", res.stderr)
        self.assertEqual(self.state("s"), "running (booted)")
        self.assertFalse(os.path.exists(self.path("refused.save")))

        image = self.path("s.save")
        self.v("save", "s", image)
        conn = self.daemon.connect()
        for xml_path, named in ((swapped, f"'{other}'"), (renamed, "disk 'vda' of the saved domain is 'vdb'")):
            with self.subTest(xml=os.path.basename(xml_path)):
                with open(xml_path) as f:
                    text = f.read()
                with self.assertRaises(libvirt.libvirtError) as ctx:
                    conn.saveImageDefineXML(image, text, 0)
                self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_CONFIG_UNSUPPORTED)
                self.assertIn(named, ctx.exception.get_error_message())
                res = self.v("restore", image, "--xml", xml_path, check=False)
                self.assertNotEqual(res.returncode, 0)
                self.assertIn(named, res.stderr)
                self.assertEqual(self.state("s"), "shut off (saved)")
                self.assertEqual(self.daemon.shim_pids(), {})
        conn.close()
        self.assertIn(f"<source file='{root}'/>", self.v("save-image-dumpxml", image).stdout)

        # A definition swapped between save and restore (define with another
        # image) does not change what the restore runs on: the saved disks.
        self.v("define", swapped)
        self.v("restore", image)
        self.assertEqual(self.live_chain("s")[-1], root)
        self.assertEqual(self.with_guest("s", lambda g: g.sum(0, MIB, MIB)), pattern_sum(21, MIB))
        # The persistent definition is the one defined, for the next boot.
        self.assertIn(other, self.v("dumpxml", "--inactive", "s").stdout)


class SnapshotXmlTest(DiskSnapshotBase):
    def snapshot_disks(self, dom, snap):
        root = ET.fromstring(self.v("snapshot-dumpxml", dom, snap).stdout)
        return [(d.get("name"), d.get("snapshot"), d.find("source").get("file") if d.find("source") is not None
                 else None) for d in root.findall("disks/disk")]

    def test_snapshot_xml_disks_and_refusals(self):
        root, data = self.image("root.img"), self.image("data.img")
        self.define_disks("x", [(root, "vda"), (data, "vdb", "      <readonly/>\n")])
        self.v("start", "x")
        self.v("snapshot-create-as", "x", "s1")
        disks = self.snapshot_disks("x", "s1")
        self.assertEqual([d[0] for d in disks], ["vda", "vdb"])
        s1_dir = self.snapshot_dir("x", "s1")
        self.assertEqual(disks[0], ("vda", "external", os.path.join(s1_dir, "disk-vda.layer")))
        self.assertTrue(os.path.isfile(disks[0][2]))
        self.assertEqual(disks[1], ("vdb", "no", None))
        # What snapshot-create-as --diskspec asks is checked against the domain.
        for spec, text in (("vdb,snapshot=external", "a read-only disk is in no snapshot"),
                           ("vda,snapshot=no", "holds every writable disk"),
                           (f"vda,snapshot=external,file={self.path('mine.qcow2')}", "a file cannot be given"),
                           ("vdz", "the domain has no such disk")):
            with self.subTest(spec=spec):
                res = self.v("snapshot-create-as", "x", "bad", "--diskspec", spec, check=False)
                self.assertNotEqual(res.returncode, 0)
                self.assertIn(text, res.stderr)
        self.v("snapshot-create-as", "x", "s2", "--diskspec", "vda,snapshot=external",
               "--diskspec", "vdb,snapshot=no")
        self.assertEqual(self.v("snapshot-list", "x", "--name").stdout.split(), ["s1", "s2"])
        # snapshot-edit sends the XML back: the description may change, the disks may not.
        xml = self.v("snapshot-dumpxml", "x", "s1").stdout
        edited = self.write("edited.xml", xml.replace("<name>s1</name>",
                                                      "<name>s1</name>\n  <description>d</description>"))
        self.v("snapshot-create", "x", edited, "--redefine")
        self.assertIn("<description>d</description>", self.v("snapshot-dumpxml", "x", "s1").stdout)
        changed = self.write("changed.xml", xml.replace("<disk name='vdb' snapshot='no'/>",
                                                        "<disk name='vdb' snapshot='external'/>"))
        res = self.v("snapshot-create", "x", changed, "--redefine", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("the disks of a vsnap snapshot are part of its saved state", res.stderr)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


REGION_A = (0, MIB)
REGION_B = (4 * MIB, 2 * MIB)


class DiskContentsTest(DiskSnapshotBase):
    """The issue's contents test, in each memory restore mode: fill, s1,
    overwrite part, s2, overwrite again; revert s1, s2, s1; every region's
    BLKSUM is the host's computation. The image's bytes never change once it
    is the base of the chain."""

    def expect(self, name, want):
        def check(g):
            for (offset, length), seed in want.items():
                self.assertEqual(g.sum(0, offset, length),
                                 pattern_sum(seed, length) if seed is not None else zero_sum(length),
                                 f"{name}: region {offset:#x}+{length:#x}")
        self.with_guest(name, check)

    def run_mode(self, mode):
        name = f"c-{mode}"
        root = self.image(f"{name}.img", 32 * MIB)
        self.define_disks(name, [(root, "vda")], restore_mode=mode)
        self.v("start", name)
        self.with_guest(name, lambda g: (g.fill(0, *REGION_A, 1), g.fill(0, *REGION_B, 2), g.flush(0)))
        self.v("snapshot-create-as", name, "s1")
        base = sha256(root)
        self.assertEqual(file_sum(root, *REGION_A), pattern_sum(1, REGION_A[1]))
        self.with_guest(name, lambda g: g.fill(0, *REGION_A, 3))
        self.v("snapshot-create-as", name, "s2")
        # The live XML shows the chain as libvirt shows external snapshots.
        chain = self.live_chain(name)
        self.assertEqual(chain[1:], [os.path.join(self.snapshot_dir(name, "s2"), "disk-vda.layer"),
                                     os.path.join(self.snapshot_dir(name, "s1"), "disk-vda.layer"), root])
        self.assertTrue(chain[0].startswith(os.path.join(self.daemon.state, "disks", name) + "/"), chain)
        # domblk* name the disk by its overlay too; the capacity is the image's.
        info = self.v("domblkinfo", name, chain[0]).stdout
        self.assertIn(f"Capacity:       {32 * MIB}", info)
        self.assertIn(f"block.0.path={chain[0]}", self.v("domstats", "--block", name).stdout)
        self.with_guest(name, lambda g: (g.fill(0, *REGION_B, 4), g.fill(0, *REGION_A, 5)))
        self.expect(name, {REGION_A: 5, REGION_B: 4})
        for snap, want in (("s1", {REGION_A: 1, REGION_B: 2}), ("s2", {REGION_A: 3, REGION_B: 2}),
                           ("s1", {REGION_A: 1, REGION_B: 2})):
            self.v("snapshot-revert", name, snap)
            self.expect(name, want)
            # Writes after a revert are the new overlay's only.
            self.with_guest(name, lambda g: (g.fill(0, *REGION_B, 9), g.flush(0)))
        self.assertEqual(sha256(root), base, "the base image changed after the first snapshot")
        self.v("destroy", name)
        # A boot after the stop (destroy: no flush but the guest's) continues
        # where the guest left its disk.
        self.v("start", name)
        self.expect(name, {REGION_A: 1, REGION_B: 9})
        self.assertEqual(sha256(root), base)

    def test_ondemand(self):
        self.run_mode("ondemand")

    def test_merge(self):
        self.run_mode("merge")

    def test_copy(self):
        self.run_mode("copy")

    def test_two_runs_from_one_snapshot_keep_their_own_writes(self):
        root = self.image("clone.img")
        self.define_disks("k", [(root, "vda")])
        self.v("start", "k")
        self.with_guest("k", lambda g: g.fill(0, *REGION_A, 1))
        self.v("snapshot-create-as", "k", "s1")
        base = sha256(root)
        for seed, snap in ((11, "x"), (12, "y")):
            self.v("snapshot-revert", "k", "s1")
            self.expect("k", {REGION_A: 1})
            self.with_guest("k", lambda g: g.fill(0, *REGION_A, seed))
            self.v("snapshot-create-as", "k", snap)
        # Each run from s1 wrote into an overlay of its own: neither sees the other's.
        for snap, seed in (("x", 11), ("y", 12), ("x", 11)):
            self.v("snapshot-revert", "k", snap)
            self.expect("k", {REGION_A: seed})
        self.assertEqual(sha256(root), base)
        # Overlays of runs no chain continues are removed.
        overlays = [f for f in os.listdir(os.path.join(self.daemon.state, "disks", "k")) if f.endswith(".overlay")]
        self.assertEqual(len(overlays), 1, overlays)

    def test_save_restore_and_managed_save_carry_the_disk(self):
        root = self.image("saved.img")
        self.define_disks("v", [(root, "vda")])
        self.v("start", "v")
        self.with_guest("v", lambda g: g.fill(0, *REGION_A, 1))
        image = self.path("v.save")
        self.v("save", "v", image)
        base = sha256(root)
        # A boot instead of the restore continues on the disk as saved.
        self.v("start", "v")
        self.expect("v", {REGION_A: 1})
        self.with_guest("v", lambda g: (g.fill(0, *REGION_A, 2), g.flush(0)))
        self.v("destroy", "v")
        # The restore goes back to the disk as it was at the save.
        self.v("restore", image)
        self.expect("v", {REGION_A: 1})
        self.with_guest("v", lambda g: g.fill(0, *REGION_B, 3))
        self.v("managedsave", "v")
        self.v("start", "v")
        self.assertEqual(self.state("v"), "running (restored)")
        self.expect("v", {REGION_A: 1, REGION_B: 3})
        self.with_guest("v", lambda g: g.fill(0, *REGION_B, 4))
        self.v("managedsave", "v")
        # Without its memory, the managed save's disk is still the disk.
        self.v("managedsave-remove", "v")
        self.v("start", "v")
        self.assertEqual(self.state("v"), "running (booted)")
        self.expect("v", {REGION_A: 1, REGION_B: 4})
        self.assertEqual(sha256(root), base)


class ChainTest(DiskSnapshotBase):
    def test_64_snapshots_inner_deletes_and_the_last_delete_folds_into_the_image(self):
        root = self.image("long.img", 32 * MIB)
        self.define_disks("l", [(root, "vda")])
        self.v("start", "l")
        block = 64 * 1024
        g = self.guest("l")
        try:
            for i in range(64):
                g.fill(0, i * block, block, 100 + i)       # a region of its own
                g.fill(0, 16 * MIB, block, 1000 + i)       # and one every snapshot rewrites
                self.v("snapshot-create-as", "l", f"s{i}")
        finally:
            g.close()
        base = sha256(root)

        def want(upto):
            regions = {(i * block, block): 100 + i for i in range(upto + 1)}
            regions.update({(i * block, block): None for i in range(upto + 1, 64)})
            regions[(16 * MIB, block)] = 1000 + upto
            return regions

        # Inner deletes fold each disk layer into its child.
        for i in range(1, 63, 2):
            self.v("snapshot-delete", "l", f"s{i}")
        for i in range(1, 63, 2):
            self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "snapshots", "l", f"s{i}")))
        self.assertEqual(len(self.live_chain("l")), 2 + 32 + 1)   # overlay, 33 layers, image... minus folded
        for snap in ("s62", "s2", "s63", "s0"):
            self.v("snapshot-revert", "l", snap)
            self.expect_regions("l", want(int(snap[1:])))
        self.v("snapshot-revert", "l", "s63")
        self.with_guest("l", lambda g: (g.fill(0, 20 * MIB, block, 7), g.flush(0)))
        # Running on the last layer, it goes as QEMU lets it: nothing above
        # holds its blocks, so its layer stays in the chain, kept in the
        # domain's disk directory (test_disk_kept.py).
        self.v("snapshot-delete", "l", "s63")
        disk_dir = os.path.join(self.daemon.state, "disks", "l")
        self.assertEqual(len([e for e in os.listdir(disk_dir) if e.startswith("kept-")]), 1)
        self.v("destroy", "l")
        for i in list(range(0, 61, 2)):
            self.v("snapshot-delete", "l", f"s{i}")
        self.assertEqual(sha256(root), base, "the image changed before the last snapshot went")
        self.v("snapshot-delete", "l", "s62")
        # The image now holds exactly what the guest last wrote.
        final = want(63)
        final[(20 * MIB, block)] = 7
        for (offset, length), seed in final.items():
            self.assertEqual(file_sum(root, offset, length),
                             pattern_sum(seed, length) if seed is not None else zero_sum(length))
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "disks", "l")))
        self.v("start", "l")
        self.assertEqual(self.live_chain("l"), [root])
        self.expect_regions("l", final)

    def expect_regions(self, name, want):
        def check(g):
            for (offset, length), seed in want.items():
                self.assertEqual(g.sum(0, offset, length),
                                 pattern_sum(seed, length) if seed is not None else zero_sum(length),
                                 f"{name}: region {offset:#x}+{length:#x}")
        self.with_guest(name, check)


if __name__ == "__main__":
    unittest.main()

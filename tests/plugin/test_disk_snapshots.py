"""Disks across snapshots, save/restore and managed save, through real virsh:
the disk the guest's memory was using comes back with it, a definition whose
disks are not the saved ones is refused naming the disk, and everything the
guest reads is checked against the host's own checksums."""

import os
import shutil
import unittest
import xml.etree.ElementTree as ET

import libvirt

from disktest import DiskGuest, MIB, PATTERN, disk_domain_xml, file_sum, make_image, pattern_sum
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
        self.assertEqual([d.find("source").get("file") for d in self.live_disks("s")], [root])
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


if __name__ == "__main__":
    unittest.main()

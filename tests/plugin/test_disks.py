"""Disks through real virsh and python3-libvirt: definitions with <disk>
round trip through define/dumpxml, refusals carry libvirt's codes, and a
start whose disk image is missing or unusable is refused naming the path,
with nothing started. (Booting a domain with a disk needs the shim's
virtio-blk device; these tests do not start one.)"""

import os
import unittest
import xml.etree.ElementTree as ET

import libvirt

from vsnapd import DaemonTest, domain_xml


def disk_xml(path, target, kind="file", extra=""):
    attribute = "dev" if kind == "block" else "file"
    return (f"    <disk type='{kind}' device='disk'>\n"
            f"      <source {attribute}='{path}'/>\n"
            f"      <target dev='{target}' bus='virtio'/>\n"
            f"{extra}    </disk>\n")


class DisksTest(DaemonTest):
    def image(self, name, size=1 << 20):
        path = os.path.join(self.daemon.dir, name)
        with open(path, "wb") as f:
            f.truncate(size)
        return path

    def write_xml(self, name, xml):
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(xml)
        return path

    def test_define_dumpxml_round_trip(self):
        root, data = self.image("root.img"), self.image("data.img")
        devices = (disk_xml(root, "vdb")
                   + disk_xml(data, "vda", extra="      <readonly/>\n      <serial>d1</serial>\n"))
        self.daemon.virsh("define", self.write_xml("d", domain_xml("d", extra_devices=devices)))
        xml1 = self.daemon.virsh("dumpxml", "d").stdout
        disks = ET.fromstring(xml1).findall("devices/disk")
        # Definition order (the guest's order), every default written out.
        self.assertEqual([d.find("target").get("dev") for d in disks], ["vdb", "vda"])
        self.assertEqual([d.find("source").get("file") for d in disks], [root, data])
        for d in disks:
            self.assertEqual(d.get("device"), "disk")
            self.assertEqual(d.find("driver").attrib, {"name": "vsnap", "type": "raw"})
            self.assertEqual(d.find("target").get("bus"), "virtio")
            self.assertIsNone(d.find("backingStore"))
        self.assertIsNone(disks[0].find("readonly"))
        self.assertIsNotNone(disks[1].find("readonly"))
        self.assertEqual(disks[1].find("serial").text, "d1")
        # What dumpxml gave defines the same domain again, and a restarted
        # daemon gives the same text back.
        self.daemon.virsh("define", self.write_xml("again", xml1))
        self.assertEqual(self.daemon.virsh("dumpxml", "d").stdout, xml1)
        self.daemon.stop()
        self.daemon.start()
        self.assertEqual(self.daemon.virsh("dumpxml", "d").stdout, xml1)

    def test_block_disk_and_qemu_driver_name(self):
        scratch = self.image("scratch.img")
        devices = (disk_xml("/dev/disk/by-id/none-such", "vda", kind="block")
                   + disk_xml(scratch, "vdb").replace(
                       "<source", "<driver name='qemu' type='raw'/>\n      <source"))
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("b", extra_devices=devices))
        disks = ET.fromstring(dom.XMLDesc(0)).findall("devices/disk")
        self.assertEqual(disks[0].get("type"), "block")
        self.assertEqual(disks[0].find("source").get("dev"), "/dev/disk/by-id/none-such")
        self.assertEqual(disks[1].find("driver").get("name"), "qemu")
        conn.close()

    def test_refusals_define_nothing(self):
        image = self.image("x.img")
        cases = [
            (disk_xml(image, "vda").replace("<source", "<driver name='qemu' type='qcow2'/>\n      <source"),
             libvirt.VIR_ERR_CONFIG_UNSUPPORTED, "qemu-img convert -O raw"),
            (disk_xml(image, "vda").replace("device='disk'", "device='cdrom'"),
             libvirt.VIR_ERR_CONFIG_UNSUPPORTED, "<disk device='cdrom'>"),
            (disk_xml(image, "sda").replace("bus='virtio'", "bus='sata'"),
             libvirt.VIR_ERR_CONFIG_UNSUPPORTED, "<target dev='sda' bus='sata'> is not supported by vsnap"),
            ("<disk type='network' device='disk'><source protocol='nbd' name='x'/>"
             "<target dev='vda'/></disk>",
             libvirt.VIR_ERR_CONFIG_UNSUPPORTED, "<disk type='network'>"),
            (disk_xml(image, "vda", extra="      <shareable/>\n"),
             libvirt.VIR_ERR_CONFIG_UNSUPPORTED, "<shareable/>"),
            (disk_xml(image, "vda") + disk_xml(self.image("y.img"), "vda"),
             libvirt.VIR_ERR_XML_ERROR, "disk target 'vda' is used twice"),
            # A chain is vsnap's to make: a definition names the image.
            (disk_xml("/run/overlay", "vda", extra="      <backingStore type='file'><format type='raw'/>"
                      f"<source file='{image}'/><backingStore/></backingStore>\n"),
             libvirt.VIR_ERR_CONFIG_UNSUPPORTED, "a <backingStore> chain is not supported in a definition"),
        ]
        conn = self.daemon.connect()
        for devices, code, text in cases:
            with self.subTest(text=text):
                with self.assertRaises(libvirt.libvirtError) as ctx:
                    conn.defineXML(domain_xml("r", extra_devices=devices))
                self.assertEqual(ctx.exception.get_error_code(), code)
                self.assertIn(text, ctx.exception.get_error_message())
        self.assertEqual(conn.listDefinedDomains(), [])
        conn.close()
        res = self.daemon.virsh("define", self.write_xml("q", domain_xml("q", extra_devices=cases[0][0])),
                                check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("qemu-img convert -O raw", res.stderr)

    def assert_nothing_started(self, name):
        self.assertEqual(self.state(name), "shut off (unknown)")   # never ran
        self.assertEqual(self.daemon.shim_pids(), {})
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "run", name)))

    def test_start_with_missing_image_is_refused(self):
        missing = os.path.join(self.daemon.dir, "missing.img")
        devices = disk_xml(self.image("present.img"), "vda") + disk_xml(missing, "vdb")
        self.daemon.virsh("define", self.write_xml("m", domain_xml("m", extra_devices=devices)))
        res = self.daemon.virsh("start", "m", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(f"Cannot access storage file '{missing}' of disk 'vdb'", res.stderr)
        self.assertIn("No such file or directory", res.stderr)
        self.assert_nothing_started("m")

        conn = self.daemon.connect()
        dom = conn.lookupByName("m")
        with self.assertRaises(libvirt.libvirtError) as ctx:
            dom.create()
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_SYSTEM_ERROR)
        self.assertIn(missing, ctx.exception.get_error_message())
        self.assertEqual(dom.state(), [libvirt.VIR_DOMAIN_SHUTOFF, libvirt.VIR_DOMAIN_SHUTOFF_UNKNOWN])
        # A transient domain that cannot start does not stay behind.
        with self.assertRaises(libvirt.libvirtError) as ctx:
            conn.createXML(domain_xml("t", extra_devices=disk_xml(missing, "vda")), 0)
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_SYSTEM_ERROR)
        self.assertEqual(sorted(d.name() for d in conn.listAllDomains()), ["m"])
        conn.close()
        self.assert_nothing_started("m")

    def test_start_with_unusable_image_is_refused(self):
        # A directory where the image should be: not openable for writing.
        directory = os.path.join(self.daemon.dir, "not-an-image")
        os.mkdir(directory)
        self.daemon.virsh("define", self.write_xml("u", domain_xml("u", extra_devices=disk_xml(directory, "vda"))))
        res = self.daemon.virsh("start", "u", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(f"Cannot access storage file '{directory}' of disk 'vda'", res.stderr)
        self.assertIn("Is a directory", res.stderr)
        self.assert_nothing_started("u")
        # A regular file given as a block device.
        image = self.image("plain.img")
        self.daemon.virsh("define", self.write_xml(
            "v", domain_xml("v", extra_devices=disk_xml(image, "vda", kind="block"))))
        res = self.daemon.virsh("start", "v", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn(f"'{image}' is not a block device", res.stderr)
        self.assert_nothing_started("v")


if __name__ == "__main__":
    unittest.main()

"""Definitions: define, list, dominfo, dumpxml round trip, undefine, and bad
input, which must get a clear libvirt error and leave everything as it was."""

import os
import unittest
import uuid as uuidlib
import xml.etree.ElementTree as ET

import libvirt

from vsnapd import DaemonTest, domain_xml, needs_guest


class DomainsTest(DaemonTest):
    def test_define_list_info_dumpxml_undefine_virsh(self):
        uuid = str(uuidlib.uuid4())
        self.define("d1", uuid=uuid, memory_mib=96, vcpus=2)
        self.assertEqual(self.daemon.virsh("list", "--all", "--name").stdout.split(), ["d1"])
        self.assertEqual(self.daemon.virsh("list", "--name").stdout.split(), [])
        info = dict(l.split(":", 1) for l in self.daemon.virsh("dominfo", "d1").stdout.splitlines()
                    if ":" in l)
        self.assertEqual(info["UUID"].strip(), uuid)
        self.assertEqual(info["State"].strip(), "shut off")
        self.assertEqual(info["CPU(s)"].strip(), "2")
        self.assertEqual(info["Max memory"].strip(), "98304 KiB")
        self.assertEqual(info["Persistent"].strip(), "yes")
        xml1 = self.daemon.virsh("dumpxml", "d1").stdout
        self.assertEqual(ET.fromstring(xml1).find("uuid").text, uuid)
        # Round trip: define what dumpxml gave, get the same text back.
        path = os.path.join(self.daemon.dir, "again.xml")
        with open(path, "w") as f:
            f.write(xml1)
        self.daemon.virsh("define", path)
        self.assertEqual(self.daemon.virsh("dumpxml", "d1").stdout, xml1)
        # The definition is on disk and survives a daemon restart.
        self.assertTrue(os.path.exists(os.path.join(self.daemon.state, "domains", "d1.xml")))
        self.daemon.stop()
        self.daemon.start()
        self.assertEqual(self.daemon.virsh("dumpxml", "d1").stdout, xml1)
        self.daemon.virsh("undefine", "d1")
        self.assertEqual(self.daemon.virsh("list", "--all", "--name").stdout.split(), [])
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "domains", "d1.xml")))

    def test_python_definitions(self):
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("p1"))
        self.assertEqual(dom.name(), "p1")
        self.assertEqual(dom.ID(), -1)
        self.assertFalse(dom.isActive())
        self.assertTrue(dom.isPersistent())
        self.assertEqual(dom.state(), [libvirt.VIR_DOMAIN_SHUTOFF, 0])
        self.assertEqual(dom.OSType(), "hvm")
        self.assertEqual(dom.maxMemory(), 64 * 1024)
        self.assertEqual(dom.vcpusFlags(libvirt.VIR_DOMAIN_AFFECT_CONFIG), 1)
        self.assertEqual(dom.hasManagedSaveImage(), 0)
        self.assertEqual(dom.snapshotNum(), 0)
        self.assertEqual(conn.lookupByUUIDString(dom.UUIDString()).name(), "p1")
        self.assertEqual(conn.listDefinedDomains(), ["p1"])
        self.assertFalse(dom.autostart())
        dom.setAutostart(1)
        self.assertTrue(conn.lookupByName("p1").autostart())
        self.assertEqual([d.name() for d in conn.listAllDomains(
            libvirt.VIR_CONNECT_LIST_DOMAINS_AUTOSTART)], ["p1"])
        dom.setAutostart(0)
        ET.fromstring(dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        dom.undefine()
        with self.assertRaises(libvirt.libvirtError) as ctx:
            conn.lookupByName("p1")
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN)
        conn.close()

    def test_large_messages(self):
        # A 3 MiB description: the call and its reply span many 64 KiB
        # buffers, both ways.
        text = ("vsnap " * 524288)[:3 << 20]
        xml = domain_xml("big").replace("<memory", f"<description>{text}</description>\n  <memory", 1)
        conn = self.daemon.connect()
        dom = conn.defineXML(xml)
        self.assertIn(text, dom.XMLDesc(0))
        dom.undefine()
        conn.close()

    def assert_refused(self, xml, code, contains=None):
        conn = self.daemon.connect()
        before = sorted(d.name() for d in conn.listAllDomains())
        with self.assertRaises(libvirt.libvirtError) as ctx:
            conn.defineXML(xml)
        self.assertEqual(ctx.exception.get_error_code(), code, ctx.exception.get_error_message())
        if contains:
            self.assertIn(contains, ctx.exception.get_error_message())
        self.assertEqual(sorted(d.name() for d in conn.listAllDomains()), before)
        conn.close()
        return ctx.exception.get_error_message()

    def test_bad_input(self):
        uuid = str(uuidlib.uuid4())
        self.define("keep", uuid=uuid)
        keep_xml = self.daemon.virsh("dumpxml", "keep").stdout
        self.assert_refused("<domain type='kvm'><name>x</name", libvirt.VIR_ERR_XML_ERROR)
        bad = domain_xml("x").replace("<devices>", "<devices>\n    <sound model='ich9'/>")
        msg = self.assert_refused(bad, libvirt.VIR_ERR_CONFIG_UNSUPPORTED)
        self.assertIn("sound", msg)
        # Same name, another uuid; same uuid, another name.
        self.assert_refused(domain_xml("keep"), libvirt.VIR_ERR_OPERATION_FAILED, "keep")
        self.assert_refused(domain_xml("other", uuid=uuid), libvirt.VIR_ERR_OPERATION_FAILED,
                            uuid)
        self.assertEqual(self.daemon.virsh("dumpxml", "keep").stdout, keep_xml)
        # Undefine of an unknown domain: virsh says so, exit status non-zero.
        res = self.daemon.virsh("undefine", "nosuch", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("nosuch", res.stderr)
        conn = self.daemon.connect()
        with self.assertRaises(libvirt.libvirtError) as ctx:
            conn.lookupByUUIDString(str(uuidlib.uuid4()))
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN)
        conn.close()

    def test_missing_kernel_fails_to_start(self):
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("nokernel", kernel="/nonexistent/kernel"))
        with self.assertRaises(libvirt.libvirtError) as ctx:
            dom.create()
        self.assertIn("/nonexistent/kernel", ctx.exception.get_error_message())
        self.assertEqual(dom.state()[0], libvirt.VIR_DOMAIN_SHUTOFF)
        self.assertEqual(self.daemon.shim_pids(), {})
        dom.undefine()
        conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

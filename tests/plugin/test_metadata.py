"""virsh desc and metadata, setvcpus and screenshot, through real virsh and
python3-libvirt: titles, descriptions and other namespaces' <metadata>
elements are kept in the definition (a daemon restart keeps them), split
between the live and the persistent definition as libvirt's QEMU driver
splits them, and in a snapshot's XML; setvcpus --config changes the next
boot and --live is refused naming why, as is a screenshot."""

import threading
import unittest
import xml.etree.ElementTree as ET

import libvirt



def run_event_loop():
    while True:
        libvirt.virEventRunDefaultImpl()


# libvirt's event loop for python callbacks, on a thread, before any connection.
libvirt.virEventRegisterDefaultImpl()
threading.Thread(target=run_event_loop, daemon=True).start()

from vsnapd import DaemonTest, needs_guest

URI = "http://example.com/vsnap-test/1"
LIVE = libvirt.VIR_DOMAIN_AFFECT_LIVE
CONFIG = libvirt.VIR_DOMAIN_AFFECT_CONFIG
DESC = libvirt.VIR_DOMAIN_METADATA_DESCRIPTION
TITLE = libvirt.VIR_DOMAIN_METADATA_TITLE
ELEMENT = libvirt.VIR_DOMAIN_METADATA_ELEMENT


class MetadataTest(DaemonTest):
    def v(self, *args, **kw):
        return self.daemon.virsh(*args, **kw)

    def error_of(self, call):
        with self.assertRaises(libvirt.libvirtError) as e:
            call()
        return e.exception

    def test_desc_and_title_survive_daemon_restart(self):
        self.define("d")
        self.assertEqual(self.v("desc", "d").stdout.strip(), "")
        self.v("desc", "d", "--new-desc", "a web server\nsecond line")
        self.v("desc", "d", "--title", "--new-desc", "Web <1> & co")
        self.daemon.stop()
        self.daemon.start()
        self.assertEqual(self.v("desc", "d").stdout.strip(), "a web server\nsecond line")
        self.assertEqual(self.v("desc", "d", "--title").stdout.strip(), "Web <1> & co")
        self.assertIn("Web <1> & co", self.v("list", "--all", "--title").stdout)
        root = ET.fromstring(self.v("dumpxml", "d").stdout)
        self.assertEqual(root.findtext("title"), "Web <1> & co")
        dom = self.daemon.connect().lookupByName("d")
        self.assertEqual(dom.metadata(DESC, None, 0), "a web server\nsecond line")
        dom.setMetadata(TITLE, "", None, None, 0)    # empty removes it
        e = self.error_of(lambda: dom.metadata(TITLE, None, 0))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN_METADATA)
        e = self.error_of(lambda: dom.setMetadata(TITLE, "two\nlines", None, None, 0))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)

    def test_metadata_change_events(self):
        self.define("ev")
        conn = self.daemon.connect()
        seen = []
        done = threading.Event()

        def on_change(conn, dom, mtype, nsuri, opaque):
            seen.append((dom.name(), mtype, nsuri))
            if len(seen) == 2:
                done.set()

        cb = conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_METADATA_CHANGE, on_change, None)
        dom = conn.lookupByName("ev")
        dom.setMetadata(TITLE, "t", None, None, 0)
        dom.setMetadata(ELEMENT, "<x/>", "k", URI, 0)
        self.assertTrue(done.wait(10), f"events seen: {seen}")
        self.assertEqual(seen, [("ev", TITLE, None), ("ev", ELEMENT, URI)])
        conn.domainEventDeregisterAny(cb)

    def test_elements_by_namespace(self):
        self.define("e")
        self.v("metadata", "e", URI, "--key", "t", "--set", "<app role='web'><port>80</port></app>")
        got = ET.fromstring(self.v("metadata", "e", URI).stdout)
        self.assertEqual((got.tag, got.get("role"), got.findtext("port")), ("app", "web", "80"))
        dom = self.daemon.connect().lookupByName("e")
        dom.setMetadata(ELEMENT, "<other>x</other>", "o", "urn:other", 0)
        dom.setMetadata(ELEMENT, "<app role='db'/>", "t", URI, 0)    # replaces the first
        self.daemon.stop()
        self.daemon.start()
        dom = self.daemon.connect().lookupByName("e")
        self.assertEqual(ET.fromstring(dom.metadata(ELEMENT, URI, 0)).get("role"), "db")
        self.assertIn(">x<", dom.metadata(ELEMENT, "urn:other", 0))
        metadata = ET.fromstring(dom.XMLDesc(0)).find("metadata")
        self.assertEqual(len(metadata.findall(f"{{{URI}}}app")), 1)
        self.v("metadata", "e", URI, "--remove")
        e = self.error_of(lambda: dom.metadata(ELEMENT, URI, 0))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN_METADATA)
        # vsnap's own namespace is the configuration, not free metadata.
        e = self.error_of(lambda: dom.setMetadata(ELEMENT, "<vsnap/>", "v", "urn:vsnap:domain:1", 0))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)
        e = self.error_of(lambda: dom.setMetadata(ELEMENT, "<unclosed>", "t", URI, 0))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_XML_ERROR)
        # Read-only clients read, never write.
        ro = self.daemon.connect(readonly=True).lookupByName("e")
        self.assertIn(">x<", ro.metadata(ELEMENT, "urn:other", 0))
        e = self.error_of(lambda: ro.setMetadata(DESC, "no", None, None, 0))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_OPERATION_DENIED)

    @needs_guest
    def test_live_and_config_of_a_running_domain(self):
        self.define("l")
        self.v("desc", "l", "--new-desc", "before")
        self.v("start", "l")
        dom = self.daemon.connect().lookupByName("l")
        dom.setMetadata(DESC, "live only", None, None, LIVE)
        dom.setMetadata(TITLE, "next boot", None, None, CONFIG)
        dom.setMetadata(ELEMENT, "<both/>", "t", URI, LIVE | CONFIG)
        self.assertEqual(dom.metadata(DESC, None, 0), "live only")
        self.assertEqual(dom.metadata(DESC, None, CONFIG), "before")
        self.assertEqual(dom.metadata(TITLE, None, CONFIG), "next boot")
        e = self.error_of(lambda: dom.metadata(TITLE, None, LIVE))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN_METADATA)
        # A snapshot keeps the live definition's metadata.
        self.v("snapshot-create-as", "l", "s1")
        snap = ET.fromstring(self.v("snapshot-dumpxml", "l", "s1").stdout)
        self.assertEqual(snap.findtext("domain/description"), "live only")
        self.assertIsNotNone(snap.find(f"domain/metadata/{{{URI}}}both"))
        # A daemon restart reattaches with both definitions.
        self.daemon.stop()
        self.daemon.start()
        dom = self.daemon.connect().lookupByName("l")
        self.assertEqual(dom.metadata(DESC, None, LIVE), "live only")
        self.assertEqual(dom.metadata(DESC, None, CONFIG), "before")
        self.v("destroy", "l")
        self.assertEqual(dom.metadata(DESC, None, 0), "before")
        self.assertEqual(dom.metadata(TITLE, None, 0), "next boot")
        self.assertIn("<both", dom.metadata(ELEMENT, URI, 0))
        e = self.error_of(lambda: dom.setMetadata(DESC, "x", None, None, LIVE))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        self.v("undefine", "l", "--snapshots-metadata")

    @needs_guest
    def test_transient_domain_has_only_a_live_definition(self):
        path = self.define("t")
        self.v("undefine", "t")
        self.v("create", path)
        dom = self.daemon.connect().lookupByName("t")
        dom.setMetadata(DESC, "live", None, None, 0)
        self.assertEqual(dom.metadata(DESC, None, 0), "live")
        for flags in (CONFIG, LIVE | CONFIG):
            e = self.error_of(lambda: dom.setMetadata(DESC, "x", None, None, flags))
            self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        e = self.error_of(lambda: dom.setVcpusFlags(2, CONFIG))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        self.v("destroy", "t")

    @needs_guest
    def test_setvcpus_config_changes_next_boot(self):
        self.define("c")
        self.v("setvcpus", "c", "2", "--config")
        self.assertIn("2", self.v("vcpucount", "c", "--config", "--current").stdout)
        self.v("start", "c")
        res = self.v("setvcpus", "c", "1", "--live", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("no CPU hotplug", res.stderr)
        dom = self.daemon.connect().lookupByName("c")
        e = self.error_of(lambda: dom.setVcpusFlags(1, 0))     # current = live while running
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_OPERATION_UNSUPPORTED)
        e = self.error_of(lambda: dom.setVcpus(1))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_OPERATION_UNSUPPORTED)
        self.assertEqual(dom.info()[3], 2)
        self.assertEqual(len(dom.vcpus()[0]), 2)    # two vCPU threads in the shim
        dom.setVcpusFlags(1, CONFIG)                # the next boot
        self.assertEqual(dom.info()[3], 2)
        self.v("destroy", "c")
        self.assertEqual(dom.info()[3], 1)
        e = self.error_of(lambda: dom.setVcpusFlags(65, CONFIG))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)
        e = self.error_of(lambda: dom.setVcpusFlags(0, CONFIG))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)

    @needs_guest
    def test_screenshot_refused_naming_why(self):
        self.define("s")
        self.v("start", "s")
        res = self.v("screenshot", "s", self.daemon.dir + "/s.ppm", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("no display device", res.stderr)
        conn = self.daemon.connect()
        stream = conn.newStream(0)
        e = self.error_of(lambda: conn.lookupByName("s").screenshot(stream, 0, 0))
        self.assertEqual(e.get_error_code(), libvirt.VIR_ERR_OPERATION_UNSUPPORTED)
        self.v("destroy", "s")


if __name__ == "__main__":
    unittest.main()

"""Connection-level information through virsh and python3-libvirt."""

import unittest
import xml.etree.ElementTree as ET

import libvirt

from vsnapd import DaemonTest


class ConnectTest(DaemonTest):
    def test_virsh_version_hostname(self):
        out = self.daemon.virsh("version").stdout
        self.assertIn("Running hypervisor: vsnap", out)
        host = self.daemon.virsh("hostname").stdout.strip()
        with open("/proc/sys/kernel/hostname") as f:
            self.assertEqual(host, f.read().strip())

    def test_virsh_nodeinfo(self):
        out = self.daemon.virsh("nodeinfo").stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        import os
        self.assertEqual(int(fields["CPU(s)"]), os.sysconf("SC_NPROCESSORS_ONLN"))
        mem_kib = int(fields["Memory size"].split()[0])
        with open("/proc/meminfo") as f:
            total = int(f.readline().split()[1])
        self.assertEqual(mem_kib, total)

    def test_capabilities_parse(self):
        root = ET.fromstring(self.daemon.virsh("capabilities").stdout)
        self.assertEqual(root.tag, "capabilities")
        self.assertIsNotNone(root.find("host/cpu/arch"))
        self.assertEqual(root.find("guest/os_type").text, "hvm")

    def test_capabilities_memory_is_nodeinfo_memory(self):
        # A host with one NUMA cell: the cell holds all of MemTotal, the same
        # number nodeinfo gives (a node's own meminfo may count half of it).
        cells = ET.fromstring(self.daemon.virsh("capabilities").stdout).findall(
            "host/topology/cells/cell")
        with open("/proc/meminfo") as f:
            total = [int(l.split()[1]) for l in f if l.startswith("MemTotal:")][0]
        out = self.daemon.virsh("nodeinfo").stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        self.assertEqual(int(fields["Memory size"].split()[0]), total)
        memory = [int(c.find("memory").text) for c in cells]
        if len(cells) == 1:
            self.assertEqual(cells[0].find("memory").get("unit"), "KiB")
            self.assertEqual(memory, [total])
        else:
            self.assertLessEqual(sum(memory), total)

    def test_domain_capabilities(self):
        root = ET.fromstring(self.daemon.virsh("domcapabilities").stdout)
        self.assertEqual(root.tag, "domainCapabilities")
        res = self.daemon.virsh("domcapabilities", "--arch", "aarch64", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("aarch64", res.stderr)

    def test_python(self):
        conn = self.daemon.connect()
        self.assertEqual(conn.getType(), "vsnap")
        self.assertGreater(conn.getVersion(), 0)
        self.assertEqual(conn.getLibVersion(), libvirt.getVersion())
        self.assertTrue(conn.getHostname())
        info = conn.getInfo()
        self.assertEqual(info[0], "x86_64")
        self.assertEqual(conn.isSecure(), 1)
        self.assertTrue(conn.isAlive())
        # The shim's limit, the same number the domain capabilities give.
        maxv = ET.fromstring(conn.getDomainCapabilities()).find("vcpu").get("max")
        self.assertEqual(conn.getMaxVcpus(None), int(maxv))
        with open("/proc/meminfo") as f:
            avail = [int(l.split()[1]) for l in f if l.startswith("MemAvailable:")][0] * 1024
        self.assertLess(abs(conn.getFreeMemory() - avail), 512 << 20)
        self.assertEqual(conn.listAllDomains(), [])
        self.assertEqual(conn.numOfDomains(), 0)
        self.assertEqual(conn.numOfDefinedDomains(), 0)
        ET.fromstring(conn.getCapabilities())
        conn.close()

    def test_two_clients(self):
        a, b = self.daemon.connect(), self.daemon.connect()
        from vsnapd import domain_xml
        a.defineXML(domain_xml("shared"))
        self.assertEqual([d.name() for d in b.listAllDomains()], ["shared"])
        b.lookupByName("shared").undefine()
        self.assertEqual(a.listAllDomains(), [])
        a.close()
        b.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

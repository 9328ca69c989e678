"""Stock guests through real virsh and python3-libvirt: <sysinfo> and
<smbios mode='sysinfo'/> reach the shim's SMBIOS config, <rng> gives the
guest virtio-rng, and systemd's READY=1 on the notify port
(<vsnap:notify>) is libvirt's agent-lifecycle 'connected', as the agent's
READY is. The daemon hands the guest the vmm.notify_socket credential on
its command line and as an SMBIOS OEM string unless told not to."""

import os
import sys
import threading
import unittest
import uuid as uuidlib

import libvirt

from vsnapd import DaemonTest, domain_xml, needs_guest, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import curl_api, wait_command_port  # noqa: E402

SERIAL = "ds=nocloud;s=http://192.0.2.1:8000/seed/"


def stock_xml(name, uuid, notify="<vsnap:notify port='1026'/>", cmdline="vsnap.fill_mib=1",
              rng="<rng model='virtio'><backend model='random'>/dev/urandom</backend></rng>"):
    """The test guest's domain with sysinfo, smbios mode, rng and a notify port."""
    xml = domain_xml(name, uuid=uuid, cmdline=cmdline, extra_devices=f"    {rng}\n")
    sysinfo = f"""  <sysinfo type='smbios'>
    <system>
      <entry name='manufacturer'>Example Corp</entry>
      <entry name='product'>Stock Test</entry>
      <entry name='serial'>{SERIAL}</entry>
      <entry name='uuid'>{uuid}</entry>
    </system>
    <oemStrings><entry>io.systemd.credential:system.hostname={name}</entry></oemStrings>
  </sysinfo>
"""
    metadata = (f"  <metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>{notify}</vsnap:vsnap>"
                "</metadata>\n")
    xml = xml.replace("  <memory", metadata + sysinfo + "  <memory", 1)
    return xml.replace("</cmdline>\n", "</cmdline>\n    <smbios mode='sysinfo'/>\n", 1)


@needs_guest
class StockGuestTest(DaemonTest):
    def define_xml(self, name, xml):
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(xml)
        self.daemon.virsh("define", path)

    def shim_info(self, name):
        sock = os.path.join(self.daemon.state, "run", name, "api.sock")
        status, info = curl_api(sock, "GET", "vm.info")
        self.assertEqual(status, 200, info)
        return info

    def guest_command_port(self, name):
        path = os.path.join(self.daemon.state, "run", name, "vsock.sock")
        return wait_command_port(path, timeout=30)

    def test_sysinfo_rng_and_notify_reach_the_shim(self):
        uuid = str(uuidlib.uuid4())
        self.define_xml("s1", stock_xml("s1", uuid))
        dumped = self.daemon.virsh("dumpxml", "s1").stdout
        for needle in ("<sysinfo type='smbios'>", f"<entry name='serial'>{SERIAL}</entry>",
                       "<entry>io.systemd.credential:system.hostname=s1</entry>", "<smbios mode='sysinfo'/>",
                       "<backend model='random'>/dev/urandom</backend>", "<vsnap:notify port='1026'/>"):
            self.assertIn(needle, dumped)
        self.daemon.virsh("start", "s1")
        config = self.shim_info("s1")["config"]
        platform = config["platform"]
        self.assertEqual(platform["uuid"], uuid)
        self.assertEqual(platform["serial_number"], SERIAL)
        self.assertEqual(platform["system"]["manufacturer"], "Example Corp")
        self.assertEqual(platform["system"]["product_name"], "Stock Test")
        self.assertEqual(platform["oem_strings"], ["io.systemd.credential:system.hostname=s1",
                                                   "io.systemd.credential:vmm.notify_socket=vsock-stream:2:1026"])
        self.assertIn("systemd.set_credential=vmm.notify_socket:vsock-stream:2:1026", config["payload"]["cmdline"])
        self.assertEqual(config["vsock"]["notify_port"], 1026)
        self.assertEqual(config["rng"]["src"], "/dev/urandom")
        # The guest reads virtio-rng: two reads differ.
        conn = self.guest_command_port("s1")
        try:
            first, second = conn.cmd("RNG 256"), conn.cmd("RNG 256")
        finally:
            conn.close()
        self.assertRegex(first, r"^RNG 256 [0-9a-f]{16}$")
        self.assertRegex(second, r"^RNG 256 [0-9a-f]{16}$")
        self.assertNotEqual(first, second)
        self.daemon.virsh("destroy", "s1")

    def test_credential_off(self):
        uuid = str(uuidlib.uuid4())
        self.define_xml("s2", stock_xml("s2", uuid, notify="<vsnap:notify credential='off'/>", rng=""))
        self.assertIn("<vsnap:notify port='1025' credential='off'/>", self.daemon.virsh("dumpxml", "s2").stdout)
        self.daemon.virsh("start", "s2")
        config = self.shim_info("s2")["config"]
        self.assertNotIn("vmm.notify_socket", config["payload"]["cmdline"])
        self.assertEqual(config["platform"]["oem_strings"], ["io.systemd.credential:system.hostname=s2"])
        self.assertIsNone(config["rng"])
        self.daemon.virsh("destroy", "s2")

    def test_refused_by_name(self):
        uuid = str(uuidlib.uuid4())
        path = os.path.join(self.daemon.dir, "bad.xml")
        with open(path, "w") as f:
            f.write(stock_xml("bad", uuid).replace(f"<entry name='uuid'>{uuid}", f"<entry name='uuid'>{uuidlib.uuid4()}"))
        res = self.daemon.virsh("define", path, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("UUID mismatch between <uuid> and <sysinfo>", res.stderr)
        with open(path, "w") as f:
            f.write(stock_xml("bad", uuid, rng="<rng model='virtio'><backend model='egd' type='tcp'/></rng>"))
        res = self.daemon.virsh("define", path, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("<backend", res.stderr)

    def test_notify_ready_is_agent_connected(self):
        """The test guest in notify mode speaks sd_notify, never the agent's
        READY: libvirt still sees the agent connect, and the shim says why."""
        events = []
        loop_running = threading.Event()

        def run_loop():
            loop_running.set()
            while not self.stop_loop:
                libvirt.virEventRunDefaultImpl()

        self.stop_loop = False
        libvirt.virEventRegisterDefaultImpl()
        conn = self.daemon.connect()
        thread = threading.Thread(target=run_loop, daemon=True)
        thread.start()
        loop_running.wait(5)
        try:
            conn.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
                                        lambda c, d, state, reason, o: events.append((d.name(), state)), None)
            uuid = str(uuidlib.uuid4())
            self.define_xml("n1", stock_xml("n1", uuid, notify="<vsnap:notify port='1025'/>",
                                            cmdline="vsnap.fill_mib=1 vsnap.notify_port=1025"))
            conn.lookupByName("n1").create()
            wait_for(lambda: ("n1", libvirt.VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED) in events,
                     timeout=60, what="agent-lifecycle connected from systemd's READY=1")
            vsnap = self.shim_info("n1")["vsnap"]
            self.assertEqual(vsnap["source"], "notify")
            self.assertIn(vsnap["notify"]["status"], ("vsnap-testguest ready", "vsnap-testguest serving"))
            conn.lookupByName("n1").destroy()
        finally:
            self.stop_loop = True
            conn.close()


if __name__ == "__main__":
    unittest.main()

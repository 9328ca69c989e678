"""virtvsnapd's network interfaces end to end: real virsh and python3-libvirt,
a daemon running inside a network namespace the test makes (its taps exist
only there), the test guest's virtio-net driver answering ICMP and UDP echo
from a peer namespace, and libvirt's own network driver in namespaces of its
own for type='network'. Every namespace, bridge and veth pair is made and
removed by the test; nothing routes out."""

import os
import shutil
import signal
import socket
import sys
import tempfile
import time
import unittest
import uuid as uuidlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netd  # noqa: E402
from netd import Lan, Netns, interface_xml, netinfo, ping, udp_echo  # noqa: E402
import vsnapd  # noqa: E402
from vsnapd import domain_xml, needs_guest, wait_for  # noqa: E402

GUEST_IP = "10.77.0.2"
PEER_IP = "10.77.0.1"


@needs_guest
class NetdTest(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("network namespaces and taps need root")
        self.closers = []
        self.host = self.closing(Netns("h"))
        self.daemon = None

    def closing(self, thing):
        self.closers.append(thing.close)
        return thing

    def tearDown(self):
        if self.daemon:
            self.daemon.cleanup()
        for close in reversed(self.closers):
            close()

    def start_daemon(self, prefix=None, network_uri=None, storage_uri=None):
        extra = ()
        if network_uri or storage_uri:
            conf = os.path.join(self.host_dir(), "virtvsnapd.conf")
            with open(conf, "w") as f:
                f.write("[daemon]\n" + (f"network_uri={network_uri}\n" if network_uri else "") +
                        (f"storage_uri={storage_uri}\n" if storage_uri else ""))
            extra = ("--config", conf)
        self.daemon = netd.daemon_in(prefix or ("ip", "netns", "exec", self.host.name), extra)
        return self.daemon

    def host_dir(self):
        if not hasattr(self, "_dir"):
            self._dir = tempfile.mkdtemp(prefix="vsnapd-netd-")
            self.closers.append(lambda: shutil.rmtree(self._dir, ignore_errors=True))
        return self._dir

    def virsh(self, *args, check=True):
        return self.daemon.virsh(*args, check=check)

    def define(self, name, interfaces, ip=GUEST_IP, uuid=None):
        xml = domain_xml(name, uuid=uuid, cmdline=netd.guest_cmdline(ip), extra_devices="".join(interfaces))
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(xml)
        self.virsh("define", path)
        return path

    def taps(self):
        return {n: i for n, i in self.host.links().items() if n.startswith(("vnet", "vsntap"))}

    def mac_of(self, name):
        out = self.virsh("domiflist", name).stdout.split()
        return out[4]

    # ---- the interface types ----

    def test_bridge_reaches_peer(self):
        """type='bridge': a tap on the host bridge; ping and UDP echo from a
        peer namespace on it; domiflist, domifstat, domstats --interface; the
        tap goes with the domain."""
        lan = self.closing(Lan(self.host, "br0", PEER_IP))
        self.start_daemon()
        self.define("b1", [interface_xml("bridge", source="br0")])
        mac = self.mac_of("b1")
        self.assertTrue(mac.startswith("52:54:00:"), mac)
        self.assertIn(f"<mac address='{mac}'/>", self.virsh("dumpxml", "--inactive", "b1").stdout)
        self.virsh("start", "b1")
        self.assertTrue(ping(lan.peer, GUEST_IP), "the guest does not answer ping on the bridge")
        payloads = [os.urandom(n) for n in (1, 100, 1400)]
        self.assertTrue(udp_echo(lan.peer, GUEST_IP, payloads), "no UDP echo")
        iflist = self.virsh("domiflist", "b1").stdout.split()
        self.assertEqual(iflist[:5], ["vnet0", "bridge", "br0", "virtio", mac])
        taps = self.taps()
        self.assertIn("vnet0", taps)
        master = self.host.ip("-o", "link", "show", "vnet0").stdout
        self.assertIn("master br0", master)
        stats = dict(line.split()[1:] for line in self.virsh("domifstat", "b1", "vnet0").stdout.splitlines()
                     if line.strip())
        self.assertGreaterEqual(int(stats["rx_packets"]), 4)   # what the guest received: pings, echoes
        self.assertGreaterEqual(int(stats["tx_packets"]), 4)
        # The interface named by its MAC, as libvirt allows (the guest keeps
        # announcing itself, so the counters only grow meanwhile).
        by_mac = dict(line.split()[1:] for line in self.virsh("domifstat", "b1", mac).stdout.splitlines()
                      if line.strip())
        self.assertGreaterEqual(int(by_mac["rx_packets"]), int(stats["rx_packets"]))
        dstats = self.virsh("domstats", "--interface", "b1").stdout
        self.assertIn("net.count=1", dstats)
        self.assertIn("net.0.name=vnet0", dstats)
        info = netinfo(self.daemon, "b1")
        self.assertEqual((info["mac"], info["link"]), (mac, 1))
        self.virsh("destroy", "b1")
        self.assertEqual(self.taps(), {})
        self.assertNotIn("vnet0", self.virsh("dumpxml", "--inactive", "b1").stdout)

    def test_ethernet_reaches_host_side(self):
        """type='ethernet' with a name given: the daemon creates the tap;
        the namespace's side of it answers the guest. managed='no' opens a
        tap that exists and leaves it there."""
        self.start_daemon()
        mac = "52:54:00:77:00:02"
        self.define("e1", [interface_xml("ethernet", mac=mac, target="vsntap1", mtu=9000)])
        self.virsh("start", "e1")
        self.assertIn("mtu 9000", self.host.ip("link", "show", "vsntap1").stdout)
        self.host.ip("addr", "add", PEER_IP + "/24", "dev", "vsntap1")
        self.assertTrue(ping(self.host, GUEST_IP), "the guest does not answer on its ethernet tap")
        self.assertTrue(udp_echo(self.host, GUEST_IP, [b"x" * 8000]), "no 8000-byte UDP echo at MTU 9000")
        # domifaddr: what the host's neighbour table holds for the guest's MAC;
        # no leases, and the agent cannot tell.
        arp = self.virsh("domifaddr", "e1", "--source", "arp").stdout
        self.assertIn(mac, arp)
        self.assertIn(GUEST_IP, arp)
        res = self.virsh("domifaddr", "e1", "--source", "agent", check=False)
        self.assertIn("the vsnap guest agent does not report", res.stderr)
        res = self.virsh("domifaddr", "e1", check=False)
        self.assertIn("no DHCP leases", res.stderr)
        self.virsh("destroy", "e1")
        self.assertNotIn("vsntap1", self.host.links())

        self.host.ip("tuntap", "add", "dev", "vsnkeep", "mode", "tap", "vnet_hdr")
        self.host.ip("addr", "add", PEER_IP + "/24", "dev", "vsnkeep")
        self.host.ip("link", "set", "vsnkeep", "up")
        self.define("e2", [interface_xml("ethernet", target="vsnkeep", managed="no")])
        self.virsh("start", "e2")
        self.assertTrue(ping(self.host, GUEST_IP), "the guest does not answer on a managed='no' tap")
        self.virsh("destroy", "e2")
        self.assertIn("vsnkeep", self.host.links())
        res = self.virsh("start", "e1", check=False)   # its tap name is free again: starts
        self.assertEqual(res.returncode, 0, res.stderr)
        self.virsh("destroy", "e1")

    def test_refusals(self):
        """Other types and models are refused by name; a missing bridge, a
        tap name that exists, or a network without a network driver is
        refused at start, leaving nothing. Without a network driver the
        network and host interface lists clients ask for are empty (not
        "unsupported"); without a storage driver the pool list is
        unsupported (tests/clients/test_storage.py has the rest)."""
        missing = os.path.join(self.host_dir(), "no-such-sock")
        self.start_daemon(network_uri=f"network:///system?socket={missing}",
                          storage_uri=f"storage:///system?socket={missing}")
        for listing in (("net-list", "--all"), ("iface-list", "--all")):
            self.assertEqual(self.virsh(*listing).stdout.strip(), "", listing)
        self.assertIn("is not supported by vsnap without the host's storage driver",
                      self.virsh("pool-list", "--all", check=False).stderr)
        conn = self.daemon.connect()
        try:
            self.assertEqual((conn.numOfNetworks(), conn.numOfDefinedNetworks(), conn.listAllNetworks(),
                              conn.listAllInterfaces()), (0, 0, [], []))
        finally:
            conn.close()
        self.define("nonet", [interface_xml("network", source="default")])
        res = self.virsh("start", "nonet", check=False)
        self.assertIn("cannot reach the host's network driver", res.stderr)
        for iface, text in ((interface_xml("user"), "<interface type='user'> is not supported"),
                            ("<interface type='ethernet'><model type='e1000'/></interface>",
                             "<model type='e1000'> is not supported")):
            path = os.path.join(self.daemon.dir, "bad.xml")
            with open(path, "w") as f:
                f.write(domain_xml("bad", extra_devices=iface))
            res = self.virsh("define", path, check=False)
            self.assertNotEqual(res.returncode, 0)
            self.assertIn(text, res.stderr)
        self.define("nobr", [interface_xml("bridge", source="vsnnobr")])
        res = self.virsh("start", "nobr", check=False)
        self.assertIn("the bridge 'vsnnobr' does not exist", res.stderr)
        self.host.ip("link", "add", "vsnbusy", "type", "bridge")
        self.define("busy", [interface_xml("ethernet", target="vsnbusy")])
        res = self.virsh("start", "busy", check=False)
        self.assertIn("exists already", res.stderr)
        self.assertEqual(self.taps(), {})
        self.assertEqual(self.daemon.shim_pids(), {})

    def test_network_through_libvirts_network_driver(self):
        """type='network': libvirt's network driver runs in a mount and
        network namespace of its own, with an isolated network defined here
        (no <forward>); the daemon under test runs in the same namespaces
        (network:///system reaches the driver there, and the network's
        bridge is where the tap must go), allocates a port, plugs its tap
        into the network's bridge; a peer on that bridge reaches the guest;
        the port is gone when the domain stops."""
        driver = self.closing(netd.NetworkDaemon(self.host))
        net_xml = os.path.join(driver.dir, "iso.xml")
        with open(net_xml, "w") as f:
            f.write("<network><name>vsniso</name><bridge name='vsnisobr'/>"
                    "<ip address='10.78.0.1' prefix='24'/><dns enable='no'/></network>")
        driver.virsh("net-define", net_xml)
        driver.virsh("net-start", "vsniso")
        lan = Lan.__new__(Lan)
        lan.host, lan.bridge, lan.peer_ip = self.host, "vsnisobr", "10.78.0.3"
        lan.peer = self.closing(Netns("p"))
        lan.plug("vvsniso")
        self.start_daemon(driver.enter_prefix())
        self.define("w1", [interface_xml("network", source="vsniso")], ip="10.78.0.2")
        self.virsh("start", "w1")
        live = self.virsh("dumpxml", "w1").stdout
        self.assertIn("bridge='vsnisobr'", live)
        self.assertIn("portid='", live)
        self.assertEqual(len(driver.virsh("net-port-list", "vsniso").split()), 1)
        self.assertTrue(ping(lan.peer, "10.78.0.2"), "the guest on the libvirt network does not answer")
        self.assertTrue(udp_echo(lan.peer, "10.78.0.2", [b"through the network"]))
        # The vsnap connection shows the host's networks, read-only, as
        # virt-manager lists them to offer them for new interfaces.
        self.assertIn("vsniso", self.virsh("net-list", "--all").stdout)
        self.assertIn("vsnisobr", self.virsh("net-info", "vsniso").stdout)
        self.assertIn("<name>vsniso</name>", self.virsh("net-dumpxml", "vsniso").stdout)
        conn = self.daemon.connect()
        try:
            nets = conn.listAllNetworks()
            self.assertEqual([n.name() for n in nets], ["vsniso"])
            self.assertEqual((nets[0].isActive(), nets[0].isPersistent(), nets[0].bridgeName()),
                             (1, 1, "vsnisobr"))
            self.assertEqual(conn.networkLookupByUUID(nets[0].UUID()).name(), "vsniso")
            self.assertEqual(conn.listStoragePools(), [])
        finally:
            conn.close()
        self.assertIn("master vsnisobr", self.host.ip("-o", "link", "show", "vnet0").stdout)
        self.virsh("destroy", "w1")
        self.assertEqual(driver.virsh("net-port-list", "vsniso").split(), [])
        # A shim that dies gives its port back; so does one found dead by a
        # daemon started after it died.
        self.virsh("start", "w1")
        for pid in self.daemon.shim_pids().values():
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: "crashed" in self.virsh("domstate", "w1", "--reason").stdout, what="the crash")
        wait_for(lambda: driver.virsh("net-port-list", "vsniso").split() == [], what="the port's release")
        self.virsh("start", "w1")
        self.daemon.stop(signal.SIGKILL)
        for pid in self.daemon.shim_pids().values():
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(len(driver.virsh("net-port-list", "vsniso").split()), 1)
        self.daemon.start(prefix=driver.enter_prefix())
        self.assertEqual(driver.virsh("net-port-list", "vsniso").split(), [])
        self.assertEqual(self.taps(), {})
        # An unknown network is refused at start, with nothing left.
        self.define("w2", [interface_xml("network", source="vsnnone")], ip="10.78.0.4")
        res = self.virsh("start", "w2", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("vsnnone", res.stderr)
        self.assertEqual(self.taps(), {})

    def test_silent_network_driver(self):
        """A network driver that accepts connections and never answers: a
        start with a type='network' interface fails within its time limit
        and the network list is empty, instead of a call that never ends."""
        path = os.path.join(self.host_dir(), "silent-sock")
        silent = socket.socket(socket.AF_UNIX)
        silent.bind(path)
        silent.listen(16)
        self.closers.append(silent.close)
        self.start_daemon(network_uri=f"network:///system?socket={path}")
        self.define("quiet", [interface_xml("network", source="default")])
        t0 = time.monotonic()
        res = self.virsh("start", "quiet", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("did not answer in time", res.stderr)
        self.assertLess(time.monotonic() - t0, 30)
        self.assertEqual(self.virsh("net-list", "--all").stdout.strip(), "")
        self.assertEqual(self.taps(), {})

    # ---- link state ----

    def test_setlink_seen_by_guest(self):
        """domif-setlink down: the guest's NETINFO says link 0 and it stops
        answering; up again: link 1, it answers; the state is in the live
        XML and domif-getlink; <link state='down'/> in a definition starts
        the guest with its link down."""
        lan = self.closing(Lan(self.host, "br0", PEER_IP))
        self.start_daemon()
        self.define("l1", [interface_xml("bridge", source="br0")])
        self.virsh("start", "l1")
        self.assertTrue(ping(lan.peer, GUEST_IP))
        self.virsh("domif-setlink", "l1", "vnet0", "down")
        self.assertEqual(netinfo(self.daemon, "l1")["link"], 0)
        self.assertIn("down", self.virsh("domif-getlink", "l1", "vnet0").stdout)
        self.assertIn("<link state='down'/>", self.virsh("dumpxml", "l1").stdout)
        self.assertNotIn("<link state='down'/>", self.virsh("dumpxml", "--inactive", "l1").stdout)
        self.assertFalse(ping(lan.peer, GUEST_IP, timeout=2), "a guest with its link down answered")
        self.virsh("domif-setlink", "l1", "vnet0", "up")
        self.assertEqual(netinfo(self.daemon, "l1")["link"], 1)
        self.assertTrue(ping(lan.peer, GUEST_IP))
        # The inactive definition names the interface by its MAC (the tap's
        # name is the run's), as in libvirt's QEMU driver.
        self.virsh("domif-setlink", "l1", self.mac_of("l1"), "down", "--config")
        self.assertIn("<link state='down'/>", self.virsh("dumpxml", "--inactive", "l1").stdout)
        self.virsh("destroy", "l1")
        self.virsh("start", "l1")
        self.assertEqual(netinfo(self.daemon, "l1")["link"], 0)

    # ---- snapshots, clones ----

    def test_revert_gets_a_new_tap(self):
        """A snapshot taken with UDP echo flowing, then reverted: the guest
        answers again, on a new tap (another interface index), with its MAC."""
        lan = self.closing(Lan(self.host, "br0", PEER_IP))
        self.start_daemon()
        self.define("s1", [interface_xml("bridge", source="br0")])
        mac = self.mac_of("s1")
        self.virsh("start", "s1")
        self.assertTrue(ping(lan.peer, GUEST_IP))
        before = self.taps()["vnet0"]
        flow = netd.Traffic(lan.peer, GUEST_IP)
        try:
            time.sleep(0.3)
            self.virsh("snapshot-create-as", "s1", "busy")
            time.sleep(0.3)
        finally:
            flow.stop()
        self.assertGreater(flow.answered, 0, "no echo while the snapshot was taken")
        self.virsh("snapshot-revert", "s1", "busy")
        after = self.taps()
        self.assertEqual(list(after), ["vnet0"])
        self.assertNotEqual(after["vnet0"], before, "the revert kept the old tap")
        self.assertIn("master br0", self.host.ip("-o", "link", "show", "vnet0").stdout)
        self.assertTrue(udp_echo(lan.peer, GUEST_IP, [b"after revert"]), "no echo after the revert")
        self.assertEqual(netinfo(self.daemon, "s1")["mac"], mac)
        self.virsh("destroy", "s1")
        self.assertEqual(self.taps(), {})

    def test_save_restore_and_clone_beside_origin(self):
        """save and restore get a fresh tap; virsh restore --xml with another
        name and uuid is a clone running beside its origin on a bridge of its
        own, with its own MAC: both answer their peers, each peer sees its
        own guest's MAC."""
        lan_a = self.closing(Lan(self.host, "br0", PEER_IP, "a"))
        lan_b = self.closing(Lan(self.host, "br1", PEER_IP, "b"))
        self.start_daemon()
        origin_mac, clone_mac = "52:54:00:0a:00:01", "52:54:00:0b:00:02"
        self.define("o1", [interface_xml("bridge", mac=origin_mac, source="br0")])
        self.virsh("start", "o1")
        self.assertTrue(ping(lan_a.peer, GUEST_IP))
        image = os.path.join(self.daemon.dir, "o1.save")
        self.virsh("save", "o1", image)
        self.assertEqual(self.taps(), {})
        self.virsh("restore", image)
        self.assertTrue(udp_echo(lan_a.peer, GUEST_IP, [b"restored"]), "no echo after the restore")
        clone_xml = domain_xml("c1", uuid=str(uuidlib.uuid4()), cmdline=netd.guest_cmdline(GUEST_IP),
                               extra_devices=interface_xml("bridge", mac=clone_mac, source="br1"))
        path = os.path.join(self.daemon.dir, "c1.xml")
        with open(path, "w") as f:
            f.write(clone_xml)
        self.virsh("restore", image, "--xml", path)
        self.assertEqual(sorted(self.virsh("list", "--name").stdout.split()), ["c1", "o1"])
        self.assertEqual(len(self.taps()), 2)
        self.assertTrue(ping(lan_b.peer, GUEST_IP), "the clone does not answer")
        self.assertTrue(ping(lan_a.peer, GUEST_IP), "the origin stopped answering")
        self.assertEqual(netinfo(self.daemon, "c1")["mac"], clone_mac)
        self.assertEqual(netinfo(self.daemon, "o1")["mac"], origin_mac)
        self.assertEqual(netd.neighbour_mac(lan_b.peer, GUEST_IP), clone_mac)
        self.assertEqual(netd.neighbour_mac(lan_a.peer, GUEST_IP), origin_mac)
        self.assertEqual(self.mac_of("c1"), clone_mac)
        self.virsh("destroy", "c1")
        # managedsave and the start from it: a fresh tap again.
        before = self.taps()["vnet0"]
        self.virsh("managedsave", "o1")
        self.assertEqual(self.taps(), {})
        self.virsh("start", "o1")
        self.assertNotEqual(self.taps().get("vnet0"), before)
        self.assertTrue(udp_echo(lan_a.peer, GUEST_IP, [b"after managedsave"]), "no echo after managedsave")
        self.virsh("destroy", "o1")
        self.assertEqual(self.taps(), {})

    def test_vsnap_from_clones_get_their_own_taps(self):
        """Clones through <vsnap:from>: each gets a new tap on its own bridge
        and its own MAC, and answers beside the origin; the taps go with
        them, and with a clone whose start the daemon's death cut short."""
        lan_a = self.closing(Lan(self.host, "br0", PEER_IP, "a"))
        lan_b = self.closing(Lan(self.host, "br1", PEER_IP, "b"))
        self.start_daemon()
        origin_mac, clone_mac = "52:54:00:0a:00:11", "52:54:00:0b:00:12"
        self.define("o3", [interface_xml("bridge", mac=origin_mac, source="br0")])
        self.virsh("start", "o3")
        self.assertTrue(ping(lan_a.peer, GUEST_IP))
        self.virsh("snapshot-create-as", "o3", "s1")
        meta = ("  <metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
                "<vsnap:from domain='o3' snapshot='s1'/></vsnap:vsnap></metadata>\n")
        clone_xml = domain_xml("c3", uuid=str(uuidlib.uuid4()), cmdline=netd.guest_cmdline(GUEST_IP),
                               extra_devices=interface_xml("bridge", mac=clone_mac, source="br1"))
        path = os.path.join(self.daemon.dir, "c3.xml")
        with open(path, "w") as f:
            f.write(clone_xml.replace("  <memory", meta + "  <memory", 1))
        self.virsh("create", path)
        self.assertEqual(len(self.taps()), 2)
        self.assertTrue(ping(lan_b.peer, GUEST_IP), "the clone does not answer on its bridge")
        self.assertTrue(ping(lan_a.peer, GUEST_IP), "the origin stopped answering")
        self.assertEqual(netinfo(self.daemon, "c3")["mac"], clone_mac)
        self.assertEqual(netd.neighbour_mac(lan_b.peer, GUEST_IP), clone_mac)
        self.assertEqual(self.mac_of("c3"), clone_mac)
        self.virsh("destroy", "c3")
        self.assertEqual(len(self.taps()), 1)
        with open(vsnapd.VIRTVSNAPD, "rb") as f:
            if b"VSNAPD_TEST_HOOK" not in f.read():
                return   # a build without test hooks cannot stop the daemon mid-start
        prefix = ("ip", "netns", "exec", self.host.name)
        self.daemon.stop(signal.SIGKILL)
        self.daemon.start(prefix=prefix, env={"VSNAPD_TEST_HOOK": "start-set-up:kill"})
        self.assertNotEqual(self.virsh("create", path, check=False).returncode, 0)
        self.daemon.proc.wait(timeout=20)
        self.daemon.proc = None
        self.daemon.start(prefix=prefix)
        wait_for(lambda: len(self.taps()) == 1, what="the cut-short clone's tap to go")
        self.assertNotIn("c3", self.virsh("list", "--all", "--name").stdout.split())
        self.virsh("create", path)
        self.assertTrue(ping(lan_b.peer, GUEST_IP), "the clone does not come back")

    # ---- crashes ----

    def test_kill_daemon_and_shim_leaves_no_tap(self):
        """kill -9 of the daemon: its shim keeps the guest on the network and
        a new daemon reattaches (the tap stays, the guest answers); kill -9 of
        the shim while no daemon runs: its tap is gone, and the restarted
        daemon finds the domain crashed with nothing left."""
        lan = self.closing(Lan(self.host, "br0", PEER_IP))
        self.start_daemon()
        self.define("k1", [interface_xml("bridge", source="br0")])
        self.virsh("start", "k1")
        self.assertTrue(ping(lan.peer, GUEST_IP))
        self.daemon.stop(signal.SIGKILL)
        self.daemon.start(prefix=("ip", "netns", "exec", self.host.name))
        self.assertEqual(list(self.taps()), ["vnet0"])
        self.assertTrue(ping(lan.peer, GUEST_IP), "the guest stopped answering after the daemon restarted")
        self.assertIn("vnet0", self.virsh("domiflist", "k1").stdout)
        self.daemon.stop(signal.SIGKILL)
        for pid in self.daemon.shim_pids().values():
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not self.taps(), what="the killed shim's tap to go")
        self.daemon.start(prefix=("ip", "netns", "exec", self.host.name))
        self.assertIn("shut off (crashed)", self.virsh("domstate", "k1", "--reason").stdout)
        self.assertEqual(self.taps(), {})
        self.virsh("start", "k1")
        self.assertTrue(ping(lan.peer, GUEST_IP), "the domain does not come back on the network")


if __name__ == "__main__":
    unittest.main(verbosity=2)

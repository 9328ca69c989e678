"""Running domains: start, state, suspend/resume, guest shutdown on the power
button, destroy, through virsh and through python3-libvirt; crash of a shim;
errors that must leave the state as it was."""

import os
import signal
import unittest

import libvirt

from vsnapd import DaemonTest, domain_xml, needs_guest, wait_for


@needs_guest
class LifecycleTest(DaemonTest):
    def test_virsh_lifecycle(self):
        v = self.daemon.virsh
        self.define("v1")
        v("start", "v1")
        self.assertEqual(self.state("v1"), "running (booted)")
        self.assertEqual(v("list", "--name").stdout.split(), ["v1"])
        info = v("dominfo", "v1").stdout
        self.assertIn("running", info)
        self.assertRegex(info, r"Id:\s+1\b")
        live = v("dumpxml", "v1").stdout
        self.assertIn("<domain type='kvm' id='1'>", live)
        self.assertIn("State:          running", v("vcpuinfo", "v1").stdout)
        v("suspend", "v1")
        self.assertEqual(self.state("v1"), "paused (user)")
        v("resume", "v1")
        self.assertEqual(self.state("v1"), "running (unpaused)")
        v("shutdown", "v1")
        wait_for(lambda: self.state("v1") == "shut off (shutdown)", what="guest poweroff")
        self.assertEqual(self.daemon.shim_pids(), {})
        v("start", "v1")
        v("destroy", "v1")
        self.assertEqual(self.state("v1"), "shut off (destroyed)")
        v("undefine", "v1")
        self.assertEqual(v("list", "--all", "--name").stdout.split(), [])

    def test_python_lifecycle(self):
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("p1", vcpus=2))
        dom.create()
        self.assertTrue(dom.isActive())
        self.assertGreater(dom.ID(), 0)
        self.assertEqual(dom.state(), [libvirt.VIR_DOMAIN_RUNNING,
                                       libvirt.VIR_DOMAIN_RUNNING_BOOTED])
        state, maxmem, mem, ncpu, cputime = dom.info()
        self.assertEqual((state, maxmem, ncpu), (libvirt.VIR_DOMAIN_RUNNING, 64 * 1024, 2))
        vcpus, maps = dom.vcpus()
        self.assertEqual([v[0] for v in vcpus], [0, 1])
        mem = dom.memoryStats()
        self.assertEqual(mem["actual"], 64 * 1024)
        self.assertGreater(mem["rss"], 0)
        dom.suspend()
        self.assertEqual(dom.state(), [libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_USER])
        dom.resume()
        stats = conn.getAllDomainStats()
        self.assertEqual(len(stats), 1)
        params = stats[0][1]
        self.assertEqual(params["state.state"], libvirt.VIR_DOMAIN_RUNNING)
        self.assertEqual(params["vcpu.current"], 2)
        self.assertEqual(params["balloon.maximum"], 64 * 1024)
        self.assertGreater(params["cpu.time"], 0)
        self.assertEqual(params["vsnap.generation"], 1)
        # The guest pushes readiness over vsock; the daemon reports it.
        wait_for(lambda: conn.getAllDomainStats()[0][1]["vsnap.ready"], what="vsnap.ready")
        dom.shutdown()
        wait_for(lambda: dom.state() == [libvirt.VIR_DOMAIN_SHUTOFF,
                                         libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN],
                 what="guest poweroff")
        dom.create()
        self.assertEqual(conn.getAllDomainStats()[0][1]["vsnap.generation"], 2)
        dom.destroy()
        self.assertEqual(dom.state(), [libvirt.VIR_DOMAIN_SHUTOFF,
                                       libvirt.VIR_DOMAIN_SHUTOFF_DESTROYED])
        dom.undefine()
        conn.close()

    def test_redefine_while_running_applies_at_stop(self):
        conn = self.daemon.connect()
        uuid = "0d1f6a2e-3b7c-4e59-9a10-5c2d8e7f6b41"
        dom = conn.defineXML(domain_xml("rd", uuid=uuid, vcpus=1))
        dom.create()
        conn.defineXML(domain_xml("rd", uuid=uuid, vcpus=2))
        self.assertEqual(dom.info()[3], 1)   # the running VM keeps its definition
        inactive = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        self.assertIn(">2</vcpu>", inactive)
        self.assertIn(">1</vcpu>", dom.XMLDesc(0))
        dom.destroy()
        self.assertEqual(dom.info()[3], 2)
        self.assertIn(">2</vcpu>", dom.XMLDesc(0))
        dom.undefine()
        conn.close()

    def test_transient_domain(self):
        conn = self.daemon.connect()
        dom = conn.createXML(domain_xml("tr"))
        self.assertTrue(dom.isActive())
        self.assertFalse(dom.isPersistent())
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "domains", "tr.xml")))
        dom.destroy()
        with self.assertRaises(libvirt.libvirtError) as ctx:
            conn.lookupByName("tr")
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_NO_DOMAIN)
        conn.close()

    def test_create_of_defined_domain(self):
        # As libvirt-tck's domain/081-unique-id-create and libvirt's QEMU
        # driver: create with the XML of a defined, inactive domain starts it
        # with that XML as the live definition; the persistent one stays.
        conn = self.daemon.connect()
        uuid1, uuid2 = "11111111-1111-1111-1111-111111111111", "22222222-1111-1111-1111-111111111111"
        dom = conn.defineXML(domain_xml("tck1", uuid=uuid1, vcpus=1))
        live = conn.createXML(domain_xml("tck1", uuid=uuid1, vcpus=2))
        self.assertEqual(live.UUIDString(), uuid1)
        self.assertTrue(dom.isActive())
        self.assertTrue(dom.isPersistent())
        self.assertEqual(dom.info()[3], 2)
        self.assertIn(">2</vcpu>", dom.XMLDesc(0))
        self.assertIn(">1</vcpu>", dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE))
        # Running: a second create is refused, as is any clash of name or uuid.
        for xml, code in ((domain_xml("tck1", uuid=uuid1), libvirt.VIR_ERR_OPERATION_INVALID),
                          (domain_xml("tck2", uuid=uuid1), libvirt.VIR_ERR_OPERATION_FAILED),
                          (domain_xml("tck1", uuid=uuid2), libvirt.VIR_ERR_OPERATION_FAILED)):
            with self.assertRaises(libvirt.libvirtError) as ctx:
                conn.createXML(xml)
            self.assertEqual(ctx.exception.get_error_code(), code, ctx.exception.get_error_message())
        other = conn.createXML(domain_xml("tck2", uuid=uuid2))
        self.assertFalse(other.isPersistent())
        other.destroy()
        # Stopped, the domain is its persistent definition again, still defined.
        dom.destroy()
        self.assertTrue(dom.isPersistent())
        self.assertEqual(dom.info()[3], 1)
        self.assertIn(">1</vcpu>", dom.XMLDesc(0))
        # Inactive: a clash of name or uuid is refused too, and changes nothing.
        for xml in (domain_xml("tck2", uuid=uuid1), domain_xml("tck1", uuid=uuid2)):
            with self.assertRaises(libvirt.libvirtError) as ctx:
                conn.createXML(xml)
            self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_FAILED)
        self.assertFalse(dom.isActive())
        self.assertEqual([d.name() for d in conn.listAllDomains()], ["tck1"])
        dom.undefine()
        conn.close()

    def test_virsh_create_of_defined_domain(self):
        path = self.define("vc1", vcpus=1)
        with open(path) as f:
            xml = f.read().replace(">1</vcpu>", ">2</vcpu>")
        live_path = os.path.join(self.daemon.dir, "vc1-live.xml")
        with open(live_path, "w") as f:
            f.write(xml)
        self.daemon.virsh("create", live_path, "--paused")
        self.assertEqual(self.daemon.virsh("domstate", "vc1").stdout.strip(), "paused")
        self.assertIn(">2</vcpu>", self.daemon.virsh("dumpxml", "vc1").stdout)
        self.assertIn(">1</vcpu>", self.daemon.virsh("dumpxml", "vc1", "--inactive").stdout)
        refused = self.daemon.virsh("create", live_path, check=False)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("already active", refused.stderr)
        self.daemon.virsh("destroy", "vc1")
        info = self.daemon.virsh("dominfo", "vc1").stdout
        self.assertRegex(info, r"Persistent:\s+yes")
        self.assertRegex(info, r"CPU\(s\):\s+1")
        self.daemon.virsh("undefine", "vc1")

    def test_guest_poweroff_by_itself(self):
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("halt", cmdline="vsnap.fill_mib=1 vsnap.halt_after_ready=1"))
        dom.create()
        wait_for(lambda: dom.state() == [libvirt.VIR_DOMAIN_SHUTOFF,
                                         libvirt.VIR_DOMAIN_SHUTOFF_SHUTDOWN],
                 what="guest-initiated poweroff")
        self.assertEqual(self.daemon.shim_pids(), {})
        dom.undefine()
        conn.close()

    def test_on_poweroff_restart(self):
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("again", on_poweroff="restart"))
        dom.create()
        first_id, first_pid = dom.ID(), self.daemon.shim_pids()["again"]
        dom.shutdown()
        # A handle's id is fixed when it is looked up: look the domain up anew.
        wait_for(lambda: conn.lookupByName("again").ID() not in (-1, first_id),
                 what="restart after poweroff")
        self.assertEqual(dom.state(), [libvirt.VIR_DOMAIN_RUNNING,
                                       libvirt.VIR_DOMAIN_RUNNING_BOOTED])
        self.assertNotEqual(self.daemon.shim_pids()["again"], first_pid)
        self.assertEqual(conn.getAllDomainStats()[0][1]["vsnap.generation"], 2)
        dom.destroy()
        conn.close()

    def test_killed_shim_is_crashed(self):
        self.define("k1")
        self.daemon.virsh("start", "k1")
        pid = self.daemon.shim_pids()["k1"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: self.state("k1") == "shut off (crashed)", what="crash detection")
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "run", "k1")))
        self.daemon.virsh("start", "k1")   # and it starts again
        self.daemon.virsh("destroy", "k1")

    def test_invalid_transitions_keep_state(self):
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("s1"))
        cases = [(dom.resume, libvirt.VIR_ERR_OPERATION_INVALID),
                 (dom.destroy, libvirt.VIR_ERR_OPERATION_INVALID),
                 (dom.suspend, libvirt.VIR_ERR_OPERATION_INVALID),
                 (dom.shutdown, libvirt.VIR_ERR_OPERATION_INVALID)]
        for call, code in cases:
            with self.assertRaises(libvirt.libvirtError) as ctx:
                call()
            self.assertEqual(ctx.exception.get_error_code(), code, call.__name__)
            self.assertEqual(dom.state()[0], libvirt.VIR_DOMAIN_SHUTOFF)
        dom.create()
        pid = self.daemon.shim_pids()["s1"]
        with self.assertRaises(libvirt.libvirtError) as ctx:
            dom.create()
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        self.assertIn("already running", ctx.exception.get_error_message())
        with self.assertRaises(libvirt.libvirtError) as ctx:
            dom.resume()
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        with self.assertRaises(libvirt.libvirtError) as ctx:
            dom.setMemory(32 * 1024)
        self.assertEqual(ctx.exception.get_error_code(), libvirt.VIR_ERR_NO_SUPPORT)
        self.assertEqual(dom.state()[0], libvirt.VIR_DOMAIN_RUNNING)
        self.assertEqual(self.daemon.shim_pids(), {"s1": pid})
        # Undefine while running: the domain lives on as transient until it stops.
        dom.undefine()
        self.assertFalse(dom.isPersistent())
        self.assertTrue(dom.isActive())
        dom.destroy()
        self.assertEqual(conn.listAllDomains(), [])
        conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

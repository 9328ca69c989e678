"""Domain events: `virsh event --loop --all` and python3-libvirt callbacks
see lifecycle, reboot and agent-lifecycle events in order, on every
registered connection."""

import threading
import time
import unittest

import libvirt

from vsnapd import DaemonTest, VirshEvents, domain_xml, needs_guest, wait_for


class EventLoop:
    """libvirt's default event loop on a thread, for python callbacks."""
    started = False

    @classmethod
    def ensure(cls):
        if not cls.started:
            libvirt.virEventRegisterDefaultImpl()
            threading.Thread(target=cls.run, daemon=True).start()
            cls.started = True

    @staticmethod
    def run():
        while True:
            libvirt.virEventRunDefaultImpl()


@needs_guest
class EventsTest(DaemonTest):
    def probe_define(self, attempt):
        """An event for VirshEvents.wait_registered, on a domain of its own."""
        self.define(f"probe{attempt}")
        return f"for domain 'probe{attempt}': Defined Added"

    def test_virsh_event_loop_sees_events_in_order(self):
        watcher = VirshEvents(self.daemon, "--all")
        try:
            watcher.wait_registered(self.probe_define)
            v = self.daemon.virsh
            self.define("e1")
            v("start", "e1")
            v("suspend", "e1")
            v("resume", "e1")
            v("shutdown", "e1")
            wait_for(lambda: self.state("e1") == "shut off (shutdown)", what="poweroff")
            v("start", "e1")
            v("destroy", "e1")
            v("undefine", "e1")
            watcher.wait_for_line("for domain 'e1': Undefined Removed")
        finally:
            out = watcher.stop()
        lines = [l.split(": ", 1)[1] for l in out.splitlines()
                 if l.startswith("event 'lifecycle' for domain 'e1'")]
        self.assertEqual(lines, [
            "Defined Added", "Started Booted", "Suspended Paused", "Resumed Unpaused",
            "Shutdown Finished after guest request", "Stopped Shutdown", "Started Booted",
            "Stopped Destroyed", "Undefined Removed"], out)

    def test_python_callbacks_on_two_connections(self):
        EventLoop.ensure()
        seen = {"a": [], "b": [], "reboot": [], "agent": []}
        lock = threading.Lock()

        def lifecycle(key):
            def cb(conn, dom, event, detail, opaque):
                with lock:
                    seen[key].append((dom.name(), event, detail))
            return cb

        a, b = self.daemon.connect(), self.daemon.connect()
        ids = [
            a.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                     lifecycle("a"), None),
            b.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                     lifecycle("b"), None),
            a.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_REBOOT,
                lambda conn, dom, opaque: seen["reboot"].append(dom.name()), None),
            a.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
                lambda conn, dom, state, reason, opaque: seen["agent"].append(state), None),
        ]
        dom = a.defineXML(domain_xml("e2"))
        dom.create()
        # The guest pushes readiness over vsock: agent-lifecycle "connected".
        wait_for(lambda: seen["agent"], what="agent-lifecycle event")
        self.assertEqual(seen["agent"],
                         [libvirt.VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED])
        dom.reboot()
        wait_for(lambda: len(seen["reboot"]) >= 1, what="reboot event")
        # The rebooted guest announces readiness again.
        wait_for(lambda: len(seen["agent"]) >= 2, what="readiness after the reboot")
        dom.destroy()
        dom.undefine()
        expected = [("e2", libvirt.VIR_DOMAIN_EVENT_DEFINED, libvirt.VIR_DOMAIN_EVENT_DEFINED_ADDED),
                    ("e2", libvirt.VIR_DOMAIN_EVENT_STARTED, libvirt.VIR_DOMAIN_EVENT_STARTED_BOOTED),
                    ("e2", libvirt.VIR_DOMAIN_EVENT_STOPPED,
                     libvirt.VIR_DOMAIN_EVENT_STOPPED_DESTROYED),
                    ("e2", libvirt.VIR_DOMAIN_EVENT_UNDEFINED,
                     libvirt.VIR_DOMAIN_EVENT_UNDEFINED_REMOVED)]
        wait_for(lambda: len(seen["a"]) >= 4 and len(seen["b"]) >= 4, what="lifecycle events")
        self.assertEqual(seen["a"], expected)
        self.assertEqual(seen["b"], expected)
        self.assertEqual(set(seen["reboot"]), {"e2"})
        for cid, conn in zip(ids, (a, b, a, a)):
            conn.domainEventDeregisterAny(cid)
        a.close()
        b.close()

    def test_guest_reset_and_on_reboot(self):
        v = self.daemon.virsh
        watcher = VirshEvents(self.daemon, "--all")
        try:
            watcher.wait_registered(self.probe_define)
            # on_reboot=restart: the guest resets itself after `ready` and keeps going.
            self.define("g1", cmdline="vsnap.fill_mib=1 vsnap.reboot_after_ready=1")
            v("start", "g1")
            # on_reboot=destroy: the guest's reset ends the domain.
            self.define("g2", cmdline="vsnap.fill_mib=1 vsnap.reboot_after_ready=1",
                        on_reboot="destroy")
            v("start", "g2")
            wait_for(lambda: self.state("g2") == "shut off (shutdown)", what="reset as poweroff")
            watcher.wait_for_line("event 'reboot' for domain 'g1'")   # g1 may reset after g2
            v("destroy", "g1")
            watcher.wait_for_line("for domain 'g1': Stopped Destroyed")
        finally:
            out = watcher.stop()
        self.assertIn("event 'reboot' for domain 'g1'", out)
        self.assertIn("event 'reboot' for domain 'g2'", out)
        g2 = [l.split(": ", 1)[1] for l in out.splitlines()
              if l.startswith("event 'lifecycle' for domain 'g2'")]
        self.assertEqual(g2, ["Defined Added", "Started Booted",
                              "Shutdown Finished after guest request", "Stopped Shutdown"], out)

    def test_domain_filter(self):
        EventLoop.ensure()
        seen = []
        conn = self.daemon.connect()
        d1 = conn.defineXML(domain_xml("f1"))
        conn.defineXML(domain_xml("f2"))
        cid = conn.domainEventRegisterAny(
            d1, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE,
            lambda c, dom, event, detail, opaque: seen.append(dom.name()), None)
        conn.lookupByName("f2").create()
        d1.create()
        wait_for(lambda: seen, what="event for f1")
        conn.lookupByName("f2").destroy()
        d1.destroy()
        wait_for(lambda: len(seen) >= 2, what="stop event for f1")
        time.sleep(0.3)
        self.assertEqual(seen, ["f1", "f1"])
        conn.domainEventDeregisterAny(cid)
        with self.assertRaises(libvirt.libvirtError):
            conn.domainEventDeregisterAny(cid)
        conn.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)

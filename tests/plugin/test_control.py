"""Control of a running domain from outside the guest, through real virsh
and python3-libvirt, each effect checked in the test guest over its command
port: reset (a fresh boot: the guest's NMI count starts again), inject-nmi
(vector 2, counted: "NMI <n>"), send-key (the i8042 scan codes the guest
polled: "KEYS ..."), and their faults (a stopped domain, bad key codes,
codesets the keyboard cannot type)."""

import os
import sys
import unittest

import libvirt

from vsnapd import DaemonTest, needs_guest, wait_for

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import wait_command_port  # noqa: E402


@needs_guest
class ControlTest(DaemonTest):
    def setUp(self):
        super().setUp()
        self.define("c")
        self.daemon.virsh("start", "c")
        self.guest = self.command_port()

    def tearDown(self):
        self.guest.close()
        self.daemon.virsh("destroy", "c", check=False)
        super().tearDown()

    def command_port(self):
        return wait_command_port(os.path.join(self.daemon.state, "run", "c", "vsock.sock"), timeout=60,
                                 connect_timeout=30)

    def v(self, *args, **kw):
        return self.daemon.virsh(*args, **kw)

    def keys(self):
        # The guest polls the keyboard every 10 ms; KEYS polls once more.
        return self.guest.cmd("KEYS")

    def test_inject_nmi_counts_in_guest(self):
        self.assertEqual(self.guest.cmd("NMI"), "NMI 0")
        self.v("inject-nmi", "c")
        wait_for(lambda: self.guest.cmd("NMI") == "NMI 1", timeout=10, what="NMI 1")
        conn = self.daemon.connect()
        conn.lookupByName("c").injectNMI(0)
        wait_for(lambda: self.guest.cmd("NMI") == "NMI 2", timeout=10, what="NMI 2")
        conn.close()
        # The guest goes on after each: the command port still answers.
        self.assertEqual(self.guest.cmd("PING"), "PONG")

    def test_inject_nmi_while_paused_is_taken_on_resume(self):
        self.v("suspend", "c")
        self.v("inject-nmi", "c")
        self.v("resume", "c")
        wait_for(lambda: self.guest.cmd("NMI") == "NMI 1", timeout=10, what="NMI 1 after resume")

    def test_send_key_names_and_numbers(self):
        self.assertEqual(self.keys(), "KEYS")
        # KEY_A press 0x1e, release 0x9e.
        self.v("send-key", "c", "KEY_A")
        wait_for(lambda: getattr(self, "_k", None) or self._keep(self.keys()), timeout=5)
        self.assertEqual(self._k, "KEYS 1e 9e")
        # Two keys, one extended (KEY_RIGHTCTRL: e0 1d), released in reverse.
        self._k = None
        self.v("send-key", "c", "--codeset", "linux", "KEY_LEFTSHIFT", "KEY_RIGHTCTRL", "--holdtime", "20")
        wait_for(lambda: self._k or self._keep(self.keys()), timeout=5)
        self.assertEqual(self._k, "KEYS 2a e0 1d e0 9d aa")

    def _keep(self, reply):
        if reply != "KEYS":
            self._k = reply
        return reply != "KEYS"

    def test_send_key_python_codesets(self):
        dom = self.daemon.connect().lookupByName("c")
        dom.sendKey(libvirt.VIR_KEYCODE_SET_XT_KBD, 0, [0xe048], 1, 0)      # up arrow
        dom.sendKey(libvirt.VIR_KEYCODE_SET_QNUM, 0, [0xc8, 0x10], 2, 0)    # up arrow, Q
        seen = []
        wait_for(lambda: seen.extend(self.keys().split()[1:]) or len(seen) >= 10, timeout=5, what="both keys")
        self.assertEqual(" ".join(seen), "e0 48 e0 c8 e0 48 10 90 e0 c8")

    def test_send_key_faults(self):
        dom = self.daemon.connect().lookupByName("c")
        with self.assertRaises(libvirt.libvirtError) as e:
            dom.sendKey(libvirt.VIR_KEYCODE_SET_LINUX, 0, [300], 1, 0)
        self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)
        self.assertIn("keycode 300", str(e.exception))
        with self.assertRaises(libvirt.libvirtError) as e:
            dom.sendKey(libvirt.VIR_KEYCODE_SET_USB, 0, [4], 1, 0)
        self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_ARGUMENT_UNSUPPORTED)
        self.assertIn("codeset usb", str(e.exception))
        with self.assertRaises(libvirt.libvirtError) as e:
            dom.sendKey(libvirt.VIR_KEYCODE_SET_ATSET1, 0, [0x9e], 1, 0)   # a release code
        self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_INVALID_ARG)
        res = self.v("send-key", "c", "--codeset", "win32", "0x41", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("codeset win32 is not supported", res.stderr)
        # Nothing of the refused calls reached the guest.
        self.assertEqual(self.keys(), "KEYS")

    def test_reset_is_a_fresh_boot(self):
        self.v("inject-nmi", "c")
        wait_for(lambda: self.guest.cmd("NMI") == "NMI 1", timeout=10, what="NMI 1")
        self.guest.close()
        self.v("reset", "c")
        self.guest = self.command_port()
        self.assertEqual(self.guest.cmd("NMI"), "NMI 0")
        self.assertEqual(self.state("c"), "running (booted)")

    def test_reset_keeps_a_paused_domain_paused(self):
        self.v("suspend", "c")
        self.guest.close()
        self.daemon.connect().lookupByName("c").reset(0)
        self.assertTrue(self.state("c").startswith("paused"))
        self.v("resume", "c")
        self.guest = self.command_port()
        self.assertEqual(self.guest.cmd("NMI"), "NMI 0")

    def test_calls_on_a_stopped_domain(self):
        self.v("destroy", "c")
        dom = self.daemon.connect().lookupByName("c")
        for call in (lambda: dom.reset(0), lambda: dom.injectNMI(0),
                     lambda: dom.sendKey(libvirt.VIR_KEYCODE_SET_LINUX, 0, [30], 1, 0)):
            with self.assertRaises(libvirt.libvirtError) as e:
                call()
            self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        res = self.v("inject-nmi", "c", check=False)
        self.assertIn("domain is not running", res.stderr)


if __name__ == "__main__":
    unittest.main()

"""Domain consoles: DOMAIN_OPEN_CONSOLE and stream packets, through
python3-libvirt streams and through `virsh console` on a pty."""

import os
import pty
import select
import subprocess
import time
import unittest

import libvirt

from vsnapd import DaemonTest, domain_xml, needs_guest, wait_for

SERIAL = "    <serial type='pty'><target port='0'/></serial>\n"


def read_until(stream, text, timeout=20):
    data = b""
    deadline = time.monotonic() + timeout
    while text.encode() not in data:
        if time.monotonic() > deadline:
            raise AssertionError(f"no {text!r} on the console; got {data!r}")
        chunk = stream.recv(4096)
        if chunk in (-2, b"", None):   # -2: would block; b"": end of file
            if chunk == b"":
                raise AssertionError(f"console ended before {text!r}; got {data!r}")
            time.sleep(0.01)
            continue
        data += chunk
    return data


@needs_guest
class ConsoleTest(DaemonTest):
    def test_python_console_stream(self):
        conn = self.daemon.connect()
        # The guest waits 1.5 s before `ready`: time to attach the console.
        dom = conn.defineXML(domain_xml("con", cmdline="vsnap.fill_mib=1 vsnap.delay_ms=1500",
                                        extra_devices=SERIAL))
        dom.create()
        st = conn.newStream(0)
        dom.openConsole(None, st, 0)
        read_until(st, "vsnap-testguest: ready sum=")
        # A second console is refused, unless forced.
        st2 = conn.newStream(0)
        with self.assertRaises(libvirt.libvirtError) as ctx:
            dom.openConsole(None, st2, 0)
        self.assertIn("Active console session", ctx.exception.get_error_message())
        st3 = conn.newStream(0)
        dom.openConsole("serial0", st3, libvirt.VIR_DOMAIN_CONSOLE_FORCE)
        # The forced-out console gets what was under way, then end of file.
        deadline = time.monotonic() + 10
        while st.recv(4096) != b"":
            self.assertLess(time.monotonic(), deadline, "no end of file on the old console")
        st.finish()
        # The power button makes the guest say so on the new console, then the
        # VM stops and the console ends.
        dom.shutdown()
        read_until(st3, "power button, powering off")
        wait_for(lambda: dom.state()[0] == libvirt.VIR_DOMAIN_SHUTOFF, what="poweroff")
        deadline = time.monotonic() + 10
        while st3.recv(4096) != b"":
            self.assertLess(time.monotonic(), deadline, "console did not end with the VM")
        st3.finish()
        with self.assertRaises(libvirt.libvirtError):
            dom.openConsole(None, conn.newStream(0), 0)   # not running
        conn.close()

    def test_no_serial_device(self):
        conn = self.daemon.connect()
        dom = conn.defineXML(domain_xml("noser"))
        dom.create()
        with self.assertRaises(libvirt.libvirtError) as ctx:
            dom.openConsole(None, conn.newStream(0), 0)
        self.assertIn("no serial console", ctx.exception.get_error_message())
        dom.destroy()
        conn.close()

    def test_virsh_console(self):
        self.define("vc", cmdline="vsnap.fill_mib=1 vsnap.delay_ms=1500", extra_devices=SERIAL)
        self.daemon.virsh("start", "vc")
        pid, master = pty.fork()
        if pid == 0:
            os.execvp("virsh", ["virsh", "-c", self.daemon.uri, "console", "vc"])
        out = b""
        deadline = time.monotonic() + 20
        try:
            while b"vsnap-testguest: ready" not in out and time.monotonic() < deadline:
                if select.select([master], [], [], 0.5)[0]:
                    out += os.read(master, 4096)
            self.assertIn(b"Connected to domain", out)
            self.assertIn(b"vsnap-testguest: ready", out)
            os.write(master, b"\x1d")   # Ctrl+]: virsh leaves the console
            _, status = os.waitpid(pid, 0)
            self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        finally:
            try:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(master)
        self.daemon.virsh("destroy", "vc")


if __name__ == "__main__":
    unittest.main(verbosity=2)

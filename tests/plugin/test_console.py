"""Domain consoles: DOMAIN_OPEN_CONSOLE and stream packets, through
python3-libvirt streams and through `virsh console` on a pty."""

import os
import pty
import select
import stat
import subprocess
import time
import tty
import unittest
import xml.etree.ElementTree as ET

import libvirt

from vsnapd import DaemonTest, domain_xml, needs_guest, wait_for

SERIAL = "    <serial type='pty'><target port='0'/></serial>\n"
CONSOLE = SERIAL + "    <console type='pty'><target type='serial' port='0'/></console>\n"
TICKS = "vsnap.fill_mib=1 vsnap.heartbeat_ms=20"


def read_pty_until(path, text, timeout=20):
    """Open the pty as any terminal program would and read until text."""
    fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
    try:
        tty.setraw(fd)
        data = b""
        deadline = time.monotonic() + timeout
        while text.encode() not in data:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} on {path}; got {data[-200:]!r}")
            if select.select([fd], [], [], 0.2)[0]:
                data += os.read(fd, 4096)
        return data
    finally:
        os.close(fd)


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

    def ttyconsole(self, name):
        return self.daemon.virsh("ttyconsole", name).stdout.strip()

    def assert_live_pty(self, name):
        """The pty in the live XML, as libvirt's QEMU driver shows it: the
        serial's <source path>, the console's tty= and <source path>."""
        root = ET.fromstring(self.daemon.virsh("dumpxml", name).stdout)
        path = root.find("devices/serial/source").get("path")
        self.assertTrue(path.startswith("/dev/pts/"), path)
        self.assertTrue(stat.S_ISCHR(os.stat(path).st_mode), path)
        console = root.find("devices/console")
        self.assertEqual(console.get("tty"), path)
        self.assertEqual(console.find("source").get("path"), path)
        self.assertEqual(self.ttyconsole(name), path)
        inactive = ET.fromstring(self.daemon.virsh("dumpxml", name, "--inactive").stdout)
        self.assertIsNone(inactive.find("devices/serial/source"))
        self.assertIsNone(inactive.find("devices/console").get("tty"))
        return path

    def test_ttyconsole_is_the_serial_pty(self):
        self.define("tc", cmdline=TICKS, extra_devices=CONSOLE)
        res = self.daemon.virsh("ttyconsole", "tc", check=False)
        self.assertNotEqual(res.returncode, 0, "a shut off domain has no tty")
        self.daemon.virsh("start", "tc")
        path = self.assert_live_pty("tc")
        # A real pty: what the guest prints comes out of it.
        read_pty_until(path, "vsnap-testguest: tick")
        # A console stream still works, on the same pty.
        conn = self.daemon.connect()
        st = conn.newStream(0)
        conn.lookupByName("tc").openConsole(None, st, 0)
        read_until(st, "vsnap-testguest: tick")
        st.finish()
        conn.close()
        # A restarted daemon reads the path back from the live definition.
        self.daemon.stop()
        self.daemon.start()
        self.assertEqual(self.ttyconsole("tc"), path)
        # A snapshot revert runs a new shim with a pty of its own.
        self.daemon.virsh("snapshot-create-as", "tc", "s1")
        self.daemon.virsh("snapshot-revert", "tc", "s1")
        new_path = self.assert_live_pty("tc")
        read_pty_until(new_path, "vsnap-testguest: tick")
        self.daemon.virsh("destroy", "tc")
        self.assertNotEqual(self.daemon.virsh("ttyconsole", "tc", check=False).returncode, 0)
        self.daemon.virsh("undefine", "tc", "--snapshots-metadata")

    def test_file_serial_has_no_console(self):
        log = os.path.join(self.daemon.dir, "serial.log")
        self.define("fs", extra_devices=f"    <serial type='file'><source path='{log}'/>"
                                        "<target port='0'/></serial>\n")
        self.daemon.virsh("start", "fs")
        conn = self.daemon.connect()
        with self.assertRaises(libvirt.libvirtError) as ctx:
            conn.lookupByName("fs").openConsole(None, conn.newStream(0), 0)
        self.assertIn("not using a PTY", ctx.exception.get_error_message())
        conn.close()
        self.daemon.virsh("destroy", "fs")

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

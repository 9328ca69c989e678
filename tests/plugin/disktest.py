"""Helpers for disk tests through the daemon: <disk> XML, the test guest's
BLK* commands over its command port, and the host's own checksums
(vsnap-pattern, from VSNAP_PATTERN) that the guest's answers are checked
against."""

import os
import subprocess
import sys

from vsnapd import domain_xml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import Fail, wait_command_port  # noqa: E402

PATTERN = os.environ.get("VSNAP_PATTERN", "")
MIB = 1 << 20


def disk_xml(path, target, kind="file", extra=""):
    attribute = "dev" if kind == "block" else "file"
    return (f"    <disk type='{kind}' device='disk'>\n"
            f"      <source {attribute}='{path}'/>\n"
            f"      <target dev='{target}' bus='virtio'/>\n"
            f"{extra}    </disk>\n")


def disk_domain_xml(name, disks, **kw):
    """disks: [(path, target)] or [(path, target, extra)]."""
    return domain_xml(name, extra_devices="".join(disk_xml(d[0], d[1], extra=d[2] if len(d) > 2 else "")
                                                  for d in disks), **kw)


def make_image(path, size):
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def pattern_sum(seed, length):
    """What BLKSUM answers for a region BLKFILLed with seed."""
    return subprocess.run([PATTERN, str(seed), str(length)], check=True, capture_output=True,
                          text=True).stdout.strip()


def file_sum(path, offset, length):
    return subprocess.run([PATTERN, "--sum-file", path, str(offset), str(length)], check=True,
                          capture_output=True, text=True).stdout.strip()


def zero_sum(length):
    return file_sum("/dev/zero", 0, length)


class DiskGuest:
    """The test guest's command port (CONNECT 5000 on the domain's vsock socket)."""

    def __init__(self, vsock_path, timeout=60):
        try:
            self.conn = wait_command_port(vsock_path, timeout, connect_timeout=30)
        except Fail as e:
            raise AssertionError(str(e)) from None

    def cmd(self, text):
        return self.conn.cmd(text)

    def info(self, disk):
        return self.cmd(f"BLKINFO {disk}")

    def fill(self, disk, offset, length, seed):
        reply = self.cmd(f"BLKFILL {disk} {offset:#x} {length:#x} {seed}")
        assert reply == "OK", f"BLKFILL {disk} {offset:#x} {length:#x} {seed} -> {reply!r}"

    def sum(self, disk, offset, length):
        reply = self.cmd(f"BLKSUM {disk} {offset:#x} {length:#x}")
        assert reply.startswith("SUM "), f"BLKSUM {disk} {offset:#x} {length:#x} -> {reply!r}"
        return reply[4:]

    def flush(self, disk):
        reply = self.cmd(f"BLKFLUSH {disk}")
        assert reply == "OK", f"BLKFLUSH {disk} -> {reply!r}"

    def close(self):
        self.conn.close()

"""Helpers of the disk tests (test_blk.py, test_blk_layers.py): images and
checksums computed on the host (vsnap-pattern), the test guest's BLK*
commands, booting a VM with disks. Set PATTERN to vsnap-pattern's path first."""

import hashlib
import os
import subprocess

from persisttest import check, connect

SECTOR = 512
PATTERN = None
GUEST = None


# --- host side -----------------------------------------------------------------

def image(workdir, name, size):
    path = os.path.join(workdir, name)
    with open(path, "wb") as f:
        f.truncate(size)
    return path


def pattern_sum(seed, length):
    return subprocess.run([PATTERN, str(seed), str(length)], check=True, capture_output=True,
                          text=True).stdout.strip()


def file_sum(path, offset, length):
    return subprocess.run([PATTERN, "--sum-file", path, str(offset), str(length)], check=True,
                          capture_output=True, text=True).stdout.strip()


def zero_sum(length):
    return file_sum("/dev/zero", 0, length)


def fill_file(path, offset, length, seed):
    subprocess.run([PATTERN, "--fill-file", path, str(offset), str(length), str(seed)], check=True)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def allocated(path):
    return os.stat(path).st_blocks * 512


# --- guest side ----------------------------------------------------------------

def expect(conn, command, reply):
    got = conn.cmd(command)
    check(got == reply, f"{command!r} -> {got!r}, expected {reply!r}")


def guest_sum(conn, disk, offset, length):
    reply = conn.cmd(f"BLKSUM {disk} {offset:#x} {length:#x}")
    check(reply.startswith("SUM "), f"BLKSUM {disk} {offset:#x} {length:#x} -> {reply!r}")
    return reply[4:]


def fill_and_check(conn, disk, path, offset, length, seed):
    """BLKFILL, then the guest's BLKSUM and the host's view of the file must
    both be the pattern's checksum."""
    expect(conn, f"BLKFILL {disk} {offset:#x} {length:#x} {seed}", "OK")
    want = pattern_sum(seed, length)
    got = guest_sum(conn, disk, offset, length)
    check(got == want, f"disk {disk} at {offset:#x}+{length:#x}: guest reads {got}, pattern is {want}")
    on_file = file_sum(path, offset, length)
    check(on_file == want, f"{path} at {offset:#x}+{length:#x} holds {on_file}, pattern is {want}")


def counters(vm, disk_id):
    return vm.ok("GET", "vm.counters")[disk_id]


def boot(vm, disks, cmdline="", vsock=True):
    vm.boot(GUEST, cmdline, disks=disks, vsock=vsock)
    return connect(vm)



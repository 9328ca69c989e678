#!/usr/bin/python3
"""Mounts in another process's mount namespace (a confined shim's, which is
private: nothing done there reaches the host), to make a directory fail
under it: read-only (a bind of it onto itself, remounted read-only; root
ignores mode bits, not a read-only mount) or full (a small tmpfs over it,
filled). The shim's jail holds neither python3 nor mount(8), so this
process enters the namespace itself (setns, with the interpreter already
loaded) rather than through nsenter.

    nsmount.py PID ro DIR [--after-create WATCHED SUFFIX]
    nsmount.py PID full DIR
    nsmount.py PID umount DIR

--after-create: wait (inotify, armed before "ready" is printed) until a file
whose name ends in SUFFIX is created in WATCHED, then act at once: a fault
that lands in the middle of an operation. Prints "ready" once armed (or at
once without it) and "done <CLOCK_MONOTONIC seconds>" after the mount; exits 1 with the reason when
a step fails."""

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
import time

libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_NOSUID, MS_NODEV = 1, 32, 4096, 2, 4
IN_CREATE = 0x100
MNT_DETACH = 2


def fail(what):
    err = ctypes.get_errno()
    print(f"{what}: {os.strerror(err)}", flush=True)
    sys.exit(1)


def call(rc, what):
    if rc != 0:
        fail(what)


def enter(pid):
    """Into pid's mount namespace and its root. setns puts this process at
    the namespace's root, which is the shim's jail only when the shim's
    pivot_root made it so: from a chroot the jail sits below that root (at
    the chroot's path), so the shim's own root is entered too."""
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
    call(libc.setns(fd, CLONE_NEWNS), f"setns into the mount namespace of {pid}")
    os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    os.chdir("/")
    os.close(root)


def read_only(path):
    p = path.encode()
    call(libc.mount(p, p, None, MS_BIND, None), f"bind {path}")
    call(libc.mount(None, p, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
         f"remount {path} read-only")


def full(path):
    p = path.encode()
    call(libc.mount(b"tmpfs", p, b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64k,mode=0777"), f"tmpfs on {path}")
    fd = os.open(os.path.join(path, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while os.write(fd, b"\xff" * 4096) > 0:
            pass
    except OSError as e:
        if e.errno != errno.ENOSPC:
            raise
    os.close(fd)


def wait_created(watched, suffix):
    """Arms inotify on watched (in this namespace, before entering the
    other: inotify follows inodes, whichever mount they are seen through),
    says "ready", then returns once a name ending in suffix is created."""
    libc.inotify_init1.argtypes = [ctypes.c_int]
    fd = libc.inotify_init1(0)
    if fd < 0:
        fail("inotify_init1")
    if libc.inotify_add_watch(fd, watched.encode(), IN_CREATE) < 0:
        fail(f"inotify on {watched}")
    print("ready", flush=True)
    while True:
        data = os.read(fd, 65536)
        offset = 0
        while offset < len(data):
            _, _, _, length = struct.unpack_from("iIII", data, offset)
            name = data[offset + 16:offset + 16 + length].rstrip(b"\0").decode()
            offset += 16 + length
            if name.endswith(suffix):
                return


def main():
    pid, action, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    after = sys.argv[4:]
    if after:
        if after[0] != "--after-create" or len(after) != 3:
            sys.exit(f"usage: {__doc__}")
        wait_created(after[1], after[2])
    enter(pid)
    if not after:
        print("ready", flush=True)
    if action == "ro":
        read_only(path)
    elif action == "full":
        full(path)
    elif action == "umount":
        call(libc.umount2(path.encode(), MNT_DETACH), f"umount {path}")
    else:
        sys.exit(f"unknown action {action}")
    print(f"done {time.monotonic()}", flush=True)


if __name__ == "__main__":
    main()

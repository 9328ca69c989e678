#!/usr/bin/python3
"""Disk layers end to end: the real vsnap-shim on KVM, the test guest's
BLK* commands, snapshots whose disks are chains of sealed layers over the
read-only image with an active overlay on top.

    test_blk_layers.py <vsnap-shim> <vsnap-testguest> <vsnap-pattern> <vsnap-compact> <case>

Every expected checksum is the host's own: a model image per snapshot
written with vsnap-pattern --fill-file as the guest wrote it, whose bytes
(vsnap-pattern --sum-file) the guest's BLKSUM of the whole disk must match.
"""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

SHIM, GUEST, PATTERN, COMPACT, CASE = sys.argv[1:6]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "persist"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
from persisttest import ApiShim, Conn, Fail, MIB, check, connect  # noqa: E402
from vsnaptest import error_message  # noqa: E402
import blktest  # noqa: E402
from blktest import expect, file_sum, fill_file, guest_sum, image, pattern_sum, sha256  # noqa: E402

blktest.PATTERN, blktest.GUEST = PATTERN, GUEST
SIZE = 32 * MIB
MODES = ("copy", "merge", "ondemand")


# --- helpers -------------------------------------------------------------------

class Model:
    """What the disk holds, kept on the host: a sparse file written as the
    guest writes, copied at each snapshot."""

    def __init__(self, workdir, name, base=None, size=SIZE):
        self.path = os.path.join(workdir, f"model-{name}.img")
        if base:
            shutil.copyfile(base.path, self.path)
        else:
            image(workdir, os.path.basename(self.path), size)
        self.size = size

    def fill(self, offset, length, seed):
        fill_file(self.path, offset, length, seed)

    def zero(self, offset, length):
        with open(self.path, "r+b") as f:
            f.seek(offset)
            f.write(bytes(length))

    def copy(self, workdir, name):
        return Model(workdir, name, base=self, size=self.size)


def config(vm, disks, work_dir=None, memory_mib=128, cmdline=""):
    cfg = {"payload": {"kernel": GUEST, "cmdline": cmdline}, "memory": {"size": memory_mib * MIB},
           "cpus": {"boot_vcpus": 1, "max_vcpus": 1}, "serial": {"mode": "File", "file": vm.serial_path},
           "console": {"mode": "Off"}, "vsock": {"cid": 3, "socket": vm.vsock_path}, "disks": disks}
    if work_dir:
        cfg["vsnap_work_dir"] = work_dir
    return cfg


def boot(vm, disks, work_dir=None, memory_mib=128, cmdline=""):
    vm.ok("PUT", "vm.create", config(vm, disks, work_dir, memory_mib, cmdline))
    vm.ok("PUT", "vm.boot")
    return connect(vm)


def write(conn, model, offset, length, seed):
    expect(conn, f"BLKFILL 0 {offset:#x} {length:#x} {seed}", "OK")
    model.fill(offset, length, seed)


def check_disk(conn, model, what):
    got, want = guest_sum(conn, 0, 0, model.size), file_sum(model.path, 0, model.size)
    check(got == want, f"{what}: the guest reads {got} over the whole disk, the host's model holds {want}")


def snapshot(vm, dest, parent=None):
    vm.ok("PUT", "vm.pause")
    status, reply = vm.snapshot(dest, parent)
    vm.ok("PUT", "vm.resume")
    check(status == 204, f"vm.snapshot {dest}: {status} {reply}" + vm.describe())


def restore(vm, source, mode, work_dir, resume=True):
    overrides = {"serial": {"mode": "File", "file": vm.serial_path}, "vsock": {"socket": vm.vsock_path},
                 "vsnap_work_dir": work_dir}
    return vm.api("PUT", "vm.restore", {"source_url": "file://" + source, "memory_restore_mode": mode,
                                        "resume": resume, "config_overrides": overrides})


def restored(workdir, name, source, mode, work_dir):
    vm = ApiShim(SHIM, workdir=workdir, name=name)
    status, reply = restore(vm, source, mode, work_dir)
    if status != 204:
        vm.close()
        raise Fail(f"restore of {source} ({mode}): {status} {reply}")
    return vm, connect(vm)


def disk_config(vm):
    return vm.ok("GET", "vm.info")["config"]["disks"][0]


def layer_files(directory):
    return sorted(f for f in os.listdir(directory) if f.startswith("disk-") and f.endswith(".layer"))


# --- cases -----------------------------------------------------------------------

def case_contents(workdir):
    """Fill, s1, overwrite, s2 (a diff), overwrite; revert to s1, s2, s1 in
    each memory restore mode: the whole disk reads as the host's model of
    that snapshot. The image's bytes never change after the first snapshot.
    Two VMs restored from s1 write different data and each reads its own.
    vm.info shows the chain, the overlay and the work directory."""
    img = image(workdir, "disk.img", SIZE)
    fill_file(img, 24 * MIB, MIB, 99)  # the image's own data shows through
    work = os.path.join(workdir, "work")
    s1, s2 = os.path.join(workdir, "s1"), os.path.join(workdir, "s2")
    live = Model(workdir, "live")
    live.fill(24 * MIB, MIB, 99)
    with ApiShim(SHIM, workdir=workdir, name="src") as vm:
        conn = boot(vm, [{"path": img, "id": "vda"}], work)
        d = disk_config(vm)
        check(d["vsnap_chain"] is None and d["vsnap_overlay"] is None, f"before any snapshot: {d}")
        write(conn, live, 0, 8 * MIB, 1)
        snapshot(vm, s1)
        base_digest = sha256(img)
        m1 = live.copy(workdir, "s1")
        info = vm.ok("GET", "vm.info")["config"]
        d = info["disks"][0]
        check(d["vsnap_chain"] == [os.path.join(s1, "disk-vda.layer")], f"vm.info after s1: {d}")
        check(d["vsnap_overlay"].startswith(work + "/") and os.path.exists(d["vsnap_overlay"]),
              f"vm.info's overlay: {d}")
        check(info["vsnap_work_dir"] == work, f"vm.info's work dir: {info['vsnap_work_dir']}")
        state = json.load(open(os.path.join(s1, "state.json")))["devices"]["disks"][0]
        check(state["layer"]["parent"] is None and state["layer"]["blocks"] == 0 and
              state["base"]["path"] == img and state["base"]["size"] == SIZE, f"s1's disk record: {state}")
        write(conn, live, 4 * MIB, 8 * MIB, 2)
        write(conn, live, 3 * 512, 5 * 512, 5)          # partial blocks over older data
        write(conn, live, 24 * MIB + 1024, 4096, 6)      # a partial block over the image's data
        expect(conn, f"BLKZERO 0 {6 * MIB:#x} {MIB:#x} 0", "OK")
        live.zero(6 * MIB, MIB)
        check_disk(conn, live, "before s2")
        snapshot(vm, s2, parent=s1)
        m2 = live.copy(workdir, "s2")
        state = json.load(open(os.path.join(s2, "state.json")))["devices"]["disks"][0]
        check(state["layer"]["parent"] == json.load(open(os.path.join(s1, "state.json")))["devices"]["disks"][0]
              ["layer"]["id"], f"s2's disk layer does not name s1's: {state}")
        write(conn, live, 0, 2 * MIB, 3)
        check_disk(conn, live, "after s2")
        conn.close()
    check(sha256(img) == base_digest, "the image changed after its first snapshot")
    for mode in MODES:
        for snap, model in ((s1, m1), (s2, m2), (s1, m1)):
            vm, conn = restored(workdir, f"r-{mode}", snap, mode, work)
            try:
                check_disk(conn, model, f"{mode} revert to {os.path.basename(snap)}")
                write(conn, model.copy(workdir, "scratch"), 16 * MIB, MIB, 40)  # writes go to the new overlay
            finally:
                conn.close()
                vm.close()
    check(sha256(img) == base_digest, "the image changed after its first snapshot")
    # Two VMs from s1 at once, each with its own overlay.
    a, conn_a = restored(workdir, "a", s1, "copy", work)
    b, conn_b = restored(workdir, "b", s1, "merge", work)
    try:
        ma, mb = m1.copy(workdir, "a"), m1.copy(workdir, "b")
        write(conn_a, ma, 20 * MIB, 2 * MIB, 7)
        write(conn_b, mb, 20 * MIB, 2 * MIB, 8)
        write(conn_b, mb, 0, MIB, 9)
        check_disk(conn_a, ma, "VM a")
        check_disk(conn_b, mb, "VM b")
        oa, ob = disk_config(a)["vsnap_overlay"], disk_config(b)["vsnap_overlay"]
        check(oa != ob, f"both VMs write into {oa}")
    finally:
        for c in (conn_a, conn_b):
            c.close()
        a.close()
        b.close()
    check(sha256(img) == base_digest, "the image changed after its first snapshot")


def case_enospc(workdir):
    """The overlay's file system fills up: the guest's write gets IOERR, the
    VM keeps running, what it wrote before still reads back, a snapshot that
    cannot be written changes nothing, and the earlier snapshot reverts
    exactly."""
    mnt = os.path.join(workdir, "small")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", mnt]).returncode != 0:
        print("cannot mount a tmpfs here (not root?)")
        sys.exit(77)
    try:
        img = image(workdir, "disk.img", SIZE)
        s1 = os.path.join(workdir, "s1")
        live = Model(workdir, "live")
        with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
            conn = boot(vm, [{"path": img}], mnt)
            write(conn, live, 0, 4 * MIB, 1)
            snapshot(vm, s1)
            m1 = live.copy(workdir, "s1")
            write(conn, live, 8 * MIB, 2 * MIB, 2)
            expect(conn, f"BLKFILL 0 {12 * MIB:#x} {8 * MIB:#x} 3", "ERR ioerr")
            c = vm.ok("GET", "vm.counters")["_disk0"]
            check(c["io_errors"] >= 1, f"counters: {c}")
            expect(conn, "PING", "PONG")
            check(vm.state() == "Running", "the VM stopped")
            check(guest_sum(conn, 0, 0, 4 * MIB) == pattern_sum(1, 4 * MIB), "data before the snapshot changed")
            check(guest_sum(conn, 0, 8 * MIB, 2 * MIB) == pattern_sum(2, 2 * MIB), "data written before ENOSPC")
            # A snapshot that cannot be written (its directory on the full
            # file system too) changes nothing: same chain, same overlay.
            before = disk_config(vm)
            vm.ok("PUT", "vm.pause")
            status, reply = vm.snapshot(os.path.join(mnt, "s-full"))
            vm.ok("PUT", "vm.resume")
            check(status == 500 and "No space left" in error_message(reply), f"a snapshot on a full disk: {status} "
                  f"{reply}")
            check(disk_config(vm) == before, f"a failed snapshot moved the disk: {before} -> {disk_config(vm)}")
            check(not [n for n in os.listdir(mnt) if n.startswith("s-full") or n.startswith(".s-full")],
                  f"the failed snapshot left {os.listdir(mnt)}")
            # Its directory fine, but no room for the next overlay: the
            # sealed layer goes with the partial directory.
            vm.ok("PUT", "vm.pause")
            status, reply = vm.snapshot(os.path.join(workdir, "s-nooverlay"))
            vm.ok("PUT", "vm.resume")
            check(status == 500 and "overlay" in error_message(reply), f"no room for the overlay: {status} {reply}")
            check(disk_config(vm) == before, f"a failed snapshot moved the disk: {before} -> {disk_config(vm)}")
            check(not [n for n in os.listdir(workdir) if "s-nooverlay" in n], "the failed snapshot left files")
            check(guest_sum(conn, 0, 0, 4 * MIB) == pattern_sum(1, 4 * MIB), "data changed by a failed snapshot")
            conn.close()
        vm, conn = restored(workdir, "back", s1, "copy", os.path.join(workdir, "work"))
        try:
            check_disk(conn, m1, "s1 after ENOSPC in the overlay")
        finally:
            conn.close()
            vm.close()
    finally:
        subprocess.run(["umount", mnt])


def quietly(call, *args):
    """For a thread whose shim is killed under it: the failure is the point."""
    try:
        call(*args)
    except Exception:  # noqa: BLE001
        pass


def run_layer_info(path):
    return subprocess.run([COMPACT, "--info", path], capture_output=True, text=True)


def case_kill_snapshot(workdir):
    """kill -9 of the shim while vm.snapshot seals a disk overlay with the
    guest's writes in flight when it paused: the snapshot is there whole or
    not at all (no torn layer), and the previous snapshot reverts exactly."""
    img = image(workdir, "disk.img", 256 * MIB)
    work = os.path.join(workdir, "work")
    s1 = os.path.join(workdir, "s1")
    live = Model(workdir, "live", size=256 * MIB)
    outcomes = []
    for attempt, delay in enumerate((0.02, 0.08, 0.3)):
        vm = ApiShim(SHIM, workdir=workdir, name=f"k{attempt}")
        try:
            if attempt == 0:
                conn = boot(vm, [{"path": img}], work)
                write(conn, live, 0, 8 * MIB, 1)
                snapshot(vm, s1)
                m1 = live.copy(workdir, "s1")
            else:
                status, reply = restore(vm, s1, "copy", work)
                check(status == 204, f"restore of s1: {status} {reply}")
                conn = connect(vm)
            busy = Conn(vm.vsock_path, timeout=120)
            threading.Thread(target=quietly, args=(busy.cmd, f"BLKFILL 0 {16 * MIB:#x} {200 * MIB:#x} 4"),
                             daemon=True).start()
            deadline = time.monotonic() + 60
            while vm.ok("GET", "vm.counters")["_disk0"]["write_bytes"] < 100 * MIB:
                check(time.monotonic() < deadline, "the guest does not write")
                time.sleep(0.01)
            vm.ok("PUT", "vm.pause")  # completes the requests in flight
            dest = os.path.join(workdir, f"s2-{attempt}")
            threading.Thread(target=quietly, args=(vm.api, "PUT", "vm.snapshot", {"destination_url": "file://" + dest}),
                             daemon=True).start()
            time.sleep(delay)
            os.kill(vm.proc.pid, signal.SIGKILL)
            vm.proc.wait(timeout=10)
            conn.close()
            busy.close()
        finally:
            vm.close()
        if os.path.exists(dest):
            for name in layer_files(dest):
                res = run_layer_info(os.path.join(dest, name))
                check(res.returncode == 0, f"a torn layer in {dest}: {res.stderr}")
            outcomes.append("whole")
        else:
            outcomes.append("absent")
        for name in os.listdir(workdir):
            if name.startswith(f".s2-{attempt}.partial-"):
                outcomes[-1] += "+partial"
        r, rconn = restored(workdir, f"back{attempt}", s1, "copy", work)
        try:
            check_disk(rconn, m1, f"s1 after a kill during a snapshot (attempt {attempt})")
        finally:
            rconn.close()
            r.close()
    print(f"kill outcomes: {outcomes}")


def case_flush_crash(workdir):
    """kill -9 after a guest BLKFLUSH, then a new shim on vsnap_chain +
    vsnap_overlay (what the daemon does after a crash): what was flushed
    reads back. An overlay that belongs to another chain, and a damaged one,
    are refused at vm.create naming the file."""
    img = image(workdir, "disk.img", SIZE)
    work = os.path.join(workdir, "work")
    s1, s2 = os.path.join(workdir, "s1"), os.path.join(workdir, "s2")
    live = Model(workdir, "live")
    vm = ApiShim(SHIM, workdir=workdir, name="crash")
    try:
        conn = boot(vm, [{"path": img, "id": "vda"}], work)
        write(conn, live, 0, 4 * MIB, 1)
        snapshot(vm, s1)
        write(conn, live, 2 * MIB + 512, 3 * MIB, 2)
        write(conn, live, 30 * MIB, 1024, 3)
        expect(conn, "BLKFLUSH 0", "OK")
        disk = disk_config(vm)
        os.kill(vm.proc.pid, signal.SIGKILL)
        vm.proc.wait(timeout=10)
        conn.close()
    finally:
        vm.close()
    with ApiShim(SHIM, workdir=workdir, name="again") as vm:
        conn = boot(vm, [disk], work)
        check_disk(conn, live, "after kill -9 and a restart on the chain and overlay")
        check(disk_config(vm)["vsnap_overlay"] == disk["vsnap_overlay"], "the restart did not continue the overlay")
        snapshot(vm, s2, parent=None)
        later = disk_config(vm)
        conn.close()
    # The old overlay (gone with s2) and one made on s2's layer over s1's chain.
    with ApiShim(SHIM, workdir=workdir, name="refuse") as vm:
        wrong = dict(disk, vsnap_overlay=later["vsnap_overlay"])
        status, reply = vm.api("PUT", "vm.create", config(vm, [wrong], work))
        check(status == 400 and later["vsnap_overlay"] in error_message(reply) and
              "vsnap_overlay" in error_message(reply), f"an overlay of another chain: {status} {reply}")
        with open(later["vsnap_overlay"], "r+b") as f:
            f.seek(40)
            f.write(b"\xff")
        status, reply = vm.api("PUT", "vm.create", config(vm, [later], work))
        check(status == 400 and later["vsnap_overlay"] in error_message(reply) and "checksum" in error_message(reply),
              f"a damaged overlay: {status} {reply}")
        swapped = dict(later, vsnap_chain=[later["vsnap_chain"][1], later["vsnap_chain"][0]])
        status, reply = vm.api("PUT", "vm.create", config(vm, [swapped], work))
        check(status == 400 and "vsnap_chain" in error_message(reply), f"a swapped chain: {status} {reply}")
        check(vm.api("GET", "vm.info")[0] == 404, "a refused vm.create left a VM")


def case_chain64(workdir):
    """A chain of 64 snapshots, the guest writing between each: restoring the
    top reads every write; the image never changes."""
    img = image(workdir, "disk.img", SIZE)
    work = os.path.join(workdir, "work")
    live = Model(workdir, "live")
    rng = random.Random(10)
    parent = None
    with ApiShim(SHIM, workdir=workdir, name="src") as vm:
        conn = boot(vm, [{"path": img}], work, memory_mib=64)
        for i in range(64):
            offset = rng.randrange(0, SIZE // 512 - 256) * 512
            write(conn, live, offset, rng.choice((512, 4096, 64 * 1024)), 100 + i)
            dest = os.path.join(workdir, f"s{i:02d}")
            snapshot(vm, dest, parent)
            if i == 0:
                digest = sha256(img)
            parent = dest
        check(len(disk_config(vm)["vsnap_chain"]) == 64, "the chain is not 64 layers long")
        conn.close()
    vm, conn = restored(workdir, "top", parent, "ondemand", work)
    try:
        check_disk(conn, live, "the top of a 64-snapshot chain")
    finally:
        conn.close()
        vm.close()
    check(sha256(img) == digest, "the image changed")


def case_fold(workdir):
    """Inner fold (vsnap-compact --fold-snapshot s2 s3: memory and disks),
    s2 deleted, s3 still reverts exactly; then the chain and the overlay of
    a VM running on s3 folded into the image (--fold-disk): the image holds
    exactly what the guest last wrote, and boots as a plain disk."""
    img = image(workdir, "disk.img", SIZE)
    work = os.path.join(workdir, "work")
    s1, s2, s3 = (os.path.join(workdir, n) for n in ("s1", "s2", "s3"))
    live = Model(workdir, "live")
    with ApiShim(SHIM, workdir=workdir, name="src") as vm:
        conn = boot(vm, [{"path": img, "id": "vda"}], work)
        write(conn, live, 0, 4 * MIB, 1)
        snapshot(vm, s1)
        write(conn, live, 2 * MIB, 4 * MIB, 2)
        snapshot(vm, s2, parent=s1)
        write(conn, live, 3 * MIB, 512, 3)
        expect(conn, f"BLKZERO 0 {5 * MIB:#x} {MIB:#x} 0", "OK")
        live.zero(5 * MIB, MIB)
        snapshot(vm, s3, parent=s2)
        m3 = live.copy(workdir, "s3")
        conn.close()
    res = subprocess.run([COMPACT, "--fold-snapshot", s2, s3], capture_output=True, text=True)
    check(res.returncode == 0, f"--fold-snapshot: {res.stderr}")
    shutil.rmtree(s2)
    state = json.load(open(os.path.join(s3, "state.json")))["devices"]["disks"][0]["layer"]
    check(state["parent_url"] == "file://" + s1, f"s3's disk layer after the fold: {state}")
    vm, conn = restored(workdir, "r3", s3, "merge", work)
    try:
        check_disk(conn, m3, "s3 after s2 was folded into it")
        write(conn, m3, 10 * MIB, MIB + 512, 4)
        write(conn, m3, 0, 4096, 5)
        expect(conn, "BLKFLUSH 0", "OK")
        overlay = disk_config(vm)["vsnap_overlay"]
        conn.close()
        # Not while a VM reads the image as its base (and writes the overlay).
        before = sha256(img)
        res = subprocess.run([COMPACT, "--fold-disk", s3, "vda", "--overlay", overlay], capture_output=True,
                             text=True)
        check(res.returncode != 0 and f"disk image {img} is in use: another process (pid {vm.proc.pid})" in res.stderr,
              f"--fold-disk under a running VM: {res.returncode} {res.stderr}")
        check(sha256(img) == before and not os.path.exists(img + ".vsnap-fold"),
              "a refused fold touched the image or left its intent")
    finally:
        vm.close()
    res = subprocess.run([COMPACT, "--fold-disk", s3, "vda", "--overlay", overlay], capture_output=True, text=True)
    check(res.returncode == 0, f"--fold-disk: {res.stderr}")
    check(sha256(img) != before and file_sum(img, 0, SIZE) == file_sum(m3.path, 0, SIZE),
          "the folded image does not hold what the guest last wrote")
    # The chain no longer matches the image: refused by name.
    with ApiShim(SHIM, workdir=workdir, name="stale") as vm:
        status, reply = restore(vm, s3, "copy", work)
        check(status == 400 and img in error_message(reply), f"restore over the folded image: {status} {reply}")
    with ApiShim(SHIM, workdir=workdir, name="plain") as vm:
        conn = boot(vm, [{"path": img}])
        check_disk(conn, m3, "the folded image as a plain disk")
        conn.close()


def case_layer_path(workdir):
    """A snapshot writes its disk layer in its partial directory and opens
    the disk on it there, before the commit: once committed, a bad block in
    that layer is reported under the layer's own name, not the partial
    directory's that is gone."""
    img = image(workdir, "disk.img", SIZE)
    s1, s2 = os.path.join(workdir, "s1"), os.path.join(workdir, "s2")
    live = Model(workdir, "live")
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": img, "id": "vda"}], os.path.join(workdir, "work"))
        snapshot(vm, s1)
        write(conn, live, 4 * MIB, MIB, 2)
        snapshot(vm, s2, parent=s1)
        layer = os.path.join(s2, "disk-vda.layer")
        with open(layer, "r+b") as f:   # the first data block: the guest has not read it since
            f.seek(4096 + 100)
            byte = f.read(1)
            f.seek(4096 + 100)
            f.write(bytes([byte[0] ^ 0x01]))
        expect(conn, f"BLKSUM 0 {4 * MIB:#x} {MIB:#x}", "ERR ioerr")
        log = vm.read(vm.log_path)
        check(layer in log and ".partial" not in log, f"the bad block is not reported in {layer}:\n{log}")
        conn.close()


def refused_create(workdir, name, disks, *needles):
    """vm.create of disks in a new shim is 400 with every needle in its message."""
    with ApiShim(SHIM, workdir=workdir, name=name) as vm:
        status, reply = vm.api("PUT", "vm.create", config(vm, disks))
        message = error_message(reply)
        check(status == 400 and all(n in message for n in needles),
              f"vm.create of {disks}: {status} {message!r}, expected 400 with {needles}")


def created(workdir, name, disks):
    with ApiShim(SHIM, workdir=workdir, name=name) as vm:
        vm.ok("PUT", "vm.create", config(vm, disks))


def case_locks(workdir):
    """One image, one writer (common/snapshot/image-lock.h). A VM writing an
    image holds it: another VM may neither write nor read it (400 naming the
    image and the holder's pid), nor may two disks of one VM write one file.
    From the first snapshot on the image is the base, read only: readers may
    share it, a writer still may not, and the running overlay is the VM's
    alone. kill -9 of the holder frees all of it, and the guest's disk was
    never touched by the refused ones."""
    img = image(workdir, "disk.img", SIZE)
    work, s1 = os.path.join(workdir, "work"), os.path.join(workdir, "s1")
    live = Model(workdir, "live")
    refused_create(workdir, "twice", [{"path": img}, {"path": img, "readonly": True}],
                   "'disks[1].path'", "is the image of disks[0] too")
    created(workdir, "two-readers", [{"path": img, "readonly": True}, {"path": img, "readonly": True}])
    with ApiShim(SHIM, workdir=workdir, name="holder") as vm:
        conn = boot(vm, [{"path": img, "id": "vda"}], work)
        write(conn, live, 0, 2 * MIB, 1)
        held = f"disk image {img} is in use: another process (pid {vm.proc.pid})"
        refused_create(workdir, "writer", [{"path": img}], held, "has it open")
        refused_create(workdir, "reader", [{"path": img, "readonly": True}], held, "is writing it")
        snapshot(vm, s1)
        created(workdir, "reader-of-base", [{"path": img, "readonly": True}])
        refused_create(workdir, "writer-of-base", [{"path": img}], held, "base of disk layers")
        overlay = disk_config(vm)["vsnap_overlay"]
        chain = disk_config(vm)["vsnap_chain"]
        refused_create(workdir, "overlay", [{"path": img, "vsnap_chain": chain, "vsnap_overlay": overlay}],
                       f"disk overlay {overlay} is in use")
        write(conn, live, MIB, MIB, 2)
        check_disk(conn, live, "the holder, after every refusal")
        conn.close()
        vm.proc.kill()
        vm.proc.wait(timeout=10)
    created(workdir, "after-kill", [{"path": img}])


def live_snapshot(vm, dest, parent=None):
    body = {"destination_url": "file://" + dest, "live": True}
    if parent:
        body.update(mode="diff", parent_url="file://" + parent)
    status, reply = vm.api("PUT", "vm.snapshot", body)
    check(status == 200 and "pause_us" in reply, f"live vm.snapshot {dest}: {status} {reply}" + vm.describe())
    return reply


def gencheck(conn, what):
    reply = conn.cmd("GENCHECK")
    check(reply.startswith("GEN ") and reply.endswith(" ok"), f"{what}: GENCHECK -> {reply}")


def case_live(workdir):
    """Live snapshots of a VM with a disk, its guest rewriting memory: a full
    and a diff, then one that fails after the stop (its destination full);
    each disk layer holds the disk at the instant of the stop, a write in
    flight across the snapshot completes, the failed one leaves the disk on
    its overlay, and every snapshot restores (copy, on demand) with disk and
    memory whole."""
    img = image(workdir, "disk.img", SIZE)
    work = os.path.join(workdir, "work")
    s1, s2, s3 = (os.path.join(workdir, n) for n in ("s1", "s2", "s3"))
    live = Model(workdir, "live")
    with ApiShim(SHIM, workdir=workdir, name="src") as vm:
        conn = boot(vm, [{"path": img, "id": "vda"}], work, cmdline="vsnap.gen_mib=16")
        write(conn, live, 0, 8 * MIB, 1)
        live_snapshot(vm, s1)
        m1 = live.copy(workdir, "s1")
        write(conn, live, 4 * MIB, 8 * MIB, 2)
        live_snapshot(vm, s2, s1)
        m2 = live.copy(workdir, "s2")
        # A fill running on a second connection while a live snapshot is taken:
        # its requests wait out the disks' pause and complete.
        filler = Conn(vm.vsock_path)
        done = {}
        t = threading.Thread(target=lambda: done.update(reply=filler.cmd(f"BLKFILL 0 {16 * MIB:#x} {8 * MIB:#x} 3")))
        t.start()
        mnt = os.path.join(workdir, "small")
        os.makedirs(mnt)
        check(subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt]).returncode == 0, "no tmpfs")
        try:
            status, reply = vm.api("PUT", "vm.snapshot", {"destination_url": "file://" + mnt + "/x", "live": True,
                                                         "mode": "diff", "parent_url": "file://" + s2})
            check(status == 500 and os.listdir(mnt) == [], f"live diff onto a full fs: {status} {reply}")
        finally:
            subprocess.run(["umount", mnt])
        t.join(30)
        filler.close()
        check(done.get("reply") == "OK", f"BLKFILL across a failed live snapshot: {done}")
        live.fill(16 * MIB, 8 * MIB, 3)
        check_disk(conn, live, "after the failed live snapshot")
        m3 = live.copy(workdir, "s3")
        # And across one that succeeds: the fill straddles its instant (so s3
        # is checked below 24 MiB only), and none of it may be lost.
        filler = Conn(vm.vsock_path)
        t = threading.Thread(target=lambda: done.update(reply=filler.cmd(f"BLKFILL 0 {24 * MIB:#x} {8 * MIB:#x} 5")))
        done.clear()
        t.start()
        time.sleep(0.05)
        live_snapshot(vm, s3, s2)
        t.join(30)
        filler.close()
        check(done.get("reply") == "OK", f"BLKFILL across a live snapshot: {done}")
        live.fill(24 * MIB, 8 * MIB, 5)
        write(conn, live, 0, MIB, 4)
        check_disk(conn, live, "after s3")
        conn.close()
    for mode in ("copy", "ondemand"):
        for snap, model, upto in ((s1, m1, SIZE), (s2, m2, SIZE), (s3, m3, 24 * MIB)):
            vm, conn = restored(workdir, f"r-{mode}", snap, mode, work)
            try:
                got, want = guest_sum(conn, 0, 0, upto), file_sum(model.path, 0, upto)
                check(got == want, f"{mode} revert to live {os.path.basename(snap)}: the disk differs")
                gencheck(conn, f"{mode} revert to live {os.path.basename(snap)}")
            finally:
                conn.close()
                vm.close()


def snapshot_job(vm):
    return vm.ok("GET", "vm.info")["vsnap"]["snapshot_job"]


def case_live_cancel_seal(workdir):
    """A cancel while a live snapshot seals a disk's 512 MiB overlay into its
    layer (after the stop, before the memory layer) ends it within a step:
    409 cancelled well within a second, nothing left, the disk still on its
    overlay with every write, and the next live snapshot takes it all."""
    size = 1024 * MIB
    img = image(workdir, "disk.img", size)
    work = os.path.join(workdir, "work")
    model = Model(workdir, "seal", size=size)
    s1, cancelled, s2 = (os.path.join(workdir, n) for n in ("s1", "cancelled", "s2"))
    with ApiShim(SHIM, workdir=workdir, name="src") as vm:
        conn = boot(vm, [{"path": img, "id": "vda"}], work, memory_mib=256, cmdline="vsnap.gen_mib=16")
        live_snapshot(vm, s1)  # the image becomes the base: later writes go to the overlay
        write(conn, model, 0, 512 * MIB, 6)
        status = {}
        t = threading.Thread(target=lambda: status.update(
            answer=vm.api("PUT", "vm.snapshot", {"destination_url": "file://" + cancelled, "live": True,
                                                 "mode": "diff", "parent_url": "file://" + s1}, timeout=120),
            at=time.monotonic()))
        t.start()
        deadline = time.monotonic() + 60
        job = snapshot_job(vm)
        while not (job and job["phase"] == "writing") and time.monotonic() < deadline:
            time.sleep(0.001)
            job = snapshot_job(vm)
        t0 = time.monotonic()
        vm.ok("PUT", "vm.cancel-snapshot")
        t.join(120)
        took_ms = (status["at"] - t0) * 1e3
        code, reply = status["answer"]
        ended = re.search(r"its end ([0-9.]+) ms after the cancel", vm.read(vm.log_path))
        print(f"cancelled while writing ({job}): {code} {took_ms:.1f} ms after the cancel; the shim ended the job "
              f"{ended.group(1) if ended else '?'} ms after it")
        check(job["written_pages"] == 0, f"the cancel came after the disk's seal: {job}")
        check(code == 409 and "cancelled" in error_message(reply), f"the cancelled snapshot: {code} {reply}")
        check(took_ms < 1000, f"a cancel while a disk's layer is sealed took {took_ms:.0f} ms")
        left = [n for n in os.listdir(workdir) if "cancelled" in n]
        check(left == [], f"the cancelled snapshot left {left}")
        check_disk(conn, model, "after the cancelled live snapshot")
        live_snapshot(vm, s2, s1)
        m2 = model.copy(workdir, "s2")
        conn.close()
    vm, conn = restored(workdir, "r", s2, "copy", work)
    try:
        check_disk(conn, m2, "the live snapshot after the cancel, restored")
    finally:
        conn.close()
        vm.close()


CASES = {
    "live": case_live,
    "live_cancel_seal": case_live_cancel_seal,
    "locks": case_locks,
    "contents": case_contents,
    "layer_path": case_layer_path,
    "enospc": case_enospc,
    "kill_snapshot": case_kill_snapshot,
    "flush_crash": case_flush_crash,
    "chain64": case_chain64,
    "fold": case_fold,
}


def main():
    workdir = tempfile.mkdtemp(prefix=f"vsnap-blk-layers-{CASE}-")
    os.environ["TMPDIR"] = workdir
    try:
        CASES[CASE](workdir)
    except Fail as e:
        print(f"FAIL {CASE}: {e}")
        return 1
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"ok {CASE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

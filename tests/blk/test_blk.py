#!/usr/bin/python3
"""virtio-blk end to end: the real vsnap-shim on KVM, the test guest's polled
virtio-blk driver and its BLK* commands on the command port, disk images in
a private temporary directory.

    test_blk.py <vsnap-shim> <vsnap-testguest> <vsnap-pattern> <case> [<vsnap-deny-syscall>]

One meson test per case. Every expected checksum comes from the host: the
pattern's (vsnap-pattern SEED LENGTH) or the image file's own bytes
(vsnap-pattern --sum-file), so the guest is checked against the file, not
against itself.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SHIM, GUEST, PATTERN, CASE = sys.argv[1:5]
NO_URING = sys.argv[5] if len(sys.argv) > 5 else None  # vsnap-deny-syscall
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "persist"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from persisttest import ApiShim, Conn, Fail, MIB, check, connect  # noqa: E402
from vsnaptest import Shim, error_message, wait_command_port  # noqa: E402
import blktest  # noqa: E402
from blktest import (SECTOR, allocated, boot, counters, expect, file_sum, fill_and_check, fill_file,  # noqa: E402
                     guest_sum, image, pattern_sum, sha256, zero_sum)

blktest.PATTERN, blktest.GUEST = PATTERN, GUEST


# --- cases -----------------------------------------------------------------------

def case_fill_sum(workdir):
    """Two disks: capacity, serial and config as given; fills at sector
    offsets read back by the guest and found in the files; the host's own
    writes are read by the guest; counters count exactly; ranges past the end
    are refused by the device; FLUSH."""
    a = image(workdir, "a.img", 64 * MIB)
    b = image(workdir, "b.img", 16 * MIB + 3 * SECTOR)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": a, "serial": "disk-a"}, {"path": b, "id": "second"}])
        expect(conn, "BLKINFO 0", f"BLK 0 {64 * MIB // SECTOR} 0")
        expect(conn, "BLKINFO 1", f"BLK 1 {(16 * MIB + 3 * SECTOR) // SECTOR} 0")
        expect(conn, "BLKINFO 2", "ERR no such disk")
        expect(conn, "BLKID 0", "ID disk-a")
        expect(conn, "BLKID 1", "ID second")  # no serial: the id
        disks = vm.ok("GET", "vm.info")["config"]["disks"]
        check([(d["id"], d["path"]) for d in disks] == [("_disk0", a), ("second", b)], f"vm.info disks: {disks}")
        check("disk 1: 32771 sectors" in vm.serial(), "the guest did not list disk 1" + vm.describe())

        before = {"_disk0": counters(vm, "_disk0"), "second": counters(vm, "second")}
        fills = [(0, a, 0, 4 * MIB, 7, 4), (0, a, 3 * SECTOR, MIB + 5 * SECTOR, 9, 2),
                 (1, b, 3 * SECTOR, 8 * MIB, 11, 8), (0, a, 60 * MIB, 4 * MIB, 13, 4)]
        for disk, path, offset, length, seed, _ in fills:
            fill_and_check(conn, disk, path, offset, length, seed)
        fill_file(b, 12 * MIB, MIB, 21)  # the host writes, the guest reads it
        check(guest_sum(conn, 1, 12 * MIB, MIB) == pattern_sum(21, MIB), "the guest does not see the host's write")
        expect(conn, "BLKFLUSH 0", "OK")

        for disk_id, disk in (("_disk0", 0), ("second", 1)):
            c, old = counters(vm, disk_id), before[disk_id]
            mine = [f for f in fills if f[0] == disk]
            wrote = sum(f[3] for f in mine)
            read = wrote + (MIB if disk == 1 else 0)
            delta = {k: c[k] - old[k] for k in c}
            check(delta["write_bytes"] == wrote and delta["write_ops"] == sum(f[5] for f in mine),
                  f"{disk_id} write counters moved by {delta}, {wrote} bytes were written")
            check(delta["read_bytes"] == read, f"{disk_id} read {delta['read_bytes']} bytes, expected {read}")
            check(c["io_errors"] == 0 and c["guest_errors"] == 0, f"{disk_id} counters: {c}")
        check(counters(vm, "_disk0")["flush_ops"] - before["_disk0"]["flush_ops"] == 1, "FLUSH not counted")

        # Past the end: the guest sends it, the device refuses it.
        expect(conn, f"BLKSUM 1 {16 * MIB + 2 * SECTOR:#x} 1024", "ERR ioerr")
        expect(conn, f"BLKFILL 0 {64 * MIB:#x} 512 1", "ERR ioerr")
        expect(conn, "BLKFILL 0 100 512 1", "ERR offset and length must be numbers, multiples of 512")
        check(counters(vm, "_disk0")["guest_errors"] == 1, "the refused write was not counted as a guest error")
        check(os.path.getsize(a) == 64 * MIB, "a refused write grew the image")
        conn.close()


def case_many_disks(workdir):
    """A vsock device and seven disks (every free interrupt line): each its
    own; one more disk is refused at vm.create."""
    paths = [image(workdir, f"d{i}.img", (i + 1) * MIB) for i in range(7)]
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        too_many = {"payload": {"kernel": GUEST}, "vsock": {"cid": 3, "socket": vm.vsock_path},
                    "disks": [{"path": paths[0], "id": f"x{i}"} for i in range(8)]}
        status, reply = vm.api("PUT", "vm.create", too_many)
        check(status == 400 and "8 virtio devices" in error_message(reply), f"eight disks and vsock: {status} {reply}")
        conn = boot(vm, [{"path": p} for p in paths])
        for i, path in enumerate(paths):
            expect(conn, f"BLKINFO {i}", f"BLK {i} {(i + 1) * MIB // SECTOR} 0")
            expect(conn, f"BLKFILL {i} 0 {(i + 1) * MIB:#x} {100 + i}", "OK")
        for i, path in enumerate(paths):
            want = pattern_sum(100 + i, (i + 1) * MIB)
            check(guest_sum(conn, i, 0, (i + 1) * MIB) == want and file_sum(path, 0, (i + 1) * MIB) == want,
                  f"disk {i} does not hold its own fill")
        c = vm.ok("GET", "vm.counters")
        check(all(c[f"_disk{i}"]["write_bytes"] == (i + 1) * MIB for i in range(7)), f"counters: {c}")
        conn.close()


def case_copy(workdir):
    """BLKCOPY: a region of one disk onto another at the same offset, the
    blocks that read as zeros skipped (what the destination held there stays,
    and the answer counts only the bytes written); a read-only destination
    is ERR readonly."""
    src = image(workdir, "src.img", 8 * MIB)
    fill_file(src, 0, 1 * MIB, 7)
    fill_file(src, 3 * MIB + 4096, 8192, 8)        # a short run between holes
    fill_file(src, 6 * MIB, 2 * MIB, 9)            # up to the end of the disk
    dst = image(workdir, "dst.img", 8 * MIB)
    fill_file(dst, 4 * MIB, MIB, 10)               # under a hole of src: kept
    model = os.path.join(workdir, "model.img")
    shutil.copyfile(dst, model)
    with open(src, "rb") as f, open(model, "r+b") as m:
        for off, length in ((0, MIB), (3 * MIB + 4096, 8192), (6 * MIB, 2 * MIB)):
            f.seek(off)
            m.seek(off)
            m.write(f.read(length))
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": src, "readonly": True}, {"path": dst}])
        expect(conn, f"BLKCOPY 0 1 0 {8 * MIB:#x}", f"OK {3 * MIB + 8192}")
        want = file_sum(model, 0, 8 * MIB)
        check(guest_sum(conn, 1, 0, 8 * MIB) == want, "the guest reads another copy than the model's")
        expect(conn, f"BLKCOPY 1 0 0 {MIB:#x}", "ERR readonly")
        expect(conn, f"BLKCOPY 0 2 0 {MIB:#x}", "ERR no such disk")
        conn.close()
    check(sha256(dst) == sha256(model), "the destination image is not the model")


def case_readonly(workdir):
    """A read-only disk: VIRTIO_BLK_F_RO, reads work, every write is answered
    IOERR (the guest says ERR readonly), the image's bytes never change."""
    ro = image(workdir, "ro.img", 8 * MIB)
    fill_file(ro, 0, 8 * MIB, 5)
    digest = sha256(ro)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": ro, "readonly": True}])
        expect(conn, "BLKINFO 0", f"BLK 0 {8 * MIB // SECTOR} 1")
        check(guest_sum(conn, 0, 0, 8 * MIB) == pattern_sum(5, 8 * MIB), "read-only disk reads wrong")
        for command in ("BLKFILL 0 0 4096 1", "BLKFILL 0 0x100000 0x200000 2", "BLKZERO 0 0 4096 0",
                        "BLKZERO 0 0 4096 1", "BLKDISCARD 0 0 4096"):
            expect(conn, command, "ERR readonly")
        expect(conn, "BLKFLUSH 0", "OK")
        expect(conn, "BLKBADPKT 0", "OK 16")
        check(guest_sum(conn, 0, 0, 8 * MIB) == pattern_sum(5, 8 * MIB), "read-only disk changed")
        c = counters(vm, "_disk0")
        check(c["write_ops"] == 0 and c["write_bytes"] == 0, f"counters of a read-only disk: {c}")
        conn.close()
    check(sha256(ro) == digest, "the read-only image's bytes changed")


def case_bad_image(workdir):
    """Missing, unusable or refused images: vm.create answers 400 naming the
    field and the path, and nothing is created or started. An image that
    vanishes between vm.create and vm.boot fails the boot (500) and the VM
    stays Created."""
    good = image(workdir, "good.img", MIB)
    tiny = os.path.join(workdir, "tiny.img")
    with open(tiny, "wb") as f:
        f.write(b"x" * 100)
    locked = image(workdir, "immutable.img", MIB)
    immutable = subprocess.run(["chattr", "+i", locked], capture_output=True).returncode == 0
    try:
        with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
            base = {"payload": {"kernel": GUEST}, "vsock": {"cid": 3, "socket": vm.vsock_path},
                    "serial": {"mode": "File", "file": vm.serial_path}}
            cases = [({"path": os.path.join(workdir, "missing.img")}, "No such file or directory"),
                     ({"path": workdir}, "not a regular file or a block device"),
                     ({"path": tiny}, "less than one 512-byte sector"),
                     ({"path": good, "image_type": "Qcow2"}, "'disks[0].image_type': 'Qcow2' is not supported"),
                     ({"path": good, "vhost_user": True}, "'disks[0].vhost_user'")]
            if immutable:
                cases.append(({"path": locked}, "Operation not permitted"))
            for disk, needle in cases:
                status, reply = vm.api("PUT", "vm.create", dict(base, disks=[disk]))
                check(status == 400 and needle in error_message(reply), f"vm.create with {disk}: {status} {reply}")
                if "path" in disk and "image_type" not in disk and "vhost_user" not in disk:
                    check(disk["path"] in error_message(reply), f"the error does not name the path: {reply}")
                check(vm.api("GET", "vm.info")[0] == 404, f"a VM exists after a refused vm.create ({disk})")
                check(not os.path.exists(vm.vsock_path) and not os.path.exists(vm.serial_path),
                      "a refused vm.create started something")
                print(f"refused {disk}: {error_message(reply)}")
            if immutable:  # read-only, the same file is fine
                vm.ok("PUT", "vm.create", dict(base, disks=[{"path": locked, "readonly": True}]))
                vm.ok("PUT", "vm.delete")

            gone = image(workdir, "gone.img", MIB)
            vm.ok("PUT", "vm.create", dict(base, disks=[{"path": gone}]))
            os.unlink(gone)
            status, reply = vm.api("PUT", "vm.boot")
            check(status == 500 and gone in error_message(reply), f"vm.boot without the image: {status} {reply}")
            info = vm.ok("GET", "vm.info")
            check(info["state"] == "Created" and gone in info["vsnap"]["last_error"], f"vm.info: {info['state']}")
            image(workdir, "gone.img", MIB)
            vm.ok("PUT", "vm.boot")
            conn = connect(vm)
            expect(conn, "BLKINFO 0", f"BLK 0 {MIB // SECTOR} 0")
            conn.close()
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", locked])


def case_malformed(workdir):
    """BLKBADPKT: malformed chains (outside RAM, too long, wrong direction,
    beyond the capacity, no status byte, loops, ...) are each answered as the
    spec says, counted, logged a bounded number of times, and the shim goes on
    serving good requests."""
    rw = image(workdir, "rw.img", 16 * MIB)
    ro = image(workdir, "ro.img", MIB)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": rw}, {"path": ro, "readonly": True}])
        for _ in range(3):
            expect(conn, "BLKBADPKT 0", "OK 16")
        expect(conn, "BLKBADPKT 1", "OK 16")
        c0, c1 = counters(vm, "_disk0"), counters(vm, "_disk1")
        # One of the 16 is an unknown request type: UNSUPP, not a guest error.
        check(c0["guest_errors"] == 3 * 15 and c0["unsupported"] == 3, f"rw disk counters: {c0}")
        check(c1["guest_errors"] == 13, f"ro disk counters (its two range requests are plain writes): {c1}")
        check(c0["io_errors"] == 0 and c0["read_ops"] == 0 and c0["write_ops"] == 0, f"rw disk counters: {c0}")
        fill_and_check(conn, 0, rw, 0, 8 * MIB, 31)
        check(vm.state() == "Running", "the VM stopped")
        log = vm.read(vm.log_path)
        logged = log.count("guest error:")
        check(0 < logged <= 2 * 21, f"{logged} guest-error lines for {c0['guest_errors'] + c1['guest_errors']} errors")
        check("further guest errors are only counted" in log, "the log does not say it stopped logging")
        conn.close()


def case_discard_zeroes(workdir):
    """WRITE_ZEROES makes a range read as zeros (with unmap it frees the
    blocks of a sparse image); DISCARD frees blocks and the range then reads
    as zeros (a raw file's holes). A disk with sparse=false offers no DISCARD
    and keeps its blocks."""
    sparse = image(workdir, "sparse.img", 16 * MIB)
    full = image(workdir, "full.img", 16 * MIB)
    for path in (sparse, full):
        fill_file(path, 0, 16 * MIB, 3)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": sparse}, {"path": full, "sparse": False}])
        blocks = allocated(sparse)
        expect(conn, f"BLKZERO 0 {MIB:#x} {MIB:#x} 0", "OK")
        check(file_sum(sparse, MIB, MIB) == zero_sum(MIB) == guest_sum(conn, 0, MIB, MIB), "WRITE_ZEROES left data")
        expect(conn, f"BLKZERO 0 {2 * MIB:#x} {MIB:#x} 1", "OK")
        check(file_sum(sparse, 2 * MIB, MIB) == zero_sum(MIB), "WRITE_ZEROES (unmap) left data")
        # (The file system's own metadata may take a block of what was freed.)
        check(allocated(sparse) <= blocks - MIB // 2, f"WRITE_ZEROES with unmap freed nothing ({blocks} -> "
              f"{allocated(sparse)} bytes)")
        blocks = allocated(sparse)
        expect(conn, f"BLKDISCARD 0 {4 * MIB:#x} {2 * MIB:#x}", "OK")
        check(allocated(sparse) <= blocks - MIB, f"DISCARD freed nothing ({blocks} -> {allocated(sparse)})")
        check(guest_sum(conn, 0, 4 * MIB, 2 * MIB) == zero_sum(2 * MIB), "a discarded range does not read as zeros")
        check(file_sum(sparse, 0, MIB) == pattern_sum(3, MIB), "the range before the zeroed ones changed")
        check(file_sum(sparse, 6 * MIB, 10 * MIB) == file_sum(full, 6 * MIB, 10 * MIB), "the rest changed")

        blocks = allocated(full)
        expect(conn, f"BLKDISCARD 1 0 {MIB:#x}", "ERR unsupported")
        expect(conn, f"BLKZERO 1 0 {MIB:#x} 1", "OK")
        check(file_sum(full, 0, MIB) == zero_sum(MIB), "WRITE_ZEROES on a non-sparse disk left data")
        check(allocated(full) == blocks, f"a non-sparse disk lost blocks ({blocks} -> {allocated(full)})")
        c0, c1 = counters(vm, "_disk0"), counters(vm, "_disk1")
        check(c0["write_zeroes_ops"] == 2 and c0["discard_ops"] == 1, f"counters: {c0}")
        check(c1["write_zeroes_ops"] == 1 and c1["discard_ops"] == 0, f"counters: {c1}")
        conn.close()


def wait_write_bytes(vm, disk_id, value, timeout_s=60):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = counters(vm, disk_id)["write_bytes"]
        if got >= value:
            return got
        time.sleep(0.05)
    raise Fail(f"{disk_id} wrote {got} bytes within {timeout_s}s, expected {value}" + vm.describe())


def pause_when_written(vm, disk_id, at_least, timeout_s=60):
    """Pause the VM as soon as the disk has written at_least bytes; the bytes
    written at the pause, or None if the guest stopped writing first."""
    deadline = time.monotonic() + timeout_s
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        written = counters(vm, disk_id)["write_bytes"]
        if written >= at_least:
            vm.ok("PUT", "vm.pause")
            return counters(vm, disk_id)["write_bytes"]
        if written != last:
            last, since = written, time.monotonic()
        elif time.monotonic() - since > 2:
            return None  # done before reaching it
        time.sleep(0.005)
    raise Fail(f"{disk_id} did not reach {at_least} bytes within {timeout_s}s")


def case_snapshot_restore(workdir):
    """Pausing completes what is in flight and holds the disk still; a
    snapshot saves the disk's transport; a VM restored from it (copy and on
    demand) drives the same disk at once and reads what the disk held (its
    chain of disk layers over the image, which is never written again).
    Snapshots taken at several points of a long fill restore (more than the
    guest's 10 s request timeout later: its clock jumps by that) into VMs that
    each write exactly the rest of the fill."""
    img = image(workdir, "disk.img", 1024 * MIB)
    big = 768 * MIB  # takes the guest a while: the pauses land in the middle
    mids = []  # (snapshot directory, bytes of the fill done at its pause)
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        # O_DIRECT: the guest spends most of the fill waiting for the device,
        # so the pauses catch it inside its waits.
        conn = boot(src, [{"path": img, "direct": True}])
        fill_and_check(conn, 0, img, 0, 8 * MIB, 3)
        busy = Conn(src.vsock_path, timeout=120)
        result = {}
        before = counters(src, "_disk0")["write_bytes"]
        worker = threading.Thread(target=lambda: result.update(reply=busy.cmd(f"BLKFILL 0 {16 * MIB:#x} "
                                                                             f"{big:#x} 4")))
        worker.start()
        for n, mark in enumerate((16 * MIB, 200 * MIB, 400 * MIB, 600 * MIB)):
            written = pause_when_written(src, "_disk0", before + mark)
            if written is None:
                break
            done = written - before
            check(0 < done < big, f"the pause did not land inside the fill ({done} bytes done)")
            if n == 0:
                time.sleep(0.5)
                check(counters(src, "_disk0")["write_bytes"] == written,
                      "the disk kept working while the VM was paused")
            mid = os.path.join(workdir, f"mid{n}")
            status, reply = src.snapshot(mid)
            check(status == 204, f"vm.snapshot: {status} {reply}")
            mids.append((mid, done))
            src.ok("PUT", "vm.resume")
        mids_taken = time.monotonic()
        check(len(mids) >= 2, f"only {len(mids)} pauses landed inside the fill")
        state = json.load(open(os.path.join(mids[0][0], "state.json")))["devices"]["disks"]
        check(len(state) == 1 and state[0]["id"] == "_disk0" and
              int(state[0]["capacity"], 16) == 1024 * MIB // SECTOR, f"state.json disks: {state}")
        config = json.load(open(os.path.join(mids[0][0], "config.json")))
        check(config["disks"][0]["path"] == img, f"config.json disks: {config['disks']}")
        worker.join(timeout=120)
        check(result.get("reply") == "OK", f"the fill paused in the middle answered {result.get('reply')!r}")
        # After the first snapshot the image is the read-only base: the rest
        # of the fill went into the disk's overlay.
        check(guest_sum(conn, 0, 16 * MIB, big) == pattern_sum(4, big), "the paused fill did not complete")
        check(file_sum(img, 16 * MIB + big - MIB, MIB) == zero_sum(MIB), "the image was written after its first "
              "snapshot")
        busy.close()
        idle = os.path.join(workdir, "idle")
        src.snapshot_paused(idle)
        conn.close()
    # Restored in the middle of the fill, the guest writes exactly what was left.
    time.sleep(max(0.0, mids_taken + 11 - time.monotonic()))
    for n, (mid, done) in enumerate(mids):
        with ApiShim(SHIM, workdir=workdir, name=f"dst-mid{n}") as dst:
            status, reply = dst.restore(mid, "copy")
            check(status == 204, f"restore of {mid}: {status} {reply}")
            got = wait_write_bytes(dst, "_disk0", big - done)
            time.sleep(0.3)
            check(counters(dst, "_disk0")["write_bytes"] == got == big - done,
                  f"the guest restored from {mid} wrote {got} bytes of the fill, {big - done} were left")
            conn = connect(dst)
            check(guest_sum(conn, 0, 16 * MIB, big) == pattern_sum(4, big), f"the fill finished after {mid} differs")
            conn.close()
    # What the disk holds at the idle snapshot, computed on the host.
    model = image(workdir, "model.img", 1024 * MIB)
    fill_file(model, 0, 8 * MIB, 3)
    fill_file(model, 16 * MIB, big, 4)
    for mode in ("copy", "ondemand"):
        dst = ApiShim(SHIM, workdir=workdir, name=f"dst-{mode}")
        try:
            status, reply = dst.restore(idle, mode)
            check(status == 204, f"restore ({mode}): {status} {reply}")
            conn = connect(dst)
            expect(conn, "BLKINFO 0", f"BLK 0 {1024 * MIB // SECTOR} 0")
            check(guest_sum(conn, 0, 0, 8 * MIB) == pattern_sum(3, 8 * MIB), f"{mode}: region 1")
            for offset in (16 * MIB, 400 * MIB, 16 * MIB + big - 8 * MIB):
                check(guest_sum(conn, 0, offset, 8 * MIB) == file_sum(model, offset, 8 * MIB),
                      f"{mode}: region 2 at {offset:#x}")
            expect(conn, f"BLKFILL 0 {900 * MIB:#x} {MIB:#x} {10 + len(mode)}", "OK")
            check(guest_sum(conn, 0, 900 * MIB, MIB) == pattern_sum(10 + len(mode), MIB), f"{mode}: a new write")
            check(file_sum(img, 900 * MIB, MIB) == zero_sum(MIB), f"{mode}: the write reached the base image")
            expect(conn, "BLKBADPKT 0", "OK 16")
            c = counters(dst, "_disk0")
            check(c["write_bytes"] == MIB, f"{mode}: counters start afresh: {c}")
            conn.close()
        finally:
            dst.close()
    # A snapshot's disk that no longer matches is refused by name.
    os.truncate(img, 256 * MIB)
    with ApiShim(SHIM, workdir=workdir, name="dst-shrunk") as dst:
        status, reply = dst.restore(idle, "copy")
        check(status == 400 and "_disk0" in error_message(reply) and img in error_message(reply) and
              "changed since it became the base" in error_message(reply),
              f"restore onto a shrunk image: {status} {reply}")


def case_enospc(workdir):
    """The image's file system fills up: the guest's write gets IOERR, the VM
    keeps running and serving, and writes work again once there is room."""
    full_file_system(workdir, {}, ring=False)


def full_file_system(workdir, disk, ring):
    """The ENOSPC scenario on an image in an 8 MiB tmpfs (disk: extra disk
    fields); ring: its writes go through the io_uring, before and after."""
    mnt = os.path.join(workdir, "small")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt]).returncode != 0:
        print("cannot mount a tmpfs here (not root?)")
        sys.exit(77)

    def ring_transfers(vm):
        return counters(vm, "_disk0").get("ring_transfers", 0)

    try:
        img = image(mnt, "disk.img", 64 * MIB)  # sparse: room for 8 MiB of it
        with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
            conn = boot(vm, [{"path": img, **disk}])
            fill_and_check(conn, 0, img, 0, 4 * MIB, 1)
            before = ring_transfers(vm)
            expect(conn, f"BLKFILL 0 {8 * MIB:#x} {16 * MIB:#x} 2", "ERR ioerr")
            c = counters(vm, "_disk0")
            check(c["io_errors"] >= 1 and (not ring or c["ring_transfers"] > before), f"counters: {c}")
            check("No space left on device" in vm.read(vm.log_path), "the log does not say why")
            expect(conn, "PING", "PONG")
            check(vm.state() == "Running", "the VM stopped")
            check(guest_sum(conn, 0, 0, 4 * MIB) == pattern_sum(1, 4 * MIB), "earlier data changed")
            expect(conn, f"BLKDISCARD 0 {8 * MIB:#x} {16 * MIB:#x}", "OK")
            if ring:
                before = ring_transfers(vm)
                reply = conn.cmd(f"BLKBENCH 0 randwrite {8 * MIB:#x} {2 * MIB:#x} 4096 8 400")
                check(reply.startswith("BENCH "), f"BLKBENCH randwrite after ENOSPC: {reply}")
                check(ring_transfers(vm) > before, "the writes after ENOSPC left the ring")
            fill_and_check(conn, 0, img, 8 * MIB, MIB, 3)
            conn.close()
    finally:
        subprocess.run(["umount", mnt])


def case_block_device(workdir):
    """A block device (a loop device over a file) as the disk."""
    backing = image(workdir, "backing.img", 32 * MIB)
    res = subprocess.run(["losetup", "--find", "--show", backing], capture_output=True, text=True)
    if res.returncode != 0:
        print(f"no loop device here: {res.stderr.strip()}")
        sys.exit(77)
    dev = res.stdout.strip()
    try:
        with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
            conn = boot(vm, [{"path": dev}])
            expect(conn, "BLKINFO 0", f"BLK 0 {32 * MIB // SECTOR} 0")
            fill_and_check(conn, 0, dev, MIB, 8 * MIB, 5)
            expect(conn, "BLKFLUSH 0", "OK")
            expect(conn, f"BLKZERO 0 {MIB:#x} {MIB:#x} 0", "OK")
            check(file_sum(dev, MIB, MIB) == zero_sum(MIB), "WRITE_ZEROES on a block device")
            expect(conn, f"BLKDISCARD 0 {4 * MIB:#x} {MIB:#x}", "OK")
            expect(conn, "BLKBADPKT 0", "OK 16")
            conn.close()
        check(file_sum(backing, 2 * MIB, 7 * MIB) == file_sum(dev, 2 * MIB, 7 * MIB), "the loop device's file")
    finally:
        subprocess.run(["losetup", "--detach", dev])


def case_direct(workdir):
    """direct=true (O_DIRECT): the same results without the host's cache."""
    img, ro = image(workdir, "direct.img", 16 * MIB), image(workdir, "direct-ro.img", 16 * MIB)
    fill_file(ro, 8 * MIB, MIB, 8)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": img, "direct": True}, {"path": ro, "direct": True, "readonly": True}])
        fill_and_check(conn, 0, img, 0, 4 * MIB, 6)
        fill_and_check(conn, 0, img, 4 * MIB + 3 * SECTOR, MIB + SECTOR, 7)
        check(guest_sum(conn, 1, 8 * MIB, MIB) == pattern_sum(8, MIB), "direct read-only disk")
        expect(conn, "BLKZERO 0 0 4096 0", "OK")
        check(file_sum(img, 0, 4096) == zero_sum(4096), "WRITE_ZEROES with O_DIRECT")
        conn.close()


def case_hotplug(workdir):
    """virtio-mmio cannot hot-plug: vm.add-disk and vm.remove-device on a
    running or paused VM are 405 and say why; once it is shut down a disk is
    added (and shows at the next boot) or removed."""
    first, second = image(workdir, "a.img", MIB), image(workdir, "b.img", 2 * MIB)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": first}])
        for endpoint, body in (("vm.add-disk", {"path": second}), ("vm.remove-device", {"id": "_disk0"})):
            status, reply = vm.api("PUT", endpoint, body)
            check(status == 405 and "hot-plugged" in error_message(reply), f"{endpoint} while running: {status} {reply}")
        vm.ok("PUT", "vm.pause")
        check(vm.api("PUT", "vm.add-disk", {"path": second})[0] == 405, "vm.add-disk while paused")
        check(vm.api("PUT", "vm.remove-device", {"id": "nope"})[0] == 404, "vm.remove-device of no device")
        conn.close()
        vm.ok("PUT", "vm.shutdown")
        vm.ok("PUT", "vm.add-disk", {"path": second, "id": "extra"})
        vm.ok("PUT", "vm.boot")
        conn = connect(vm)
        expect(conn, "BLKINFO 1", f"BLK 1 {2 * MIB // SECTOR} 0")
        expect(conn, "BLKID 1", "ID extra")
        conn.close()
        vm.ok("PUT", "vm.shutdown")
        vm.ok("PUT", "vm.remove-device", {"id": "_disk0"})
        vm.ok("PUT", "vm.boot")
        conn = connect(vm)
        expect(conn, "BLKINFO 0", f"BLK 0 {2 * MIB // SECTOR} 0")
        expect(conn, "BLKINFO 1", "ERR no such disk")
        conn.close()


def case_cli(workdir):
    """--disk on the command line (direct mode), as Cloud Hypervisor's."""
    img, ro = image(workdir, "cli.img", 4 * MIB), image(workdir, "cli-ro.img", 4 * MIB)
    vsock = os.path.join(workdir, "cli.vsock")
    with Shim(SHIM, GUEST, memory="256M", workdir=workdir,
              extra_args=["--vsock", f"cid=3,socket={vsock}", "--disk", f"path={img},serial=from-cli",
                          "--disk", f"path={ro},readonly=on,id=again"]) as vm:
        conn = wait_command_port(vsock, timeout=30)
        try:
            expect(conn, "BLKID 0", "ID from-cli")
            expect(conn, "BLKINFO 1", f"BLK 1 {4 * MIB // SECTOR} 1")
            fill_and_check(conn, 0, img, 0, MIB, 2)
        finally:
            conn.close()



# --- io='io_uring' (vsnap_io) ------------------------------------------------------

def ring_counters(vm, disk_id):
    c = counters(vm, disk_id)
    return c["ring_transfers"], c["ring_max_in_flight"]


def scattered_fill(conn, disk, path, span, seeds):
    """BLKFILLs at scattered 4 KiB-aligned offsets, four 1 MiB requests in
    flight each: the guest and the file must both hold every one afterwards."""
    step = span // len(seeds)  # each region stays inside its own step
    regions = [(i * step + (i * 7 % 5) * 4096, min(MIB + (i * 13 + 1) * 4096, step - 5 * 4096), seed)
               for i, seed in enumerate(seeds)]
    for offset, length, seed in regions:
        expect(conn, f"BLKFILL {disk} {offset:#x} {length:#x} {seed}", "OK")
    for offset, length, seed in regions:
        want = pattern_sum(seed, length)
        check(guest_sum(conn, disk, offset, length) == want, f"guest at {offset:#x}+{length:#x}: not seed {seed}")
        check(file_sum(path, offset, length) == want, f"{path} at {offset:#x}+{length:#x}: not seed {seed}")


def case_uring(workdir):
    """vsnap_io io_uring. O_DIRECT: fills of many requests in flight land
    where they should (guest and file agree with the pattern), 32 random
    writes in flight at once leave the guest reading exactly the file, an
    unaligned fill (the bounce buffer, off the ring), FLUSH and WRITE_ZEROES
    between ring transfers. Cached: writes stay on the thread, reads go
    through the ring; BLKCOPY from it onto the direct disk. The counters show
    the ring did the transfers, several at once."""
    img, direct = image(workdir, "ring.img", 64 * MIB), image(workdir, "ring-direct.img", 64 * MIB)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        conn = boot(vm, [{"path": img, "vsnap_io": "io_uring"},
                         {"path": direct, "direct": True, "vsnap_io": "io_uring", "id": "direct"}])
        check(vm.ok("GET", "vm.info")["config"]["disks"][1]["vsnap_io"] == "io_uring", "vm.info lost vsnap_io")
        scattered_fill(conn, 1, direct, 64 * MIB, range(1, 17))
        fill_and_check(conn, 1, direct, 9 * MIB + 3 * SECTOR, MIB + SECTOR, 31)
        expect(conn, "BLKFLUSH 1", "OK")
        expect(conn, f"BLKZERO 1 {MIB:#x} {64 * 1024:#x} 0", "OK")
        check(file_sum(direct, MIB, 64 * 1024) == zero_sum(64 * 1024), "WRITE_ZEROES among ring writes")
        before = counters(vm, "direct")["ring_transfers"]
        reply = conn.cmd(f"BLKBENCH 1 randwrite 0 {32 * MIB:#x} 4096 32 4000")
        check(reply.startswith("BENCH "), f"BLKBENCH randwrite: {reply}")
        check(guest_sum(conn, 1, 0, 32 * MIB) == file_sum(direct, 0, 32 * MIB), "after 32 writes in flight the "
              "guest reads another disk than the file")
        transfers, most = ring_counters(vm, "direct")
        check(transfers - before >= 3000 and most >= 8, f"the ring did {transfers - before} of 4000 random writes, "
              f"at most {most} at once")

        fill_and_check(conn, 0, img, 40 * MIB, 8 * MIB, 32)
        expect(conn, f"BLKCOPY 0 1 {40 * MIB:#x} {8 * MIB:#x}", f"OK {8 * MIB}")
        check(file_sum(direct, 40 * MIB, 8 * MIB) == pattern_sum(32, 8 * MIB), "BLKCOPY onto the direct disk")
        transfers, most = ring_counters(vm, "_disk0")
        check(transfers >= 8 and most >= 2, f"the cached disk's ring did {transfers} reads, at most {most} at once")
        for disk_id in ("_disk0", "direct"):
            c = counters(vm, disk_id)
            check(c["io_errors"] == 0 and c["guest_errors"] == 0, f"{disk_id} counters: {c}")
        conn.close()
    check("requests are done one at a time" not in vm.read(vm.log_path), "the ring fell back here")


def case_uring_enospc(workdir):
    """vsnap_io io_uring with O_DIRECT on an image in a full tmpfs: the
    ring's ENOSPC is the guest's IOERR, the VM goes on, earlier data stays,
    and once there is room writes through the ring work again."""
    full_file_system(workdir, {"direct": True, "vsnap_io": "io_uring"}, ring=True)


def case_uring_fallback(workdir):
    """A kernel without io_uring (here: io_uring_setup answered ENOSYS by a
    seccomp filter the shim inherits, as an old kernel answers): one log
    line, the disk does one transfer at a time, the VM runs and its data is
    right. A bad vsnap_io is refused by name."""
    img = image(workdir, "fallback.img", 16 * MIB)
    with ApiShim(SHIM, workdir=workdir, name="vm") as vm:
        status, reply = vm.api("PUT", "vm.create", {"payload": {"kernel": GUEST},
                                                   "disks": [{"path": img, "vsnap_io": "uring"}]})
        check(status == 400 and "vsnap_io" in error_message(reply), f"vsnap_io uring: {status} {reply}")
    with ApiShim(SHIM, workdir=workdir, name="vm2", wrapper=[NO_URING, "io_uring_setup"]) as vm:
        conn = boot(vm, [{"path": img, "vsnap_io": "io_uring"}])
        fill_and_check(conn, 0, img, 0, 4 * MIB, 5)
        c = counters(vm, "_disk0")
        check(c["ring_transfers"] == 0 and c["write_bytes"] == 4 * MIB, f"counters: {c}")
        lines = [l for l in vm.read(vm.log_path).splitlines() if "io_uring" in l]
        check(len(lines) == 1 and "Function not implemented" in lines[0] and "one at a time" in lines[0],
              f"the fallback's log lines: {lines}")
        conn.close()



CASES = {
    "fill_sum": case_fill_sum,
    "uring": case_uring,
    "uring_enospc": case_uring_enospc,
    "uring_fallback": case_uring_fallback,
    "many_disks": case_many_disks,
    "readonly": case_readonly,
    "copy": case_copy,
    "bad_image": case_bad_image,
    "malformed": case_malformed,
    "discard_zeroes": case_discard_zeroes,
    "snapshot_restore": case_snapshot_restore,
    "enospc": case_enospc,
    "block_device": case_block_device,
    "direct": case_direct,
    "hotplug": case_hotplug,
    "cli": case_cli,
}


def main():
    workdir = tempfile.mkdtemp(prefix=f"vsnap-blk-{CASE}-")
    os.environ["TMPDIR"] = workdir  # a shim's default overlay directory goes in here
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

#!/usr/bin/python3
"""Restore by sharing (memory_restore_mode "shared"), end to end: the real
shim, the test guest and its command port. Guest RAM is a private mapping of
one sparse image of the snapshot: clones read the same host pages and hold
only what they write.

    test_shared.py <vsnap-shim> <vsnap-testguest> <vsnap-pattern> <case>
"""

import os
import subprocess
import sys
import time

SHIM, GUEST, PATTERN, CASE = sys.argv[1:5]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from persisttest import ApiShim, FILL_BASE, MIB, check, connect, ram_smaps, run_case  # noqa: E402
from vsnaptest import HugePages, error_message  # noqa: E402

RAM_MIB, FILL_MIB = 512, 64
REGION_A = (FILL_BASE, FILL_MIB * MIB)     # the boot fill
REGION_B = (96 * MIB, 16 * MIB)            # filled before the diff
REGION_Z = (24 * MIB, 4 * MIB)             # zeroed before the diff
OWN = (160 * MIB, 8 * MIB)                 # what each clone writes of its own
CLONES = 4


def source(workdir, name="src", cmdline=""):
    src = ApiShim(SHIM, workdir=workdir, name=name)
    src.boot(GUEST, f"vsnap.fill_mib={FILL_MIB} vsnap.seed=7 vsnap.fill_clean=1 {cmdline}", memory_mib=RAM_MIB)
    return src


def sums(conn, regions=(REGION_A, REGION_B, REGION_Z)):
    return [conn.sum(*r) for r in regions]


def shared(workdir, snap, name, **extra):
    shim = ApiShim(SHIM, workdir=workdir, name=name)
    status, reply = shim.restore(snap, "shared", **extra)
    if status != 204:
        shim.close()
        check(False, f"{name}: shared restore -> {status} {reply}")
    return shim


def images(snap):
    return sorted(n for n in os.listdir(snap) if n.startswith(".memory-image-"))


def make_chain(workdir):
    """base, and d1 over it: region B filled, region Z zeroed; the sums at each."""
    src = source(workdir)
    try:
        conn = connect(src)
        base, d1 = os.path.join(workdir, "base"), os.path.join(workdir, "d1")
        want = {"base": sums(conn)}
        src.snapshot_paused(base)
        conn.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} 11")
        conn.ok(f"ZERO {REGION_Z[0]:#x} {REGION_Z[1]:#x}")
        want["d1"] = sums(conn)
        src.snapshot_paused(d1, base)
        conn.close()
        return base, d1, want
    finally:
        src.close()


def case_chain(workdir):
    """A diff over a base, shared: the image holds each page from the topmost
    layer that has it, zeroed pages included; the base's own image is another."""
    base, d1, want = make_chain(workdir)
    for snap, name in ((d1, "d1"), (base, "base")):
        with shared(workdir, snap, f"dst-{name}") as dst:
            got = sums(connect(dst, 60))
            check(got == want[name], f"shared restore of {name}: {got} != {want[name]}")
            check(dst.ok("GET", "vm.info")["vsnap"]["snapshot"]["restore_mode"] == "shared", "restore_mode")
        check(len(images(snap)) == 1, f"{name}: one image beside it: {images(snap)}")


def case_clones(workdir):
    """Clones of one snapshot at once: each reads the snapshot's data, writes a
    region of its own and reads back only its own; together they hold one
    copy of what they read, plus what they wrote."""
    snap = os.path.join(workdir, "snap")
    with source(workdir) as src:
        conn = connect(src)
        want = conn.sum(*REGION_A)
        conn.close()
        src.snapshot_paused(snap)
    clones = [shared(workdir, snap, f"clone{i}") for i in range(CLONES)]
    try:
        conns = [connect(c, 60) for c in clones]
        for i, c in enumerate(conns):
            check(c.sum(*REGION_A) == want, f"clone {i}: the snapshot's data")
            c.ok(f"FILL {OWN[0]:#x} {OWN[1]:#x} {100 + i}")
        own = [c.sum(*OWN) for c in conns]
        check(len(set(own)) == CLONES, f"each clone holds its own region: {own}")
        for i, c in enumerate(conns):
            check(c.sum(*OWN) == own[i] and c.sum(*REGION_A) == want, f"clone {i} after the others wrote")
            c.close()
        total = sum(ram_smaps(c.proc.pid)["Pss"] for c in clones)
        limit = 1.5 * (FILL_MIB + CLONES * OWN[1] / MIB)
        print(f"{CLONES} clones: their RAM's PSS {total:.0f} MiB in all (limit {limit:.0f}: 1.5 x one working "
              "set + writes)")
        check(total <= limit, f"the clones share too little: PSS {total:.0f} MiB > {limit:.0f}")
    finally:
        for c in clones:
            c.close()


def case_clone_snapshots(workdir):
    """A clone's diff over the shared snapshot and its full snapshot restore
    to exactly what the clone held (its written pages and the image's)."""
    base, d1, want = make_chain(workdir)
    with shared(workdir, d1, "clone") as clone:
        conn = connect(clone, 60)
        conn.ok(f"FILL {OWN[0]:#x} {OWN[1]:#x} 23")
        held = sums(conn, (REGION_A, REGION_B, REGION_Z, OWN))
        conn.close()
        diff, full = os.path.join(workdir, "clone-diff"), os.path.join(workdir, "clone-full")
        clone.snapshot_paused(diff, d1)
        clone.snapshot_paused(full)
    for snap in (diff, full):
        dst = ApiShim(SHIM, workdir=workdir, name="back-" + os.path.basename(snap))
        with dst:
            status, reply = dst.restore(snap, "copy")
            check(status == 204, f"restore {snap}: {status} {reply}")
            got = sums(connect(dst, 60), (REGION_A, REGION_B, REGION_Z, OWN))
            check(got == held, f"{os.path.basename(snap)}: {got} != {held}")


def case_image(workdir):
    """The image is built once and reused; one of another boot is removed; one
    of the wrong size is built again; the shim's kill -9 while building leaves
    none behind."""
    base, d1, want = make_chain(workdir)
    with shared(workdir, d1, "first"):
        pass
    name = images(d1)[0]
    inode = os.stat(os.path.join(d1, name)).st_ino
    with shared(workdir, d1, "second") as dst:
        check(sums(connect(dst, 60)) == want["d1"], "a restore from the built image")
    check(images(d1) == [name] and os.stat(os.path.join(d1, name)).st_ino == inode, "the image is reused")
    layer_id = name[len(".memory-image-"):][:36]
    stale = os.path.join(d1, f".memory-image-{layer_id}-00000000-0000-0000-0000-000000000000")
    os.rename(os.path.join(d1, name), stale)
    os.truncate(stale, 4096)
    with shared(workdir, d1, "after-crash") as dst:
        check(sums(connect(dst, 60)) == want["d1"], "rebuilt after a crash")
    check(images(d1) == [name], f"an image of another boot is removed: {images(d1)}")
    os.truncate(os.path.join(d1, name), 4096)
    with shared(workdir, d1, "short") as dst:
        check(sums(connect(dst, 60)) == want["d1"], "an image cut short is built again")
    os.remove(os.path.join(d1, name))
    killed = ApiShim(SHIM, workdir=workdir, name="killed")
    body_sent = subprocess.Popen(["curl", "-s", "--unix-socket", killed.sock, "-X", "PUT", "-d",
                                  f'{{"source_url": "file://{d1}", "memory_restore_mode": "shared"}}',
                                  "http://localhost/api/v1/vm.restore"], stdout=subprocess.DEVNULL)
    time.sleep(0.05)
    killed.proc.kill()
    killed.close()
    body_sent.wait()
    check(images(d1) in ([], [name]), f"a killed build leaves no partial image: {images(d1)}")


def case_refusals(workdir):
    """Huge pages cannot be shared (400, saying why); an image that does not
    fit its file system fails the restore (500, saying so) and leaves nothing."""
    mnt = os.path.join(workdir, "small")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100m", "tmpfs", mnt]).returncode != 0:
        print("cannot mount a tmpfs here (not root?)")
        sys.exit(77)
    try:
        with source(workdir) as src:
            connect(src).close()
            snap = os.path.join(mnt, "snap")
            src.snapshot_paused(snap)  # its 64 MiB layer fits; the image (64 MiB more) does not
    except Exception:
        subprocess.run(["umount", mnt])
        raise
    try:
        dst = ApiShim(SHIM, workdir=workdir, name="full")
        with dst:
            status, reply = dst.restore(snap, "shared")
            check(status == 500 and "space" in error_message(reply), f"image on a full fs: {status} {reply}")
            check(images(snap) == [], f"left beside the snapshot: {images(snap)}")
            check(dst.api("GET", "vm.info")[0] != 200, "no VM after a failed restore")
    finally:
        subprocess.run(["umount", mnt])
    if HugePages.can_reserve():
        with HugePages(RAM_MIB // 2), ApiShim(SHIM, workdir=workdir, name="huge") as src:
            src.boot(GUEST, f"vsnap.fill_mib={FILL_MIB}", memory_mib=RAM_MIB, hugepages=True)
            connect(src).close()
            hsnap = os.path.join(workdir, "huge-snap")
            src.snapshot_paused(hsnap)
            with ApiShim(SHIM, workdir=workdir, name="huge-dst") as dst:
                status, reply = dst.restore(hsnap, "shared")
                check(status == 400 and "huge pages" in error_message(reply), f"huge pages: {status} {reply}")


CASES = {
    "chain": case_chain,
    "clones": case_clones,
    "clone_snapshots": case_clone_snapshots,
    "image": case_image,
    "refusals": case_refusals,
}

if __name__ == "__main__":
    sys.exit(run_case(CASES, CASE, "vsnap-shared"))

#!/usr/bin/python3
"""The recorded working set of on-demand restores, end to end: the real shim,
the test guest reading back a scattered part of its filled region
(vsnap.ws_mib) before READY.

    test_workset.py <vsnap-shim> <vsnap-testguest> <vsnap-pattern> <case>

A record only orders reads: after every restore, whatever record it found
(fresh, stale, corrupt, hostile, of blocks the guest never touches), the
guest's whole filled region must sum to what the host computes.
"""

import os
import subprocess
import sys
import time

SHIM, GUEST, PATTERN, CASE = sys.argv[1:5]
STORE = os.environ.get("VSNAP_STORE", "vsnap-store")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from persisttest import ApiShim, FILL_BASE, MIB, check, connect, run_case  # noqa: E402

FILL_MIB, WS_MIB, RAM_MIB = 64, 16, 512
BLOCK_PAGES = 16  # 64 KiB fault blocks
GRACE_S = 0.2 + 0.3  # the shim's grace period after READY, and slack for the write


def host_sum(length):
    return subprocess.run([PATTERN, "7", str(length)], capture_output=True, check=True,
                          text=True).stdout.strip()


def make_snapshot(workdir):
    src = ApiShim(SHIM, workdir=workdir, name="src")
    try:
        src.boot(GUEST, f"vsnap.fill_mib={FILL_MIB} vsnap.ws_mib={WS_MIB} vsnap.seed=7", memory_mib=RAM_MIB)
        src.wait_ready(60)
        snap = os.path.join(workdir, "snap")
        src.ok("PUT", "vm.pause")
        src.ok("PUT", "vm.snapshot", {"destination_url": "file://" + snap})
        return snap
    finally:
        src.close()


def restore(workdir, snap, name, **extra):
    """Restore on demand, wait for READY and the grace period, check the whole
    filled region; the ondemand stats and the shim's log."""
    shim = ApiShim(SHIM, workdir=workdir, name=name)
    try:
        status, reply = shim.restore(snap, "ondemand", **extra)
        check(status == 204, f"{name}: restore -> {status} {reply}")
        conn = connect(shim, 60)
        time.sleep(GRACE_S)
        stats = shim.ok("GET", "vm.info")["vsnap"]["snapshot"]["ondemand"]
        got = conn.sum(FILL_BASE, FILL_MIB * MIB)
        conn.close()
        check(got == host_sum(FILL_MIB * MIB), f"{name}: the filled region sums to {got} after the restore")
        print(f"{name}: {stats}")
        return stats, shim.read(shim.log_path)
    finally:
        shim.close()


def record_path(snap):
    return os.path.join(snap, "workset")


def read_record(snap):
    with open(record_path(snap)) as f:
        return f.read()


def runs_of(text):
    lines = text.splitlines()
    return [tuple(int(x) for x in line.split()) for line in lines[1:-1]]


def pages_of(text):
    return {p for a, n in runs_of(text) for p in range(a, a + n)}


def write_record(snap, header, runs):
    """A well-formed record (right checksum) with the given header and runs."""
    body = header + "\n" + "".join(f"{a} {n}\n" for a, n in runs)
    with open(record_path(snap), "w") as f:
        f.write(body + f"crc32c {crc32c(body.encode()):08x}\n")


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def case_record_and_use(workdir):
    """The first restore records, the next ones serve the record first: fewer
    faults, prefetch hits, and the same data."""
    snap = make_snapshot(workdir)
    check(not os.path.exists(record_path(snap)), "a new snapshot has no record")
    first, _ = restore(workdir, snap, "first")
    check(first["record"] == "recorded" and first["blocks_read_ahead"] == 0,
          f"the first restore records (readahead waiting meanwhile): {first}")
    runs = runs_of(read_record(snap))
    pages = sum(n for _, n in runs)
    ws_pages = WS_MIB * MIB // 4096
    check(ws_pages <= pages <= ws_pages + 64 * BLOCK_PAGES,
          f"the record holds the {ws_pages} pages read back and a few of code and stack: {pages}")
    fill_first = FILL_BASE // 4096
    in_fill = sum(n for a, n in runs if fill_first <= a < fill_first + FILL_MIB * MIB // 4096)
    check(in_fill == ws_pages, f"the record's pages inside the filled region: {in_fill}, want {ws_pages}")
    second, _ = restore(workdir, snap, "second")
    check(second["record"] == "used" and second["prefetch_hits"] > 0 and second["prefetch_misses"] == 0,
          f"the second restore serves the record: {second}")
    check(second["faults"] * 2 < first["faults"], f"faults: {first['faults']} recording, {second['faults']} served")
    check(read_record(snap) and runs_of(read_record(snap)) == runs, "a record that held is kept as it was")
    off, _ = restore(workdir, snap, "off", ondemand_workset=False)
    check(off["record"] == "none" and off["workset_blocks"] == 0 and off["prefetch_hits"] == 0,
          f"ondemand_workset false neither serves nor records: {off}")


def case_handed_over(workdir):
    """"ondemand_workset_write": false: the record is held for the client
    (GET vm.workset, announced by the workset-recorded event), not written:
    the client owns the snapshot directory (the daemon, for clones whose
    shims see it read-only)."""
    snap = make_snapshot(workdir)
    shim = ApiShim(SHIM, workdir=workdir, name="held")
    try:
        status, reply = shim.restore(snap, "ondemand", ondemand_workset_write=False)
        check(status == 204, f"restore -> {status} {reply}")
        conn = connect(shim, 60)
        time.sleep(GRACE_S)
        stats = shim.ok("GET", "vm.info")["vsnap"]["snapshot"]["ondemand"]
        held = shim.ok("GET", "vm.workset")["workset"]
        conn.close()
        check(stats["record"] == "recorded", f"recorded: {stats}")
        check(not os.path.exists(record_path(snap)), "nothing written into the snapshot")
        check(held and held.startswith("vsnap-workset 1 ") and runs_of(held), f"the record held: {held!r:.80}")
        events = [e["event"] for e in shim.events() if e.get("source") == "vm"]
        check("workset-recorded" in events, f"the event says it is there: {events}")
    finally:
        shim.close()
    with open(record_path(snap), "w") as f:
        f.write(held)
    second, _ = restore(workdir, snap, "second")
    check(second["record"] == "used" and second["prefetch_hits"] > 0, f"the record written serves: {second}")


def case_bad_records(workdir):
    """A corrupt, a stale and a hostile record never give wrong data; the first
    two are ignored with a log line and recorded anew."""
    snap = make_snapshot(workdir)
    restore(workdir, snap, "first")
    good = read_record(snap)
    # corrupt: one digit changed, the checksum no longer holds
    lines = good.splitlines()
    lines[1] = lines[1].replace(lines[1][0], "9" if lines[1][0] != "9" else "8", 1)
    with open(record_path(snap), "w") as f:
        f.write("\n".join(lines) + "\n")
    stats, log = restore(workdir, snap, "corrupt")
    check(stats["record"] == "recorded" and "is ignored (its checksum does not hold)" in log,
          f"a corrupt record is ignored with a log line and recorded anew: {stats}")
    check(pages_of(read_record(snap)) == pages_of(good), "the record made anew holds the first's pages")
    # stale: a record of another layer
    write_record(snap, "vsnap-workset 1 00000000-0000-0000-0000-000000000001 131072", [(4096, 16)])
    stats, log = restore(workdir, snap, "stale")
    check(stats["record"] == "recorded" and "another snapshot or RAM size" in log, f"stale record: {stats}")
    # hostile but well-formed: all of RAM, in an order of its own
    header = good.splitlines()[0]
    ram_pages = RAM_MIB * MIB // 4096
    write_record(snap, header, [(ram_pages // 2, ram_pages // 2), (0, ram_pages // 2)])
    stats, _ = restore(workdir, snap, "all-of-ram")
    check(stats["record"] == "used" and stats["workset_blocks"] == ram_pages // BLOCK_PAGES,
          f"a record of all RAM is served, the data still right: {stats}")
    # malformed shapes: each ignored
    for name, text in [("outside", f"{header}\n{ram_pages} 1\n"), ("empty-run", f"{header}\n5 0\n"),
                       ("sign", f"{header}\n-1 4\n"), ("no-header", "5 4\n")]:
        body = text
        with open(record_path(snap), "w") as f:
            f.write(body + f"crc32c {crc32c(body.encode()):08x}\n")
        stats, log = restore(workdir, snap, name)
        check(stats["record"] == "recorded" and "is ignored" in log, f"{name}: {stats}")
    # not writable: the record's path is a directory
    os.remove(record_path(snap))
    os.mkdir(record_path(snap))
    stats, log = restore(workdir, snap, "unwritable")
    check(stats["record"] == "none" and stats.get("record_error"), f"a record that cannot be kept says why: {stats}")
    os.rmdir(record_path(snap))


def case_refresh(workdir):
    """A record the guest's touches mostly miss is replaced by what it touched."""
    snap = make_snapshot(workdir)
    restore(workdir, snap, "first")
    header = read_record(snap).splitlines()[0]
    ram_pages = RAM_MIB * MIB // 4096
    elsewhere = [(ram_pages - 32 * BLOCK_PAGES, 32 * BLOCK_PAGES)]  # 2 MiB the guest never reads
    write_record(snap, header, elsewhere)
    stats, _ = restore(workdir, snap, "moved")
    check(stats["record"] == "refreshed" and stats["prefetch_misses"] > stats["workset_blocks"],
          f"a record mostly missed is refreshed: {stats}")
    runs = runs_of(read_record(snap))
    check(runs != elsewhere and sum(n for _, n in runs) >= WS_MIB * MIB // 4096,
          f"the new record holds what the guest touched: {sum(n for _, n in runs)} pages")
    again, _ = restore(workdir, snap, "after-refresh")
    check(again["record"] == "used" and again["prefetch_misses"] * 10 < stats["prefetch_misses"],
          f"the refreshed record serves: {again}")


def case_killed(workdir):
    """kill -9 of a recording shim leaves no record (nor a temporary file);
    the next restore records."""
    snap = make_snapshot(workdir)
    shim = ApiShim(SHIM, workdir=workdir, name="killed")
    status, reply = shim.restore(snap, "ondemand")
    check(status == 204, f"restore -> {status} {reply}")
    shim.proc.kill()
    shim.proc.wait()
    shim.close()
    check(os.listdir(snap) == [n for n in os.listdir(snap) if not n.startswith("workset")],
          f"a killed recording leaves nothing: {sorted(os.listdir(snap))}")
    stats, _ = restore(workdir, snap, "after-kill")
    check(stats["record"] == "recorded", f"the next restore records: {stats}")


def case_store_carries_it(workdir):
    """A push carries the record; a restore of the pulled snapshot serves it."""
    snap = make_snapshot(workdir)
    restore(workdir, snap, "first")
    store = os.path.join(workdir, "store")
    common = ["--cache-dir", os.path.join(workdir, "cache"), "-q"]
    snap_id = subprocess.run([STORE] + common + ["push", snap, "file://" + store], capture_output=True,
                             text=True, check=True).stdout.split()[-1]
    pulled = os.path.join(workdir, "pulled")
    subprocess.run([STORE] + common + ["pull", f"file://{store}/{snap_id}", pulled], check=True)
    check(read_record(pulled) == read_record(snap), "the pulled snapshot's record is the pushed one")
    stats, _ = restore(workdir, pulled, "from-store", kernel=GUEST)
    check(stats["record"] == "used" and stats["prefetch_hits"] > 0, f"the pulled record serves: {stats}")


CASES = {
    "store_carries_it": case_store_carries_it,
    "record_and_use": case_record_and_use,
    "handed_over": case_handed_over,
    "bad_records": case_bad_records,
    "refresh": case_refresh,
    "killed": case_killed,
}


def main():
    return run_case(CASES, CASE, "vsnap-workset")


if __name__ == "__main__":
    sys.exit(main())

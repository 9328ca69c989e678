#!/usr/bin/python3
"""vm.snapshot / vm.restore end to end: the real vsnap-shim on KVM, the test
guest, its vsock command port (FILL/ZERO/SUM) and heartbeat ticks.

    test_persist.py <vsnap-shim> <vsnap-testguest> <vsnap-pattern> <case>

One meson test per case, each with its own VMs, so they run in parallel and
fail separately. Every expected checksum is either computed on the host
(vsnap-pattern) or read from the source VM right before the snapshot, so a
restore is checked against exactly what the guest held at that instant.
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time

SHIM, GUEST, PATTERN, CASE = sys.argv[1:5]
COMPACT = os.environ.get("VSNAP_COMPACT", "vsnap-compact")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from persisttest import ApiShim, Conn, Fail, FILL_BASE, MIB, check, connect, run_case  # noqa: E402
from vsnaptest import (LAYER_DATA_OFFSET, CurlError, HugePages, curl_api, error_message,  # noqa: E402
                       flip_byte, hugepages_available, layer_page_offset, write_state_json)

MODES = ("copy", "merge", "ondemand")
# Regions the chain test checks, as (gpa, length): A is the boot-time fill.
REGION_A = (FILL_BASE, 64 * MIB)
REGION_B = (80 * MIB, 16 * MIB)
REGION_C = (96 * MIB, 16 * MIB)
REGIONS = (REGION_A, REGION_B, REGION_C, (20 * MIB, 4 * MIB), (84 * MIB, 4 * MIB))


def host_sum(seed, length):
    return subprocess.run([PATTERN, str(seed), str(length)], check=True, capture_output=True,
                          text=True).stdout.strip()


def sums(conn):
    return [conn.sum(gpa, length) for gpa, length in REGIONS]


def guest_cmdline(extra=""):
    return f"vsnap.fill_mib=64 vsnap.seed=7 vsnap.heartbeat_ms=100 {extra}"


class Chain:
    """A source VM and snapshots base, d1, d2 of it with the region sums the
    guest reported right before each snapshot."""

    def __init__(self, workdir, **boot):
        self.dir = workdir
        self.src = ApiShim(SHIM, workdir=workdir, name="src")
        self.src.boot(GUEST, guest_cmdline(), **boot)
        self.conn = connect(self.src)
        self.expected = {}
        self.paths = {name: os.path.join(workdir, name) for name in ("base", "d1", "d2")}

    def take(self, name, parent=None):
        self.expected[name] = sums(self.conn)
        self.src.snapshot_paused(self.paths[name], self.paths[parent] if parent else None)

    def build(self):
        c = self.conn
        check(c.sum(*REGION_A) == host_sum(7, 64 * MIB), "boot fill differs from the host reference")
        self.take("base")
        c.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} 11")
        c.ok(f"FILL {20 * MIB:#x} {4 * MIB:#x} 13")         # overwrite pages of the base
        self.take("d1", "base")
        c.ok(f"FILL {REGION_C[0]:#x} {REGION_C[1]:#x} 17")
        c.ok(f"ZERO {84 * MIB:#x} {4 * MIB:#x}")             # zero over non-zero pages of d1
        c.ok(f"FILL {20 * MIB:#x} {1 * MIB:#x} 19")          # overwrite pages of d1
        self.take("d2", "d1")
        e = self.expected
        check(len({tuple(v) for v in e.values()}) == 3, f"the three snapshots should differ: {e}")
        check(e["base"][0] == host_sum(7, 64 * MIB), "base region A")
        check(e["d1"][1] == host_sum(11, 16 * MIB), "d1 region B")
        check(e["d2"][2] == host_sum(17, 16 * MIB), "d2 region C")

    def close(self):
        self.conn.close()
        self.src.close()


def restored(workdir, name, source, mode, **extra):
    shim = ApiShim(SHIM, workdir=workdir, name=name)
    status, reply = shim.restore(source, mode, **extra)
    if status != 204:
        shim.close()
        raise Fail(f"restore {source} ({mode}) -> {status} {reply}")
    return shim


# --- cases -------------------------------------------------------------------

def case_heartbeat(workdir, cpus=1):
    """Snapshot a running-then-paused guest without vsock, restore by copy in a
    fresh shim: paused until resumed, then the heartbeat goes on from where it
    was (LAPIC timer, HLT idle and TSC came back). With 2 vCPUs the second one
    sits in wait-for-SIPI and must stay there."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, guest_cmdline(), vsock=False, cpus=cpus)
        last = src.wait_tick_above(3)
        status, _ = src.snapshot(os.path.join(workdir, "early"))
        check(status == 405, f"snapshot of a running VM must be 405, got {status}")
        src.ok("PUT", "vm.pause")
        at_pause = src.ticks()[-1]
        snap = os.path.join(workdir, "snap")
        status, reply = src.snapshot(snap)
        check(status == 204, f"vm.snapshot -> {status} {reply}")
        check(sorted(os.listdir(snap)) == ["config.json", "memory-ranges", "state.json"],
              f"snapshot dir holds {os.listdir(snap)}")
        # Guest RAM and state: readable by the shim's user only.
        modes = {n: oct(os.stat(os.path.join(snap, n)).st_mode & 0o777) for n in os.listdir(snap)}
        check(os.stat(snap).st_mode & 0o777 == 0o700 and set(modes.values()) == {"0o600"},
              f"modes of the snapshot: {oct(os.stat(snap).st_mode & 0o777)} {modes}")
        names = [e["event"] for e in src.events()]
        check(names[-2:] == ["snapshotting", "snapshotted"], f"events: {names}")
        check(not [n for n in os.listdir(workdir) if ".partial" in n], "temporary directory left behind")
        size = os.path.getsize(os.path.join(snap, "memory-ranges"))
        check(64 * MIB <= size < 70 * MIB, f"full layer of a 64 MiB fill is {size} bytes")
        src.ok("PUT", "vm.resume")
        src.wait_tick_above(last + 2)
    with restored(workdir, "dst", snap, "copy", resume=False) as dst:
        check(dst.state() == "Paused", "a restored VM must come up paused")
        time.sleep(0.5)
        check(not dst.ticks(), "a paused restored VM printed ticks")
        dst.ok("PUT", "vm.resume")
        first = dst.wait_tick_above(at_pause)
        check(first <= at_pause + 2, f"ticks restarted at {first}, the snapshot was at {at_pause}")
        dst.wait_tick_above(first + 3)
        names = [e["event"] for e in dst.events() if e["source"] == "vm"]
        check(names[:2] == ["restoring", "restored"], f"events: {names}")
        info = dst.ok("GET", "vm.info")
        check(info["config"]["cpus"]["boot_vcpus"] == cpus, f"restored config: {info['config']['cpus']}")
        layer_id = json.load(open(os.path.join(snap, "state.json")))["memory"]["id"]
        snap_info = info["vsnap"]["snapshot"]
        check(snap_info["layer_id"] == layer_id and snap_info["restore_mode"] == "copy",
              f"vm.info vsnap.snapshot: {snap_info}, layer {layer_id}")


def case_chain(workdir, mode):
    """Base, d1, d2 restored in one mode; each must hold what the guest held at
    that snapshot. Then a VM restored from [base, d1] takes d2' with parent d1
    (tracking restarts at restore), which restores too."""
    chain = Chain(workdir)
    # On demand, d1 is served in 256 KiB blocks with background prefetch.
    extra = {"d1": {"ondemand_block_size": 256 << 10, "prefetch": True}} if mode == "ondemand" else {}
    try:
        chain.build()
        for name in ("base", "d1", "d2"):
            with restored(workdir, f"{mode}-{name}", chain.paths[name], mode, **extra.get(name, {})) as dst:
                conn = connect(dst)
                got = sums(conn)
                check(got == chain.expected[name], f"{mode} restore of {name}: {got} != {chain.expected[name]}")
                if "prefetch" in extra.get(name, {}):
                    wait_prefetched(dst)
                if mode == "ondemand" and name == "d2":
                    check_readahead(workdir, chain.paths["d2"], chain.expected["d2"])
                if name == "d2":
                    # A full snapshot of the restored VM (on demand: every page
                    # is brought in first) restores to the same content.
                    full = os.path.join(workdir, f"{mode}-full")
                    dst.snapshot_paused(full)
                if name == "d1":
                    conn.ok(f"FILL {REGION_C[0]:#x} {4 * MIB:#x} 23")
                    expected_d2x = sums(conn)
                    d2x = os.path.join(workdir, f"{mode}-d2x")
                    dst.snapshot_paused(d2x, chain.paths["d1"])
                    size = os.path.getsize(os.path.join(d2x, "memory-ranges"))
                    check(size < 6 * MIB, f"diff after restore holds {size} bytes for a 4 MiB write")
                conn.close()
        with restored(workdir, f"{mode}-d2x", d2x, "copy") as dst:
            got = sums(connect(dst))
            check(got == expected_d2x, f"restore of d2' taken after a {mode} restore: {got} != {expected_d2x}")
        with restored(workdir, f"{mode}-full", full, "copy") as dst:
            got = sums(connect(dst))
            check(got == chain.expected["d2"], f"full snapshot of a {mode} restore: {got} != {chain.expected['d2']}")
    finally:
        chain.close()


def check_readahead(workdir, snap, expected):
    """Reading RAM back in order after an on-demand restore: with readahead
    (the default) the handler serves blocks before they are touched, and the
    guest takes fewer faults than the same restore without it. Both without a
    working-set record (test_workset.py), which would serve the pages first,
    and whose recording holds readahead back."""
    with restored(workdir, "readahead", snap, "ondemand", ondemand_workset=False) as ahead:
        got = sums(connect(ahead))
        check(got == expected, f"on-demand restore with readahead: {got} != {expected}")
        on = ahead.ok("GET", "vm.info")["vsnap"]["snapshot"]["ondemand"]
    with restored(workdir, "no-readahead", snap, "ondemand", ondemand_readahead=False,
                  ondemand_workset=False) as plain:
        got = sums(connect(plain))
        check(got == expected, f"on-demand restore without readahead: {got} != {expected}")
        off = plain.ok("GET", "vm.info")["vsnap"]["snapshot"]["ondemand"]
    print(f"readahead on: {on}\nreadahead off: {off}")
    check(on["blocks_read_ahead"] > 0 and off["blocks_read_ahead"] == 0, f"blocks read ahead: {on} / {off}")
    check(on["faults"] * 2 < off["faults"], f"faults with readahead {on['faults']}, without {off['faults']}")


def wait_prefetched(shim, timeout_s=30):
    """Background prefetch brings every page of the chain in by itself."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = shim.ok("GET", "vm.info")["vsnap"]["snapshot"]["ondemand"]
        if stats["complete"] and stats["prefetch_done"]:
            check(stats["blocks_prefetched"] > 0, f"prefetch completed without prefetching: {stats}")
            return
        time.sleep(0.1)
    raise Fail(f"prefetch did not complete within {timeout_s}s: {stats}")


def case_twins(workdir):
    """Two shims restored from one snapshot at once (config_overrides give each
    its own vsock socket and serial file); each diverges and stays correct."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, guest_cmdline())
        conn = connect(src)
        expected = sums(conn)
        snap = os.path.join(workdir, "snap")
        src.snapshot_paused(snap)
        conn.close()
    # One on demand with prefault (every page in before the vCPUs run), one by copy.
    twins = [restored(workdir, "twin0", snap, "ondemand", prefault=True), restored(workdir, "twin1", snap, "copy")]
    stats = twins[0].ok("GET", "vm.info")["vsnap"]["snapshot"]["ondemand"]
    check(stats["complete"], f"prefault=true on demand: not every page is in: {stats}")
    try:
        conns = [connect(t) for t in twins]
        for i, c in enumerate(conns):
            check(sums(c) == expected, f"twin {i} right after restore")
            c.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} {100 + i}")
        for i, c in enumerate(conns):
            check(c.sum(*REGION_B) == host_sum(100 + i, REGION_B[1]), f"twin {i} after diverging")
            check(c.sum(*REGION_A) == expected[0], f"twin {i} region A")
    finally:
        for t in twins:
            t.close()


def case_load_20(workdir, count=20):
    """20 VMs restored at once from one chain (base, d1, d2), every mode in
    turn, each checked region by region; then each writes its own data and
    is snapshotted (a diff on d2) at once, and one of those snapshots is
    restored and checked."""
    import threading
    chain = Chain(workdir)
    chain.build()
    chain.close()
    clones, errors = [None] * count, []

    def run_all(fn):
        threads = [threading.Thread(target=fn, args=(i,)) for i in range(count)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        check(not any(t.is_alive() for t in threads), "a clone's call never returned")
        check(not errors, "; ".join(errors[:5]))
        return time.monotonic() - t0

    def restore(i):
        try:
            clones[i] = restored(workdir, f"clone{i}", chain.paths["d2"], MODES[i % 3])
            c = connect(clones[i], timeout_s=120)
            got = sums(c)
            if got != chain.expected["d2"]:
                errors.append(f"clone {i} ({MODES[i % 3]}): {got} != {chain.expected['d2']}")
            c.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} {300 + i}")
            c.close()
        except Exception as e:
            errors.append(f"clone {i}: {e}")

    def snapshot(i):
        try:
            clones[i].snapshot_paused(os.path.join(workdir, f"snap{i}"), chain.paths["d2"])
        except Exception as e:
            errors.append(f"snapshot of clone {i}: {e}")

    try:
        t_restore = run_all(restore)
        t_snapshot = run_all(snapshot)
    finally:
        for shim in clones:
            if shim:
                shim.close()
    last = count - 1
    again = restored(workdir, "again", os.path.join(workdir, f"snap{last}"), "ondemand")
    try:
        c = connect(again)
        check(c.sum(*REGION_B) == host_sum(300 + last, REGION_B[1]), "a clone's snapshot: region B")
        check(c.sum(*REGION_C) == chain.expected["d2"][2], "a clone's snapshot: region C")
        c.close()
    finally:
        again.close()
    print(f"{count} clones restored and checked at once in {t_restore:.1f} s, "
          f"snapshotted at once in {t_snapshot:.1f} s")


def case_sparse_8g(workdir):
    """A 8 GiB VM that used 64 MiB writes a layer of about 64 MiB."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, guest_cmdline(), memory_mib=8192, vsock=False)
        src.wait_tick_above(0, timeout_s=30)
        src.ok("PUT", "vm.pause")
        snap = os.path.join(workdir, "snap")
        t0 = time.monotonic()
        status, reply = src.snapshot(snap)
        elapsed = time.monotonic() - t0
        check(status == 204, f"vm.snapshot -> {status} {reply}")
        size = os.path.getsize(os.path.join(snap, "memory-ranges"))
        print(f"8 GiB VM, 64 MiB used: layer {size / MIB:.1f} MiB in {elapsed:.2f} s")
        check(64 * MIB <= size < 72 * MIB, f"layer is {size} bytes")
    with restored(workdir, "dst", snap, "ondemand") as dst:
        dst.wait_tick_above(0)


def case_long_chain(workdir):
    """A base and 64 diffs on top, each writing its own 64 KiB; the top
    restored on demand and by copy holds every write (the chain is followed
    down 65 layers)."""
    layers = 64
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, "vsnap.fill_mib=8 vsnap.seed=7")
        conn = connect(src)
        parent = os.path.join(workdir, "l0")
        src.snapshot_paused(parent)
        for i in range(1, layers + 1):
            conn.ok(f"FILL {FILL_BASE + i * MIB:#x} {64 << 10:#x} {1000 + i}")
            path = os.path.join(workdir, f"l{i}")
            src.snapshot_paused(path, parent)
            parent = path
        expected = conn.sum(FILL_BASE, (layers + 1) * MIB)
        conn.close()
    for mode in ("ondemand", "copy"):
        with restored(workdir, f"top-{mode}", parent, mode) as dst:
            conn = connect(dst)
            got = conn.sum(FILL_BASE, (layers + 1) * MIB)
            check(got == expected, f"{mode} restore of a {layers + 1}-layer chain: {got} != {expected}")
            for i in (1, 2, layers // 2, layers - 1, layers):
                got = conn.sum(FILL_BASE + i * MIB, 64 << 10)
                check(got == host_sum(1000 + i, 64 << 10), f"{mode}: the write of layer {i} is lost")


def expect_refused(shim, source, what, mode="copy", needle=None, body=None):
    status, reply = shim.api("PUT", "vm.restore", body) if body else shim.restore(source, mode)
    check(status == 400, f"{what}: restore -> {status} {reply}")
    message = error_message(reply)
    if needle:
        check(needle in message, f"{what}: error {message!r} does not mention {needle!r}")
    check(shim.api("GET", "vmm.ping")[0] == 200, f"{what}: the shim stopped serving")
    status, _ = shim.api("GET", "vm.info")
    check(status == 404, f"{what}: a failed restore left a VM behind")
    print(f"{what}: 400 {message}")


def copy_snapshot(src, dst):
    os.makedirs(dst)
    for name in os.listdir(src):
        with open(os.path.join(src, name), "rb") as f, open(os.path.join(dst, name), "wb") as g:
            g.write(f.read())


def case_bad_input(workdir):
    """Refusals with a clear error: wrong state, bad bodies, truncated layer,
    flipped byte, wrong parent, missing file, parent that is not the VM's last
    snapshot, an existing destination. The shims keep serving."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        check(src.snapshot(os.path.join(workdir, "x"))[0] == 404, "snapshot without a VM must be 404")
        src.boot(GUEST, guest_cmdline())
        conn = connect(src)
        base, d1, base2, other = (os.path.join(workdir, n) for n in ("base", "d1", "base2", "other"))
        src.snapshot_paused(base)
        conn.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} 11")
        src.snapshot_paused(d1, base)
        src.snapshot_paused(base2)
        src.ok("PUT", "vm.pause")
        events_before = len(src.events())
        for body, what in (({}, "no destination"), ({"destination_url": "ftp://x/y"}, "neither a file nor a store URL"),
                           ({"destination_url": "file://" + other, "bogus": 1}, "unknown field"),
                           ({"destination_url": "file://" + other, "mode": "diff"}, "diff without parent"),
                           ({"destination_url": "file://" + other, "mode": "diff", "parent_url": "file://" + base},
                            "parent that is not the last snapshot"),
                           ({"destination_url": "file://" + base}, "existing destination"),
                           ({"destination_url": "file:///nonexistent-dir/x"}, "missing parent directory")):
            status, reply = src.api("PUT", "vm.snapshot", body)
            check(status == 400, f"vm.snapshot with {what}: {status} {reply}")
            print(f"snapshot, {what}: {error_message(reply)}")
        check(not os.path.exists(other), "a refused snapshot left its destination behind")
        refused_events = [e["event"] for e in src.events()[events_before:]]
        check("snapshotting" not in refused_events, f"refused snapshots emitted {refused_events}")
        src.ok("PUT", "vm.resume")
        # As Cloud Hypervisor (VmAlreadyCreated is an internal error there).
        check(src.api("PUT", "vm.restore", {"source_url": "file://" + base})[0] == 500,
              "restore into a shim that has a VM must be 500")
        conn.close()

    bad = {}
    bad["truncated"] = os.path.join(workdir, "truncated")
    copy_snapshot(base, bad["truncated"])
    layer = os.path.join(bad["truncated"], "memory-ranges")
    os.truncate(layer, os.path.getsize(layer) - 4096)
    bad["flipped"] = os.path.join(workdir, "flipped")
    copy_snapshot(base, bad["flipped"])
    with open(os.path.join(bad["flipped"], "memory-ranges"), "r+b") as f:
        f.seek(4096 + 12345)           # inside the page data
        byte = f.read(1)
        f.seek(4096 + 12345)
        f.write(bytes([byte[0] ^ 0x40]))
    bad["missing"] = os.path.join(workdir, "missing")
    copy_snapshot(base, bad["missing"])
    os.unlink(os.path.join(bad["missing"], "memory-ranges"))
    bad["no_state"] = os.path.join(workdir, "no_state")
    copy_snapshot(base, bad["no_state"])
    os.unlink(os.path.join(bad["no_state"], "state.json"))
    # d1 whose parent_url names another full snapshot (same VM, other id).
    bad["wrong_parent"] = os.path.join(workdir, "wrong_parent")
    copy_snapshot(d1, bad["wrong_parent"])
    state_path = os.path.join(bad["wrong_parent"], "state.json")
    state = json.load(open(state_path))
    state["memory"]["parent_url"] = "file://" + base2  # a base of the same VM, but not d1's
    write_state_json(state_path, state)
    bad["parent_gone"] = os.path.join(workdir, "parent_gone")
    copy_snapshot(d1, bad["parent_gone"])
    state_path = os.path.join(bad["parent_gone"], "state.json")
    state = json.load(open(state_path))
    state["memory"]["parent_url"] = "file://" + os.path.join(workdir, "no-such-snapshot")
    write_state_json(state_path, state)

    for name, edit, needle in (("bad_regs", lambda st: st["vcpus"][0].update(regs="AAAA"), "regs"),
                               ("bad_msr", lambda st: st["vcpus"][0]["msrs"].update({"0x10": "-1"}), "0x10"),
                               ("bad_version", lambda st: st.update(vsnap_state_version=99), "version 99"),
                               ("bad_vcpus", lambda st: st["vcpus"].append({}), "vCPUs"),
                               ("bad_queue", lambda st: st["devices"]["vsock"]["transport"]["queues"][0]
                                .update(size=100000), "size")):
        bad[name] = (os.path.join(workdir, name), needle)
        copy_snapshot(base, bad[name][0])
        state_path = os.path.join(bad[name][0], "state.json")
        state = json.load(open(state_path))
        edit(state)
        write_state_json(state_path, state)

    # 100,000 nested arrays in a file read at restore used to overflow the
    # parser's recursion (SIGSEGV), as in a request body. config.json's
    # checksum in state.json is made to match, so the parser is reached.
    for name in ("state.json", "config.json"):
        bad[name] = os.path.join(workdir, "deep_" + name.split(".")[0])
        copy_snapshot(base, bad[name])
        path = os.path.join(bad[name], name)
        text = open(path).read().rstrip()
        deep = (text[:-1] + ', "deep": ' + "[" * 100000 + "]" * 100000 + "}").encode()
        with open(path, "wb") as f:
            f.write(deep)
        if name == "config.json":
            state_path = os.path.join(bad[name], "state.json")
            state = json.load(open(state_path))
            state["config"]["sha256"] = hashlib.sha256(deep).hexdigest()
            write_state_json(state_path, state)

    with ApiShim(SHIM, workdir=workdir, name="dst") as dst:
        for name in ("state.json", "config.json"):
            # (ApiShim.restore would read config.json, which Python cannot parse either.)
            body = {"source_url": "file://" + bad[name], "memory_restore_mode": "copy",
                    "config_overrides": {"vsock": {"socket": dst.vsock_path}}}
            expect_refused(dst, bad[name], f"{name} nested 100,000 deep", needle="nested", body=body)
        for name in ("bad_regs", "bad_msr", "bad_version", "bad_vcpus", "bad_queue"):
            expect_refused(dst, bad[name][0], f"state.json edited ({name})", needle=bad[name][1])
        expect_refused(dst, bad["truncated"], "truncated layer", needle="memory-ranges")
        expect_refused(dst, bad["flipped"], "flipped data byte (copy)", needle="checksum")
        expect_refused(dst, bad["flipped"], "flipped data byte (merge)", mode="merge", needle="checksum")
        expect_refused(dst, bad["missing"], "missing layer file", needle="memory-ranges")
        expect_refused(dst, bad["no_state"], "missing state.json", needle="state.json")
        expect_refused(dst, bad["wrong_parent"], "wrong parent", needle="wrong parent")
        expect_refused(dst, bad["parent_gone"], "missing parent", needle="no-such-snapshot")
        for body, what in (({}, "no source"), ({"source_url": "file://" + base, "memory_restore_mode": "fast"},
                                                "unknown mode"),
                           ({"source_url": "file://" + base, "ondemand_block_size": 3000,
                             "memory_restore_mode": "ondemand"}, "bad block size"),
                           ({"source_url": "file://" + base, "ondemand_readahead": "yes",
                             "memory_restore_mode": "ondemand"}, "readahead not a boolean"),
                           ({"source_url": "file://" + base, "config_overrides": {"memory": {"size": 1}}},
                            "override of memory"),
                           ({"source_url": "file://" + base, "net_fds": [3]}, "unknown field")):
            status, reply = dst.api("PUT", "vm.restore", body)
            check(status == 400, f"vm.restore with {what}: {status} {reply}")
            print(f"restore, {what}: {error_message(reply)}")
        # After all that, a good restore still works in the same shim.
        status, reply = dst.restore(d1, "copy")
        check(status == 204, f"good restore after refusals: {status} {reply}")
        conn = connect(dst)
        check(conn.sum(*REGION_B) == host_sum(11, REGION_B[1]), "region B after the good restore")


# A VM restored on demand that meets a corrupt block cannot go on, and a thread
# that faulted on that block can never be released (its data is gone; zeros
# would be a lie): the shim says "crash" on the event monitor and exits. These
# bound how long that may take.
EXIT_WITHIN_S = 15


def corrupt_snapshot(workdir, where):
    """A base snapshot of a booted guest with one byte flipped in one data
    block: `fill` (the fill region, read by the guest only as its working set
    after the restore) or `first` (the layer's first block: the guest's lowest
    pages, its page tables and code, touched at its first instruction)."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, guest_cmdline())
        connect(src).close()
        base = os.path.join(workdir, "base")
        src.snapshot_paused(base)
    layer = os.path.join(base, "memory-ranges")
    offset = (layer_page_offset(layer, REGION_A[0] + REGION_A[1] // 2) if where == "fill"
              else LAYER_DATA_OFFSET + 100)
    check(offset is not None, "the layer does not store the middle of the fill region")
    flip_byte(layer, offset)
    return base


def api_or_gone(shim, method, endpoint, body=None):
    """An API call to a shim that may exit under it: (status, reply), or
    (None, curl's message) when the connection ended without an answer."""
    try:
        return curl_api(shim.sock, method, endpoint, body, timeout=30)
    except CurlError as e:
        return None, str(e)


def wait_exit(shim, timeout_s=EXIT_WITHIN_S):
    try:
        return shim.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        threads = subprocess.run(["ps", "-L", "-o", "tid,stat,pcpu,comm,wchan:24", "-p",
                                  str(shim.proc.pid)], capture_output=True, text=True).stdout
        raise Fail(f"{shim.name}: still running {timeout_s}s after the corrupt block:\n{threads}"
                   + shim.describe()) from None


def check_crashed(shim):
    """The shim ended on its own, after a crash event that names the checksum,
    and the guest never got past the corrupt block."""
    code = wait_exit(shim)
    check(code > 0, f"{shim.name}: exit status {code} (a signal, or success?)" + shim.describe())
    stops = [e for e in shim.events() if e["source"] == "vm" and e["event"] == "shutdown"]
    props = (stops[-1]["properties"] or {}) if stops else {}
    check(props.get("reason") == "crash" and "checksum" in props.get("detail", ""),
          f"no crash event naming the checksum: {stops}" + shim.describe())
    check("checksum" in shim.read(shim.log_path), "the shim's log does not say what failed")
    print(f"{shim.name}: exited ({code}) after: {props['detail']}")


def case_ondemand_corrupt(workdir):
    """On demand, data blocks are checked when first served: a flipped byte is
    not noticed up front, but when the guest touches that block (its working
    set, read back after the restore) the VM crashes and the shim exits; bad
    data never reaches the guest, and nothing falls back to copy."""
    base = corrupt_snapshot(workdir, "fill")
    with restored(workdir, "dst", base, "ondemand") as dst:
        try:
            reply = connect(dst).cmd(f"SUM {REGION_A[0]:#x} {REGION_A[1]:#x}")
        except (Fail, OSError):
            reply = None  # the VM stopped under the connection, as it must
        check(reply is None, f"the guest answered SUM over a corrupt block: {reply!r}")
        check_crashed(dst)


def case_ondemand_corrupt_first(workdir):
    """A corrupt block among the guest's first pages: its vCPU faults on it in
    the kernel's page walk, at once. vm.restore may still answer (or the shim
    is gone before it could); either way the shim exits with a crash event
    instead of spinning or hanging."""
    base = corrupt_snapshot(workdir, "first")
    with ApiShim(SHIM, workdir=workdir, name="dst") as dst:
        status, reply = api_or_gone(dst, "PUT", "vm.restore", restore_body(dst, base, resume=True))
        check(status in (204, None), f"vm.restore -> {status} {reply}")
        check_crashed(dst)


def case_ondemand_corrupt_paused(workdir):
    """Restored paused, the VM has read nothing and lives on (SIGTERM still
    ends such a shim cleanly); resumed, it reaches the bad block and the shim
    exits with a crash event. A full snapshot of such a VM reads every page
    first and meets the block on the main thread: the same end."""
    base = corrupt_snapshot(workdir, "fill")
    with restored(workdir, "term", base, "ondemand", resume=False) as term:
        time.sleep(0.5)
        check(term.state() == "Paused", "a VM restored paused does not read Paused")
        term.proc.terminate()
        code = wait_exit(term, 10)
        check(code == 0, f"SIGTERM: exit status {code}" + term.describe())
        check(not [e for e in term.events() if e["event"] == "shutdown" and
                   (e["properties"] or {}).get("reason") == "crash"], "a crash nobody caused")
    with restored(workdir, "dst", base, "ondemand", resume=False) as dst:
        time.sleep(0.5)
        check(dst.state() == "Paused", "a VM restored paused does not read Paused")
        status, reply = api_or_gone(dst, "PUT", "vm.resume")
        check(status in (204, None), f"vm.resume -> {status} {reply}")
        check_crashed(dst)
    with restored(workdir, "snap", base, "ondemand", resume=False) as snap:
        status, reply = api_or_gone(snap, "PUT", "vm.snapshot",
                                    {"destination_url": "file://" + os.path.join(workdir, "full")})
        check(status is None, f"vm.snapshot over a corrupt block -> {status} {reply}")
        check_crashed(snap)


def restore_body(shim, source, resume):
    """What ApiShim.restore sends, for a call made with api_or_gone."""
    return {"source_url": "file://" + source, "memory_restore_mode": "ondemand", "resume": resume,
            "config_overrides": {"serial": {"mode": "File", "file": shim.serial_path},
                                 "vsock": {"socket": shim.vsock_path}}}


def case_fold_snapshot(workdir):
    """What the daemon's snapshot-delete of an inner snapshot does, on
    directories the shim wrote (vsnap-compact --fold-snapshot: the snapshot
    library's fold and rewrite of the parent record): d1 is folded into d2 and
    deleted, then the base; each time d2 restores to what the guest held at d2,
    and state.json keeps every member of the shim's own as it was."""
    chain = Chain(workdir)
    try:
        chain.build()
    finally:
        chain.close()
    paths = chain.paths

    def state(name):
        with open(os.path.join(paths[name], "state.json")) as f:
            return json.load(f)

    def fold(inner):
        return subprocess.run([COMPACT, "--fold-snapshot", paths[inner], paths["d2"]], capture_output=True,
                              text=True, timeout=60)

    before = state("d2")
    # The record and the file's own checksum change; nothing else may.
    rewritten = ("memory", "state_sha256")
    shim_members = {k: v for k, v in before.items() if k not in rewritten}
    refused = fold("base")
    check(refused.returncode != 0 and "names neither" in refused.stderr,
          f"folding base into d2 (whose parent is d1) was not refused: {refused.stderr!r}")
    check(state("d2") == before, "a refused fold changed d2's state.json")
    for inner, parent in (("d1", "base"), ("base", None)):
        done = fold(inner)
        check(done.returncode == 0, f"fold of {inner} into d2: {done.stderr!r}")
        after = state("d2")
        check({k: v for k, v in after.items() if k not in rewritten} == shim_members,
              f"folding {inner} changed the shim's members of state.json")
        memory = after["memory"]
        check(memory["id"] == before["memory"]["id"], "d2 lost its id in the fold")
        if parent:
            check(memory["kind"] == "diff" and memory["parent_id"] == state(parent)["memory"]["id"],
                  f"d2 does not name {parent} after the fold: {memory}")
        else:
            check(memory["kind"] == "full" and "parent_id" not in memory and "parent_url" not in memory,
                  f"d2 is not a full snapshot after the base was folded in: {memory}")
        subprocess.run(["rm", "-rf", paths[inner]], check=True)
        for mode in ("copy", "ondemand"):
            with restored(workdir, f"{mode}-without-{inner}", paths["d2"], mode) as dst:
                got = sums(connect(dst))
                check(got == chain.expected["d2"], f"{mode} restore of d2 without {inner}: {got}")


def case_full_fs(workdir):
    """Destination on a full file system (a 32 MiB tmpfs): clear error, nothing
    partial left, the VM keeps running, and a later snapshot elsewhere still
    has every page (the dirty pages of the failed try are kept)."""
    mnt = os.path.join(workdir, "small")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "tmpfs", mnt]).returncode != 0:
        print("cannot mount a tmpfs here (not root?)")
        sys.exit(77)
    try:
        with ApiShim(SHIM, workdir=workdir, name="src") as src:
            src.boot(GUEST, guest_cmdline())
            conn = connect(src)
            base = os.path.join(workdir, "base")
            src.snapshot_paused(base)
            conn.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} 11")
            conn.ok(f"FILL {REGION_C[0]:#x} {REGION_C[1]:#x} 12")
            expected = sums(conn)
            src.ok("PUT", "vm.pause")
            for body in ({"destination_url": "file://" + os.path.join(mnt, "full")},
                         {"destination_url": "file://" + os.path.join(mnt, "diff"), "mode": "diff",
                          "parent_url": "file://" + base}):
                status, reply = src.api("PUT", "vm.snapshot", body)
                check(status == 500, f"snapshot onto a full fs: {status} {reply}")
                check("space" in error_message(reply), f"error does not say the disk is full: {error_message(reply)}")
                print("full fs:", error_message(reply))
                check(os.listdir(mnt) == [], f"left on the full fs: {os.listdir(mnt)}")
            src.ok("PUT", "vm.resume")
            check(conn.sum(*REGION_B) == expected[1], "the VM changed after a failed snapshot")
            d1 = os.path.join(workdir, "d1")
            src.snapshot_paused(d1, base)
            conn.close()
        with restored(workdir, "dst", d1, "copy") as dst:
            got = sums(connect(dst))
            check(got == expected, f"diff after failed tries lost pages: {got} != {expected}")
    finally:
        subprocess.run(["umount", mnt])


def truncate_layer(snapshot):
    """Cut a snapshot's layer down to its header and first data page."""
    os.truncate(os.path.join(snapshot, "memory-ranges"), LAYER_DATA_OFFSET + 4096)


def case_truncated_reference(workdir):
    """The layer a running VM compares its next diff with (its last full
    snapshot, or the snapshot it was restored from) truncated under it: the
    next diff killed the shim with SIGBUS. Now the diff keeps every page KVM
    logged, says why in the log, and the VM, its snapshots and their restores
    go on."""
    paths = {n: os.path.join(workdir, n) for n in ("base", "d1", "base2", "d2", "base3")}
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, guest_cmdline())
        conn = connect(src)
        src.snapshot_paused(paths["base"])
        truncate_layer(paths["base"])
        conn.ok(f"FILL {20 * MIB:#x} {4 * MIB:#x} 13")   # pages the base holds
        conn.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} 11")
        src.snapshot_paused(paths["d1"], paths["base"])
        check(src.proc.poll() is None, "the shim died taking a diff over a truncated reference")
        check("reference it would be compared with is gone" in src.read(src.log_path),
              "the log does not say why the diff is whole")
        expected = sums(conn)
        src.snapshot_paused(paths["base2"])
        conn.close()
    with restored(workdir, "dst", paths["base2"], "copy") as dst:
        conn = connect(dst)
        check(sums(conn) == expected, "restore of the full snapshot taken after the truncation")
        truncate_layer(paths["base2"])                     # what dst was restored from
        conn.ok(f"FILL {REGION_C[0]:#x} {REGION_C[1]:#x} 17")
        dst.snapshot_paused(paths["d2"], paths["base2"])
        check(dst.proc.poll() is None, "the shim died taking a diff over a truncated restored chain")
        expected = sums(conn)
        dst.snapshot_paused(paths["base3"])
        conn.close()
    with restored(workdir, "again", paths["base3"], "ondemand") as again:
        check(sums(connect(again)) == expected, "restore after the second truncation")
        print("diffs over truncated references: taken whole, the VMs ran on")


def case_ondemand_truncated(workdir):
    """A layer truncated under a VM restored on demand, before the guest ran:
    the handler thread checking a block that is gone got SIGBUS, which ended
    the shim. Now the VM stops with a crash event that says why, and the shim
    exits with status 3, as for a corrupt block."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, guest_cmdline())
        connect(src).close()
        base = os.path.join(workdir, "base")
        src.snapshot_paused(base)
    with restored(workdir, "dst", base, "ondemand", resume=False) as dst:
        truncate_layer(base)
        status, reply = api_or_gone(dst, "PUT", "vm.resume")
        check(status in (204, None), f"vm.resume -> {status} {reply}")
        code = wait_exit(dst)
        check(code == 3, f"exit status {code} (a signal is negative)" + dst.describe())
        stops = [e for e in dst.events() if e["source"] == "vm" and e["event"] == "shutdown"]
        props = (stops[-1]["properties"] or {}) if stops else {}
        check(props.get("reason") == "crash" and "truncated" in props.get("detail", ""),
              f"no crash event naming the truncation: {stops}" + dst.describe())
        print(f"dst: exited ({code}) after: {props['detail']}")


def disk_used(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def case_deleted_space(workdir):
    """A snapshot deleted while its VM runs gives its space back at once: the
    VM kept its last full layer (or the chain it was restored from) mapped, so
    64 MiB stayed allocated until the shim exited and the next snapshot on
    that (100 MiB) file system failed with ENOSPC."""
    mnt = os.path.join(workdir, "small")
    os.makedirs(mnt)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=100m", "tmpfs", mnt]).returncode != 0:
        print("cannot mount a tmpfs here (not root?)")
        sys.exit(77)
    try:
        empty = disk_used(mnt)
        with ApiShim(SHIM, workdir=workdir, name="src") as src:
            src.boot(GUEST, guest_cmdline())
            conn = connect(src)
            for name in ("first", "second"):
                snap = os.path.join(mnt, name)
                src.snapshot_paused(snap)
                taken = disk_used(mnt)
                subprocess.run(["rm", "-rf", snap], check=True)
                left = disk_used(mnt)
                print(f"full snapshot {name}: {(taken - empty) >> 20} MiB, "
                      f"{(left - empty) >> 20} MiB left allocated after it was deleted")
                check(left - empty < 4 * MIB, f"deleting {name} freed nothing: {(left - empty) >> 20} MiB used")
            keep = os.path.join(mnt, "keep")
            src.snapshot_paused(keep)
            expected = sums(conn)
            conn.close()
        with restored(workdir, "dst", keep, "copy") as dst:
            conn = connect(dst)
            check(sums(conn) == expected, "restore from the small file system")
            subprocess.run(["rm", "-rf", keep], check=True)
            left = disk_used(mnt)
            print(f"restored from keep, then deleted it: {(left - empty) >> 20} MiB left allocated")
            check(left - empty < 4 * MIB, f"the restored chain is still allocated: {(left - empty) >> 20} MiB")
            again = os.path.join(mnt, "again")
            dst.snapshot_paused(again)
            conn.close()
    finally:
        subprocess.run(["umount", "-l", mnt])


HUGE_VM_MIB = 128  # 64 huge pages: the chain's regions end at 112 MiB


def ram_kernel_page_kib(shim):
    """KernelPageSize of the shim's guest RAM mapping (/proc/PID/smaps)."""
    with open(f"/proc/{shim.proc.pid}/smaps") as f:
        in_ram = False
        for line in f:
            if not line[0].isupper():
                in_ram = "vsnap-guest-ram" in line
            elif in_ram and line.startswith("KernelPageSize:"):
                return int(line.split()[1])
    raise Fail(f"{shim.name} has no guest RAM mapping")


def check_on_huge_pages(shim):
    info = shim.ok("GET", "vm.info")
    memory = info["config"]["memory"]
    check(memory["hugepages"] and memory["hugepage_size"] == 2 * MIB and
          info["vsnap"]["ram_page_size"] == 2 * MIB, f"{shim.name}: {memory}, {info['vsnap']['ram_page_size']}")
    check(ram_kernel_page_kib(shim) == 2048, f"{shim.name}: guest RAM is not on 2 MiB pages")
    return info["vsnap"]["kvm_mapped_pages"]


def case_hugepages(workdir, mode):
    """RAM on 2 MiB huge pages (memory.hugepages, hugepage_size): base, d1
    and d2 restored in one mode come back on huge pages holding what the
    guest held; on demand serves whole 2 MiB pages (a smaller
    ondemand_block_size is refused), with prefetch too. Dirty tracking stays
    at 4 KiB: a diff after a restore holds the 12 KiB written, not its huge
    page. A full snapshot of the restored VM restores to the same content.
    The test reserves its huge pages and gives them back."""
    with HugePages(3 * HUGE_VM_MIB // 2 + 8):
        chain = Chain(workdir, memory_mib=HUGE_VM_MIB, hugepages=True)
        try:
            check_on_huge_pages(chain.src)
            chain.build()
            if mode == "ondemand":
                with ApiShim(SHIM, workdir=workdir, name="small-blocks") as dst:
                    status, reply = dst.restore(chain.paths["d1"], mode, ondemand_block_size=64 << 10)
                    check(status == 400 and "2 MiB" in error_message(reply), f"64 KiB blocks: {status} {reply}")
            extra = {"d1": {"ondemand_block_size": 2 * MIB, "prefetch": True}} if mode == "ondemand" else {}
            for name in ("base", "d1", "d2"):
                with restored(workdir, f"{mode}-{name}", chain.paths[name], mode, **extra.get(name, {})) as dst:
                    conn = connect(dst)
                    got = sums(conn)
                    check(got == chain.expected[name], f"{mode} restore of {name}: {got} != {chain.expected[name]}")
                    mapped = check_on_huge_pages(dst)
                    print(f"{mode} restore of {name}: KVM maps {mapped}")
                    if "prefetch" in extra.get(name, {}):
                        wait_prefetched(dst)
                    if name == "d1":
                        conn.ok(f"FILL {REGION_C[0] + 4096:#x} {3 * 4096:#x} 23")
                        expected_d2x = sums(conn)
                        d2x = os.path.join(workdir, f"{mode}-d2x")
                        dst.snapshot_paused(d2x, chain.paths["d1"])
                        size = os.path.getsize(os.path.join(d2x, "memory-ranges"))
                        check(size < 256 << 10, f"a diff of 12 KiB written on huge pages holds {size} bytes")
                    if name == "d2":
                        full = os.path.join(workdir, f"{mode}-full")
                        dst.snapshot_paused(full)
                    conn.close()
            for snap, want in ((d2x, expected_d2x), (full, chain.expected["d2"])):
                with restored(workdir, f"{mode}-again", snap, mode) as dst:
                    got = sums(connect(dst))
                    check(got == want, f"{mode} restore of {os.path.basename(snap)}: {got} != {want}")
        finally:
            chain.close()


def case_hugepages_short(workdir):
    """Too few huge pages: vm.boot and vm.restore fail with the numbers (needed,
    free, reserved) and what to do, and the shim stays usable: the same restore
    works once the pages are there."""
    with HugePages(HUGE_VM_MIB // 2 + 8, alone=True):   # it sizes VMs from what is free
        snap = os.path.join(workdir, "snap")
        with ApiShim(SHIM, workdir=workdir, name="src") as src:
            src.boot(GUEST, guest_cmdline(), memory_mib=HUGE_VM_MIB, hugepages=True)
            connect(src).close()
            src.snapshot_paused(snap)
        # A VM wanting more than the pool has free.
        want = hugepages_available() + 16
        with ApiShim(SHIM, workdir=workdir, name="big") as big:
            big.ok("PUT", "vm.create", {"payload": {"kernel": GUEST}, "memory": {"size": want * 2 * MIB,
                                                                                 "hugepages": True}})
            status, reply = big.api("PUT", "vm.boot")
            message = error_message(reply)
            check(status == 500 and f"needs {want} huge pages of 2 MiB" in message and "vm.nr_hugepages" in message,
                  f"vm.boot with too few huge pages: {status} {message!r}")
        # The pool held by another VM: the restore is refused, then works.
        with ApiShim(SHIM, workdir=workdir, name="hog") as hog:
            hog.boot(GUEST, "", memory_mib=2 * (hugepages_available() - 4), vsock=False, hugepages=True)
            with ApiShim(SHIM, workdir=workdir, name="dst") as dst:
                status, reply = dst.restore(snap, "ondemand")
                check(status in (400, 500) and "huge pages of 2 MiB" in error_message(reply),
                      f"restore with too few huge pages: {status} {reply}")
                hog.close()
                status, reply = dst.restore(snap, "ondemand")
                check(status == 204, f"restore once the pages are back: {status} {reply}")
                check_on_huge_pages(dst)
                connect(dst).close()


# --- live snapshots (vm.snapshot "live": true of a running VM) ----------------

LIVE_CMDLINE = "vsnap.fill_mib=64 vsnap.seed=7 vsnap.gen_mib=32 vsnap.heartbeat_ms=100"


def live_snapshot(shim, dest, parent=None, **extra):
    """A live snapshot: 200 with its pause (us), or Fail."""
    body = {"destination_url": "file://" + dest, "live": True, **extra}
    if parent:
        body.update(mode="diff", parent_url="file://" + parent)
    status, reply = shim.api("PUT", "vm.snapshot", body)
    if status != 200 or not isinstance(reply, dict) or "pause_us" not in reply:
        raise Fail(f"{shim.name}: live vm.snapshot -> {status} {reply}" + shim.describe())
    print(f"live snapshot {os.path.basename(dest)}: {reply}")
    return reply


def gencheck(conn, what):
    """GENCHECK: (generation, page); fails unless the region is whole."""
    words = conn.cmd("GENCHECK").split()
    check(len(words) == 4 and words[0] == "GEN", f"{what}: GENCHECK answered {words}")
    check(words[3] == "ok", f"{what}: the gen_mib region is not one instant: {' '.join(words)}")
    return int(words[1]), int(words[2])


def nonlive_pause_us(shim, dest):
    """The vCPUs' stop of a snapshot of a paused VM: at least its vm.snapshot call."""
    shim.ok("PUT", "vm.pause")
    t0 = time.monotonic()
    status, reply = shim.snapshot(dest)
    elapsed = time.monotonic() - t0
    shim.ok("PUT", "vm.resume")
    check(status == 204, f"non-live snapshot -> {status} {reply}")
    return int(elapsed * 1e6)


def check_live_restore(workdir, name, snapshot, mode, fill_sum):
    with restored(workdir, name, snapshot, mode) as dst:
        conn = connect(dst)
        gen, page = gencheck(conn, f"{os.path.basename(snapshot)} restored ({mode})")
        check(gen > 1, f"{name}: the writer never finished a pass before the snapshot (generation {gen})")
        check(conn.sum(FILL_BASE, 64 * MIB) == fill_sum, f"{name}: the filled region differs")
        time.sleep(0.2)
        gencheck(conn, f"{os.path.basename(snapshot)} restored ({mode}), its writer on")
        conn.close()


def case_live(workdir):
    """A guest rewriting 32 MiB as fast as it can: a live full snapshot and a
    live diff on it are each one instant (GENCHECK ok restored by copy, on
    demand and merged), with a stop shorter than the same VM's non-live one."""
    fill_sum = host_sum(7, 64 * MIB)
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, LIVE_CMDLINE)
        conn = connect(src)
        gencheck(conn, "source")
        nonlive = nonlive_pause_us(src, os.path.join(workdir, "nonlive"))
        conn.cmd("STALL")
        full = os.path.join(workdir, "lfull")
        reply = live_snapshot(src, full)
        stall = int(conn.cmd("STALL").split()[1])
        print(f"non-live stop {nonlive} us, live pause_us {reply['pause_us']}, guest STALL {stall} us")
        check(0 < reply["pause_us"] < nonlive, f"live pause {reply['pause_us']} us, non-live {nonlive} us")
        check(src.state() == "Running", "the VM does not run after a live snapshot")
        gencheck(conn, "source after the live snapshot")
        conn.ok(f"FILL {FILL_BASE:#x} {4 * MIB:#x} 9")      # the diff must carry this
        diff = os.path.join(workdir, "ldiff")
        live_snapshot(src, diff, full)
        check(src.state() == "Running", "the VM does not run after a live diff")
        status, reply = src.api("PUT", "vm.snapshot", {"destination_url": "file://" + full + "x", "live": True,
                                                       "mode": "diff", "parent_url": "file://" + full})
        check(status == 400 and "last snapshot" in error_message(reply), f"live diff on an old parent: {status} {reply}")
        src.ok("PUT", "vm.pause")
        status, reply = src.api("PUT", "vm.snapshot", {"destination_url": "file://" + full + "y", "live": True})
        check(status == 405, f"live snapshot of a paused VM: {status} {reply}")
        src.ok("PUT", "vm.resume")
        conn.close()
    for mode in ("copy", "ondemand"):
        check_live_restore(workdir, f"full-{mode}", full, mode, fill_sum)
    expected = subprocess.run([PATTERN, "9", str(4 * MIB)], check=True, capture_output=True, text=True).stdout.strip()
    for mode in MODES:
        with restored(workdir, f"diff-{mode}", diff, mode) as dst:
            conn = connect(dst)
            gencheck(conn, f"live diff restored ({mode})")
            check(conn.sum(FILL_BASE, 4 * MIB) == expected, f"live diff ({mode}) lost the FILL before it")
            conn.close()
    # Of a VM restored on demand, still being served: a live diff on the
    # snapshot it came from, and a live full (which brings every page in first).
    again = {name: os.path.join(workdir, name) for name in ("od-diff", "od-full")}
    with restored(workdir, "od", full, "ondemand") as od:
        conn = connect(od)
        live_snapshot(od, again["od-diff"], full)
        live_snapshot(od, again["od-full"])
        gencheck(conn, "the VM restored on demand, after its live snapshots")
        conn.close()
    for name, snapshot in again.items():
        check_live_restore(workdir, name + "-copy", snapshot, "copy", fill_sum)


def case_live_fail(workdir):
    """A live snapshot that fails mid-way (no room for the scratch image, while
    the guest runs; no room for the layer, after the stop) answers 500, leaves
    nothing, and the VM runs on, whole; a later live diff still holds every
    page. A bad body is refused before anything starts."""
    mnt = os.path.join(workdir, "small")
    os.makedirs(mnt)
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, LIVE_CMDLINE)
        conn = connect(src)
        base = os.path.join(workdir, "base")
        live_snapshot(src, base)
        conn.ok(f"FILL {FILL_BASE:#x} {32 * MIB:#x} 9")
        # The scratch image beside the layer fills a small fs while the guest
        # runs (before the stop); one in memory leaves the layer to fail, after it.
        for size, scratch in (("24m", "destination"), ("24m", "memory"), ("100m", "destination")):
            if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", mnt]).returncode != 0:
                print("cannot mount a tmpfs here (not root?)")
                sys.exit(77)
            try:
                for body in ({"destination_url": "file://" + os.path.join(mnt, "full")},
                             {"destination_url": "file://" + os.path.join(mnt, "diff"),
                              "mode": "diff", "parent_url": "file://" + base}):
                    body.update(live=True, live_scratch=scratch)
                    status, reply = src.api("PUT", "vm.snapshot", body)
                    print(f"tmpfs {size}, scratch in {scratch}, {body.get('mode', 'full')}: {status} "
                          f"{error_message(reply)}")
                    check(status == 500 and "space" in error_message(reply), f"live onto a full fs: {status} {reply}")
                    check(os.listdir(mnt) == [], f"left on the full fs: {os.listdir(mnt)}")
                    check(src.state() == "Running", "the VM does not run after a failed live snapshot")
                    gencheck(conn, "source after a failed live snapshot")
            finally:
                subprocess.run(["umount", mnt])
        src.wait_tick_above(src.ticks()[-1])
        for body, needle in (({"live": "yes"}, "true or false"), ({"live": True, "live_scratch": "disk"}, "memory"),
                             ({"live_scratch": "memory"}, "is for")):
            body["destination_url"] = "file://" + os.path.join(workdir, "refused")
            status, reply = src.api("PUT", "vm.snapshot", body)
            check(status == 400 and needle in error_message(reply), f"vm.snapshot {body}: {status} {reply}")
        check(not os.path.exists(os.path.join(workdir, "refused")), "a refused snapshot left its destination")
        d1 = os.path.join(workdir, "d1")
        live_snapshot(src, d1, base)
        check(sorted(os.listdir(workdir)).count("base") == 1, "the earlier snapshot is gone")
        conn.close()
    expected = subprocess.run([PATTERN, "9", str(32 * MIB)], check=True, capture_output=True, text=True).stdout.strip()
    for snap in (base, d1):
        with restored(workdir, "dst", snap, "copy") as dst:
            conn = connect(dst)
            gencheck(conn, f"{os.path.basename(snap)} after failed tries")
            if snap == d1:
                check(conn.sum(FILL_BASE, 32 * MIB) == expected, "the diff after failed tries lost pages")
            conn.close()


class LiveInBackground:
    """A live vm.snapshot on a thread of its own: its answer, and when it came."""

    def __init__(self, shim, dest, **extra):
        self.status = self.reply = self.done_at = None
        body = {"destination_url": "file://" + dest, "live": True, **extra}
        self.thread = threading.Thread(target=self._run, args=(shim, body), daemon=True)
        self.thread.start()

    def _run(self, shim, body):
        self.status, self.reply = shim.api("PUT", "vm.snapshot", body, timeout=120)
        self.done_at = time.monotonic()

    def join(self, timeout_s=60):
        self.thread.join(timeout_s)
        check(not self.thread.is_alive(), "the live vm.snapshot did not answer")
        return self.status, self.reply


def timed_info(shim):
    t0 = time.monotonic()
    info = shim.ok("GET", "vm.info")
    return info, time.monotonic() - t0


def wait_job(shim, until, what, timeout_s=30):
    """vm.info's vsnap.snapshot_job once until(job) holds; the slowest answer."""
    deadline, slowest = time.monotonic() + timeout_s, 0
    while time.monotonic() < deadline:
        info, took = timed_info(shim)
        slowest = max(slowest, took)
        job = info["vsnap"]["snapshot_job"]
        if job is not None and until(job):
            return job, slowest
        time.sleep(0.02)
    raise Fail(f"{shim.name}: no snapshot job {what} in {timeout_s} s: {info['vsnap']['snapshot_job']}")


def case_live_cancel(workdir):
    """While a live snapshot of a VM with 1.5 GiB to copy runs, the API
    answers: vm.info at once, with the job's progress; vm.pause refused
    (409); vm.cancel-snapshot ends it at its next step: vm.snapshot answers
    409, the VM runs, nothing is left, and a later live diff on the earlier
    snapshot still holds every page written before the cancel."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, "vsnap.fill_mib=1536 vsnap.seed=7 vsnap.gen_mib=32 vsnap.heartbeat_ms=100",
                 memory_mib=2048)
        conn = connect(src)
        gencheck(conn, "source")
        status, reply = src.api("PUT", "vm.cancel-snapshot")
        check(status == 405 and "no live snapshot" in error_message(reply), f"cancel without a job: {status} {reply}")
        check(timed_info(src)[0]["vsnap"]["snapshot_job"] is None, "a snapshot job before any")
        base = os.path.join(workdir, "base")
        job = LiveInBackground(src, base)
        seen, slowest = wait_job(src, lambda j: j["phase"] == "precopy" and j["pass_pages_copied"] > 0, "copying")
        print(f"during the first live snapshot: {seen}; vm.info's slowest answer {slowest * 1e3:.1f} ms")
        check(seen["ram_pages"] == 2048 * MIB // 4096 and seen["pass_pages_total"] >= 1536 * MIB // 4096,
              f"the first pass copies the populated RAM: {seen}")
        status, reply = job.join()
        check(status == 200, f"the live snapshot under vm.info's polling: {status} {reply}")
        conn.ok(f"FILL {FILL_BASE:#x} {32 * MIB:#x} 9")  # the diff after the cancel must carry this
        cancelled = os.path.join(workdir, "cancelled")
        job = LiveInBackground(src, cancelled)
        seen, slowest = wait_job(src, lambda j: j["pass_pages_copied"] > 16 * MIB // 4096, "half-way")
        status, reply = src.api("PUT", "vm.pause")
        check(status == 409 and "live snapshot is under way" in error_message(reply), f"pause: {status} {reply}")
        t0 = time.monotonic()
        src.ok("PUT", "vm.cancel-snapshot")
        status, reply = job.join()
        took_ms = (job.done_at - t0) * 1e3
        print(f"cancelled at {seen}: vm.snapshot answered {status} {took_ms:.1f} ms after the cancel; "
              f"vm.info's slowest answer {slowest * 1e3:.1f} ms")
        check(status == 409 and "cancelled" in error_message(reply), f"the cancelled snapshot: {status} {reply}")
        check(took_ms < 1000, f"the cancel took {took_ms:.0f} ms")
        ended = re.search(r"its end ([0-9.]+) ms after the cancel", src.read(src.log_path))
        check(ended is not None, "the shim did not log the cancelled job's end" + src.describe())
        print(f"the shim ended the job {ended.group(1)} ms after the cancel")
        check(float(ended.group(1)) < 500, f"the job ended {ended.group(1)} ms after its cancel")
        check(slowest < 1.0, f"vm.info took {slowest:.1f} s during a live snapshot")
        info = src.ok("GET", "vm.info")
        check(info["state"] == "Running" and info["vsnap"]["snapshot_job"] is None, f"after the cancel: {info}")
        left = [n for n in os.listdir(workdir) if n.startswith("cancelled") or n.startswith(".cancelled")]
        check(left == [], f"the cancelled snapshot left {left}")
        gencheck(conn, "source after the cancel")
        # After the stop, while the layer is written: the writer finishes, the
        # layer is dropped, the disks (paused since the stop) go on.
        job = LiveInBackground(src, cancelled)
        seen, _ = wait_job(src, lambda j: j["phase"] == "writing", "writing")
        src.ok("PUT", "vm.cancel-snapshot")
        status, reply = job.join()
        print(f"cancelled while writing ({seen}): {status} {reply}")
        check(status == 409 and "cancelled" in error_message(reply), f"cancelled while writing: {status} {reply}")
        left = [n for n in os.listdir(workdir) if n.startswith("cancelled") or n.startswith(".cancelled")]
        check(left == [] and src.state() == "Running", f"after a cancel while writing: {left} {src.state()}")
        gencheck(conn, "source after a cancel while writing")
        diff = os.path.join(workdir, "diff")
        live_snapshot(src, diff, base)
        conn.close()
    expected = subprocess.run([PATTERN, "9", str(32 * MIB)], check=True, capture_output=True, text=True).stdout.strip()
    with restored(workdir, "dst", diff, "copy") as dst:
        conn = connect(dst)
        gencheck(conn, "the diff after a cancelled snapshot")
        check(conn.sum(FILL_BASE, 32 * MIB) == expected, "the diff after a cancelled snapshot lost pages")
        conn.close()


def case_live_forced(workdir):
    """A guest rewriting 256 MiB as fast as it can outruns the copy of one
    pass (live_max_passes 1): the rest, more than the stop's budget, is
    copied in a forced stop, which the answer names (forced_stop "passes")
    and the log explains; the snapshot is still one instant. Limits out of
    range, or without "live", are refused."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, "vsnap.fill_mib=64 vsnap.seed=7 vsnap.gen_mib=256", memory_mib=1024)
        conn = connect(src)
        snap = os.path.join(workdir, "forced")
        for body in ({"live": True, "live_max_passes": 0}, {"live": True, "live_max_ms": "1"},
                     {"live_max_passes": 2}):
            body["destination_url"] = "file://" + snap
            status, reply = src.api("PUT", "vm.snapshot", body)
            check(status == 400 and "from 1 to" in error_message(reply), f"vm.snapshot {body}: {status} {reply}")
        reply = live_snapshot(src, snap, live_max_passes=1)
        check(reply["forced_stop"] == "passes" and reply["passes"] == 1, f"a guest outrunning the copy: {reply}")
        check(reply["final_pages"] > 1024, f"the forced stop copied {reply['final_pages']} pages")
        check(reply["first_pass_pages"] <= reply["copied_pages"], f"first pass: {reply}")
        check(reply["data_pages"] > 0 and reply["file_bytes"] > reply["data_pages"] * 4096, f"the layer: {reply}")
        found = re.search(r"not converging \(([0-9]+) pages left after ([0-9]+) passes", src.read(src.log_path))
        check(found is not None, "the shim did not log the forced stop" + src.describe())
        gencheck(conn, "source after a forced stop")
        conn.close()
    with restored(workdir, "dst", snap, "copy") as dst:
        conn = connect(dst)
        gencheck(conn, "the forced stop's snapshot restored")
        conn.close()


def case_paused_cancel(workdir):
    """vm.snapshot of a paused VM (no "live") runs as a job too: vm.info
    answers meanwhile (the job, live false, its written pages), vm.resume is
    refused (409), vm.cancel-snapshot ends it at its next 16 MiB step: 409
    cancelled, the VM still paused, nothing left; the next diff on the
    earlier snapshot holds every page."""
    with ApiShim(SHIM, workdir=workdir, name="src") as src:
        src.boot(GUEST, "vsnap.fill_mib=1536 vsnap.seed=7 vsnap.heartbeat_ms=100", memory_mib=2048)
        conn = connect(src)
        base = os.path.join(workdir, "base")
        src.snapshot_paused(base)
        conn.ok(f"FILL {FILL_BASE:#x} {32 * MIB:#x} 9")
        src.ok("PUT", "vm.pause")
        cancelled = os.path.join(workdir, "cancelled")
        job = LiveInBackground(src, cancelled, live=False)
        seen, slowest = wait_job(src, lambda j: j["written_pages"] >= 16 * MIB // 4096, "writing")
        check(seen["live"] is False and seen["phase"] == "writing", f"the paused job: {seen}")
        status, reply = src.api("PUT", "vm.resume")
        check(status == 409 and "under way" in error_message(reply), f"resume during it: {status} {reply}")
        t0 = time.monotonic()
        src.ok("PUT", "vm.cancel-snapshot")
        status, reply = job.join()
        took_ms = (job.done_at - t0) * 1e3
        print(f"paused snapshot cancelled at {seen['written_pages']} pages written: {status} {took_ms:.1f} ms after; "
              f"vm.info's slowest answer {slowest * 1e3:.1f} ms")
        check(status == 409 and "cancelled" in error_message(reply), f"the cancelled snapshot: {status} {reply}")
        check(took_ms < 1000, f"the cancel took {took_ms:.0f} ms")
        check(src.state() == "Paused", f"after the cancel the VM is {src.state()}")
        left = [n for n in os.listdir(workdir) if n.startswith("cancelled") or n.startswith(".cancelled")]
        check(left == [], f"the cancelled snapshot left {left}")
        diff = os.path.join(workdir, "diff")
        status, reply = src.api("PUT", "vm.snapshot", {"destination_url": "file://" + diff, "mode": "diff",
                                                       "parent_url": "file://" + base})
        check(status == 204, f"a paused diff after the cancel: {status} {reply}")
        src.ok("PUT", "vm.resume")
        conn.close()
    expected = subprocess.run([PATTERN, "9", str(32 * MIB)], check=True, capture_output=True, text=True).stdout.strip()
    with restored(workdir, "dst", diff, "copy") as dst:
        conn = connect(dst)
        check(conn.sum(FILL_BASE, 32 * MIB) == expected, "the diff after a cancelled snapshot lost pages")
        conn.close()


def case_live_teardown(workdir):
    """A guest that powers off during a live snapshot, and a vmm.shutdown
    during one, end it first: vm.snapshot answers 409 (the poweroff), the VM
    is Shutdown, the shim exits cleanly, nothing is left."""
    cmdline = "vsnap.fill_mib=1536 vsnap.seed=7 vsnap.heartbeat_ms=100"
    with ApiShim(SHIM, workdir=workdir, name="halt") as src:
        src.boot(GUEST, cmdline, memory_mib=2048)
        conn = connect(src)
        job = LiveInBackground(src, os.path.join(workdir, "halted"))
        wait_job(src, lambda j: j["pass_pages_copied"] > 0, "copying")
        check(conn.cmd("HALT") == "OK", "HALT")
        status, reply = job.join()
        print(f"the guest powered off during a live snapshot: {status} {reply}")
        check(status == 409 and "cancelled" in error_message(reply), f"vm.snapshot: {status} {reply}")
        check(src.state() == "Shutdown", "the VM is not Shutdown after its poweroff")
        conn.close()
    with ApiShim(SHIM, workdir=workdir, name="exit") as src:
        src.boot(GUEST, cmdline, memory_mib=2048)
        connect(src).close()  # the guest has filled its RAM
        job = LiveInBackground(src, os.path.join(workdir, "exited"))
        wait_job(src, lambda j: j["pass_pages_copied"] > 0, "copying")
        t0 = time.monotonic()
        src.api("PUT", "vmm.shutdown", timeout=10)
        code = src.proc.wait(timeout=10)
        print(f"vmm.shutdown during a live snapshot: exit {code} after {(time.monotonic() - t0) * 1e3:.0f} ms")
        check(code == 0, f"the shim exited {code}" + src.describe())
        job.thread.join(10)
    left = [n for n in os.listdir(workdir) if "halted" in n or "exited" in n]
    check(left == [], f"left behind: {left}")


CASES = {
    "live": case_live,
    "live_teardown": case_live_teardown,
    "live_forced": case_live_forced,
    "paused_cancel": case_paused_cancel,
    "live_cancel": case_live_cancel,
    "live_fail": case_live_fail,
    "hugepages_copy": lambda d: case_hugepages(d, "copy"),
    "hugepages_merge": lambda d: case_hugepages(d, "merge"),
    "hugepages_ondemand": lambda d: case_hugepages(d, "ondemand"),
    "hugepages_short": case_hugepages_short,
    "heartbeat": case_heartbeat,
    "heartbeat_2cpus": lambda d: case_heartbeat(d, cpus=2),
    "chain_copy": lambda d: case_chain(d, "copy"),
    "chain_merge": lambda d: case_chain(d, "merge"),
    "chain_ondemand": lambda d: case_chain(d, "ondemand"),
    "twins": case_twins,
    "long_chain": case_long_chain,
    "sparse_8g": case_sparse_8g,
    "bad_input": case_bad_input,
    "ondemand_corrupt": case_ondemand_corrupt,
    "ondemand_corrupt_first": case_ondemand_corrupt_first,
    "ondemand_corrupt_paused": case_ondemand_corrupt_paused,
    "full_fs": case_full_fs,
    "fold_snapshot": case_fold_snapshot,
    "truncated_reference": case_truncated_reference,
    "ondemand_truncated": case_ondemand_truncated,
    "deleted_space": case_deleted_space,
    # Under the sanitizers (scripts/test.sh's second stage) the same path with
    # 4 VMs: that stage looks for memory errors, the load is the first stage's.
    "load_20": lambda d: case_load_20(d, 4 if os.environ.get("VSNAP_SANITIZED") else 20),
}


def main():
    if CASE.startswith("hugepages") and not HugePages.can_reserve():
        print(f"SKIP {CASE}: huge pages need root and a default huge page size of 2 MiB")
        return 77
    return run_case(CASES, CASE, "vsnap-persist")


if __name__ == "__main__":
    sys.exit(main())

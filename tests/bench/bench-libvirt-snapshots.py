"""libvirt-level snapshot benchmark (issue 6): what a virsh user sees.

For guest RAM 512 MiB and 8 GiB and restore modes ondemand and merge (the
domain's <vsnap:restore mode=...>), with a 64 MiB working set filled at boot
and 16 MiB of it rewritten between the snapshots:

  create_full_ms      wall time of `virsh snapshot-create-as` (first: full layer)
  create_diff_ms      ... of the next one (diff layer)
  revert_wall_ms      wall time of `virsh snapshot-revert` (process start to exit)
  revert_ready_ms     from the start of `virsh snapshot-revert` to the
                      agent-lifecycle "connected" event seen by a python3-libvirt
                      client (the guest reads its working set back before it
                      announces readiness after a restore)

Everything runs through a private virtvsnapd with real virsh and real
python3-libvirt. Medians of --runs reverts (alternating between the two
snapshots). One JSON object per measurement is appended to RESULTS; the
ratios revert(8 GiB)/revert(512 MiB) per mode and merge/ondemand per size are
printed and recorded.

usage: bench-libvirt-snapshots.py VIRTVSNAPD SHIM GUEST RESULTS [--runs N] [--sizes 512,8192]
"""

import argparse
import os
import statistics
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from vsnaptest import append_jsonl  # noqa: E402

MIB = 1 << 20
WORKSET_MIB = 64
REWRITE = (16 * MIB, 16 * MIB)
MODES = ("ondemand", "merge")


def domain_xml(name, guest, ram_mib, mode):
    return f"""<domain type='kvm'>
  <name>{name}</name>
  <metadata>
    <vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'><vsnap:restore mode='{mode}'/></vsnap:vsnap>
  </metadata>
  <memory unit='MiB'>{ram_mib}</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type><kernel>{guest}</kernel>
    <cmdline>vsnap.fill_mib={WORKSET_MIB} vsnap.seed=3</cmdline></os>
  <devices><vsock model='virtio'><cid auto='yes'/></vsock></devices>
</domain>
"""


def timed_virsh(daemon, *args):
    t0 = time.monotonic()
    daemon.virsh(*args)
    return t0, (time.monotonic() - t0) * 1e3


def record(args, entry):
    entry.update(benchmark="libvirt-snapshots", host=os.uname().nodename, time=time.time())
    append_jsonl(args.results, [entry])


def bench_one(args, daemon, ready, ram_mib, mode):
    from test_snapshots import Guest
    name = f"b{ram_mib}{mode}"
    path = os.path.join(daemon.dir, name + ".xml")
    with open(path, "w") as f:
        f.write(domain_xml(name, args.guest, ram_mib, mode))
    daemon.virsh("define", path)
    daemon.virsh("start", name)
    vsock = os.path.join(daemon.state, "run", name, "vsock.sock")
    Guest(vsock, timeout=120).close()
    _, full_ms = timed_virsh(daemon, "snapshot-create-as", name, "base")
    g = Guest(vsock)
    g.fill(REWRITE, 99)
    g.close()
    _, diff_ms = timed_virsh(daemon, "snapshot-create-as", name, "top")
    walls, readies = [], []
    for i in range(args.runs):
        snap = ("base", "top")[i % 2]
        t0, wall = timed_virsh(daemon, "snapshot-revert", name, snap)
        walls.append(wall)
        readies.append((ready.wait_after(t0) - t0) * 1e3)
    daemon.virsh("destroy", name)
    daemon.virsh("undefine", name, "--snapshots-metadata")
    result = {"ram_mib": ram_mib, "mode": mode, "runs": args.runs,
              "create_full_ms": full_ms, "create_diff_ms": diff_ms,
              "revert_wall_ms": statistics.median(walls),
              "revert_ready_ms": statistics.median(readies),
              "samples": {"revert_wall_ms": walls, "revert_ready_ms": readies}}
    record(args, result)
    print(f"{ram_mib:5d} MiB {mode:8s} create full {full_ms:7.1f} ms  diff {diff_ms:7.1f} ms  "
          f"revert {result['revert_wall_ms']:7.1f} ms  to readiness {result['revert_ready_ms']:7.1f} ms",
          flush=True)
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("virtvsnapd")
    ap.add_argument("shim")
    ap.add_argument("guest")
    ap.add_argument("results")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="512,8192")
    args = ap.parse_args()
    # meson passes build paths relative to the build directory; the daemon
    # wants an absolute <kernel>.
    for key in ("virtvsnapd", "shim", "guest", "results"):
        setattr(args, key, os.path.abspath(getattr(args, key)))
    os.environ.update(VIRTVSNAPD=args.virtvsnapd, VSNAP_SHIM=args.shim, VSNAP_TESTGUEST=args.guest)
    os.environ.setdefault("VSNAP_SCHEMA_DIR", os.path.join(HERE, "..", "..", "xml"))
    import vsnapd  # reads the environment above
    import libvirt
    vsnapd.SHIM, vsnapd.TESTGUEST = args.shim, args.guest
    vsnapd.VIRTVSNAPD = args.virtvsnapd
    libvirt.virEventRegisterDefaultImpl()
    threading.Thread(target=lambda: [libvirt.virEventRunDefaultImpl() for _ in iter(int, 1)],
                     daemon=True).start()
    daemon = vsnapd.Daemon().start()
    table = {}
    try:
        conn = daemon.connect()
        ready = vsnapd.AgentReadiness(conn)
        for ram in [int(s) for s in args.sizes.split(",")]:
            for mode in MODES:
                table[(ram, mode)] = bench_one(args, daemon, ready, ram, mode)
        conn.domainEventDeregisterAny(ready.cb)
        conn.close()
    finally:
        daemon.cleanup()
    sizes = sorted({k[0] for k in table})
    ratios = {}
    for key in ("revert_wall_ms", "revert_ready_ms"):
        for mode in MODES:
            if len(sizes) > 1:
                ratios[f"{mode}_{key}_{sizes[-1]}m_over_{sizes[0]}m"] = (
                    table[(sizes[-1], mode)][key] / table[(sizes[0], mode)][key])
        for ram in sizes:
            ratios[f"merge_over_ondemand_{key}_{ram}m"] = (
                table[(ram, "merge")][key] / table[(ram, "ondemand")][key])
    for ram in sizes:
        ratios[f"full_over_diff_create_{ram}m"] = (
            table[(ram, "ondemand")]["create_full_ms"] / table[(ram, "ondemand")]["create_diff_ms"])
    record(args, {"ratios": ratios})
    # QEMU with libvirt's QEMU driver, measured on the same guest and in the
    # same run as vsnap, is tests/bench/bench-qemu-save.py.
    for k, v in ratios.items():
        print(f"{k}: {v:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

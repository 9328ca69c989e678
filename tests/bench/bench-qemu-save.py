#!/usr/bin/python3
"""QEMU's `virsh save`/`virsh restore` next to vsnap's, in the same run (issue 6):
the everyday alternative a libvirt user would pick, on the same test guest.

The guest (guest/testguest, booted by QEMU through its PVH entry and by the
shim through the Linux boot protocol) fills 64 MiB at boot and then idles,
printing a heartbeat line every HEARTBEAT_MS. For guest RAM 512 MiB and 8 GiB,
per run, interleaved so load on the shared machine hits both alike:

  QEMU (libvirt's QEMU driver, qemu:///system; q35, direct kernel boot)
    save_ms           wall time of `virsh save DOM FILE` (ends with the domain stopped)
    restore_ms        wall time of `virsh restore FILE` (ends with it running)
    restore_running_ms  from the start of `virsh restore` to the guest's first
                      serial output after it (it prints a heartbeat every
                      HEARTBEAT_MS, so this is when it runs again, +0..20 ms)
  vsnap (virtvsnapd on a private socket, vsnap:///system)
    save_ms, restore_ms   the same two virsh commands
    restore_running_ms  the same first output, read from the new run's
                      serial pty (<serial type='pty'/>, what `virsh console`
                      and `virsh ttyconsole` use), as soon as the daemon's
                      live XML names it (<source path>): the later of the
                      guest's first output and that
    restore_vcpus_running_ms  ... to the new shim's vCPUs running (its own
                      mark, vm.info's vsnap.timeline.resumed_ns)
    restore_ready_ms  from the start of `virsh restore` to the agent-lifecycle
                      "connected" event (the guest announces readiness again)
    revert_ms, revert_running_ms, revert_ready_ms   `virsh snapshot-revert` to a
                      snapshot taken once after boot, and the same two marks

Medians of --runs runs; one JSON object per (RAM size, VMM) plus the ratios
(QEMU over vsnap) is appended to RESULTS. What this needs and does not find
(qemu-system-x86, libvirt-daemon-system) is installed with apt-get; libvirtd
and virtlogd are started if they are not running and stopped again at the end.
Every domain this defines is destroyed and undefined, and its files removed.
QEMU runs as libvirt's QEMU user (libvirt-qemu), as on any Debian host. Where
/dev/kvm is root-only (no udev here), it gets Debian's usual group kvm and mode
0660 for the run and its old owner and mode back at the end: otherwise libvirt
finds KVM unusable for that user, throws its capability cache away on every
lookup and probes QEMU again (4 s each here, twice per restore), which is not
what QEMU users see.

usage: bench-qemu-save.py VIRTVSNAPD SHIM GUEST RESULTS [--runs N] [--sizes 512,8192]
                          [--pattern BUILD/tests/lib/vsnap-pattern]
"""

import argparse
import json
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import libvirt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
sys.path.insert(0, HERE)
from targets import at_most, smoke, summary_status, touch_target  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from vsnaptest import http_unix  # noqa: E402

MIB = 1 << 20
WORKSET_MIB = 64
SEED = 7
HEARTBEAT_MS = 20
PREFIX = "vsnap-testguest: "
QEMU_URI = "qemu:///system"
QEMU_BIN = "/usr/bin/qemu-system-x86_64"
LIBVIRT_SOCK = "/run/libvirt/libvirt-sock"
VIRTLOGD_SOCK = "/run/libvirt/virtlogd-sock"
PACKAGES = ["qemu-system-x86", "libvirt-daemon-system", "libvirt-daemon-system-sysv"]
BOOT_TIMEOUT = 120  # s; SeaBIOS runs in KVM's emulator here (5-10 s)
CMDLINE = f"vsnap.fill_mib={WORKSET_MIB} vsnap.seed={SEED} vsnap.heartbeat_ms={HEARTBEAT_MS}"


def log(text):
    print(text, flush=True)


def run(argv, timeout=600, check=True):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                         stdin=subprocess.DEVNULL)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({res.returncode}): "
                           f"{res.stderr.strip() or res.stdout.strip()}")
    return res


def timed(argv, timeout=600):
    """(start on the monotonic clock, wall time in ms) of one command."""
    t0 = time.monotonic()
    run(argv, timeout=timeout)
    return t0, (time.monotonic() - t0) * 1e3


def timed_watching(argv, watch):
    """(start, wall ms of the command, the time watch(start) returned) for a
    command that brings a guest back, with watch() looking for its output while
    the command runs: the guest may run again before the command exits."""
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    ended = {}

    def wait_command():
        ended["out"] = proc.communicate()
        ended["t"] = time.monotonic()
    waiter = threading.Thread(target=wait_command)
    waiter.start()
    try:
        seen = watch(t0)
    finally:
        waiter.join(120)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {ended['out'][1].strip()}")
    return t0, (ended["t"] - t0) * 1e3, seen


# ---- what QEMU needs on the host ----

def install_missing():
    missing = [p for p in PACKAGES
               if run(["dpkg-query", "-W", "-f=${Status}", p], check=False).stdout
               != "install ok installed"]
    if not missing:
        return
    log(f"installing {' '.join(missing)} (apt-get, no recommends)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    argv = ["apt-get", "install", "-y", "--no-install-recommends"] + missing
    if subprocess.run(argv, env=env, stdout=subprocess.DEVNULL).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, stdout=subprocess.DEVNULL, check=True)
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, check=True)


def listening(path):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(path)
        return True
    except OSError:
        return False


class KvmForQemuUser:
    """/dev/kvm usable by libvirt's QEMU user for the run (see the top)."""

    def __init__(self, user="libvirt-qemu", group="kvm"):
        import grp
        import pwd
        self.saved = None
        st = os.stat("/dev/kvm")
        pw = pwd.getpwnam(user)
        gid = grp.getgrnam(group).gr_gid
        groups = os.getgrouplist(user, pw.pw_gid)
        if ((st.st_uid == pw.pw_uid and st.st_mode & 0o600 == 0o600)
                or (st.st_gid in groups and st.st_mode & 0o060 == 0o060)
                or st.st_mode & 0o006 == 0o006):
            return
        if gid not in groups:
            raise RuntimeError(f"{user} is not in group {group}: cannot give it /dev/kvm")
        self.saved = (st.st_uid, st.st_gid, st.st_mode & 0o7777)
        os.chown("/dev/kvm", st.st_uid, gid)
        os.chmod("/dev/kvm", 0o660)
        log(f"/dev/kvm: group {group}, mode 0660 for the run (was {self.saved[2]:o}, "
            f"gid {self.saved[1]}; put back at the end)")

    def close(self):
        if self.saved:
            uid, gid, mode = self.saved
            os.chown("/dev/kvm", uid, gid)
            os.chmod("/dev/kvm", mode)
            self.saved = None


class HostDaemon:
    """virtlogd or libvirtd: used as found if it listens, else started here
    (in the foreground, as our child) and stopped again by close()."""

    def __init__(self, argv, sock, workdir):
        self.proc = None
        if listening(sock):
            return
        self.log_path = os.path.join(workdir, os.path.basename(argv[0]) + ".log")
        with open(self.log_path, "w") as out:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while not listening(sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                with open(self.log_path) as f:
                    raise RuntimeError(f"{argv[0]} did not start: {f.read()[-2000:]}")
            time.sleep(0.05)
        log(f"started {argv[0]} (pid {self.proc.pid}); it is stopped at the end")

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# ---- QEMU through libvirt ----

def qemu_domain_xml(name, kernel, ram_mib, serial_path):
    return f"""<domain type='kvm'>
  <name>{name}</name>
  <memory unit='MiB'>{ram_mib}</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>{kernel}</kernel>
    <cmdline>{CMDLINE}</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>{QEMU_BIN}</emulator>
    <controller type='usb' model='none'/>
    <serial type='file'>
      <source path='{serial_path}' append='on'/>
      <target port='0'/>
    </serial>
    <memballoon model='none'/>
  </devices>
</domain>
"""


class SerialFile:
    """The guest's serial port as a file QEMU appends to."""

    def __init__(self, path):
        self.path = path
        self.offset = 0

    def skip_to_end(self):
        self.offset = os.path.getsize(self.path) if os.path.exists(self.path) else 0

    def wait_line(self, prefix, timeout=BOOT_TIMEOUT):
        """(monotonic time seen, line) of the first new line starting with prefix."""
        deadline = time.monotonic() + timeout
        pending = b""
        while time.monotonic() < deadline:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self.offset)
                    chunk = f.read()
            except FileNotFoundError:
                chunk = b""
            now = time.monotonic()
            self.offset += len(chunk)
            pending += chunk
            while b"\n" in pending:
                raw, pending = pending.split(b"\n", 1)
                line = raw.decode(errors="replace").strip("\r")
                if "exception" in line or line.startswith(PREFIX + "error"):
                    raise RuntimeError(f"guest under QEMU: {line}")
                if line.startswith(prefix):
                    self.offset -= len(pending)
                    return now, line
            self.offset -= len(pending)
            pending = b""
            time.sleep(0.002)
        raise RuntimeError(f"no '{prefix}' on {self.path} within {timeout} s")

    def wait_output(self, timeout=60):
        """Monotonic time at which the file first grew past the offset."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.getsize(self.path) > self.offset:
                return time.monotonic()
            time.sleep(0.001)
        raise RuntimeError(f"no output on {self.path} within {timeout} s")


class QemuGuest:
    def __init__(self, workdir, kernel, ram_mib, expected_sum):
        self.name = f"vsnap-bench-qemu-{ram_mib}"
        self.dir = os.path.join(workdir, self.name)
        os.makedirs(self.dir)
        self.save_path = os.path.join(self.dir, "saved.img")
        self.serial = SerialFile(os.path.join(self.dir, "serial.log"))
        xml = os.path.join(self.dir, "domain.xml")
        with open(xml, "w") as f:
            f.write(qemu_domain_xml(self.name, kernel, ram_mib, self.serial.path))
        self.virsh("define", xml)
        self.defined = True
        self.virsh("start", self.name)
        _, line = self.serial.wait_line(PREFIX + "ready sum=")
        if line != PREFIX + "ready sum=" + expected_sum:
            raise RuntimeError(f"QEMU guest: '{line}', expected sum {expected_sum}")
        self.serial.wait_line(PREFIX + "tick")

    @staticmethod
    def virsh(*args):
        return run(["virsh", "-q", "-c", QEMU_URI] + list(args))

    def measure(self):
        _, save_ms = timed(["virsh", "-q", "-c", QEMU_URI, "save", self.name, self.save_path])
        self.serial.skip_to_end()
        t0, restore_ms, seen = timed_watching(
            ["virsh", "-q", "-c", QEMU_URI, "restore", self.save_path],
            lambda t0: self.serial.wait_output())
        state = self.virsh("domstate", self.name).stdout.strip()
        if state != "running":
            raise RuntimeError(f"QEMU domain is '{state}' after virsh restore")
        image = os.path.getsize(self.save_path)
        os.unlink(self.save_path)
        return {"save_ms": save_ms, "restore_ms": restore_ms,
                "restore_running_ms": (seen - t0) * 1e3, "image_bytes": image}

    def close(self):
        run(["virsh", "-q", "-c", QEMU_URI, "destroy", self.name], check=False)
        if getattr(self, "defined", False):
            run(["virsh", "-q", "-c", QEMU_URI, "undefine", self.name], check=False)
        shutil.rmtree(self.dir, ignore_errors=True)
        try:  # libvirt's log of the QEMU process, created for this domain
            os.unlink(f"/var/log/libvirt/qemu/{self.name}.log")
        except FileNotFoundError:
            pass


# ---- vsnap through virtvsnapd ----

def vsnap_domain_xml(name, kernel, ram_mib):
    return f"""<domain type='kvm'>
  <name>{name}</name>
  <memory unit='MiB'>{ram_mib}</memory>
  <vcpu>1</vcpu>
  <os><type>hvm</type><kernel>{kernel}</kernel><cmdline>{CMDLINE}</cmdline></os>
  <devices>
    <serial type='pty'><target port='0'/></serial>
    <vsock model='virtio'><cid auto='yes'/></vsock>
  </devices>
</domain>
"""


SERIAL_PTY = re.compile(r"<serial type=.pty.>\s*<source path=.(/dev/pts/[0-9]+).")


def live_pty(conn, name, old_id):
    """The serial pty of the domain's run after the one with id old_id, as
    the daemon's live XML names it (<serial type='pty'><source path>), or None
    while that run has not started. A confined shim holds the slave in its
    own mount namespace (/proc/PID/fd does not name the host's path); the
    daemon reports the path clients open, as `virsh ttyconsole` does.
    Looked up again each time: a virDomain keeps the id it was looked up with."""
    try:
        dom = conn.lookupByName(name)
        if dom.ID() in (-1, old_id):
            return None
        m = SERIAL_PTY.search(dom.XMLDesc(0))
    except libvirt.libvirtError:
        return None
    return m.group(1) if m else None


def first_output_from_new_run(conn, name, old_id, deadline):
    """Monotonic time of the first guest output on the serial pty of the
    domain's next run. The shim keeps the slave open, so what the guest
    wrote before the daemon named the pty waits in it: the mark is the later
    of the guest's first output and the daemon's live XML naming the pty."""
    fd = None
    try:
        while time.monotonic() < deadline:
            if fd is None:
                path = live_pty(conn, name, old_id)
                if path is None:
                    time.sleep(0.001)
                    continue
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOCTTY | os.O_NONBLOCK)
                except OSError:
                    time.sleep(0.001)
                    continue
            ready, _, _ = select.select([fd], [], [], max(0.0, min(0.05, deadline - time.monotonic())))
            if ready:
                try:
                    if os.read(fd, 4096):
                        return time.monotonic()
                except BlockingIOError:
                    pass
    finally:
        if fd is not None:
            os.close(fd)
    raise RuntimeError(f"no output on the serial pty of {name}'s next run (the live XML's "
                       f"<serial><source path>) within the deadline")


class VsnapGuest:
    def __init__(self, daemon, conn, ready, kernel, ram_mib, expected_sum, runs):
        from test_snapshots import Guest
        self.daemon, self.conn, self.ready = daemon, conn, ready
        self.name = f"vsnap-bench-vsnap-{ram_mib}"
        self.save_path = os.path.join(daemon.dir, self.name + ".save")
        xml = os.path.join(daemon.dir, self.name + ".xml")
        with open(xml, "w") as f:
            f.write(vsnap_domain_xml(self.name, kernel, ram_mib))
        daemon.virsh("define", xml)
        daemon.virsh("start", self.name)
        self.run_dir = os.path.join(daemon.state, "run", self.name)
        self.vsock = os.path.join(self.run_dir, "vsock.sock")
        self.expected_sum = expected_sum
        self.check_memory(Guest, timeout=BOOT_TIMEOUT)
        self.fresh_touch_ms = self.fresh_touch(Guest, ram_mib, runs)
        daemon.virsh("snapshot-create-as", self.name, "booted")

    def fresh_touch(self, guest_class, ram_mib, runs):
        """The reference for READY after a restore (which comes once the guest
        has read its working set back): median ms of TOUCH of as much RAM the
        booted guest never touched, regions past the working set."""
        g = guest_class(self.vsock)
        times = []
        try:
            for k in range(max(1, min(runs, (ram_mib - 16) // WORKSET_MIB - 1))):
                gpa = (16 + WORKSET_MIB * (k + 1)) * MIB
                t0 = time.monotonic()
                reply = g.cmd(f"TOUCH {gpa:#x} {WORKSET_MIB * MIB:#x}")
                times.append((time.monotonic() - t0) * 1e3)
                if reply != "OK":
                    raise RuntimeError(f"TOUCH: {reply}")
        finally:
            g.close()
        return statistics.median(times)

    def check_memory(self, guest_class=None, timeout=30):
        if guest_class is None:
            from test_snapshots import Guest as guest_class
        g = guest_class(self.vsock, timeout=timeout)
        try:
            got = g.sum((16 * MIB, WORKSET_MIB * MIB))
        finally:
            g.close()
        if got != self.expected_sum:
            raise RuntimeError(f"vsnap guest memory sum {got}, expected {self.expected_sum}")

    def virsh_argv(self, *args):
        return ["virsh", "-q", "-c", self.daemon.uri] + list(args)

    def timed_back(self, *args):
        """(wall ms, ms to the new shim's first guest output, ms to readiness,
        ms to the new shim's vCPUs running) of a virsh command that brings the
        domain back. The last is the shim's own mark (vm.info's
        vsnap.timeline.resumed_ns, wall clock), exact where the first output
        waits for the daemon to name the pty."""
        old_id = self.conn.lookupByName(self.name).ID()
        wall_minus_mono = time.time_ns() - time.monotonic_ns()
        t0, wall, running = timed_watching(
            self.virsh_argv(*args),
            lambda t0: first_output_from_new_run(self.conn, self.name, old_id, t0 + 60))
        ready = self.ready.wait_after(t0)
        status, body = http_unix(os.path.join(self.run_dir, "api.sock"), "GET", "/api/v1/vm.info")
        resumed_ns = json.loads(body)["vsnap"]["timeline"]["resumed_ns"] if status == 200 else None
        if resumed_ns is None:
            raise RuntimeError(f"vm.info of the restored shim: {status} {body[:200]!r}")
        vcpus = (resumed_ns - wall_minus_mono) / 1e9
        return wall, (running - t0) * 1e3, (ready - t0) * 1e3, (vcpus - t0) * 1e3

    def measure(self):
        _, save_ms = timed(self.virsh_argv("save", self.name, self.save_path))
        image = os.path.getsize(self.save_path)
        restore = self.timed_back("restore", self.save_path)
        os.unlink(self.save_path)
        revert = self.timed_back("snapshot-revert", self.name, "booted")
        self.check_memory()
        out = {"save_ms": save_ms, "image_bytes": image}
        for what, times in (("restore", restore), ("revert", revert)):
            out.update({f"{what}_ms": times[0], f"{what}_running_ms": times[1], f"{what}_ready_ms": times[2],
                        f"{what}_vcpus_running_ms": times[3]})
        return out

    def close(self):
        self.daemon.virsh("destroy", self.name, check=False)
        self.daemon.virsh("undefine", self.name, "--snapshots-metadata", "--managed-save",
                          check=False)


# ---- the run ----

def medians(samples):
    keys = samples[0].keys()
    return {k: statistics.median(s[k] for s in samples) for k in keys}


def record(results, entry):
    entry.update(benchmark="qemu-save", host=os.uname().nodename, time=time.time())
    os.makedirs(os.path.dirname(os.path.abspath(results)), exist_ok=True)
    with open(results, "a") as f:
        f.write(json.dumps(entry) + "\n")


def bench_size(args, workdir, kernel, daemon, conn, ready, ram_mib, expected):
    qemu = vsnap = None
    q_samples, v_samples = [], []
    try:
        qemu = QemuGuest(workdir, kernel, ram_mib, expected) if args.qemu else None
        vsnap = VsnapGuest(daemon, conn, ready, kernel, ram_mib, expected, args.runs)
        for i in range(args.runs):
            if qemu:
                q_samples.append(qemu.measure())
            v_samples.append(vsnap.measure())
            q = (f"qemu save {q_samples[-1]['save_ms']:.0f} restore {q_samples[-1]['restore_ms']:.0f} ms; "
                 if qemu else "")
            log(f"  {ram_mib} MiB run {i + 1}: {q}vsnap save {v_samples[-1]['save_ms']:.0f} "
                f"restore {v_samples[-1]['restore_ms']:.0f} revert {v_samples[-1]['revert_ms']:.0f} ms")
    finally:
        for g in (qemu, vsnap):
            if g:
                g.close()
    out = {}
    for vmm, samples in (("qemu", q_samples), ("vsnap", v_samples)):
        if not samples:
            continue
        out[vmm] = dict(medians(samples), samples=samples)
        if vmm == "vsnap":
            out[vmm]["fresh_touch_ms"] = vsnap.fresh_touch_ms
        record(args.results, dict(vmm=vmm, ram_mib=ram_mib, runs=args.runs,
                                  workset_mib=WORKSET_MIB, **out[vmm]))
    return out


def size_targets(ram, q, v):
    """vsnap's READY after virsh restore and snapshot-revert against the
    guest's own first touches (same run), and vsnap's restore against
    QEMU's on the same guest."""
    out = [touch_target(f"{what}_ready_minus_running_{ram}m",
                        v[f"{what}_ready_ms"] - v[f"{what}_vcpus_running_ms"], v["fresh_touch_ms"])
           for what in ("restore", "revert")]
    qr = q["restore_running_ms"] if q else None
    out.append(at_most(f"vsnap_restore_running_{ram}m_vs_qemu", v["restore_running_ms"], qr,
                       f"QEMU's virsh restore to running on the same guest, same run = "
                       f"{'n/a' if qr is None else f'{qr:.1f}'} ms", "ms",
                       why=None if q else "QEMU is not installed (smoke mode installs nothing)"))
    return out


def print_table(table):
    log("")
    log(f"{'RAM':>6} {'VMM':6} {'save':>8} {'restore':>8} {'running':>8} {'ready':>8} "
        f"{'revert':>8} {'running':>8} {'ready':>8} {'image':>10}")
    for ram, row in table.items():
        q, v = row.get("qemu"), row["vsnap"]
        if q:
            log(f"{ram:>5}M {'qemu':6} {q['save_ms']:8.1f} {q['restore_ms']:8.1f} "
                f"{q['restore_running_ms']:8.1f} {'-':>8} {'-':>8} {'-':>8} {'-':>8} "
                f"{q['image_bytes'] / MIB:6.1f} MiB")
        log(f"{ram:>5}M {'vsnap':6} {v['save_ms']:8.1f} {v['restore_ms']:8.1f} "
            f"{v['restore_running_ms']:8.1f} {v['restore_ready_ms']:8.1f} {v['revert_ms']:8.1f} "
            f"{v['revert_running_ms']:8.1f} {v['revert_ready_ms']:8.1f} "
            f"{v['image_bytes'] / MIB:6.1f} MiB  (vCPUs running: restore {v['restore_vcpus_running_ms']:.1f}, "
            f"revert {v['revert_vcpus_running_ms']:.1f} ms; fresh touch {v['fresh_touch_ms']:.1f} ms)")


def summarize(args, table):
    print_table(table)
    ratios, targets = {}, []
    for ram, row in table.items():
        q, v = row.get("qemu"), row["vsnap"]
        targets += size_targets(ram, q, v)
        if not q:
            continue
        ratios[f"qemu_restore_over_vsnap_restore_{ram}m"] = q["restore_ms"] / v["restore_ms"]
        ratios[f"qemu_restore_over_vsnap_revert_{ram}m"] = q["restore_ms"] / v["revert_ms"]
        ratios[f"qemu_save_over_vsnap_save_{ram}m"] = q["save_ms"] / v["save_ms"]
        ratios[f"qemu_running_over_vsnap_running_{ram}m"] = (
            q["restore_running_ms"] / v["restore_running_ms"])
    record(args.results, {"ratios": ratios, "targets": targets, "target_status": summary_status(targets)})
    log(f"(medians of {args.runs} runs, ms. running: from the start of the virsh command to "
        f"the guest's first serial output after it; ready: to the agent-lifecycle event "
        f"(vsnap only: QEMU's guest has no vsnap vsock); image: the save file)")
    for k, val in ratios.items():
        log(f"{k}: {val:.2f}")
    for t in targets:
        log(f"target {t['name']}: {t['value']} {t['op']} {t['limit']}: {t['status']}")


def qemu_installed():
    return os.access(QEMU_BIN, os.X_OK) and os.access("/usr/sbin/libvirtd", os.X_OK)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("virtvsnapd")
    ap.add_argument("shim")
    ap.add_argument("guest")
    ap.add_argument("results")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="512,8192")
    ap.add_argument("--pattern", help="vsnap-pattern (default: beside GUEST's build tree)")
    args = ap.parse_args()
    # meson passes build paths relative to the build directory; the daemon
    # wants an absolute <kernel>.
    for key in ("virtvsnapd", "shim", "guest", "results"):
        setattr(args, key, os.path.abspath(getattr(args, key)))
    if not args.pattern:
        args.pattern = os.path.join(os.path.dirname(os.path.abspath(args.guest)), "..", "..",
                                    "tests", "lib", "vsnap-pattern")
    os.environ.update(VIRTVSNAPD=args.virtvsnapd, VSNAP_SHIM=args.shim, VSNAP_TESTGUEST=args.guest)
    os.environ.setdefault("VSNAP_SCHEMA_DIR", os.path.join(HERE, "..", "..", "xml"))
    # Smoke mode (CI) installs nothing: without QEMU the vsnap side runs alone.
    args.qemu = True
    if smoke():
        args.runs, args.sizes, args.qemu = 1, "512", qemu_installed()
        if not args.qemu:
            log("smoke mode: QEMU is not installed, the vsnap side runs alone")
    else:
        install_missing()
    import vsnapd  # reads the environment above
    libvirt.registerErrorHandler(lambda ctx, err: None, None)
    libvirt.virEventRegisterDefaultImpl()
    threading.Thread(target=lambda: [libvirt.virEventRunDefaultImpl() for _ in iter(int, 1)],
                     daemon=True).start()

    expected = run([args.pattern, str(SEED), f"{WORKSET_MIB}M"]).stdout.strip()
    # QEMU (as the domain's DAC label) reads the kernel from here, not from the build tree.
    workdir = tempfile.mkdtemp(prefix="vsnap-bench-qemu-", dir="/var/tmp")
    os.chmod(workdir, 0o755)
    kernel = os.path.join(workdir, "vsnap-testguest")
    shutil.copyfile(args.guest, kernel)
    table = {}
    host_daemons = []
    daemon = conn = None
    kvm = None
    try:
        if args.qemu:
            kvm = KvmForQemuUser()
            host_daemons.append(HostDaemon(["/usr/sbin/virtlogd"], VIRTLOGD_SOCK, workdir))
            host_daemons.append(HostDaemon(["/usr/sbin/libvirtd"], LIBVIRT_SOCK, workdir))
        daemon = vsnapd.Daemon().start()
        conn = daemon.connect()
        ready = vsnapd.AgentReadiness(conn)
        for ram in [int(s) for s in args.sizes.split(",")]:
            log(f"{ram} MiB: booting the test guest under {'QEMU and under ' if args.qemu else ''}vsnap")
            table[ram] = bench_size(args, workdir, kernel, daemon, conn, ready, ram, expected)
        conn.domainEventDeregisterAny(ready.cb)
    finally:
        if conn:
            conn.close()
        if daemon:
            daemon.cleanup()
        for d in reversed(host_daemons):
            d.close()
        if kvm:
            kvm.close()
        shutil.rmtree(workdir, ignore_errors=True)
    summarize(args, table)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The shims virtvsnapd launches are confined (docs/confinement.md): an
unprivileged user, no capabilities, no_new_privs, seccomp filters on every
thread, their own mount, IPC, UTS and PID namespaces with only the domain's
files visible, a cgroup with the limits of <memtune> and <cputune>. A
forbidden system call (the shim's test-only trigger) kills the shim, and the
daemon says so. confine=false in the configuration file turns it off."""

import os
import pwd
import re
import stat
import subprocess
import tempfile
import time
import unittest

from vsnapd import SHIM, TESTGUEST, DaemonTest, VirshEvents, domain_xml, needs_guest, wait_for

TRIGGER = "VSNAP_SHIM_TEST_FORBIDDEN_SYSCALL"
MIB = 1 << 20


def status(pid, tid=None):
    """/proc/<pid>[/task/<tid>]/status as a dict of its fields."""
    path = f"/proc/{pid}/status" if tid is None else f"/proc/{pid}/task/{tid}/status"
    with open(path) as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def namespace(pid, kind):
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def cgroup_dir(pid, controller):
    """The directory of pid's cgroup holding controller: v1's hierarchy when
    it has one (a hybrid host), else v2's."""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if controller in controllers.split(","):
            return f"/sys/fs/cgroup/{controller}{path}"
    for hid, controllers, path in lines:
        if hid == "0" and not controllers:
            root = ("/sys/fs/cgroup" if os.path.exists("/sys/fs/cgroup/cgroup.controllers")
                    else "/sys/fs/cgroup/unified")
            return root + path
    raise AssertionError(f"no cgroup of {pid} has {controller}")


def top(path):
    """The first component of an absolute path."""
    return path.split("/")[1]


def read(path):
    with open(path) as f:
        return f.read().strip()


def files_named(root, name, skip=("proc", "dev")):
    """The paths of the files called name under root (not /proc, /dev)."""
    found = []
    for base, dirs, files in os.walk(root):
        if base == root:
            dirs[:] = [d for d in dirs if d not in skip]
        found += [os.path.join(base, f) for f in files if f == name]
    return found


def mount_points(pid):
    """pid's mount points, as it sees them (inside its jail)."""
    with open(f"/proc/{pid}/mountinfo") as f:
        return [line.split()[4] for line in f]


def inode(st):
    return st.st_dev, st.st_ino


def pty_slaves_held(pid):
    """The pty slaves (the files of the host's devpts but its ptmx) pid has
    open, by device and inode, not by the path /proc/PID/fd names: that is
    the file's path in the shim's mount namespace, which from a chroot at
    /srv/x (where the shim's pivot_root left its jail) reads
    /srv/x/dev/pts/0."""
    devpts, ptmx = os.stat("/dev/pts").st_dev, os.stat("/dev/pts/ptmx").st_rdev
    held = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except FileNotFoundError:   # closed meanwhile
            continue
        if st.st_dev == devpts and stat.S_ISCHR(st.st_mode) and st.st_rdev != ptmx:
            held.add(inode(st))
    return held


def tuned_xml(name, memtune="", cputune="", **kw):
    xml = domain_xml(name, **kw)
    return re.sub(r"(  <vcpu>.*</vcpu>\n)", lambda m: m.group(1) + memtune + cputune, xml)


@needs_guest
class ConfineTest(DaemonTest):
    def start_domain(self, name, xml=None):
        path = os.path.join(self.daemon.dir, name + ".xml")
        with open(path, "w") as f:
            f.write(xml or domain_xml(name))
        self.daemon.virsh("define", path)
        self.daemon.virsh("start", name)
        return self.daemon.shim_pids()[name]

    def test_shim_is_confined(self):
        pid = self.start_domain("c1")
        user = pwd.getpwnam("vsnap")
        st = status(pid)
        self.assertEqual(st["CapEff"], "0000000000000000")
        self.assertEqual(st["CapPrm"], "0000000000000000")
        self.assertEqual(st["CapBnd"], "0000000000000000")
        self.assertEqual(st["NoNewPrivs"], "1")
        self.assertEqual(st["Seccomp"], "2")
        self.assertEqual(st["Uid"].split(), [str(user.pw_uid)] * 4)
        self.assertEqual(st["Gid"].split(), [str(user.pw_gid)] * 4)
        # Every thread: the vCPU, the devices, the main loop.
        tids = os.listdir(f"/proc/{pid}/task")
        self.assertGreater(len(tids), 1)
        for tid in tids:
            t = status(pid, tid)
            self.assertEqual((t["Seccomp"], t["CapEff"], t["Uid"].split()[1]),
                             ("2", "0000000000000000", str(user.pw_uid)), f"thread {t['Name']}")
        for kind in ("mnt", "ipc", "uts", "pid"):
            self.assertNotEqual(namespace(pid, kind), namespace(os.getpid(), kind), kind)
        # The daemon records the shim's real pid; inside, it is the first.
        self.assertEqual(st["NSpid"].split(), [str(pid), "1"])
        # Only the jail: no /etc, the kernel and the run directory at their own paths.
        root = f"/proc/{pid}/root"
        self.assertFalse(os.path.exists(root + "/etc/shadow"))
        self.assertFalse(os.path.exists(root + "/usr"))
        self.assertEqual(sorted(os.listdir(root)),
                         sorted({"dev", "proc", top(self.daemon.dir), top(self.kernel())}))
        # Its procfs is its PID namespace's: itself and nobody else.
        self.assertEqual([e for e in os.listdir(root + "/proc") if e.isdigit()], ["1"])
        self.assertTrue(os.path.exists(root + self.kernel()))
        run = os.path.join(self.daemon.state, "run", "c1")
        self.assertTrue(os.path.exists(root + run + "/api.sock"))
        self.assertFalse(os.path.exists(root + os.path.join(self.daemon.state, "domains")))
        self.assertEqual(sorted(os.listdir(root + "/dev")),
                         ["kvm", "null", "ptmx", "pts", "random", "shm", "urandom", "userfaultfd",
                          "zero"])
        # The domain keeps working confined: pause, snapshot, resume.
        self.daemon.virsh("suspend", "c1")
        self.daemon.virsh("snapshot-create-as", "c1", "s1")
        self.daemon.virsh("resume", "c1")
        self.assertEqual(self.state("c1"), "running (unpaused)")

    def test_a_jail_holds_no_other_domains_save(self):
        """All shims run as one user: what keeps one VM's shim from another
        guest's RAM is its jail. B's shim sees nothing of A's managed save
        image, and every directory of the daemon's in its jail is B's own
        (none shared with A, where A's save or managed save would stage its
        files); A still saves and starts from its image confined."""
        self.start_domain("a")
        pid_b = self.start_domain("b")
        self.daemon.virsh("managedsave", "a")
        images = files_named(self.daemon.state, "managed-save.ini")
        self.assertEqual(len(images), 1, images)
        root = f"/proc/{pid_b}/root"
        self.assertFalse(os.path.exists(root + os.path.dirname(images[0])))
        self.assertEqual(files_named(root, "managed-save.ini"), [])
        # Outside any jail too, the shims' user cannot reach it while A is off.
        area = os.stat(os.path.dirname(os.path.dirname(images[0])))
        self.assertEqual((area.st_uid, area.st_mode & 0o777), (os.getuid(), 0o700))
        for point in mount_points(pid_b):
            if not point.startswith(self.daemon.dir + "/"):
                continue
            part = os.path.relpath(point, self.daemon.state).split("/")
            self.assertTrue(len(part) >= 2 and part[1] in ("b", "b.log"),
                            f"B's jail holds {point}, not B's own")
        self.daemon.virsh("start", "a")
        self.assertEqual(self.state("a"), "running (restored)")
        pid_a = self.daemon.shim_pids()["a"]
        self.assertEqual(status(pid_a)["Uid"].split()[1], str(pwd.getpwnam("vsnap").pw_uid))
        # Both ways: B's managed save and start, A's save to a file and restore.
        self.daemon.virsh("managedsave", "b")
        self.assertFalse(os.path.exists(f"/proc/{pid_a}/root" + self.daemon.state + "/managedsave"))
        self.assertEqual(files_named(f"/proc/{pid_a}/root", "managed-save.ini"), [])
        self.daemon.virsh("start", "b")
        self.assertEqual(self.state("b"), "running (restored)")
        image = os.path.join(self.daemon.dir, "a.save")
        self.daemon.virsh("save", "a", image)
        self.daemon.virsh("restore", image)
        self.assertEqual(self.state("a"), "running (restored)")

    def test_guest_reset_reopens_a_root_only_disk(self):
        """A reset builds a fresh VM in the same shim, after the drop: the
        disk image, writable by root only, is the one opened before it."""
        image = os.path.join(self.daemon.dir, "root-only.img")
        with open(image, "wb") as f:
            f.truncate(1 << 20)
        os.chmod(image, 0o644)
        disk = (f"    <disk type='file' device='disk'>\n      <source file='{image}'/>\n"
                "      <target dev='vda' bus='virtio'/>\n    </disk>\n")
        watcher = VirshEvents(self.daemon, "--all")
        try:
            path = os.path.join(self.daemon.dir, "r.xml")
            with open(path, "w") as f:
                f.write(domain_xml("r", cmdline="vsnap.fill_mib=1 vsnap.reboot_after_ready=1",
                                   extra_devices=disk))
            self.daemon.virsh("define", path)
            self.daemon.virsh("start", "r")
            pid = self.daemon.shim_pids()["r"]
            first = watcher.wait_for_line("event 'reboot' for domain 'r'")
            # The rebuilt VM booted and got ready: it resets again.
            watcher.wait_for_line("event 'reboot' for domain 'r'", after=first + 1)
            self.assertTrue(self.state("r").startswith("running"))
            self.assertEqual(self.daemon.shim_pids()["r"], pid)
            self.assertNotEqual(status(pid)["Uid"].split()[1], "0")
            self.daemon.virsh("destroy", "r")
        finally:
            watcher.stop()

    def test_guest_reset_keeps_its_pty_console(self):
        """A reset builds the serial port anew after the drop, where the
        shims' user cannot open the host's ptmx: it used to fail ('cannot open
        a pty: Permission denied') and leave the domain shut off. The new port
        is on the same pty, the one the live XML names, still root's (a pty
        the shims' user made would be open to every other shim)."""
        serial = ("    <serial type='pty'><target port='0'/></serial>\n"
                  "    <console type='pty'><target type='serial' port='0'/></console>\n")
        watcher = VirshEvents(self.daemon, "--all")
        try:
            path = os.path.join(self.daemon.dir, "p.xml")
            with open(path, "w") as f:
                f.write(domain_xml("p", cmdline="vsnap.fill_mib=1 vsnap.reboot_after_ready=1",
                                   extra_devices=serial))
            self.daemon.virsh("define", path)
            self.daemon.virsh("start", "p")
            pid = self.daemon.shim_pids()["p"]
            pty = re.findall(r"<source path='(/dev/pts/[0-9]+)'", self.daemon.virsh("dumpxml", "p").stdout)
            self.assertTrue(pty, "no pty in the live XML")
            first = watcher.wait_for_line("event 'reboot' for domain 'p'")
            watcher.wait_for_line("event 'reboot' for domain 'p'", after=first + 1)
            self.assertTrue(self.state("p").startswith("running"), self.state("p"))
            self.assertEqual(self.daemon.shim_pids()["p"], pid)
            self.assertEqual(pty_slaves_held(pid), {inode(os.stat(pty[0]))})
            self.assertEqual(os.stat(pty[0]).st_uid, 0)
            self.daemon.virsh("destroy", "p")
        finally:
            watcher.stop()

    def kernel(self):
        return os.environ["VSNAP_TESTGUEST"]

    def test_cgroup_limits_from_memtune_and_cputune(self):
        xml = tuned_xml("c2", memory_mib=64,
                        memtune="  <memtune>\n    <hard_limit unit='MiB'>256</hard_limit>\n"
                                "    <soft_limit unit='MiB'>192</soft_limit>\n  </memtune>\n",
                        cputune="  <cputune>\n    <shares>512</shares>\n"
                                "    <period>100000</period>\n    <quota>50000</quota>\n"
                                "  </cputune>\n")
        pid = self.start_domain("c2", xml)
        memory = cgroup_dir(pid, "memory")
        cpu = cgroup_dir(pid, "cpu")
        self.assertRegex(os.path.basename(memory), r"^vsnap-c2-[0-9a-f]{8}$")
        if os.path.exists(memory + "/memory.limit_in_bytes"):   # v1
            self.assertEqual(int(read(memory + "/memory.limit_in_bytes")), 256 * MIB)
            self.assertEqual(int(read(memory + "/memory.soft_limit_in_bytes")), 192 * MIB)
            self.assertEqual(read(cpu + "/cpu.shares"), "512")
            self.assertEqual(read(cpu + "/cpu.cfs_quota_us"), "50000")
            self.assertEqual(read(cpu + "/cpu.cfs_period_us"), "100000")
        else:                                                   # v2
            self.assertEqual(int(read(memory + "/memory.max")), 256 * MIB)
            self.assertEqual(int(read(memory + "/memory.high")), 192 * MIB)
            self.assertEqual(read(cpu + "/cpu.max"), "50000 100000")
        # The shim's guest RAM is charged there.
        usage = memory + ("/memory.usage_in_bytes" if os.path.exists(memory + "/memory.usage_in_bytes")
                          else "/memory.current")
        self.assertGreater(int(read(usage)), 1 * MIB)
        # The definition keeps its limits; the cgroup goes with the shim.
        live = self.daemon.virsh("dumpxml", "c2").stdout
        self.assertIn("<hard_limit unit='KiB'>262144</hard_limit>", live)
        self.assertIn("<quota>50000</quota>", live)
        self.daemon.virsh("destroy", "c2")
        wait_for(lambda: not os.path.exists(memory), what="the cgroup removed")

    def test_shim_environment_holds_no_secrets(self):
        """Started with store credentials (and other variables) in its
        environment, the daemon hands its shims only the allow-listed ones
        (plugin/run/shim-env.h): no AWS_* in a shim's environ or argv,
        confined or not; PATH, LANG, LC_*, TZ, the sanitizers' options and
        (this file runs in builds with test hooks only) the test triggers
        pass."""
        secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
        env = {"AWS_SECRET_ACCESS_KEY": secret, "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
               "AWS_SESSION_TOKEN": secret + "-token", "VSNAP_DB_PASSWORD": secret + "-db",
               "LANG": "C.UTF-8", "LC_TIME": "C", "TZ": "UTC", "UBSAN_OPTIONS": "print_stacktrace=1",
               "VSNAP_SHIM_TEST_UNUSED": "1"}
        conf = os.path.join(self.daemon.dir, "unconfined.conf")
        with open(conf, "w") as f:
            f.write("[daemon]\nconfine=false\n")
        for name, extra in (("e1", []), ("e2", ["--config", conf])):
            with self.subTest(confined=not extra):
                self.daemon.stop()
                self.daemon.start(extra=extra, env=env)
                pid = self.start_domain(name)
                with open(f"/proc/{pid}/environ", "rb") as f:
                    entries = [e.decode() for e in f.read().split(b"\0") if e]
                got = dict(e.split("=", 1) for e in entries)
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().decode(errors="replace")
                self.assertFalse([k for k in got if k.startswith("AWS_")])
                self.assertNotIn("VSNAP_DB_PASSWORD", got)
                self.assertFalse([e for e in entries if secret in e], entries)
                self.assertNotIn(secret, argv)
                for k in ("LANG", "LC_TIME", "TZ", "UBSAN_OPTIONS", "VSNAP_SHIM_TEST_UNUSED"):
                    self.assertEqual(got.get(k), env[k], k)
                self.assertEqual(got.get("PATH"), os.environ.get("PATH"))
                allowed = ("PATH", "LANG", "TZ", "G_DEBUG", "G_MESSAGES_DEBUG")
                self.assertEqual([k for k in got if k not in allowed and not k.startswith("LC_")
                                  and not k.endswith("SAN_OPTIONS")
                                  and not k.startswith("VSNAP_SHIM_TEST_")], [])
                self.daemon.virsh("destroy", name)

    def test_forbidden_syscall_at_start_is_reported(self):
        self.daemon.stop()
        self.daemon.start(env={TRIGGER: "main"})
        path = os.path.join(self.daemon.dir, "f1.xml")
        with open(path, "w") as f:
            f.write(domain_xml("f1"))
        self.daemon.virsh("define", path)
        res = self.daemon.virsh("start", "f1", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("seccomp: thread vsnap-shim (main list) made the forbidden system call "
                      "personality", res.stderr)
        self.assertTrue(self.state("f1").startswith("shut off"))
        self.assertEqual(self.daemon.shim_pids(), {})

    def test_forbidden_syscall_on_a_vcpu_kills_the_shim(self):
        self.daemon.stop()
        self.daemon.start(env={TRIGGER: "vcpu"})
        path = os.path.join(self.daemon.dir, "f2.xml")
        with open(path, "w") as f:
            f.write(domain_xml("f2"))
        self.daemon.virsh("define", path)
        # The vCPU dies as vm.boot starts it: the start fails, or the domain
        # crashes right after; either way the daemon names the call.
        res = self.daemon.virsh("start", "f2", check=False)
        wait_for(lambda: self.state("f2").startswith("shut off"), what="the shim gone")
        self.assertEqual(self.daemon.shim_pids(), {})
        report = "thread vcpu0 (vcpu list) made the forbidden system call personality"
        wait_for(lambda: report in res.stderr or report in self.daemon.log(),
                 what="the daemon's report")

    def expect_killed(self, name, kind, thread, start):
        """start() makes a thread of kind run: the shim dies of its filter,
        the domain ends shut off, and the report names the thread and list."""
        res = start()
        wait_for(lambda: self.state(name).startswith("shut off"), what="the shim gone")
        self.assertEqual(self.daemon.shim_pids(), {})
        report = f"thread {thread} ({kind} list) made the forbidden system call personality"
        wait_for(lambda: report in res.stderr or report in self.daemon.log(),
                 what=f"the report of the {kind} thread")

    def test_forbidden_syscall_on_a_disk_or_device_thread(self):
        image = os.path.join(self.daemon.dir, "disk.img")
        with open(image, "wb") as f:
            f.truncate(1 << 20)
        disk = (f"    <disk type='file' device='disk'>\n      <source file='{image}'/>\n"
                "      <target dev='vda' bus='virtio'/>\n    </disk>\n")
        for kind, thread in (("disk", "virtio-blk"), ("device", "virtio-vsock")):
            with self.subTest(kind=kind):
                self.daemon.stop()
                self.daemon.start(env={TRIGGER: kind})
                path = os.path.join(self.daemon.dir, f"k-{kind}.xml")
                with open(path, "w") as f:
                    f.write(domain_xml(f"k-{kind}", extra_devices=disk))
                self.daemon.virsh("define", path)
                self.expect_killed(f"k-{kind}", kind, thread,
                                   lambda: self.daemon.virsh("start", f"k-{kind}", check=False))

    def test_forbidden_syscall_on_the_uffd_handler(self):
        """The userfaultfd handler of an on-demand revert (whose fd the shim
        opened while still root) runs filtered too."""
        path = os.path.join(self.daemon.dir, "u.xml")
        with open(path, "w") as f:
            f.write(domain_xml("u", restore_mode="ondemand"))
        self.daemon.virsh("define", path)
        self.daemon.virsh("start", "u")
        self.daemon.virsh("snapshot-create-as", "u", "s1")
        self.daemon.virsh("destroy", "u")
        # Without the trigger, the on-demand revert works confined.
        self.daemon.virsh("snapshot-revert", "u", "s1", "--running")
        self.assertEqual(self.state("u"), "running (from snapshot)")
        self.daemon.virsh("destroy", "u")
        self.daemon.stop()
        self.daemon.start(env={TRIGGER: "uffd"})
        self.expect_killed("u", "uffd", "vsnap-shim",
                           lambda: self.daemon.virsh("snapshot-revert", "u", "s1", "--running",
                                                     check=False))


@needs_guest
class HandConfineTest(unittest.TestCase):
    """vsnap-shim --confine by hand: the same jail and drop, no PID namespace."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="vsnap-confine-")
        self.proc = None

    def tearDown(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        subprocess.run(["rm", "-rf", self.dir], check=False)

    def boot(self, *extra):
        serial = os.path.join(self.dir, "serial.log")
        log = os.path.join(self.dir, "shim.log")
        self.proc = subprocess.Popen(
            [SHIM, *extra, "--log-file", log, "--kernel", TESTGUEST, "--memory", "size=64M",
             "--serial", f"file={serial}", "--console", "off",
             "--api-socket", "path=" + os.path.join(self.dir, "api.sock")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the shim exited ({self.proc.returncode}):\n" + read(log))
            if os.path.exists(serial) and "ready" in read(serial):
                return self.proc.pid
            time.sleep(0.05)
        raise AssertionError("the guest never got ready:\n" + read(log))

    def test_confine_option(self):
        root = os.path.join(self.dir, "root")
        os.mkdir(root)
        # nobody: a user every Debian system has (vsnap may not exist yet).
        pid = self.boot("--confine", f"root={root},user=nobody")
        st = status(pid)
        user = pwd.getpwnam("nobody")
        self.assertEqual(st["Uid"].split(), [str(user.pw_uid)] * 4)
        self.assertEqual((st["CapEff"], st["NoNewPrivs"], st["Seccomp"]),
                         ("0000000000000000", "1", "2"))
        self.assertNotEqual(namespace(pid, "mnt"), namespace(os.getpid(), "mnt"))
        self.assertEqual(namespace(pid, "pid"), namespace(os.getpid(), "pid"))
        self.assertFalse(os.path.exists(f"/proc/{pid}/root/etc/passwd"))
        self.assertTrue(os.path.exists(f"/proc/{pid}/root{TESTGUEST}"))

    def test_unconfined_by_default(self):
        pid = self.boot()
        st = status(pid)
        self.assertEqual(st["Uid"].split()[1], "0")
        self.assertEqual(st["Seccomp"], "2")
        self.assertEqual(namespace(pid, "mnt"), namespace(os.getpid(), "mnt"))


@needs_guest
class UnconfinedTest(DaemonTest):
    def test_confine_false_in_the_configuration(self):
        conf = os.path.join(self.daemon.dir, "virtvsnapd.conf")
        with open(conf, "w") as f:
            f.write("[daemon]\nconfine=false\n")
        self.daemon.stop()
        self.daemon.start(extra=["--config", conf])
        path = os.path.join(self.daemon.dir, "u1.xml")
        with open(path, "w") as f:
            f.write(domain_xml("u1"))
        self.daemon.virsh("define", path)
        self.daemon.virsh("start", "u1")
        pid = self.daemon.shim_pids()["u1"]
        st = status(pid)
        self.assertEqual(st["Uid"].split()[1], "0")
        self.assertEqual(st["Seccomp"], "2")   # the filters stay: they need no privilege
        self.assertEqual(namespace(pid, "mnt"), namespace(os.getpid(), "mnt"))
        self.assertTrue(os.path.exists(f"/proc/{pid}/root/etc"))


if __name__ == "__main__":
    unittest.main(verbosity=2)

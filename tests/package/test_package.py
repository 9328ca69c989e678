"""The Debian package as a user gets it: scripts/build-deb.sh builds it (in a
copy of the source tree, so the developer's checkout and build directories
stay untouched), lintian checks it, `apt-get install ./vsnap_*.deb` installs
it on this machine, systemd-analyze verifies its units, and the installed
/usr/sbin/virtvsnapd - started without --shim or --schema-dir, on a private
socket and state directory - runs a define / start / snapshot / revert cycle
through virsh with the installed shim. The package is purged afterwards,
also when a step fails or the test is stopped.

Needs root (it installs a package). Skips (77) when not root, or when a vsnap
package is already installed (it would not replace or remove someone's
install). Two runs on one machine take turns through a lock file.

Environment (set by meson): VSNAP_SOURCE_ROOT, VSNAP_VERSION, VSNAP_TESTGUEST."""

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import vsnapd  # noqa: E402
from vsnaptest import wait_command_port  # noqa: E402

SOURCE = os.environ["VSNAP_SOURCE_ROOT"]
VERSION = os.environ["VSNAP_VERSION"]
TESTGUEST = os.environ["VSNAP_TESTGUEST"]
LOCK = "/run/lock/vsnap-package-test.lock"

DAEMON = "/usr/sbin/virtvsnapd"
SHIM = "/usr/libexec/vsnap/vsnap-shim"
# The shim as Cloud Hypervisor, for libvirt's ch driver (on its PATH).
CH_LINK = ("/usr/bin/cloud-hypervisor", "../libexec/vsnap/vsnap-shim")
UNITS = ["virtvsnapd.service", "virtvsnapd.socket", "virtvsnapd-ro.socket"]
UNIT_DIR = "/lib/systemd/system"
CONFFILE = "/etc/vsnap/virtvsnapd.conf"
# Where the issue and the daemon's defaults say each part goes.
EXPECTED_FILES = [
    DAEMON, SHIM, "/usr/bin/vsnap-compact", "/usr/bin/vsnap-store", "/usr/bin/vsnap-mkinitramfs",
    "/usr/lib/vsnap/vsnap-agent", CONFFILE,
    "/usr/share/vsnap/schemas/domain.rng", "/usr/share/vsnap/schemas/snapshot.rng",
    "/usr/share/man/man8/virtvsnapd.8.gz", "/usr/share/man/man1/vsnap-shim.1.gz",
    "/usr/share/man/man1/vsnap-compact.1.gz", "/usr/share/man/man1/vsnap-store.1.gz",
    "/usr/share/man/man1/vsnap-mkinitramfs.1.gz",
    "/usr/share/man/man8/vsnap-agent.8.gz",
] + [f"{UNIT_DIR}/{u}" for u in UNITS]
EXPECTED_DIRS = ["/var/lib/vsnap", "/var/log/vsnap"]
# What debhelper adds on its own, beyond what meson installs.
DEBHELPER_FILES = {"/usr/share/doc/vsnap/changelog.gz", "/usr/share/doc/vsnap/copyright",
                   "/usr/share/doc/vsnap/README.md.gz", "/usr/share/lintian/overrides/vsnap"}
MIB = 1 << 20
REGION = (16 * MIB, 4 * MIB)   # guest RAM the test guest lets us write


class Fail(Exception):
    pass


# What a SIGTERM must undo (see on_sigterm).
ACTIVE = {"daemon": None, "package": False}


def check(cond, what):
    if not cond:
        raise Fail(what)


def step(text):
    print(f"[{time.monotonic() - T0:6.1f}s] {text}", flush=True)


def run(argv, timeout, cwd=None, log=None, env=None):
    """Run argv; Fail with its output (or the tail of log) if it fails."""
    try:
        if log:
            with open(log, "w") as f:
                res = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=f,
                                     stderr=subprocess.STDOUT, timeout=timeout, env=env)
            with open(log, errors="replace") as f:
                out = f.read()
        else:
            res = subprocess.run(argv, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                                 text=True, timeout=timeout, env=env)
            out = res.stdout + res.stderr
    except subprocess.TimeoutExpired:
        raise Fail(f"{' '.join(argv)} took more than {timeout}s") from None
    if res.returncode != 0:
        raise Fail(f"{' '.join(argv)} failed ({res.returncode}):\n{out[-6000:]}")
    return out


def apt_env():
    return dict(os.environ, DEBIAN_FRONTEND="noninteractive")


def apt(*args, cwd=None):
    return run(["apt-get", "-y", "-o", "DPkg::Lock::Timeout=300", *args], 600, cwd=cwd,
               env=apt_env())


def package_installed():
    res = subprocess.run(["dpkg-query", "-W", "-f=${Status}", "vsnap"], capture_output=True,
                         text=True)
    return res.returncode == 0 and "ok installed" in res.stdout


def take_lock():
    os.makedirs(os.path.dirname(LOCK), exist_ok=True)
    fd = os.open(LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + 600
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise Fail(f"another package test held {LOCK} for 600 s") from None
            time.sleep(1)


def copy_source(dest):
    """The checkout's files (tracked and new, not ignored) without build
    directories; a tree without git is copied without its build outputs."""
    if os.path.isdir(os.path.join(SOURCE, ".git")) or os.path.isfile(os.path.join(SOURCE, ".git")):
        names = run(["git", "-C", SOURCE, "ls-files", "-co", "--exclude-standard", "-z"], 60)
        for rel in filter(None, names.split("\0")):
            src = os.path.join(SOURCE, rel)
            if not os.path.lexists(src):   # deleted in the work tree, not yet committed
                continue
            os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(dest, rel), follow_symlinks=False)
        return

    def ignore(directory, entries):
        return [e for e in entries
                if os.path.isdir(os.path.join(directory, e, "meson-private"))
                or e.startswith("obj-") or e == ".git"]
    shutil.copytree(SOURCE, dest, ignore=ignore, symlinks=True)


# ---- the package file ----

def check_control(deb):
    fields = {}
    for name in ["Package", "Version", "Architecture", "Depends", "Recommends"]:
        fields[name] = run(["dpkg-deb", "-f", deb, name], 30).strip()
    check(fields["Package"] == "vsnap", f"Package is {fields['Package']!r}")
    check(fields["Version"] == VERSION,
          f"the package's version {fields['Version']} is not meson's {VERSION}")
    check(fields["Architecture"] == "amd64", f"Architecture is {fields['Architecture']!r}")
    # dh_shlibdeps found the shared libraries the programs link.
    for lib in ["libc6", "libglib2.0-0", "libjson-glib-1.0-0", "libsoup-3.0-0", "libtirpc3",
                "libcurl4", "libxml2"]:
        check(lib + " " in fields["Depends"] + " ",
              f"Depends lacks {lib} (dh_shlibdeps): {fields['Depends']}")
    check("libvirt-clients" in fields["Recommends"],
          f"Recommends lacks libvirt-clients: {fields['Recommends']}")
    scripts = tempfile.mkdtemp(prefix="control-", dir=WORK)
    run(["dpkg-deb", "-e", deb, scripts], 30)
    with open(os.path.join(scripts, "conffiles")) as f:
        conffiles = f.read().split()
    check(CONFFILE in conffiles, f"{CONFFILE} is not a conffile: {conffiles}")
    with open(os.path.join(scripts, "postinst")) as f:
        postinst = f.read()
    for unit in UNITS:   # dh_installsystemd enables each unit that has an [Install] section
        check(unit in postinst and "deb-systemd-helper" in postinst,
              f"postinst does not enable {unit}")


def package_paths(deb):
    """{path: type} of every entry in the package ('d', '-', 'l')."""
    paths = {}
    for line in run(["dpkg-deb", "-c", deb], 30).splitlines():
        fields = line.split(None, 5)
        path = os.path.normpath(fields[5].split(" -> ")[0].lstrip("."))
        paths[path] = fields[0][0]
    return paths


def meson_installed(build_dir):
    """The files `meson install` puts in place in the package's build, with
    the compression dh_compress applies to man pages."""
    import json
    out = run(["meson", "introspect", "--installed", build_dir], 60)
    paths = set()
    for dest in json.loads(out).values():
        paths.add(dest + ".gz" if dest.startswith("/usr/share/man/") else dest)
    return paths


def check_contents(deb, build_dir):
    paths = package_paths(deb)
    for path in EXPECTED_FILES:
        check(paths.get(path) == "-", f"the package has no file {path}")
    for path in EXPECTED_DIRS:
        check(paths.get(path) == "d", f"the package has no directory {path}")
    check(paths.get(CH_LINK[0]) == "l", f"the package has no link {CH_LINK[0]}")
    files = {p for p, t in paths.items() if t != "d"}
    from_meson = meson_installed(build_dir)
    check(from_meson == files - DEBHELPER_FILES,
          "the package and `meson install` disagree:\n"
          f"  only in the package: {sorted(files - DEBHELPER_FILES - from_meson)}\n"
          f"  only from meson: {sorted(from_meson - files)}")


def run_lintian(changes):
    """lintian must find no error; every tag it reports is printed. (Not
    --show-overrides: lintian 2.116 then exits 2 for an overridden error;
    the overrides, with their reasons, are debian/vsnap.lintian-overrides.)"""
    res = subprocess.run(["lintian", "--fail-on", "error", "--pedantic", "--info", changes],
                         capture_output=True, text=True, timeout=600)
    tags = [l for l in (res.stdout + res.stderr).splitlines() if l[:2] in
            ("E:", "W:", "I:", "O:", "P:", "X:")]
    step("lintian: " + ("; ".join(tags) if tags else "no tags"))
    check(res.returncode == 0, f"lintian found errors:\n{res.stdout}{res.stderr}")


# ---- the installed package ----

def check_installed():
    for path in EXPECTED_FILES:
        check(os.path.isfile(path), f"{path} is not there after apt-get install")
    check(os.path.islink(CH_LINK[0]) and os.readlink(CH_LINK[0]) == CH_LINK[1],
          f"{CH_LINK[0]} is not a link to {CH_LINK[1]} after apt-get install")
    version = run([CH_LINK[0], "--version"], 10)
    check(version.startswith("cloud-hypervisor v"), f"{CH_LINK[0]} --version: {version!r}")
    for unit in ["virtvsnapd.service"]:
        check(os.path.islink(f"/etc/systemd/system/multi-user.target.wants/{unit}"),
              f"{unit} is not enabled (multi-user.target.wants)")
    for unit in UNITS[1:]:
        check(os.path.islink(f"/etc/systemd/system/sockets.target.wants/{unit}"),
              f"{unit} is not enabled (sockets.target.wants)")
    conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "vsnap"], 30)
    check(CONFFILE in conffiles, f"dpkg does not list {CONFFILE} as a conffile: {conffiles}")
    out = run(["systemd-analyze", "verify"] + [f"{UNIT_DIR}/{u}" for u in UNITS], 120)
    step("systemd-analyze verify: " + (out.strip() or "no complaints"))
    check(not out.strip(), f"systemd-analyze verify complained:\n{out}")


def shim_exe(daemon, name):
    pid = daemon.shim_pids().get(name)
    check(pid, f"no shim pid for {name}")
    return os.readlink(f"/proc/{pid}/exe")


def guest_sum(daemon, name, fill_seed=None):
    conn = wait_command_port(os.path.join(daemon.state, "run", name, "vsock.sock"), 60,
                             connect_timeout=10)
    try:
        if fill_seed is not None:
            check(conn.cmd(f"FILL {REGION[0]:#x} {REGION[1]} {fill_seed}") == "OK", "FILL failed")
        answer = conn.cmd(f"SUM {REGION[0]:#x} {REGION[1]}")
        check(answer.startswith("SUM "), f"SUM answered {answer!r}")
        return answer[4:]
    finally:
        conn.close()


def cycle_with_installed_daemon():
    """define / start / snapshot / revert through virsh against the installed
    daemon, which finds the installed shim and schemas by itself."""
    vsnapd.VIRTVSNAPD, vsnapd.SHIM, vsnapd.SCHEMA_DIR = DAEMON, "", ""
    daemon = vsnapd.Daemon()
    ACTIVE["daemon"] = daemon
    try:
        daemon.start()
        # The daemon logs its shim just after it starts listening, which is
        # when start() returns: wait for the line rather than race it.
        deadline = time.monotonic() + 10
        while f"(shim {SHIM}," not in daemon.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        check(f"(shim {SHIM}," in daemon.log(),
              f"the installed daemon does not use {SHIM}:\n{daemon.log()}")
        name = "pkg-cycle"
        xml = os.path.join(daemon.dir, name + ".xml")
        with open(xml, "w") as f:
            f.write(vsnapd.domain_xml(name, memory_mib=128, kernel=TESTGUEST))
        v = daemon.virsh
        # Every definition is validated against domain.rng: without the
        # installed schemas this fails ("schema ... is missing").
        v("define", xml)
        v("start", name)
        check(v("domstate", name).stdout.strip() == "running", "not running after start")
        check(shim_exe(daemon, name) == SHIM, f"the VM runs in {shim_exe(daemon, name)}")
        want = guest_sum(daemon, name, fill_seed=101)
        v("snapshot-create-as", name, "s1", "installed package")
        changed = guest_sum(daemon, name, fill_seed=202)
        check(changed != want, "FILL with another seed left the same sum")
        v("snapshot-revert", name, "s1")
        check(v("domstate", name).stdout.strip() == "running", "not running after revert")
        got = guest_sum(daemon, name)
        check(got == want, f"after the revert the guest's sum is {got}, the snapshot's {want}")
        check(shim_exe(daemon, name) == SHIM, "the reverted VM does not run the installed shim")
        check("s1" in v("snapshot-list", name, "--name").stdout, "snapshot-list lacks s1")
        v("destroy", name)
        v("undefine", name, "--snapshots-metadata")
        step(f"installed daemon: define, start, snapshot, revert (sum {want}) through virsh")
    except Fail:
        print("daemon log:\n" + daemon.log(), flush=True)
        raise
    finally:
        daemon.cleanup()
        ACTIVE["daemon"] = None


def build_and_check():
    src = os.path.join(WORK, "vsnap")
    copy_source(src)
    step(f"building the package from a copy of {SOURCE}")
    run([os.path.join(src, "scripts", "build-deb.sh")], 900, cwd=src,
        log=os.path.join(WORK, "build-deb.log"))
    deb = os.path.join(WORK, f"vsnap_{VERSION}_amd64.deb")
    check(os.path.isfile(deb), f"build-deb.sh did not write {deb}")
    check_control(deb)
    check_contents(deb, os.path.join(src, "obj-x86_64-linux-gnu"))
    step(f"{os.path.basename(deb)}: control fields, conffile, units; contents = meson install")
    run_lintian(os.path.join(WORK, f"vsnap_{VERSION}_amd64.changes"))
    return deb


def purge():
    """Remove the package and its conffile; True when nothing is left."""
    try:
        apt("purge", "vsnap")
    except Fail as e:
        print(f"FAIL: {e}", flush=True)
        return False
    left = [p for p in EXPECTED_FILES if os.path.exists(p)]
    if left:
        print(f"FAIL: still there after apt-get purge vsnap: {left}", flush=True)
        return False
    step("apt-get purge vsnap")
    return True


def main():
    if os.geteuid() != 0:
        print("SKIP: installing a package needs root")
        return 77
    lock = take_lock()
    try:
        if package_installed():
            print("SKIP: a vsnap package is already installed; this test installs and purges "
                  "its own and will not replace that one (apt-get purge vsnap to run it)")
            return 77
        try:
            deb = build_and_check()
        except Fail as e:
            print(f"FAIL: {e}", flush=True)
            return 1
        rc = 0
        ACTIVE["package"] = True
        try:
            apt("install", "--no-install-recommends", "./" + os.path.basename(deb), cwd=WORK)
            step("apt-get install ./" + os.path.basename(deb))
            check_installed()
            cycle_with_installed_daemon()
        except Fail as e:
            print(f"FAIL: {e}", flush=True)
            rc = 1
        finally:
            # Also after a failed or interrupted install: purge removes
            # whatever part of the package dpkg has on record.
            if not purge():
                rc = 1
            ACTIVE["package"] = False
        return rc
    finally:
        os.close(lock)


def on_sigterm(signum, frame):
    """meson's timeout (or ^C) sends SIGTERM to the whole process group and
    SIGKILL half a second later: too soon to purge a package. Kill the VMs
    now (shims run in sessions of their own), leave the purge and the
    removal of the work directory to a process in a session of its own."""
    daemon = ACTIVE["daemon"]
    script = f"rm -rf '{WORK}'"
    if daemon:
        for pid in daemon.shim_pids().values():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        script += f" '{daemon.dir}'"
    if ACTIVE["package"]:
        script = ("apt-get -y -o DPkg::Lock::Timeout=300 purge vsnap >/dev/null 2>&1; "
                  + script)
    subprocess.Popen(["sh", "-c", script], start_new_session=True, env=apt_env(),
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    print("FAIL: stopped by a signal; the package is purged in the background", flush=True)
    os._exit(1)


if __name__ == "__main__":
    T0 = time.monotonic()
    signal.signal(signal.SIGTERM, on_sigterm)
    WORK = tempfile.mkdtemp(prefix="vsnap-package-")
    try:
        rc = main()
    finally:
        shutil.rmtree(WORK, ignore_errors=True)
    sys.exit(rc)

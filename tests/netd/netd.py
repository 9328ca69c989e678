"""Helpers for the daemon's networking tests: private network namespaces
made and removed by each test, a daemon under test running inside one of
them (so its taps and bridges exist only there), the peer's side of the
traffic (ICMP echo and UDP echo from a socket made inside the peer
namespace), the test guest's NETINFO, and libvirt's own network daemon in
a mount and network namespace of its own.

Nothing routes out: no namespace here is linked to the host's, and every
address (10.77-79.x.x) exists only inside them."""

import ctypes
import glob
import os
import shlex
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import vsnapd  # noqa: E402
from vsnaptest import Fail, wait_command_port  # noqa: E402

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def run(*argv, check=True, timeout=30):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and res.returncode != 0:
        raise Fail(f"{' '.join(argv)}: {res.stderr.strip()}")
    return res


class Netns:
    """A named network namespace (ip netns), unique to this process, with lo up."""
    count = 0

    def __init__(self, label):
        Netns.count += 1
        self.name = f"vsnd{os.getpid()}{label}{Netns.count}"
        run("ip", "netns", "add", self.name)
        self.ip("link", "set", "lo", "up")

    def ip(self, *args, check=True):
        return run("ip", "-n", self.name, *args, check=check)

    def links(self):
        """{name: ifindex} of the namespace's interfaces."""
        out = {}
        for line in self.ip("-o", "link", "show").stdout.splitlines():
            index, name = line.split(":")[0:2]
            out[name.strip().split("@")[0]] = int(index)
        return out

    def call(self, fn):
        """fn() on a thread inside the namespace (sockets made there stay there)."""
        result = {}

        def body():
            fd = os.open(f"/run/netns/{self.name}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), "setns")
                result["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                result["error"] = e
            finally:
                os.close(fd)
        t = threading.Thread(target=body)
        t.start()
        t.join()
        if "error" in result:
            raise result["error"]
        return result["value"]

    def close(self):
        run("ip", "netns", "del", self.name, check=False)


class Lan:
    """A bridge in namespace host and a peer namespace on it through a veth
    pair, the peer at peer_ip/24."""

    def __init__(self, host, bridge, peer_ip, label="p"):
        self.host, self.bridge, self.peer_ip = host, bridge, peer_ip
        self.peer = Netns(label)
        veth = f"v{bridge}"
        host.ip("link", "add", bridge, "type", "bridge")
        host.ip("link", "set", bridge, "up")
        self.plug(veth)

    def plug(self, veth):
        """The veth pair into self.bridge (made here, or by a network daemon)."""
        self.host.ip("link", "add", veth, "type", "veth", "peer", "name", "vp", "netns", self.peer.name)
        self.host.ip("link", "set", veth, "master", self.bridge, "up")
        self.peer.ip("addr", "add", self.peer_ip + "/24", "dev", "vp")
        self.peer.ip("link", "set", "vp", "up")

    def close(self):
        self.peer.close()


# ---- traffic from a peer ----------------------------------------------------------

def _checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xffff)
    total += total >> 16
    return ~total & 0xffff


def ping_once(sock, dest, seq, timeout):
    ident = os.getpid() & 0xffff
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq) + b"vsnap-netd"
    packet = struct.pack("!BBHHH", 8, 0, _checksum(hdr), ident, seq) + b"vsnap-netd"
    sock.sendto(packet, (dest, 0))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            data, addr = sock.recvfrom(2048)
        except socket.timeout:
            return False
        icmp = data[(data[0] & 0x0f) * 4:]
        if addr[0] == dest and icmp[0] == 0 and struct.unpack("!HH", icmp[4:8]) == (ident, seq):
            return True
    return False


def ping(ns, dest, timeout=20):
    """An ICMP echo answered from dest within timeout seconds (retrying: ARP,
    the bridge and a guest that just started need a moment)."""
    sock = ns.call(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
    try:
        deadline, seq = time.monotonic() + timeout, 1
        while time.monotonic() < deadline:
            if ping_once(sock, dest, seq, 0.5):
                return True
            seq += 1
        return False
    finally:
        sock.close()


def udp_echo(ns, dest, payloads, timeout=10):
    """Each payload sent to dest port 7 comes back unchanged (retries until
    timeout for the first)."""
    sock = ns.call(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    try:
        deadline = time.monotonic() + timeout
        for payload in payloads:
            while True:
                sock.settimeout(0.5)
                sock.sendto(payload, (dest, 7))
                try:
                    data, _ = sock.recvfrom(65536)
                    if data == payload:
                        break
                except socket.timeout:
                    pass
                if time.monotonic() > deadline:
                    return False
        return True
    finally:
        sock.close()


def neighbour_mac(ns, ip):
    """The MAC the namespace's ARP table holds for ip (None if none)."""
    for line in ns.ip("neigh", "show", ip).stdout.splitlines():
        words = line.split()
        if "lladdr" in words:
            return words[words.index("lladdr") + 1].lower()
    return None


class Traffic:
    """UDP echo to dest from a peer, in a loop on a thread, until stopped:
    traffic flowing while a snapshot is taken."""

    def __init__(self, ns, dest):
        self.sock = ns.call(lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        self.sock.settimeout(0.05)
        self.dest, self.sent, self.answered = dest, 0, 0
        self.stopping = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stopping:
            self.sock.sendto(b"flow %d" % self.sent, (self.dest, 7))
            self.sent += 1
            try:
                self.sock.recvfrom(2048)
                self.answered += 1
            except OSError:
                pass

    def stop(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()


# ---- the guest --------------------------------------------------------------------

def guest_cmdline(ip, mac=None):
    return f"console=ttyS0 vsnap.ip={ip}/24" + (f" vsnap.mac={mac}" if mac else "")


def netinfo(daemon, name, timeout=30):
    """The guest's NETINFO: {"mac", "link", "rx", "tx"}."""
    path = os.path.join(daemon.state, "run", name, "vsock.sock")
    conn = wait_command_port(path, timeout)
    try:
        words = conn.cmd("NETINFO").split()
    finally:
        conn.close()
    if len(words) != 5 or words[0] != "NET":
        raise Fail(f"NETINFO answered {words}")
    return {"mac": words[1], "link": int(words[2]), "rx": int(words[3]), "tx": int(words[4])}


def interface_xml(kind, mac=None, source=None, target=None, managed=None, link=None, mtu=None):
    inner = f"<mac address='{mac}'/>" if mac else ""
    if source:
        inner += f"<source {'bridge' if kind == 'bridge' else 'network'}='{source}'/>"
    if target:
        inner += f"<target dev='{target}'" + (f" managed='{managed}'" if managed else "") + "/>"
    inner += "<model type='virtio'/>"
    if mtu:
        inner += f"<mtu size='{mtu}'/>"
    if link:
        inner += f"<link state='{link}'/>"
    return f"    <interface type='{kind}'>{inner}</interface>\n"


def daemon_in(ns_prefix, extra=()):
    """A virtvsnapd (tests/plugin's Daemon) started through ns_prefix, a
    command that enters namespaces and execs it (the pid stays the daemon's)."""
    return vsnapd.Daemon().start(prefix=ns_prefix, extra=extra)


# ---- libvirt's network driver in namespaces of its own ------------------------------

LIBVIRT_DIRS = ("/run/libvirt", "/etc/libvirt", "/var/lib/libvirt", "/var/log/libvirt", "/var/cache/libvirt")


def mount_point_commands(path, scratch, covered):
    """Shell commands, for a private mount namespace, that make the folder
    path there when the host has none (Debian 12's libvirt-daemon, without
    its recommends, makes no /var/lib/libvirt), and leave the host as it
    was: the nearest folder above that exists gets a tmpfs of its own in
    the namespace, with each of its entries bound back from the host's (a
    symbolic link copied), and path is made in that tmpfs. covered: the
    folders given a tmpfs so far (one each)."""
    if os.path.isdir(path):
        return []
    parent = os.path.dirname(path)
    while not os.path.isdir(parent):
        parent = os.path.dirname(parent)
    q = shlex.quote
    if parent in covered:
        return [f"mkdir -p {q(path)}"]
    covered.add(parent)
    host = os.path.join(scratch, "host" + parent.replace("/", "-"))
    os.makedirs(host)
    mode = oct(os.stat(parent).st_mode & 0o7777)[2:]
    cmds = [f"mount --rbind {q(parent)} {q(host)}", f"mount -t tmpfs -o mode={mode} vsnap-netd {q(parent)}"]
    for name in sorted(os.listdir(parent)):
        src, dst = os.path.join(host, name), os.path.join(parent, name)
        if os.path.islink(os.path.join(parent, name)):
            cmds.append(f"cp -P {q(src)} {q(dst)}")
        elif os.path.isdir(os.path.join(parent, name)):
            cmds.append(f"mkdir {q(dst)} && mount --rbind {q(src)} {q(dst)}")
        else:
            cmds.append(f"touch {q(dst)} && mount --bind {q(src)} {q(dst)}")
    return cmds + [f"mkdir -p {q(path)}"]


def drivers_but_qemu(scratch):
    """A folder (in scratch) of links to libvirt's connection drivers, all
    but QEMU's, for libvirtd's LIBVIRT_DRIVER_DIR. Debian 12's libvirtd
    loads every driver there is, and its QEMU driver stops the daemon when
    the user libvirt-qemu does not exist, whatever qemu.conf says: that user
    comes with libvirt-daemon-system, which setup.sh does not install (it
    would run a libvirtd of the system's). This daemon runs no QEMU."""
    found = (glob.glob("/usr/lib/*/libvirt/connection-driver") +
             glob.glob("/usr/lib*/libvirt/connection-driver"))
    if not found:
        raise Fail("libvirt's connection drivers (libvirt/connection-driver) are not installed")
    links = os.path.join(scratch, "connection-driver")
    os.makedirs(links)
    for name in os.listdir(found[0]):
        if name != "libvirt_driver_qemu.so":
            os.symlink(os.path.join(found[0], name), os.path.join(links, name))
    return links


class NetworkDaemon:
    """libvirt's network driver (virtnetworkd where libvirt's drivers are
    split, libvirtd on Debian 12, whose libvirt-daemon holds the network
    driver) inside namespace ns and a mount namespace of its own, where
    libvirt's directories are private and empty: no configured network
    (libvirt's default NAT network is not there), nothing of the host's
    libvirt seen or touched, not even made where the host has none. Its
    socket is <dir>/run/libvirt-sock. Debian
    12's libvirtd runs the storage driver too (storage_uri; empty, no pool
    defined), where the drivers are split virtnetworkd does not."""

    def __init__(self, ns):
        self.dir = tempfile.mkdtemp(prefix="vsnapd-netdrv-")
        binds, covered = [], set()
        for d in LIBVIRT_DIRS:
            private = os.path.join(self.dir, d.strip("/").replace("/", "-"))
            os.makedirs(private)
            binds += mount_point_commands(d, self.dir, covered)
            binds.append(f"mount --bind {private} {d}")
        os.makedirs(os.path.join(self.dir, "run-libvirt", "network"), exist_ok=True)
        os.makedirs(os.path.join(self.dir, "var-lib-libvirt", "dnsmasq"), exist_ok=True)
        open(os.path.join(self.dir, "etc-libvirt", "libvirtd.conf"), "w").close()
        binary = next((b for b in ("/usr/sbin/virtnetworkd", "/usr/sbin/libvirtd") if os.access(b, os.X_OK)), None)
        if not binary:
            raise Fail("neither virtnetworkd nor libvirtd is installed")
        script = " && ".join(["mount --make-rprivate /"] + binds +
                             [f"exec {binary} -p /run/libvirt/{os.path.basename(binary)}.pid"])
        env = dict(os.environ, LIBVIRT_DRIVER_DIR=drivers_but_qemu(self.dir))
        self.log_path = os.path.join(self.dir, "daemon.log")
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(["ip", "netns", "exec", ns.name, "unshare", "-m", "sh", "-c", script],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         env=env)
        sock = "virtnetworkd-sock" if binary.endswith("virtnetworkd") else "libvirt-sock"
        self.socket = os.path.join(self.dir, "run-libvirt", sock)
        self.uri = f"network:///system?socket={self.socket}"
        self.storage_uri = f"storage:///system?socket={self.socket}"
        deadline = time.monotonic() + 30
        while not os.path.exists(self.socket):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Fail("the network daemon did not start:\n" + self.log())
            time.sleep(0.05)

    def log(self):
        with open(self.log_path) as f:
            return f.read()[-3000:]

    def virsh(self, *args):
        res = subprocess.run(["virsh", "-q", "-c", self.uri] + list(args), capture_output=True, text=True,
                             timeout=60)
        if res.returncode != 0:
            raise Fail(f"virsh {' '.join(args)}: {res.stderr}\n{self.log()}")
        return res.stdout

    def enter_prefix(self):
        """A command prefix that runs a program in this daemon's mount and
        network namespaces (where network:///system reaches it), at its
        root: the mount namespace's own root is another from a chroot."""
        return ("nsenter", "-t", str(self.proc.pid), "-m", "-n", "-r")

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        subprocess.run(["rm", "-rf", self.dir], check=False)

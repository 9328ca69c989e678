"""Private networks for the virtio-net tests and benchmark: network namespaces,
a bridge, veth pairs and taps that the caller creates and removes, so no
packet ever leaves them (nothing links them to the host's namespace).

    host namespace "<tag>h": bridge br0, the shim runs here, its taps on br0
    peer namespace "<tag>p": veth "vp" (10.77.0.1/24), the other end on br0

Sockets for a namespace are made on a thread that entered it (setns), which
is where they stay: they can then be used from any thread.
"""

import ctypes
import fcntl
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "persist"))
from vsnaptest import CurlError, Fail, check, curl_api, read_text  # noqa: E402,F401

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TAP, IFF_NO_PI, IFF_VNET_HDR = 0x0002, 0x1000, 0x4000
PEER_IP = "10.77.0.1"
GUEST_IP = "10.77.0.2"
MIB = 1 << 20
_libc = ctypes.CDLL(None, use_errno=True)


def run(*argv, check_rc=True):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check_rc and res.returncode != 0:
        raise Fail(f"{' '.join(argv)}: {res.stderr.strip()}")
    return res


def in_netns(name, fn):
    """fn() on a thread inside network namespace name; its result (or exception)."""
    out = {}

    def body():
        fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
        try:
            if _libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns {name}")
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            out["error"] = e
        finally:
            os.close(fd)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


class Network:
    """The two namespaces, the bridge and the veth pair; taps on demand."""

    def __init__(self, label="n"):
        self.tag = f"vsn{os.getpid() % 100000}{label}"
        self.host, self.peer = self.tag + "h", self.tag + "p"
        self.taps = []
        run("ip", "netns", "add", self.host)
        try:
            run("ip", "netns", "add", self.peer)
            h = ("ip", "-n", self.host)
            run(*h, "link", "set", "lo", "up")
            run("ip", "-n", self.peer, "link", "set", "lo", "up")
            run(*h, "link", "add", "br0", "type", "bridge")
            run(*h, "link", "set", "br0", "up")
            run(*h, "link", "add", "vh", "type", "veth", "peer", "name", "vp", "netns", self.peer)
            run(*h, "link", "set", "vh", "master", "br0", "up")
            run("ip", "-n", self.peer, "addr", "add", PEER_IP + "/24", "dev", "vp")
            run("ip", "-n", self.peer, "link", "set", "vp", "up")
        except BaseException:
            self.close()
            raise

    def close(self):
        for ns in getattr(self, "extra", []) + [self.peer, self.host]:
            run("ip", "netns", "del", ns, check_rc=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def add_echo_namespace(self, ip="10.77.0.3"):
        """A third namespace "<tag>e" on the bridge through its own veth pair
        (the kernel's path, no VM): where the benchmark's reference echo
        server runs."""
        self.echo = self.tag + "e"
        run("ip", "netns", "add", self.echo)
        self.extra = [self.echo]
        run("ip", "-n", self.echo, "link", "set", "lo", "up")
        run("ip", "-n", self.host, "link", "add", "veh", "type", "veth", "peer", "name", "ve", "netns", self.echo)
        run("ip", "-n", self.host, "link", "set", "veh", "master", "br0", "up")
        run("ip", "-n", self.echo, "addr", "add", ip + "/24", "dev", "ve")
        run("ip", "-n", self.echo, "link", "set", "ve", "up")
        return ip

    def add_tap(self, name, mtu=None):
        """A persistent tap on the bridge (the shim opens it by name)."""
        h = ("ip", "-n", self.host)
        run(*h, "tuntap", "add", "dev", name, "mode", "tap")
        run(*h, "link", "set", name, "master", "br0", "up")
        if mtu:
            run(*h, "link", "set", name, "mtu", str(mtu))
        return name

    def attach(self, name):
        """Put an interface the shim made on the bridge."""
        run("ip", "-n", self.host, "link", "set", name, "master", "br0", "up")

    def set_mtu(self, mtu):
        for ns, dev in ((self.host, "br0"), (self.host, "vh"), (self.peer, "vp")):
            run("ip", "-n", ns, "link", "set", dev, "mtu", str(mtu))

    def delete_link(self, name):
        run("ip", "-n", self.host, "link", "del", name)

    def open_tap_fd(self, name):
        """A descriptor of tap name (created if missing), as a management
        daemon would hand it over: IFF_TAP | IFF_NO_PI | IFF_VNET_HDR."""
        def body():
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_CLOEXEC)
            ifr = struct.pack("16sH", name.encode(), IFF_TAP | IFF_NO_PI | IFF_VNET_HDR)
            fcntl.ioctl(fd, TUNSETIFF, ifr)
            return fd
        return in_netns(self.host, body)

    def peer_socket(self, family, kind, proto=0):
        return in_netns(self.peer, lambda: socket.socket(family, kind, proto))


class NetShim:
    """vsnap-shim inside the host namespace, with its API socket and event
    monitor in a private directory; killed by its pid on close()."""

    def __init__(self, shim_path, net, workdir, name="shim"):
        self.net, self.dir, self.name = net, workdir, name
        self.sock = os.path.join(workdir, f"{name}.api")
        self.log_path = os.path.join(workdir, f"{name}.log")
        self.serial_path = os.path.join(workdir, f"{name}.serial")
        self.vsock_path = os.path.join(workdir, f"{name}.vsock")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(["ip", "netns", "exec", net.host, shim_path, "-v", "--api-socket",
                                      f"path={self.sock}", "--event-monitor",
                                      f"path={os.path.join(workdir, name + '.events')}"],
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not os.path.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise Fail(f"{name}: no API socket" + self.describe())
            time.sleep(0.01)
        time.sleep(0.05)

    def log(self):
        return read_text(self.log_path)

    def serial(self):
        return read_text(self.serial_path)

    def describe(self):
        return (f"\n--- {self.name} exit code: {self.proc.poll()}\n--- log:\n{self.log()[-3000:]}"
                f"\n--- serial (tail):\n{self.serial()[-2000:]}")

    def api(self, method, endpoint, body=None, timeout=60):
        try:
            return curl_api(self.sock, method, endpoint, body, timeout)
        except CurlError as e:
            raise Fail(f"curl {method} {endpoint}: {e}" + self.describe()) from None

    def ok(self, method, endpoint, body=None, timeout=60):
        status, reply = self.api(method, endpoint, body, timeout)
        if status not in (200, 204):
            raise Fail(f"{self.name}: {endpoint} -> {status} {reply}" + self.describe())
        return reply

    def with_fds(self, endpoint, body, fds):
        """PUT endpoint with the descriptors in the same sendmsg as the
        request (SCM_RIGHTS), as libvirt's ch driver sends them. Returns
        (status, parsed body)."""
        data = json.dumps(body).encode()
        req = (f"PUT /api/v1/{endpoint} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
               f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode() + data
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(60)
        try:
            s.connect(self.sock)
            s.sendmsg([req], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))])
            reply = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                reply += chunk
        finally:
            s.close()
        head, _, payload = reply.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1])
        return status, (json.loads(payload) if payload.strip() else None)

    def counters(self, net_id):
        return self.ok("GET", "vm.counters")[net_id]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.api("PUT", "vmm.shutdown", timeout=10)
                self.proc.wait(timeout=10)
            except (Fail, subprocess.TimeoutExpired):
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._log.close()
        log = self.log()
        for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
            if marker in log:
                raise Fail(f"{self.name}: sanitizer report:\n{log[max(0, log.index(marker) - 200):][:6000]}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def vm_config(guest, shim, cmdline, nets, memory_mib=64):
    return {"payload": {"kernel": guest, "cmdline": cmdline}, "memory": {"size": memory_mib * MIB},
            "cpus": {"boot_vcpus": 1, "max_vcpus": 1},
            "serial": {"mode": "File", "file": shim.serial_path}, "console": {"mode": "Off"},
            "vsock": {"cid": 3, "socket": shim.vsock_path}, "net": nets}


def guest_cmdline(mac=None, ip=GUEST_IP):
    line = f"console=ttyS0 vsnap.ip={ip}/24"
    return line + (f" vsnap.mac={mac}" if mac else "")


# --- the peer's side ---------------------------------------------------------------

def icmp_checksum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return ~s & 0xffff


def ping(sock, dest, seq, payload=b"vsnap-ping", timeout=2.0):
    """One ICMP echo over a raw socket; the round trip in seconds, or None."""
    ident = os.getpid() & 0xffff
    hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    packet = struct.pack("!BBHHH", 8, 0, icmp_checksum(hdr + payload), ident, seq) + payload
    start = time.monotonic()
    sock.sendto(packet, (dest, 0))
    deadline = start + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        sock.settimeout(left)
        try:
            data, addr = sock.recvfrom(65536)
        except socket.timeout:
            return None
        ihl = (data[0] & 15) * 4
        icmp = data[ihl:]
        if addr[0] == dest and len(icmp) >= 8 and icmp[0] == 0 and struct.unpack("!HH", icmp[4:8]) == (ident, seq) \
                and icmp[8:] == payload:
            return time.monotonic() - start


def ping_until(sock, dest, timeout=20.0):
    """Ping until an answer comes (the guest, ARP, the bridge need a moment)."""
    deadline = time.monotonic() + timeout
    seq = 1
    while time.monotonic() < deadline:
        rtt = ping(sock, dest, seq, timeout=0.5)
        if rtt is not None:
            return rtt
        seq += 1
    return None


def udp_echo_once(sock, dest, payload, timeout=2.0):
    sock.settimeout(timeout)
    start = time.monotonic()
    sock.sendto(payload, (dest, 7))
    while time.monotonic() - start < timeout:
        try:
            data, addr = sock.recvfrom(65536)
        except socket.timeout:
            return None
        if data == payload:
            return time.monotonic() - start
    return None


def payload_for(seq, size):
    """Datagram seq of a stream: its number, then bytes only it has."""
    head = struct.pack("!Q", seq)
    block = (head * ((size + 7) // 8))[:size - 8]
    return head + bytes((b + seq) & 0xff for b in block[:64]) + block[64:]


def udp_stream(sock, dest, total, size=1472, window=32, port=7, timeout=120.0):
    """Send `total` bytes as datagrams of `size` through an echo service and
    read them back: each seq's echo must be its exact bytes. Lost ones are
    sent again. Returns (seconds, sha256 of the echoed stream in order,
    sha256 of what was sent, datagrams sent)."""
    import hashlib
    count = (total + size - 1) // size
    received = {}
    outstanding = {}
    next_seq = 0
    sent = 0
    start = time.monotonic()
    deadline = start + timeout
    sock.settimeout(0.2)
    while len(received) < count:
        now = time.monotonic()
        if now > deadline:
            raise Fail(f"UDP stream: {len(received)} of {count} datagrams echoed within {timeout:.0f}s")
        while len(outstanding) < window and next_seq < count:
            sock.sendto(payload_for(next_seq, size), (dest, port))
            outstanding[next_seq] = now
            next_seq += 1
            sent += 1
        try:
            data, _ = sock.recvfrom(65536)
        except socket.timeout:
            for seq, when in list(outstanding.items()):
                if time.monotonic() - when > 0.2:
                    sock.sendto(payload_for(seq, size), (dest, port))
                    outstanding[seq] = time.monotonic()
                    sent += 1
            continue
        seq = struct.unpack("!Q", data[:8])[0]
        if seq in outstanding and data == payload_for(seq, size):
            received[seq] = hashlib.sha256(data).digest()
            del outstanding[seq]
    elapsed = time.monotonic() - start
    echoed = hashlib.sha256(b"".join(received[s] for s in range(count))).hexdigest()
    expected = hashlib.sha256(b"".join(hashlib.sha256(payload_for(s, size)).digest()
                                       for s in range(count))).hexdigest()
    return elapsed, echoed, expected, sent


def capture_arp(sock, sender_ip, timeout):
    """The first ARP frame whose sender address is sender_ip seen on an
    AF_PACKET socket: (sender MAC, target IP, opcode), or None."""
    deadline = time.monotonic() + timeout
    want = socket.inet_aton(sender_ip)
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            frame = sock.recv(2048)
        except socket.timeout:
            return None
        if len(frame) >= 42 and frame[12:14] == b"\x08\x06" and frame[28:32] == want:
            mac = ":".join(f"{b:02x}" for b in frame[22:28])
            return mac, socket.inet_ntoa(frame[38:42]), struct.unpack("!H", frame[20:22])[0]
    return None


def workdir():
    return tempfile.mkdtemp(prefix="vsnap-net-")

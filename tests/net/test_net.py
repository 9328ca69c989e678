#!/usr/bin/python3
"""virtio-net end to end: the real vsnap-shim on KVM inside a network
namespace of the test's own, its taps on a private bridge, the test guest's
polled virtio-net driver answering from 10.77.0.2, and a peer namespace at
10.77.0.1 on the same bridge through a veth pair (nettest.py). Nothing routes
out: the namespaces are linked to nothing else and removed at the end.

    test_net.py <vsnap-shim> <vsnap-testguest> <case>
"""

import json
import os
import shutil
import socket
import sys
import threading
import time

SHIM, GUEST, CASE = sys.argv[1:4]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nettest import (GUEST_IP, MIB, PEER_IP, Fail, NetShim, Network, capture_arp, check, guest_cmdline,  # noqa: E402
                     ping, ping_until, udp_echo_once, udp_stream, vm_config, workdir)
from persisttest import Conn  # noqa: E402
from vsnaptest import error_message  # noqa: E402

MAC = "52:54:00:12:34:56"


def boot(shim, nets, mac=MAC, memory_mib=64):
    shim.ok("PUT", "vm.create", vm_config(GUEST, shim, guest_cmdline(mac), nets, memory_mib))
    shim.ok("PUT", "vm.boot")
    shim.ok("GET", "vm.wait-ready?timeout_ms=30000", timeout=40)
    return Conn(shim.vsock_path)


def netinfo(conn):
    reply = conn.cmd("NETINFO").split()
    check(len(reply) == 5 and reply[0] == "NET", f"NETINFO -> {reply}")
    return {"mac": reply[1], "link": int(reply[2]), "rx": int(reply[3]), "tx": int(reply[4])}


def pinger(net):
    import socket as s
    return net.peer_socket(s.AF_INET, s.SOCK_RAW, s.IPPROTO_ICMP)


def udp(net):
    return net.peer_socket(socket.AF_INET, socket.SOCK_DGRAM)


def arp_listener(net):
    sock = net.peer_socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806))
    sock.bind(("vp", 0))
    return sock


def must_answer(net, what, timeout=20):
    rtt = ping_until(pinger(net), GUEST_IP, timeout)
    check(rtt is not None, f"{what}: the guest does not answer ping")
    return rtt


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise Fail(f"{what} within {timeout}s")


# --- cases --------------------------------------------------------------------------

def case_ping_udp(wd):
    """ping and UDP echo from the peer; NETINFO and vm.counters agree."""
    with Network() as net, NetShim(SHIM, net, wd) as shim:
        net.add_tap("tap0")
        conn = boot(shim, [{"id": "net0", "tap": "tap0", "mac": MAC}])
        check(f"net {MAC} mtu 1500 link up" in shim.serial(), "no net line on the serial port" + shim.describe())
        must_answer(net, "after boot")
        sock = pinger(net)
        for seq in range(20):
            check(ping(sock, GUEST_IP, 1000 + seq, payload=bytes(range(256)) * 4) is not None, f"ping {seq} lost")
        u = udp(net)
        for size in (1, 100, 1472):
            check(udp_echo_once(u, GUEST_IP, os.urandom(size)) is not None, f"UDP echo of {size} bytes")
        info = netinfo(conn)
        check(info["mac"] == MAC and info["link"] == 1 and info["rx"] >= 22 and info["tx"] >= 22, f"NETINFO {info}")
        c = shim.counters("net0")
        for key in ("rx_bytes", "rx_frames", "tx_bytes", "tx_frames", "rx_dropped", "tx_dropped", "guest_errors",
                    "tap_errors", "link"):
            check(key in c, f"vm.counters net0 lacks {key}: {c}")
        check(c["rx_frames"] >= info["rx"] and c["tx_frames"] >= info["tx"] and c["guest_errors"] == 0 and
              c["link"] == 1, f"counters {c} against NETINFO {info}")
        vm = shim.ok("GET", "vm.info")["config"]["net"]
        check(vm[0]["tap"] == "tap0" and vm[0]["mac"] == MAC and vm[0]["id"] == "net0", f"vm.info net {vm}")


def case_stream(wd):
    """100 MiB through the guest's UDP echo, every datagram checked, the
    whole stream's checksum against what was sent."""
    with Network() as net, NetShim(SHIM, net, wd) as shim:
        net.add_tap("tap0")
        boot(shim, [{"id": "net0", "tap": "tap0", "mac": MAC}])
        must_answer(net, "after boot")
        seconds, echoed, expected, sent = udp_stream(udp(net), GUEST_IP, 100 * MIB, timeout=240)
        check(echoed == expected, "the echoed stream's checksum differs from the sent one's")
        c = shim.counters("net0")
        check(c["tx_bytes"] >= 100 * MIB and c["rx_bytes"] >= 100 * MIB, f"counters {c}")
        print(f"100 MiB echoed in {seconds:.1f} s ({100 / seconds:.1f} MiB/s), {sent} datagrams sent")


def case_link(wd):
    """vm.set-link takes the link down and up; the guest sees it (NETINFO)."""
    with Network() as net, NetShim(SHIM, net, wd) as shim:
        net.add_tap("tap0")
        conn = boot(shim, [{"id": "net0", "tap": "tap0", "mac": MAC}])
        must_answer(net, "after boot")
        shim.ok("PUT", "vm.set-link", {"id": "net0", "up": False})
        wait_for(lambda: netinfo(conn)["link"] == 0, 5, "the guest did not see the link go down")
        check(shim.counters("net0")["link"] == 0, "vm.counters still says link up")
        check(ping(pinger(net), GUEST_IP, 7, timeout=1.0) is None, "the guest answered with its link down")
        shim.ok("PUT", "vm.set-link", {"id": "net0", "up": True})
        wait_for(lambda: netinfo(conn)["link"] == 1, 5, "the guest did not see the link come up")
        must_answer(net, "link up again")
        status, reply = shim.api("PUT", "vm.set-link", {"id": "nope", "up": True})
        check(status == 404, f"vm.set-link on an unknown id: {status} {reply}")
        for body in ({"id": "net0"}, {"id": "net0", "up": 1}, {"id": "net0", "up": True, "x": 1}):
            status, reply = shim.api("PUT", "vm.set-link", body)
            check(status == 400, f"vm.set-link {body}: {status} {reply}")


def case_mtu9000(wd):
    """mtu 9000: the tap gets it, the guest is told (VIRTIO_NET_F_MTU), and
    8972-byte datagrams (9000-byte IP packets, five merged receive buffers)
    echo whole."""
    with Network() as net, NetShim(SHIM, net, wd) as shim:
        net.set_mtu(9000)
        net.add_tap("tap0")
        # Without checksum offload here (the other cases have it, the default).
        boot(shim, [{"id": "net0", "tap": "tap0", "mac": MAC, "mtu": 9000, "offload_csum": False}])
        check(f"net {MAC} mtu 9000" in shim.serial(), "the guest was not told mtu 9000" + shim.describe())
        must_answer(net, "after boot")
        u = udp(net)
        for n in range(20):
            payload = os.urandom(8972)
            check(udp_echo_once(u, GUEST_IP, payload) is not None, f"8972-byte datagram {n} did not come back")
        seconds, echoed, expected, _ = udp_stream(u, GUEST_IP, 16 * MIB, size=8972, timeout=120)
        check(echoed == expected, "jumbo stream checksum differs")


def traffic(net, stop, counts):
    """UDP echo traffic from the peer until stop is set."""
    sock = udp(net)
    n = 0
    while not stop.is_set():
        if udp_echo_once(sock, GUEST_IP, f"flow {n}".encode(), timeout=0.2) is not None:
            counts["ok"] = counts.get("ok", 0) + 1
        n += 1


def case_snapshot_restore(wd):
    """A snapshot taken with traffic flowing, restored into a new shim on a
    new tap handed over as a descriptor (net_fds): the guest answers again
    and announces itself with a gratuitous ARP, which the peer sees."""
    snap = os.path.join(wd, "snap")
    with Network() as net:
        net.add_tap("tap0")
        with NetShim(SHIM, net, wd, "src") as src:
            boot(src, [{"id": "net0", "tap": "tap0", "mac": MAC}])
            must_answer(net, "after boot")
            stop, counts = threading.Event(), {}
            flow = threading.Thread(target=traffic, args=(net, stop, counts))
            flow.start()
            time.sleep(1.0)
            src.ok("PUT", "vm.pause")
            status, reply = src.api("PUT", "vm.snapshot", {"destination_url": "file://" + snap})
            stop.set()
            flow.join()
            check(status == 204, f"vm.snapshot: {status} {reply}")
            check(counts.get("ok", 0) > 0, "no traffic flowed before the snapshot")
        saved = json.load(open(os.path.join(snap, "state.json")))["devices"]["nets"]
        check(len(saved) == 1 and saved[0]["id"] == "net0" and saved[0]["link_up"] == 1, f"state.json nets {saved}")
        config = json.load(open(os.path.join(snap, "config.json")))["net"]
        check("fds" not in config[0], f"config.json names descriptors: {config}")
        net.delete_link("tap0")
        net.add_tap("tap1")
        fd = net.open_tap_fd("tap1")
        arp = arp_listener(net)
        with NetShim(SHIM, net, wd, "dst") as dst:
            body = {"source_url": "file://" + snap, "memory_restore_mode": "ondemand", "resume": True,
                    "net_fds": [{"id": "net0", "num_fds": 1}],
                    "config_overrides": {"serial": {"mode": "File", "file": dst.serial_path},
                                         "vsock": {"socket": dst.vsock_path}}}
            status, reply = dst.with_fds("vm.restore", body, [fd])
            os.close(fd)
            check(status == 204, f"vm.restore with a tap descriptor: {status} {reply}" + dst.describe())
            seen = capture_arp(arp, GUEST_IP, 10)
            check(seen is not None and seen[0] == MAC and seen[1] == GUEST_IP,
                  f"no gratuitous ARP from the restored guest (saw {seen})" + dst.describe())
            must_answer(net, "after restore")
            check(udp_echo_once(udp(net), GUEST_IP, b"after restore") is not None, "UDP echo after restore")
            info = netinfo(Conn(dst.vsock_path))
            check(info["mac"] == MAC and info["link"] == 1, f"NETINFO after restore {info}")
            check(dst.ok("GET", "vm.info")["config"]["net"][0]["tap"] == "tap1", "vm.info does not name tap1")
            # The guest acked on the control queue: the device asks once.
            time.sleep(0.5)
            check(dst.serial().count("net announce") == 1, "the announcement was not acked" + dst.describe())


def case_clone(wd):
    """A clone restored beside its running origin, on its own network, tap
    and MAC (config_overrides.net): both answer; the clone uses its new MAC
    in its announcement and replies."""
    snap = os.path.join(wd, "snap")
    clone_mac = "52:54:00:ab:cd:ef"
    with Network("a") as net_a, Network("b") as net_b:
        net_a.add_tap("tap0")
        net_b.add_tap("tapc")
        with NetShim(SHIM, net_a, wd, "origin") as origin:
            boot(origin, [{"id": "net0", "tap": "tap0", "mac": MAC}])
            must_answer(net_a, "origin")
            origin.ok("PUT", "vm.pause")
            status, reply = origin.api("PUT", "vm.snapshot", {"destination_url": "file://" + snap})
            check(status == 204, f"vm.snapshot {status} {reply}")
            origin.ok("PUT", "vm.resume")
            arp = arp_listener(net_b)
            with NetShim(SHIM, net_b, wd, "clone") as clone:
                body = {"source_url": "file://" + snap, "memory_restore_mode": "copy", "resume": True,
                        "config_overrides": {"serial": {"mode": "File", "file": clone.serial_path},
                                             "vsock": {"socket": clone.vsock_path},
                                             "net": [{"id": "net0", "tap": "tapc", "mac": clone_mac}]}}
                clone.ok("PUT", "vm.restore", body)
                seen = capture_arp(arp, GUEST_IP, 10)
                check(seen is not None and seen[0] == clone_mac, f"the clone's announcement: {seen}" + clone.describe())
                must_answer(net_b, "clone")
                must_answer(net_a, "origin beside its clone")
                check(netinfo(Conn(clone.vsock_path))["mac"] == clone_mac, "the clone's NETINFO MAC")
                check(netinfo(Conn(origin.vsock_path))["mac"] == MAC, "the origin's NETINFO MAC")
                check(clone.ok("GET", "vm.info")["config"]["net"][0]["mac"] == clone_mac, "vm.info of the clone")
                status, reply = clone.api("PUT", "vm.restore", body)
                check(status != 204, "a second restore into the same shim succeeded")
        status = None
        with NetShim(SHIM, net_b, wd, "bad") as bad:
            for over, why in (([{"id": "nope", "tap": "x"}], "unknown id"), ([{"id": "net0", "mtu": 1}], "mtu")):
                body = {"source_url": "file://" + snap, "config_overrides": {"net": over}}
                status, reply = bad.api("PUT", "vm.restore", body)
                check(status == 400, f"config_overrides.net {why}: {status} {reply}")


def tun_fds(shim):
    """How many of the shim's descriptors are taps."""
    fd_dir = f"/proc/{shim.proc.pid}/fd"
    n = 0
    for name in os.listdir(fd_dir):
        try:
            n += os.readlink(os.path.join(fd_dir, name)) == "/dev/net/tun"
        except OSError:
            pass
    return n


def case_fds(wd):
    """Tap descriptors with vm.create (net[].fds placeholders) and
    vm.add-net (all that came), over SCM_RIGHTS; counts that differ are 400."""
    with Network() as net, NetShim(SHIM, net, wd) as shim:
        fd0, fd1 = net.open_tap_fd("tapf0"), net.open_tap_fd("tapf1")
        config = vm_config(GUEST, shim, guest_cmdline(MAC), [{"id": "net0", "mac": MAC, "fds": [-1]}])
        status, reply = shim.with_fds("vm.create", config, [fd0, fd1])
        check(status == 400 and "descriptors" in error_message(reply), f"two fds for one: {status} {reply}")
        check(tun_fds(shim) == 0, f"the shim kept {tun_fds(shim)} tap descriptors of a refused request")
        bad = dict(config, memory={"size": 1})
        status, reply = shim.with_fds("vm.create", bad, [fd0])
        check(status == 400 and tun_fds(shim) == 0, f"a refused config kept its descriptor: {status} {reply}")
        status, reply = shim.with_fds("vm.create", config, [fd0])
        check(status == 204, f"vm.create with a tap descriptor: {status} {reply}")
        status, reply = shim.with_fds("vm.add-net", {"id": "net1", "mac": "52:54:00:00:00:01"}, [fd1])
        check(status == 204, f"vm.add-net with a descriptor: {status} {reply}")
        status, reply = shim.api("PUT", "vm.add-net", {"id": "net1", "tap": "x"})
        check(status == 409, f"vm.add-net with an id taken: {status} {reply}")
        os.close(fd0)
        os.close(fd1)
        net.attach("tapf0")
        net.attach("tapf1")
        shim.ok("PUT", "vm.boot")
        shim.ok("GET", "vm.wait-ready?timeout_ms=30000", timeout=40)
        must_answer(net, "on a tap from a descriptor")
        check(tun_fds(shim) == 4, f"{tun_fds(shim)} tap descriptors: expected the config's two and the devices' two")
        nets = shim.ok("GET", "vm.info")["config"]["net"]
        check([n["tap"] for n in nets] == ["tapf0", "tapf1"], f"vm.info taps {nets}")
        counters = shim.ok("GET", "vm.counters")
        check("net0" in counters and "net1" in counters, f"counters {list(counters)}")
        status, reply = shim.api("PUT", "vm.add-net", {"id": "net2", "tap": "tapx"})
        check(status == 405, f"vm.add-net on a running VM: {status} {reply}")
        # A reboot builds the VM again from the config's own copies of the descriptors.
        shim.ok("PUT", "vm.reboot")
        wait_for(lambda: shim.serial().count("ready sum=") >= 2, 30, "no second boot" + shim.describe())
        must_answer(net, "after a reboot")
        status, reply = shim.api("GET", "vm.info")
        check(status == 200 and "fds" not in reply["config"]["net"][0], "vm.info shows descriptors")


def case_config(wd):
    """NetConfig fields vsnap cannot honour are refused by name."""
    with Network() as net, NetShim(SHIM, net, wd) as shim:
        cases = [({"num_queues": 4}, "net[0].num_queues"), ({"vhost_user": True}, "net[0].vhost_user"),
                 ({"vhost_socket": "/x"}, "net[0].vhost_socket"), ({"iommu": True}, "net[0].iommu"),
                 ({"rate_limiter_config": {"bandwidth": {"size": 1}}}, "net[0].rate_limiter_config"),
                 ({"mac": "nonsense"}, "net[0].mac"), ({"mac": "01:00:5e:00:00:01"}, "net[0].mac"),
                 ({"mtu": 20}, "net[0].mtu"), ({"queue_size": 100}, "net[0].queue_size"),
                 ({"ip": "fe80::1"}, "net[0].ip"), ({"vhost_mode": "Server"}, "net[0].vhost_mode"),
                 ({"fds": [3]}, "descriptors"), ({"tap": "a/b"}, "net[0].tap"), ({"bogus": 1}, "net[0].bogus")]
        for fields, name in cases:
            body = vm_config(GUEST, shim, guest_cmdline(), [dict({"id": "net0", "tap": "tap0"}, **fields)])
            status, reply = shim.api("PUT", "vm.create", body)
            check(status == 400 and name in error_message(reply), f"{fields}: {status} {reply}")
        body = vm_config(GUEST, shim, guest_cmdline(), [{"id": "net0", "tap": "t0"}, {"id": "net0", "tap": "t1"}])
        status, reply = shim.api("PUT", "vm.create", body)
        check(status == 400 and "net[1].id" in error_message(reply), f"duplicate id: {status} {reply}")
        # Cloud Hypervisor's defaults, spelled out, are accepted.
        full = {"id": "net0", "tap": "tapd", "num_queues": 2, "queue_size": 256, "iommu": False, "vhost_user": False,
                "vhost_mode": "Client", "offload_tso": True, "offload_ufo": True, "offload_csum": True,
                "ip": "192.168.249.1", "mask": "255.255.255.0"}
        shim.ok("PUT", "vm.create", vm_config(GUEST, shim, guest_cmdline(), [full]))
        shim.ok("PUT", "vm.remove-device", {"id": "net0"})
        check(shim.ok("GET", "vm.info")["config"]["net"] is None, "vm.remove-device left the interface")


def case_malformed(wd):
    """Malformed transmit chains and receive buffers, and a flood of frames
    from the peer: the device drops what is wrong, counts it, and goes on;
    the shim survives, and another VM on the same bridge is unaffected."""
    other_ip, other_mac = "10.77.0.5", "52:54:00:00:00:05"
    with Network() as net, NetShim(SHIM, net, wd) as shim, NetShim(SHIM, net, wd, "other") as other:
        net.add_tap("tap0")
        net.add_tap("tap1")
        conn = boot(shim, [{"id": "net0", "tap": "tap0", "mac": MAC}])
        other.ok("PUT", "vm.create", vm_config(GUEST, other, guest_cmdline(other_mac, other_ip),
                                               [{"id": "net0", "tap": "tap1", "mac": other_mac}]))
        other.ok("PUT", "vm.boot")
        other.ok("GET", "vm.wait-ready?timeout_ms=30000", timeout=40)
        must_answer(net, "after boot")
        check(ping_until(pinger(net), other_ip, 20) is not None, "the other VM does not answer")
        for _ in range(3):
            reply = conn.cmd("NETBADPKT")
            check(reply == "OK 14", f"NETBADPKT -> {reply}")
            # A ring's worth of frames brings the malformed receive buffers
            # (posted at the ring's end) back.
            u = udp(net)
            for n in range(160):
                udp_echo_once(u, GUEST_IP, b"%d" % n, timeout=0.3)
        errors = shim.counters("net0")["guest_errors"]
        check(errors >= 30, f"guest_errors {errors} after 27 malformed chains and 15 receive buffers")
        must_answer(net, "after malformed chains")
        flood = udp(net)
        flood.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
        flood.setblocking(False)
        junk = os.urandom(1400)
        sent = 0
        end = time.monotonic() + 5
        while time.monotonic() < end:
            for port in range(1000, 1100):
                try:
                    flood.sendto(junk, (GUEST_IP, port))
                    flood.sendto(junk[:60], ("10.77.0.255", port))
                    sent += 2
                except BlockingIOError:
                    time.sleep(0.001)
        check(sent > 10000, f"only {sent} datagrams flooded")
        must_answer(net, "after the flood")
        check(shim.proc.poll() is None, "the shim died")
        c = shim.counters("net0")
        check(c["rx_frames"] + c["rx_dropped"] > 10000, f"counters after the flood {c}")
        check(netinfo(conn)["link"] == 1, "link after the flood")
        check(ping_until(pinger(net), other_ip, 10) is not None, "the other VM stopped answering")
        check(udp_echo_once(udp(net), other_ip, b"other") is not None, "the other VM's UDP echo")
        check(other.counters("net0")["guest_errors"] == 0, "the other VM's device saw guest errors")


def case_tap_removed(wd):
    """The tap deleted under the running VM: one clear log line, the link goes
    down (the guest sees it), the shim and the VM go on."""
    with Network() as net, NetShim(SHIM, net, wd) as shim:
        net.add_tap("tap0")
        conn = boot(shim, [{"id": "net0", "tap": "tap0", "mac": MAC}])
        must_answer(net, "after boot")
        net.delete_link("tap0")
        # The device notices on its next read or write: the guest's next frame.
        conn.cmd("NETBADPKT")
        wait_for(lambda: "tap tap0 is gone" in shim.log(), 10, "no log line for the vanished tap" + shim.describe())
        wait_for(lambda: netinfo(conn)["link"] == 0, 5, "the guest still sees its link up")
        check(shim.counters("net0")["link"] == 0, "vm.counters link")
        check(shim.ok("GET", "vm.info")["state"] == "Running", "the VM stopped")
        check(conn.cmd("PING") == "PONG", "the guest stopped answering its command port")


def case_cli(wd):
    """--net on the command line, as Cloud Hypervisor's: the shim creates the
    tap (no tap=), sets ip/mask on it; a bad key is refused by name."""
    import subprocess
    net = Network()
    serial = os.path.join(wd, "cli.serial")
    proc = None
    try:
        argv = ["ip", "netns", "exec", net.host, SHIM, "--kernel", GUEST, "--cmdline", guest_cmdline(MAC),
                "--memory", "size=64M", "--serial", f"file={serial}", "--console", "off",
                "--net", f"mac={MAC},ip=10.77.9.1,mask=255.255.255.0,id=cli0"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: "ready sum=" in open(serial).read() if os.path.exists(serial) else False, 30,
                 "the guest did not come up")
        links = subprocess.run(["ip", "-n", net.host, "-o", "addr", "show"], capture_output=True, text=True).stdout
        tap = [line.split()[1] for line in links.splitlines() if "10.77.9.1/24" in line]
        check(tap and tap[0].startswith("vmtap"), f"no vmtap with 10.77.9.1/24: {links}")
        net.attach(tap[0])
        must_answer(net, "a tap the shim made")
        bad = subprocess.run(["ip", "netns", "exec", net.host, SHIM, "--kernel", GUEST, "--net", "queues=4"],
                             capture_output=True, text=True, timeout=30)
        check(bad.returncode != 0 and "queues" in bad.stderr, f"--net queues=4: {bad.returncode} {bad.stderr}")
        bad = subprocess.run(["ip", "netns", "exec", net.host, SHIM, "--kernel", GUEST, "--net", "num_queues=4"],
                             capture_output=True, text=True, timeout=30)
        check(bad.returncode != 0 and "num_queues" in bad.stderr, f"--net num_queues=4: {bad.stderr}")
    finally:
        if proc:
            proc.kill()
            proc.wait()
        net.close()


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("net tests need root and iproute2 (network namespaces): skipped")
        sys.exit(77)
    wd = workdir()
    try:
        CASES[CASE](wd)
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    print(f"net {CASE}: ok")


if __name__ == "__main__":
    main()

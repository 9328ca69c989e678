"""Store URLs through the shim's Cloud Hypervisor API (test_store.py runs
these cases with the servers it started): vm.snapshot to an nginx store and
to the RADOS Gateway, vm.restore from them on "other hosts" (shims with their
own cache and work directories, the same base image path), in copy and
on-demand modes, checked by the guest's SUM of its RAM and BLKSUM of its
disk against the origin's. Every shim runs with its default seccomp filter."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import threading
import time

from persisttest import ApiShim, Fail, MIB, check, connect
from servers import StallingProxy
from vsnaptest import write_state_json

SHIM = GUEST = None
COMPACT = os.environ.get("VSNAP_COMPACT", "")
DISK_SIZE = 32 * MIB
RAM_REGION = (16 * MIB, 48 * MIB)


def setup(shim, guest):
    global SHIM, GUEST
    SHIM, GUEST = shim, guest


def store_config(env, path, timeout=None, ca_file=None):
    """--store-config: the [store] and [s3] groups store_options_load reads
    (timeout: [store] timeout, the whole transfer's bound; ca_file: [store]
    ca_file, the CA bundle https:// stores are checked against)."""
    e = env.s3_env
    with open(path, "w") as f:
        f.write("[store]\nconnections = 4\nrange_size = 2M\n")
        if timeout is not None:
            f.write(f"timeout = {timeout}\n")
        if ca_file is not None:
            f.write(f"ca_file = {ca_file}\n")
        if env.rgw:
            f.write(f"\n[s3]\nendpoint = {env.rgw.endpoint}\n"
                    f"region = {e['AWS_REGION']}\naccess_key = {e['AWS_ACCESS_KEY_ID']}\n"
                    f"secret_key = {e['AWS_SECRET_ACCESS_KEY']}\n")
    return path


class Host:
    """One "host": its layer cache and work directory; shims made on it."""

    def __init__(self, env, root, name, timeout=None, ca_file=None):
        self.env, self.name = env, name
        self.dir = os.path.join(root, name)
        self.cache = os.path.join(self.dir, "cache")
        self.work = os.path.join(self.dir, "work")
        os.makedirs(self.work)
        self.config = store_config(env, os.path.join(self.dir, "store.conf"), timeout, ca_file)
        self.count = 0

    def shim(self):
        self.count += 1
        # no AWS_* in the environment: the S3 keys come from --store-config
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env["TMPDIR"] = self.dir   # a restore without vsnap_work_dir makes its work dir there
        return ApiShim(SHIM, workdir=self.dir, name=f"{self.name}-{self.count}", env=env,
                       args=["--store-config", self.config, "--store-cache-dir", self.cache])


def restore_url(vm, url, mode, work, image):
    """work None: no vsnap_work_dir (a pull goes under the cache's shim/).
    Every host path is the caller's (a snapshot from a store supplies none):
    the kernel, the serial file, the vsock socket, image as disk vda's."""
    overrides = {"serial": {"mode": "File", "file": vm.serial_path}, "vsock": {"socket": vm.vsock_path},
                 "payload": {"kernel": GUEST}, "disks": [{"id": "vda", "path": image}]}
    if work:
        overrides["vsnap_work_dir"] = work
    return vm.api("PUT", "vm.restore", {"source_url": url, "memory_restore_mode": mode, "resume": True,
                                        "config_overrides": overrides}, timeout=120)


def sums(conn):
    ram = conn.sum(*RAM_REGION)
    reply = conn.cmd(f"BLKSUM 0 0 {DISK_SIZE:#x}")
    check(reply.startswith("SUM "), f"BLKSUM -> {reply!r}")
    return ram, reply[4:]


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Origin:
    """Host A's VM: s1, a full snapshot to nginx (RAM filled, the disk
    written in place: its layer is empty, the image its base); then more
    written to RAM and disk and s2, a diff of s1 to nginx (its disk layer
    holds those blocks, over s1's), and s3, a diff of s2 to S3; made once,
    shared by the cases. Host A's directories are then moved away, so the
    other hosts can only use what the stores hold (and the base image, at
    the same path)."""

    def __init__(self, env):
        self.root = env.scratch("shim-store")
        self.image = os.path.join(self.root, "base.img")
        with open(self.image, "wb") as f:
            f.truncate(DISK_SIZE)
        self.host = Host(env, self.root, "hostA")
        self.http = env.nginx.url("store", "shim")
        # without the gateway (VSNAP_STORE_NO_S3) the second store is nginx's too
        self.s3 = "s3://vsnap-test/shim" if env.rgw else env.nginx.url("store", "shim-second")
        with self.host.shim() as vm:
            vm.ok("PUT", "vm.create", {
                "payload": {"kernel": GUEST, "cmdline": "vsnap.fill_mib=48 vsnap.seed=5"},
                "memory": {"size": 128 * MIB}, "cpus": {"boot_vcpus": 1, "max_vcpus": 1},
                "serial": {"mode": "File", "file": vm.serial_path}, "console": {"mode": "Off"},
                "vsock": {"cid": 3, "socket": vm.vsock_path}, "vsnap_work_dir": self.host.work,
                "disks": [{"path": self.image, "id": "vda"}]})
            vm.ok("PUT", "vm.boot")
            conn = connect(vm)
            check(conn.cmd(f"BLKFILL 0 0 {4 * MIB:#x} 3") == "OK", "BLKFILL")
            vm.ok("PUT", "vm.pause")
            self.s1 = vm.ok("PUT", "vm.snapshot", {"destination_url": self.http})
            vm.ok("PUT", "vm.resume")
            conn.ok(f"FILL {RAM_REGION[0] + 8 * MIB:#x} {8 * MIB:#x} 21")
            check(conn.cmd(f"BLKFILL 0 {20 * MIB:#x} {2 * MIB:#x} 4") == "OK", "BLKFILL")
            check(conn.cmd(f"BLKFILL 0 {MIB + 512:#x} {4096:#x} 6") == "OK", "BLKFILL")
            self.sums = sums(conn)
            vm.ok("PUT", "vm.pause")
            t0 = time.monotonic()
            self.http_reply = vm.ok("PUT", "vm.snapshot", {"destination_url": self.http, "mode": "diff",
                                                           "parent_url": self.s1["local_url"]})
            self.http_push_s = time.monotonic() - t0
            self.s3_reply = vm.ok("PUT", "vm.snapshot", {"destination_url": self.s3, "mode": "diff",
                                                         "parent_url": self.http_reply["local_url"]})
            self.failed_push = self.push_to_dead_server(vm)
            vm.ok("PUT", "vm.resume")
            check(sums(conn) == self.sums, "the origin's sums changed across its snapshots")
            self.full_sums, self.full_reply = self.full_over_the_disk_chain(vm, conn)
            conn.close()
        self.id = self.http_reply["id"]
        self.local = self.http_reply["local_url"][len("file://"):]
        self.disk_layer = open(os.path.join(self.local, "disk-vda.layer"), "rb").read()
        os.rename(self.host.work, self.host.work + ".moved-away")

    def full_over_the_disk_chain(self, vm, conn):
        """s4: more written to the disk, then a full snapshot to nginx. Its
        memory has no parent, but its disk layer continues the chain (the
        failed push's layer, then s3's, which is only in S3, s2's, s1's):
        the push must carry those too."""
        check(conn.cmd(f"BLKFILL 0 {24 * MIB:#x} {MIB:#x} 8") == "OK", "BLKFILL")
        full_sums = sums(conn)
        vm.ok("PUT", "vm.pause")
        reply = vm.ok("PUT", "vm.snapshot", {"destination_url": self.http})
        vm.ok("PUT", "vm.resume")
        return full_sums, reply

    def push_to_dead_server(self, vm):
        """A push that cannot connect: an error naming the object, the VM
        still paused and its local snapshot kept."""
        url = f"http://127.0.0.1:{dead_port()}/gone"
        t0 = time.monotonic()
        status, reply = vm.api("PUT", "vm.snapshot", {"destination_url": url}, timeout=120)
        return status, reply, time.monotonic() - t0, vm.state()


def origin(env):
    if not hasattr(env, "shim_origin"):
        env.shim_origin = Origin(env)
    return env.shim_origin


def layer_gets(env, since):
    return [line for line in env.nginx.access_lines()[since:]
            if line[0] == "GET" and line[1].endswith(".zst") and int(line[3]) > 64 * 1024]


# --- cases ---------------------------------------------------------------------

def case_shim_snapshot_to_store(env):
    """vm.snapshot to a store prefix answers 200 with the manifest id (the
    local snapshot's memory layer id) and the local copy's URL; the
    manifest is in the store; the disk layer's object, plain `zstd -d`,
    is the layer."""
    o = origin(env)
    moved = o.host.work + ".moved-away"
    for reply, url in ((o.s1, o.http), (o.http_reply, o.http), (o.s3_reply, o.s3)):
        local = reply["local_url"][len("file://"):]
        check(local.startswith(o.host.work + "/"), f"the local copy is not in the VM's work dir: {reply}")
        local = local.replace(o.host.work, moved, 1)
        layer_id = json.load(open(os.path.join(local, "state.json")))["memory"]["id"]
        check(reply["id"] == layer_id and reply["url"] == f"{url}/{layer_id}", f"vm.snapshot answered {reply}")
    check(0 < o.http_reply["bytes_sent"] < o.s1["bytes_sent"] / 2,
          f"the diff's push sent nothing, or s1 again: s1 {o.s1}, s2 {o.http_reply}")
    # s4's push carried its disk chain: s3 and the failed push's snapshot
    ids = set(e["id"] for e in env.store([], ["ls", o.http]))
    check({o.s1["id"], o.id, o.s3_reply["id"], o.full_reply["id"]} <= ids and len(ids) == 5,
          f"ls {o.http}: {ids}")
    ids = sorted(e["id"] for e in env.store([], ["ls", o.s3]))
    check(ids == sorted([o.s1["id"], o.id, o.s3_reply["id"]]), f"ls {o.s3}: {ids}")
    blocks = (len(o.disk_layer) - 8192) // 4096
    check(len(o.disk_layer) > 2 * MIB, f"s2's disk layer holds {len(o.disk_layer)} bytes, not the 2 MiB written")
    obj = os.path.join(env.nginx.root, "shim", "objects", hashlib.sha256(o.disk_layer).hexdigest() + ".zst")
    out = subprocess.run(["zstd", "-dc", obj], capture_output=True, check=True).stdout
    check(out == o.disk_layer, f"zstd -d {obj} is not s2's disk layer (about {blocks} blocks)")
    print(f"  vm.snapshot + push to nginx: {o.http_push_s:.2f} s", flush=True)


def case_shim_restore_from_store(env):
    """Host B restores the nginx snapshot in copy mode (a cache miss), then
    on demand in a second shim (a cache hit: no layer GETs); host C restores
    the S3 one on demand. SUM and BLKSUM equal the origin's."""
    o = origin(env)
    hostb = Host(env, o.root, "hostB")
    for mode, hit in (("copy", False), ("ondemand", True)):
        before = len(env.nginx.access_lines())
        with hostb.shim() as vm:
            t0 = time.monotonic()
            status, reply = restore_url(vm, f"{o.http}/{o.id}", mode, hostb.work, o.image)
            check(status == 204, f"restore ({mode}): {status} {reply}" + vm.describe())
            elapsed = time.monotonic() - t0
            conn = connect(vm)
            check(sums(conn) == o.sums, f"{mode} restore from {o.http}: sums {sums(conn)}, origin {o.sums}")
            conn.close()
            imported = [line.split("info: ", 1)[1] for line in vm.read(vm.log_path).splitlines()
                        if " imported " in line]
        gets = layer_gets(env, before)
        check(bool(gets) != hit, f"{mode} restore ({'hit' if hit else 'miss'}): layer GETs {gets}")
        print(f"  restore {mode} ({'cache hit' if hit else 'cache miss'}): {elapsed:.2f} s; {imported}", flush=True)
    hostc = Host(env, o.root, "hostC")
    with hostc.shim() as vm:
        status, reply = restore_url(vm, f"{o.s3}/{o.s3_reply['id']}", "ondemand", hostc.work, o.image)
        check(status == 204, f"restore from S3: {status} {reply}" + vm.describe())
        conn = connect(vm)
        check(sums(conn) == o.sums, f"ondemand restore from {o.s3}: sums {sums(conn)}, origin {o.sums}")
        conn.close()


def case_shim_store_errors(env):
    """A missing id is a 404 naming the manifest, a dead server an error
    within its retries, a failed push leaves the VM paused with its local
    snapshot; after each refusal the shim restores a good snapshot."""
    o = origin(env)
    status, reply, elapsed, state = o.failed_push
    check(status >= 500 and "gone" in reply[0] and "still paused" in reply[0],
          f"a push to a dead server: {status} {reply}")
    check(state == "Paused" and elapsed < 60, f"after the failed push: {state}, {elapsed:.1f} s")
    hostd = Host(env, o.root, "hostD")
    missing = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    with hostd.shim() as vm:
        status, reply = restore_url(vm, f"{o.http}/{missing}", "ondemand", hostd.work, o.image)
        check(status == 404 and f"manifests/{missing}" in reply[0], f"a missing id: {status} {reply}")
        t0 = time.monotonic()
        status, reply = restore_url(vm, f"http://127.0.0.1:{dead_port()}/x/{o.id}", "copy", hostd.work, o.image)
        check(status >= 500 and time.monotonic() - t0 < 60, f"a dead server: {status} {reply}")
        status, reply = restore_url(vm, f"{o.http}/{o.id}", "ondemand", hostd.work, o.image)
        check(status == 204, f"the restore after two refusals: {status} {reply}" + vm.describe())
        conn = connect(vm)
        check(sums(conn) == o.sums, "sums after the refused restores")
        conn.close()
        leftovers = [n for n in os.listdir(hostd.work) if n.startswith("store-")]
        check(len(leftovers) == 1, f"the refused imports left directories: {leftovers}")


def case_shim_full_snapshot_carries_its_disk_chain(env):
    """Host E restores s4, a full snapshot whose disk continues a chain of
    four earlier layers (one of them pushed only to S3 before): the push to
    nginx carried them, the pull brought them, BLKSUM is the origin's."""
    o = origin(env)
    hoste = Host(env, o.root, "hostE")
    with hoste.shim() as vm:
        status, reply = restore_url(vm, f"{o.http}/{o.full_reply['id']}", "ondemand", hoste.work, o.image)
        check(status == 204, f"restore of the full snapshot over a disk chain: {status} {reply}" + vm.describe())
        conn = connect(vm)
        check(sums(conn) == o.full_sums, f"s4 from {o.http}: sums {sums(conn)}, origin {o.full_sums}")
        conn.close()


def pulled(base):
    """The holders of a shim's pulls under base (not vm.snapshot's local copies)."""
    return sorted(n for n in os.listdir(base) if n.startswith("store-") and not n.startswith("store-snapshot-"))


def restore_checked(env, vm, url, work, o):
    status, reply = restore_url(vm, url, "ondemand", work, o.image)
    check(status == 204, f"restore {url}: {status} {reply}" + vm.describe())
    conn = connect(vm)
    check(sums(conn) == o.sums, f"restore {url}: sums {sums(conn)}, origin {o.sums}")
    conn.close()


def case_shim_pulled_dirs_go_with_the_vm(env):
    """What a restore from a store pulled (hard links into the cache) goes
    with the VM: vm.delete, vmm.shutdown, SIGTERM; the cache keeps the
    layers, and the next restore is a hit. A killed shim's pull (kill -9)
    is removed by the next import into that directory, a live shim's never;
    a VM that took a snapshot keeps its pull (the snapshot names it)."""
    o = origin(env)
    host = Host(env, o.root, "hostF")
    ref = f"{o.http}/{o.id}"
    with host.shim() as vm:
        restore_checked(env, vm, ref, host.work, o)
        check(len(pulled(host.work)) == 1, f"after the restore: {pulled(host.work)}")
        vm.ok("PUT", "vm.delete")
        check(pulled(host.work) == [], f"vm.delete left {pulled(host.work)}")
        layers = os.listdir(os.path.join(host.cache, "layers"))
        check(len(layers) >= 2, f"the cache lost its layers: {layers}")
        before = len(env.nginx.access_lines())
        restore_checked(env, vm, ref, host.work, o)
        check(not layer_gets(env, before), f"the restore after vm.delete was no cache hit: {layer_gets(env, before)}")
    check(pulled(host.work) == [], f"vmm.shutdown left {pulled(host.work)}")
    beside_cache = os.path.join(host.cache, "shim")
    vm = host.shim()
    try:
        restore_checked(env, vm, ref, None, o)
        check(len(pulled(beside_cache)) == 1, f"no pull under the cache: {os.listdir(host.cache)}")
        vm.proc.terminate()
        vm.proc.wait(timeout=30)
        check(pulled(beside_cache) == [], f"SIGTERM left {pulled(beside_cache)}")
    finally:
        vm.close()
    killed = host.shim()
    try:
        restore_checked(env, killed, ref, host.work, o)
        killed.proc.kill()
        killed.proc.wait(timeout=30)
    finally:
        killed.close()
    stale = pulled(host.work)
    check(len(stale) == 1, f"after kill -9: {stale}")
    with host.shim() as a:
        restore_checked(env, a, ref, host.work, o)
        mine = pulled(host.work)
        check(len(mine) == 1 and mine != stale, f"the next import left the killed shim's pull: {stale} -> {mine}")
        with host.shim() as b:
            restore_checked(env, b, ref, host.work, o)
            check(len(pulled(host.work)) == 2 and mine[0] in pulled(host.work),
                  f"an import removed a live shim's pull: {mine} -> {pulled(host.work)}")
        check(pulled(host.work) == mine, f"b's exit: {pulled(host.work)}")
    check(pulled(host.work) == [], f"after both: {pulled(host.work)}")
    snap = os.path.join(host.dir, "snapshot-of-a-restored-vm")
    with host.shim() as vm:
        restore_checked(env, vm, ref, host.work, o)
        vm.ok("PUT", "vm.pause")
        vm.ok("PUT", "vm.snapshot", {"destination_url": "file://" + snap})
        vm.ok("PUT", "vm.delete")
    kept = pulled(host.work)
    check(len(kept) == 1, f"the pull a snapshot names was not kept: {kept}")
    with host.shim() as vm:
        restore_checked(env, vm, "file://" + snap, os.path.join(host.dir, "work2"), o)
    with host.shim() as vm:
        restore_checked(env, vm, ref, host.work, o)
        check(kept[0] in pulled(host.work), f"an import removed a kept pull: {kept} -> {pulled(host.work)}")


def timed(call):
    t0 = time.monotonic()
    result = call()
    return result, time.monotonic() - t0


def check_deadline_reply(what, status, reply, bound, elapsed):
    print(f"  {what}: {status} after {elapsed:.1f} s: {reply}", flush=True)
    check(status == 504 and f"deadline of {bound} s" in reply[0] and ".zst" in reply[0],
          f"{what} from a stalled store: {status} {reply}")
    check(bound - 0.5 < elapsed < bound + 4, f"{what} from a stalled store answered after {elapsed:.1f} s, "
          f"its deadline {bound} s")


def case_shim_store_deadline(env):
    """A store that accepts requests for objects and never answers them (a
    stalled server: its manifests come, the layers never do) holds an API
    request no longer than the transfer's deadline ([store] timeout): the
    vm.restore and the vm.snapshot answer 504 naming the object and the
    deadline, the VM stays paused after the push, the shim takes the next
    restore. Without a [store] timeout the bound is the shim's 25 s (not in
    the short run, VSNAP_STORE_NO_S3: it only waits)."""
    o = origin(env)
    stall = StallingProxy(env.nginx)
    try:
        host = Host(env, o.root, "hostG", timeout=2)
        with host.shim() as vm:
            (status, reply), elapsed = timed(lambda: restore_url(vm, f"{stall.url('store', 'shim')}/{o.id}",
                                                                 "ondemand", host.work, o.image))
            check_deadline_reply("vm.restore", status, reply, 2, elapsed)
            check(pulled(host.work) == [], f"the timed-out import left {pulled(host.work)}")
            # The restore that must work after the 504 finds its layers in
            # the cache (pulled now, with no deadline): the 2 s bound then
            # covers manifests and a cache hit, not a whole import on a
            # loaded machine.
            env.pull(f"{o.http}/{o.id}", os.path.join(host.dir, "warm"), host.cache)
            restore_checked(env, vm, f"{o.http}/{o.id}", host.work, o)
            vm.ok("PUT", "vm.pause")
            (status, reply), elapsed = timed(lambda: vm.api("PUT", "vm.snapshot",
                                                            {"destination_url": stall.url("store", "stalled")}))
            check_deadline_reply("vm.snapshot", status, reply, 2, elapsed)
            check("still paused" in reply[0] and vm.state() == "Paused", f"after the push: {reply}")
        check(stall.stalled >= 2, f"the proxy stalled {stall.stalled} requests")
        if env.short:
            return
        host = Host(env, o.root, "hostH")
        with host.shim() as vm:
            (status, reply), elapsed = timed(lambda: restore_url(vm, f"{stall.url('store', 'shim')}/{o.id}",
                                                                 "copy", host.work, o.image))
            check_deadline_reply("vm.restore (the default bound)", status, reply, 25, elapsed)
    finally:
        stall.close()


def wait_push_job(vm, until, timeout_s=30):
    """vm.info's vsnap.snapshot_job once until(job) holds, each vm.info
    answered within 2 s (the API serves while a push runs)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        info, elapsed = timed(lambda: vm.ok("GET", "vm.info", timeout=10))
        check(elapsed < 2, f"vm.info took {elapsed:.1f} s during a push")
        job = info["vsnap"]["snapshot_job"]
        if until(job):
            return info
        time.sleep(0.05)
    raise Fail(f"{vm.name}: no push job as wanted in {timeout_s} s: {job}")


def in_thread(call):
    box = {}
    thread = threading.Thread(target=lambda: box.setdefault("r", timed(call)))
    thread.start()
    return thread, box


def case_shim_push_is_a_job(env):
    """vm.snapshot to a store runs as a job: while the push waits on a
    stalled server, vm.info answers and shows it (phase push), a second
    store snapshot is refused (409), vm.cancel-snapshot ends it within 2 s
    (409 cancelled, the VM still paused, the local copy kept, no manifest
    in the store), and a client that hangs up ends it too. A live snapshot
    to nginx answers with its pause and the manifest id, and restores
    exactly on another host."""
    o = origin(env)
    stall = StallingProxy(env.nginx)
    try:
        host = Host(env, o.root, "hostJ", timeout=120)
        env.pull(f"{o.http}/{o.id}", os.path.join(host.dir, "warm"), host.cache)
        with host.shim() as vm:
            restore_checked(env, vm, f"{o.http}/{o.id}", host.work, o)
            vm.ok("PUT", "vm.pause")
            thread, box = in_thread(lambda: vm.api("PUT", "vm.snapshot",
                                                   {"destination_url": stall.url("store", "cancelled")},
                                                   timeout=120))
            info = wait_push_job(vm, lambda j: j and j["phase"] == "push" and stall.stalled > 0)
            job = info["vsnap"]["snapshot_job"]
            check(job["url"] == stall.url("store", "cancelled") and not job["cancelling"], f"the job: {job}")
            status, reply = vm.api("PUT", "vm.snapshot", {"destination_url": o.http})
            check(status == 409 and "push to a store is under way" in reply[0], f"a second push: {status} {reply}")
            t0 = time.monotonic()
            vm.ok("PUT", "vm.cancel-snapshot")
            thread.join(30)
            (status, reply), _ = box["r"]
            cancel_s = time.monotonic() - t0
            print(f"  cancel of a stalled push: answered {status} after {cancel_s:.2f} s", flush=True)
            check(status == 409 and "cancel" in reply[0].lower() and "still paused" in reply[0],
                  f"the cancelled push: {status} {reply}")
            check(cancel_s < 2, f"the cancel took {cancel_s:.2f} s")
            local = reply[0].split("file://", 1)[1].split(" ", 1)[0]
            check(os.path.exists(os.path.join(local, "state.json")), f"the local copy {local} is gone")
            info = vm.ok("GET", "vm.info")
            check(info["state"] == "Paused" and info["vsnap"]["snapshot_job"] is None, f"after the cancel: {info}")
            check(not os.path.exists(os.path.join(env.nginx.root, "cancelled", "manifests")),
                  "a cancelled push left a manifest")
            # a client that gives up: curl's --max-time closes the connection
            try:
                vm.api("PUT", "vm.snapshot", {"destination_url": stall.url("store", "hung-up")}, timeout=2)
            except Fail:
                pass
            wait_push_job(vm, lambda j: j is None, timeout_s=10)
            vm.ok("PUT", "vm.resume")
            url = env.nginx.url("store", "live-push")
            reply = vm.ok("PUT", "vm.snapshot", {"destination_url": url, "live": True}, timeout=120)
            check(reply["id"] and reply["pause_us"] > 0 and reply["objects_sent"] > 0, f"a live push: {reply}")
            check(vm.state() == "Running", "the VM stopped after its live push")
        hostk = Host(env, o.root, "hostK")
        with hostk.shim() as vm:
            restore_checked(env, vm, f"{url}/{reply['id']}", hostk.work, o)
    finally:
        stall.close()


def file_facts(path):
    """What a refused restore must leave as it was: bytes, mode, mtime."""
    st = os.lstat(path)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), st.st_mode, st.st_mtime_ns


def hostile_snapshot(env, w, victims):
    """A snapshot in a store of the test's own (nginx) whose config.json
    names this host's files: victims["disk"] (a root-owned 0600 file) as its
    writable disk vda, victims["serial"] as its serial file, victims["socket"]
    as its vsock socket; state.json holds no layer of vda (so the disk would
    run on that very file) and both checksums match, as a store can always
    make them. Returns the store ref."""
    image = os.path.join(w, "origin.img")
    with open(image, "wb") as f:
        f.truncate(DISK_SIZE)
    local = os.path.join(w, "crafted")
    with ApiShim(SHIM, workdir=w, name="origin") as vm:
        vm.boot(GUEST, "vsnap.fill_mib=8 vsnap.seed=3", memory_mib=64,
                disks=[{"path": image, "id": "vda"}])
        connect(vm).close()
        vm.snapshot_paused(local)
    config_path = os.path.join(local, "config.json")
    config = json.load(open(config_path))
    config["disks"][0]["path"] = victims["disk"]
    config["serial"] = {"mode": "File", "file": victims["serial"]}
    config["vsock"]["socket"] = victims["socket"]
    text = json.dumps(config).encode()
    with open(config_path, "wb") as f:
        f.write(text)
    state = json.load(open(os.path.join(local, "state.json")))
    state["config"]["sha256"] = hashlib.sha256(text).hexdigest()
    for disk in state["devices"]["disks"]:
        disk.pop("layer", None)
        disk.pop("base", None)
    write_state_json(os.path.join(local, "state.json"), state)
    os.unlink(os.path.join(local, "disk-vda.layer"))
    url = env.nginx.url("store", "hostile-paths")
    reply = env.store([], ["push", local, url])
    return f"{url}/{reply['id']}", image


def restore_body(url, overrides):
    return {"source_url": url, "memory_restore_mode": "ondemand", "resume": True, "config_overrides": overrides}


def case_shim_store_supplies_no_host_paths(env):
    """A snapshot from a store never supplies a host path. Restored by its
    store URL with no overrides, one whose config.json names a root-owned
    0600 file as its disk, a file as its serial port and a socket path for
    its vsock is refused (400) naming the payload; each override added, the
    next device is named (serial, vsock, disk vda), and the files stay
    exactly as they were, no socket bound there. With every path given, the
    disk without a layer is still refused (a writable disk always has one),
    and given read-only it runs on the caller's image. The same from a
    file:// directory vsnap-store pulled (marked store-origin, never pushed
    again). A genuine snapshot's disk given read-only over its layer is
    refused too."""
    w = env.scratch("shim-host-paths")
    victims = {"disk": os.path.join(w, "root-only.img"), "serial": os.path.join(w, "host.log"),
               "socket": os.path.join(w, "store-chose.sock")}
    with open(victims["disk"], "wb") as f:
        f.write(b"root's own data\n" * (DISK_SIZE // 16))
    os.chmod(victims["disk"], 0o600)
    with open(victims["serial"], "w") as f:
        f.write("the host's log\n")
    before = {k: file_facts(victims[k]) for k in ("disk", "serial")}
    ref, image = hostile_snapshot(env, w, victims)

    def untouched(what):
        check({k: file_facts(victims[k]) for k in ("disk", "serial")} == before, f"{what} changed a host file")
        check(not os.path.lexists(victims["socket"]), f"{what} bound {victims['socket']}")

    host = Host(env, w, "hostB")
    copy = os.path.join(host.dir, "vda.img")
    shutil.copy2(image, copy)
    with host.shim() as vm:
        overrides = {}
        steps = [("payload", {"kernel": GUEST}), ("serial", {"mode": "File", "file": vm.serial_path}),
                 ("vsock", {"socket": vm.vsock_path}), ("disks", [{"id": "vda", "path": copy}])]
        for (section, value), named in zip(steps, ("payload", "serial port", "vsock device", "disk vda")):
            status, reply = vm.api("PUT", "vm.restore", restore_body(ref, overrides), timeout=120)
            check(status == 400 and named in reply[0] and "came from a store" in reply[0],
                  f"restore with overrides {sorted(overrides)}: {status} {reply}")
            untouched(f"the restore refused for its {named}")
            overrides[section] = value
        status, reply = vm.api("PUT", "vm.restore", restore_body(ref, overrides), timeout=120)
        check(status == 400 and "disk vda is writable" in reply[0] and "no layer" in reply[0],
              f"a writable disk without a layer: {status} {reply}")
        overrides["disks"][0]["readonly"] = True
        status, reply = vm.api("PUT", "vm.restore", restore_body(ref, overrides), timeout=120)
        check(status == 204, f"restore with every path given: {status} {reply}" + vm.describe())
        conn = connect(vm)
        check(conn.cmd(f"BLKSUM 0 0 {MIB:#x}").startswith("SUM "), "the restored VM cannot read its disk")
        conn.close()
        config = vm.ok("GET", "vm.info")["config"]
        got = (config["payload"]["kernel"], config["serial"]["file"], config["vsock"]["socket"],
               config["disks"][0]["path"], config["disks"][0]["readonly"])
        check(got == (GUEST, vm.serial_path, vm.vsock_path, copy, True), f"the restored VM's paths: {got}")
    untouched("the restored VM")
    pulled_dir = os.path.join(w, "pulled")
    env.pull(ref, pulled_dir, os.path.join(w, "cache"))
    origin_mark = open(os.path.join(pulled_dir, "store-origin")).read().split()
    check(origin_mark == ref.rsplit("/", 1), f"store-origin of the pulled directory: {origin_mark}")
    with host.shim() as vm:
        status, reply = vm.api("PUT", "vm.restore", restore_body("file://" + pulled_dir, {}), timeout=120)
        check(status == 400 and "payload" in reply[0] and "came from a store" in reply[0],
              f"restore of the pulled directory with no overrides: {status} {reply}")
    untouched("the restore of the pulled directory")
    again = env.store([], ["push", pulled_dir, env.nginx.url("store", "pushed-again")])
    manifest = json.load(open(os.path.join(env.nginx.root, "pushed-again", "manifests", again["id"] + ".json")))
    check("store-origin" not in [f["name"] for f in manifest["files"]], f"the mark travelled: {manifest['files']}")
    o = origin(env)
    with host.shim() as vm:
        status, reply = vm.api("PUT", "vm.restore", restore_body(f"{o.http}/{o.id}", {
            "payload": {"kernel": GUEST}, "serial": {"mode": "File", "file": vm.serial_path},
            "vsock": {"socket": vm.vsock_path}, "disks": [{"id": "vda", "path": o.image, "readonly": True}]}))
        check(status == 400 and "disk vda is read-only, but" in reply[0],
              f"a read-only disk over the snapshot's layer: {status} {reply}")


def case_shim_fold_disk_of_a_pulled_snapshot(env):
    """vsnap-compact --fold-disk writes into the base image a snapshot
    records; a pulled one records what the store wrote (here: a file whose
    identity it knows, a copy of the image), so the fold is refused naming
    --image, and with --image it folds into the image given."""
    o = origin(env)
    w = env.scratch("shim-fold-pulled")
    pulled_dir = os.path.join(w, "s1")
    env.pull(f"{o.http}/{o.s1['id']}", pulled_dir, os.path.join(w, "cache"))
    victim, mine = os.path.join(w, "store-named.img"), os.path.join(w, "mine.img")
    shutil.copy2(o.image, victim)
    shutil.copy2(o.image, mine)
    os.chmod(victim, 0o600)
    state_path = os.path.join(pulled_dir, "state.json")
    state = json.load(open(state_path))
    state["devices"]["disks"][0]["base"]["path"] = victim
    write_state_json(state_path, state)
    before = file_facts(victim)
    r = subprocess.run([COMPACT, "--fold-disk", pulled_dir, "vda"], capture_output=True, text=True, timeout=120)
    check(r.returncode == 1 and "came from a store" in r.stderr and "--image" in r.stderr,
          f"--fold-disk of a pulled snapshot into the image it records: {r.returncode} {r.stderr}")
    check(file_facts(victim) == before and not os.path.exists(victim + ".vsnap-fold"),
          "the refused fold touched the image the store named")
    r = subprocess.run([COMPACT, "--fold-disk", pulled_dir, "vda", "--image", mine], capture_output=True,
                       text=True, timeout=120)
    check(r.returncode == 0 and mine in r.stdout, f"--fold-disk --image: {r.returncode} {r.stdout} {r.stderr}")
    check(file_facts(victim) == before, "the fold into --image touched the image the store named")


def edited_store(env, name):
    """A copy, called name, of the nginx store of the origin's snapshots:
    its root and URL."""
    dst = os.path.join(env.nginx.root, name)
    shutil.copytree(os.path.join(env.nginx.root, "shim"), dst)
    return dst, env.nginx.url("store", name)


def edit_manifest(root, snap_id, edit):
    """A manifest is plain JSON: a store can write anything there."""
    path = os.path.join(root, "manifests", snap_id + ".json")
    manifest = json.load(open(path))
    edit(manifest)
    with open(path, "w") as f:
        json.dump(manifest, f)


def case_shim_store_names_no_host_directory(env):
    """The directories a pulled snapshot's state.json names (its memory
    parent, its disks' parent layers) are the pull's own, never the
    store's: a manifest that leaves out a diff's parent, or the snapshots
    a disk continues, is refused naming the snapshot (the store's URL
    would name a directory of this host); a manifest that names a file
    store-origin (the pull's own mark) is refused."""
    o = origin(env)
    w = env.scratch("shim-host-dirs")
    cache = os.path.join(w, "cache")
    root, url = edited_store(env, "no-parent")
    edit_manifest(root, o.id, lambda m: m.pop("parent"))
    r = env.pull(f"{url}/{o.id}", os.path.join(w, "no-parent"), cache, ok=False)
    check("is a diff of" in r.stderr and "names no parent" in r.stderr, f"a diff without its parent: {r.stderr}")
    check(not os.path.exists(os.path.join(w, "no-parent")), "the refused pull left its directory")
    full = o.full_reply["id"]
    root, url = edited_store(env, "no-disk-parents")
    edit_manifest(root, full, lambda m: m.pop("disk_parents"))
    r = env.pull(f"{url}/{full}", os.path.join(w, "no-disk-parents"), cache, ok=False)
    check("disk vda's parent layer" in r.stderr and "none of the snapshots" in r.stderr,
          f"a disk continuing a chain the manifest does not bring: {r.stderr}")
    root, url = edited_store(env, "named-mark")

    def add_mark(m):
        f = dict(next(f for f in m["files"] if f["name"] == "config.json"))
        f["name"] = "store-origin"
        m["files"].append(f)
        m["files"].sort(key=lambda f: f["name"])
    edit_manifest(root, o.s1["id"], add_mark)
    r = env.pull(f"{url}/{o.s1['id']}", os.path.join(w, "named-mark"), cache, ok=False)
    check("names a file store-origin" in r.stderr, f"a manifest naming store-origin: {r.stderr}")
    ok = os.path.join(w, "whole")
    env.pull(f"{o.http}/{full}", ok, cache)
    check(os.path.exists(os.path.join(ok, "store-origin")), "the pull left no mark")


CASES = [case_shim_snapshot_to_store, case_shim_restore_from_store, case_shim_store_errors,
         case_shim_full_snapshot_carries_its_disk_chain, case_shim_pulled_dirs_go_with_the_vm,
         case_shim_store_deadline, case_shim_push_is_a_job, case_shim_store_supplies_no_host_paths,
         case_shim_store_names_no_host_directory, case_shim_fold_disk_of_a_pulled_snapshot]


def case_shim_confined_refuses_store_urls(env):
    """A confined shim answers store URLs with 400 saying why, touches no
    network and stays ready: a vm.restore from a local directory follows."""
    o = origin(env)
    w = env.scratch("shim-confined")
    jail = os.path.join(w, "jail")
    os.makedirs(jail)
    vm = ApiShim(SHIM, workdir=w, name="confined", args=["--confine", f"root={jail},uid=65534,gid=65534"])
    with vm:
        status, reply = vm.api("PUT", "vm.restore", {"source_url": f"{o.http}/{o.id}"})
        check(status == 400 and "confined shim" in reply[0] and "vsnap-store pull" in reply[0],
              f"a confined restore from a store: {status} {reply}")
        status, reply = vm.api("PUT", "vm.snapshot", {"destination_url": o.s3})
        check(status == 400 and "confined shim" in reply[0], f"a confined snapshot to a store: {status} {reply}")
        check(vm.ok("GET", "vmm.ping")["version"], "vmm.ping after the refusals")


CASES.append(case_shim_confined_refuses_store_urls)

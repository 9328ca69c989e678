"""virtvsnapd with a snapshot store, run by test_store.py against the servers
it started (nginx, Ceph's RADOS Gateway): real daemons (each "host" its own
state directory, sockets and cache), real virsh, the test guest with a disk.

- two hosts sharing a store (nginx, S3): host A pushes a memory + disk
  snapshot and its diff child in the background (domjobinfo shows the
  push), host B learns them from A's XML (define, snapshot-create
  --redefine), reverts and runs with A's memory and disk (SUM, BLKSUM);
  a revert on B whose base image is missing is refused by name, the
  running VM untouched; a `cp -a` copy of the image is accepted; B's
  definition with its own image, kernel and serial file: the reverted
  shim runs on those (a snapshot from a store supplies no host path), A's
  files untouched;
- a push in the background: domjobinfo shows it, other operations on the
  domain go on, destroy does not end it; kill -9 of the daemon during it:
  at its next start the push is done again and the manifest is listed;
- a store that is down: the snapshot is taken and the VM runs, the push
  shows as failed;
- a revert on B that pulls slowly (nginx's limit_rate) in copy mode:
  domjobinfo shows the pull and --completed its end, virsh list and
  dominfo answer meanwhile, start and snapshot-delete give up after
  job_wait_timeout naming the revert; nginx killed mid-pull and the daemon killed
  (kill -9) mid-pull each leave B's domain as it was, no job, no snapshot
  half there, and the next revert works; hostile <cookie>s and store URLs
  with credentials are refused at redefine/define without echoing them;
  a host whose cache is smaller than the layers refuses two reverts at
  once naming the cache, and with a larger cache both succeed;
- virsh domjobabort during a revert's pull (the store stalled) and destroy
  during one: each ends the revert within 2 s, aborted, the domain as it
  was (or destroyed), nothing half imported, the next revert works;
  domjobabort of a background push: no manifest, still pending, pushed
  with the next snapshot; domjobabort with no job refused as libvirt does;
- faults, on A's s1 and s2 pushed once (Origin): objects damaged in the
  store (a frame's byte flipped, replaced by another object, truncated),
  a cache and a state directory that run out of space mid-pull, reverts
  racing deletes of the same snapshot and its parent, deletes and an
  undefine while a push runs and others wait behind it, many clients (and
  more calls waiting for a job than there are workers) while a pull and a
  push run. Each refusal names the object, file or snapshot, leaves
  nothing in the cache, no half directory and the domain as it was.

Each case takes the Env of test_store.py (env.nginx, env.rgw, env.s3_env,
STORE through env.store)."""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid as uuidlib

import libvirt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "plugin"))
from disktest import DiskGuest, MIB, disk_domain_xml, make_image  # noqa: E402
from vsnapd import TESTGUEST, Daemon, wait_for  # noqa: E402
from vsnaptest import curl_api  # noqa: E402

MEM_A = (16 * MIB, 48 * MIB)     # filled by the guest at boot (vsnap.fill_mib=48)
MEM_B = (72 * MIB, 16 * MIB)     # filled after the first snapshot
DISK_A = (0, 2 * MIB)
DISK_B = (4 * MIB, 2 * MIB)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Host:
    """One host: a virtvsnapd with its own state, sockets and store cache."""

    def __init__(self, env, name, url=None, hook=None, cache_size="2G", cache=None, state=None,
                 job_wait=None, ca_file=None):
        self.env = env
        self.daemon = Daemon(parent=env.dir)
        if state:
            self.daemon.state = state
        self.cache = cache or os.path.join(self.daemon.dir, "cache")
        self.conf = os.path.join(self.daemon.dir, "virtvsnapd.conf")
        s3 = env.s3_env
        with open(self.conf, "w") as f:
            if job_wait:
                f.write(f"[daemon]\njob_wait_timeout={job_wait}\n")
            f.write("[store]\n" + (f"url={url}\n" if url else "") +
                    f"cache_dir={self.cache}\ncache_size={cache_size}\nconnections=4\nrange_size=4M\n"
                    f"threads=2\n" + (f"ca_file={ca_file}\n" if ca_file else "") +
                    f"[s3]\nendpoint={env.rgw.endpoint}\n"
                    f"region={s3['AWS_REGION']}\naccess_key={s3['AWS_ACCESS_KEY_ID']}\n"
                    f"secret_key={s3['AWS_SECRET_ACCESS_KEY']}\n")
        self.name = name
        self.start(hook)

    def start(self, hook=None):
        self.daemon.start(extra=["--config", self.conf],
                          env={"VSNAPD_TEST_HOOK": hook} if hook else None)

    def v(self, *args, **kw):
        return self.daemon.virsh(*args, **kw)

    def write(self, name, text):
        path = os.path.join(self.daemon.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def guest(self, dom):
        return DiskGuest(os.path.join(self.daemon.state, "run", dom, "vsock.sock"))

    def sums(self, dom):
        g = self.guest(dom)
        try:
            mem = [g.cmd(f"SUM {a:#x} {n:#x}") for a, n in (MEM_A, MEM_B)]
            disk = [g.sum(0, a, n) for a, n in (DISK_A, DISK_B)]
        finally:
            g.close()
        check(all(m.startswith("SUM ") for m in mem), f"SUM: {mem}")
        return mem + disk

    def state(self, dom):
        return self.v("domstate", dom).stdout.strip()

    def jobinfo(self, dom, completed=False):
        out = self.v("domjobinfo", dom, *(["--completed"] if completed else [])).stdout
        return dict((k.strip(), v.strip()) for k, v in
                    (line.split(":", 1) for line in out.splitlines() if ":" in line))

    def wait_push(self, dom, timeout=120):
        """The last push of dom ended; its domjobinfo --completed."""
        info = {}

        def ended():
            nonlocal info
            info = self.jobinfo(dom, completed=True)
            return info.get("Job type") in ("Completed", "Failed") and not self.pending(dom)

        wait_for(ended, timeout=timeout, interval=0.1, what=f"the push of {dom} on {self.name}")
        return info

    def pending(self, dom):
        root = os.path.join(self.daemon.state, "snapshots", dom)
        return [e for e in os.listdir(root) if os.path.exists(os.path.join(root, e, ".push-pending"))]

    def close(self):
        self.daemon.cleanup()


def snapshot_ids(xml):
    """(id, parent, url) of the <vsnap:store> in a snapshot's <cookie>."""
    m = re.search(r"<cookie>\s*<vsnap:store [^>]*url='([^']*)' id='([^']*)'(?: parent='([^']*)')?",
                  xml)
    check(m, f"no <vsnap:store> in the snapshot's cookie:\n{xml}")
    return m.group(2), m.group(3), m.group(1)


def nginx_pids(env):
    """nginx's master and its workers."""
    master = env.nginx.proc.pid
    pids = [master]
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) == master:
                    pids.append(int(entry))
        except (OSError, ValueError, IndexError):
            pass
    return pids


def env_ls(env, url):
    """vsnap-store ls: the complete manifests' ids ([] while there is no
    manifests/ at all)."""
    try:
        return sorted(m["id"] for m in env.store(["--retries", "0"], ["ls", url]) or [])
    except Exception as e:
        if "404" in str(e) or "not found" in str(e).lower() or "No such" in str(e):
            return []
        raise


def domain_on(host, image, dom, uuid, restore_mode=None, store_url=None):
    xml = disk_domain_xml(dom, [(image, "vda")], uuid=uuid, memory_mib=128,
                          cmdline="vsnap.fill_mib=48 vsnap.seed=5", restore_mode=restore_mode)
    if store_url:
        xml = xml.replace("</vsnap:vsnap>", f"<vsnap:store url='{store_url}'/></vsnap:vsnap>") \
            if "<vsnap:vsnap" in xml else xml.replace(
                "<memory", "<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
                f"<vsnap:store url='{store_url}'/></vsnap:vsnap></metadata>\n  <memory", 1)
    host.v("define", host.write(dom + ".xml", xml))


def fill_disk(host, dom, region, seed, flush=True):
    """The guest of dom on host fills region (offset, length) of its first
    disk with seed's pattern, flushed to the host unless flush is False."""
    g = host.guest(dom)
    try:
        g.fill(0, region[0], region[1], seed)
        if flush:
            g.flush(0)
    finally:
        g.close()


def take_two(a, dom):
    """s1 (full memory, first disk layer) and s2 (its diff), each pushed;
    the guest's sums at each."""
    a.v("start", dom)
    fill_disk(a, dom, DISK_A, 31)
    sums = {"s1": a.sums(dom)}
    t0 = time.monotonic()
    a.v("snapshot-create-as", dom, "s1")
    took = time.monotonic() - t0
    check(a.state(dom) == "running", f"after snapshot-create: {a.state(dom)}")
    info = a.wait_push(dom)
    check(info.get("Job type") == "Completed", f"domjobinfo --completed after the push: {info}")
    check(info.get("Operation") == "Snapshot", f"domjobinfo --completed: {info}")
    check(info.get("Data processed") == info.get("Data total") and
          info.get("Data total", "0 B") != "0 B", f"domjobinfo --completed: {info}")
    g = a.guest(dom)
    try:
        g.cmd(f"FILL {MEM_B[0]:#x} {MEM_B[1]:#x} 9")
        g.fill(0, DISK_B[0], DISK_B[1], 33)
        g.flush(0)
    finally:
        g.close()
    sums["s2"] = a.sums(dom)
    a.v("snapshot-create-as", dom, "s2")
    a.wait_push(dom)
    return sums, took


def learn(a, b, dom):
    """B defines dom and its snapshots from A's XML."""
    b.v("define", b.write(dom + ".xml", a.v("dumpxml", "--inactive", dom).stdout))
    ids = {}
    for snap in ("s1", "s2"):
        xml = a.v("snapshot-dumpxml", dom, snap).stdout
        ids[snap] = snapshot_ids(xml)
        b.v("snapshot-create", dom, "--redefine", b.write(snap + ".xml", xml))
        # B shows the same cookie.
        check(snapshot_ids(b.v("snapshot-dumpxml", dom, snap).stdout) == ids[snap],
              f"B's XML of {snap}")
    check(ids["s2"][1] == ids["s1"][0], f"s2's parent layer is not s1's: {ids}")
    return ids


def two_hosts(env, url, restore_mode, per_domain):
    w = env.scratch("daemon-two-hosts")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    dom, uuid = "mover", str(uuidlib.uuid4())
    a = Host(env, "A", url=None if per_domain else url)
    b = None
    try:
        domain_on(a, image, dom, uuid, restore_mode, store_url=url if per_domain else None)
        sums, took = take_two(a, dom)
        for snap in ("s1", "s2"):
            sid = snapshot_ids(a.v("snapshot-dumpxml", dom, snap).stdout)[0]
            check(sid in env_ls(env, url), f"{snap} ({sid}) is not listed in {url}")
        a.v("destroy", dom)
        b = Host(env, "B")
        ids = learn(a, b, dom)
        if per_domain:
            check(f"<vsnap:store url='{url}'/>" in b.v("dumpxml", "--inactive", dom).stdout,
                  "B's dumpxml lost the domain's <vsnap:store>")
        check(not os.path.exists(os.path.join(b.cache, "layers")) or
              not os.listdir(os.path.join(b.cache, "layers")), "B pulled before a revert")
        # s2 is a diff on s1 and is not here yet: s1 cannot be folded into it.
        r = b.v("snapshot-delete", dom, "s1", check=False)
        check(r.returncode != 0 and "'s2' is a diff on it" in r.stderr, f"delete of s1 on B: {r.stderr}")
        # The image on B: a copy with the same identity (cp -a), at the same path.
        shutil.move(image, image + ".A")
        shutil.copy2(image + ".A", image)
        b.v("snapshot-revert", dom, "s2")
        check(b.state(dom) == "running", f"B after revert: {b.state(dom)}")
        check(b.sums(dom) == sums["s2"], f"B's s2: {b.sums(dom)}, A had {sums['s2']}")
        # The base gone: refused by name, the VM runs on.
        pid = b.daemon.shim_pids()[dom]
        os.rename(image, image + ".away")
        r = b.v("snapshot-revert", dom, "s1", check=False)
        check(r.returncode != 0 and image in r.stderr, f"revert without the image: {r.stderr}")
        check(b.daemon.shim_pids().get(dom) == pid and b.state(dom) == "running",
              "the refused revert touched the VM")
        os.rename(image + ".away", image)
        b.v("snapshot-revert", dom, "s1")
        check(b.sums(dom)[0] == sums["s1"][0] and b.sums(dom)[2] == sums["s1"][2],
              f"B's s1: {b.sums(dom)}, A had {sums['s1']}")
        # B's own snapshot on the imported chain (a diff on s1, its disk
        # layer on s1's), reverted to after the guest changed again.
        fill_disk(b, dom, DISK_B, 35)
        here = b.sums(dom)
        b.v("snapshot-create-as", dom, "b1")
        fill_disk(b, dom, DISK_B, 36, flush=False)
        b.v("snapshot-revert", dom, "b1")
        check(b.sums(dom) == here, f"B's own b1: {b.sums(dom)}, want {here}")
        print(f"  snapshot-create returned in {took:.2f} s; pushes and B's reverts checked")
    finally:
        a.close()
        if b:
            b.close()


def case_daemon_two_hosts_http(env):
    """Through nginx, the store the daemon's configuration names; on-demand restore."""
    two_hosts(env, env.nginx.url("store", "daemon-two"), None, per_domain=False)


def case_daemon_https_store(env):
    """[store] url = https://... (nginx's TLS server) and ca_file, its CA:
    snapshot-create-as pushes through TLS in the background (domjobinfo
    --completed: Completed, the manifest listed); a second daemon, its own
    ca_file, learns the snapshot and reverts from the https store, with
    A's memory and disk (SUM, BLKSUM)."""
    url = env.nginx.tls_url("store", "daemon-tls")
    ca = env.nginx.tls.ca
    w = env.scratch("daemon-https")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    dom, uuid = "tls", str(uuidlib.uuid4())
    a = Host(env, "A", url=url, ca_file=ca)
    b = None
    try:
        domain_on(a, image, dom, uuid)
        a.v("start", dom)
        fill_disk(a, dom, DISK_A, 41)
        want = a.sums(dom)
        a.v("snapshot-create-as", dom, "s1")
        info = a.wait_push(dom)
        check(info.get("Job type") == "Completed", f"domjobinfo --completed after the https push: {info}")
        sid = snapshot_ids(a.v("snapshot-dumpxml", dom, "s1").stdout)[0]
        listed = sorted(m["id"] for m in env.store(["--ca-file", ca], ["ls", url]))
        check(listed == [sid], f"ls {url}: {listed}, pushed {sid}")
        a.v("destroy", dom)
        b = Host(env, "B", ca_file=ca)
        b.v("define", b.write(dom + ".xml", a.v("dumpxml", "--inactive", dom).stdout))
        b.v("snapshot-create", dom, "--redefine", b.write("s1.xml", a.v("snapshot-dumpxml", dom, "s1").stdout))
        b.v("snapshot-revert", dom, "s1")
        check(b.state(dom) == "running", f"B after the revert: {b.state(dom)}")
        check(b.sums(dom) == want, f"B's s1 from {url}: {b.sums(dom)}, A had {want}")
    finally:
        a.close()
        if b:
            b.close()


def file_facts(path):
    st = os.stat(path)
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), st.st_mode, st.st_mtime_ns


def case_daemon_store_revert_uses_its_own_paths(env):
    """B learns A's snapshots with its own paths (its definition names
    another image, a `cp -a` copy, another kernel file and another serial
    file than A's) and reverts to one from the store: the shim runs on B's
    files, as vm.info shows (kernel, serial file, disk image, vsock socket
    in B's state), with A's memory and disk; A's image (root's, 0600) and
    serial file stay exactly as they were."""
    url = env.nginx.url("store", "daemon-own-paths")
    w = env.scratch("daemon-own-paths")
    paths = {"A": {"image": make_image(os.path.join(w, "a.img"), 16 * MIB), "kernel": TESTGUEST,
                   "serial": os.path.join(w, "a.log")},
             "B": {"image": os.path.join(w, "b.img"), "kernel": os.path.join(w, "b-kernel"),
                   "serial": os.path.join(w, "b.log")}}
    dom = "own-paths"
    xml = disk_domain_xml(dom, [(paths["A"]["image"], "vda")], memory_mib=128,
                          cmdline="vsnap.fill_mib=48 vsnap.seed=5")
    xml = xml.replace("</devices>", f"<serial type='file'><source path='{paths['A']['serial']}'/></serial>"
                                    "</devices>")
    a = Host(env, "A", url=url)
    b = None
    try:
        a.v("define", a.write(dom + ".xml", xml))
        sums, _ = take_two(a, dom)
        a.v("destroy", dom)
        shutil.copy2(paths["A"]["image"], paths["B"]["image"])
        shutil.copy2(paths["A"]["kernel"], paths["B"]["kernel"])
        os.chmod(paths["A"]["image"], 0o600)
        before = {k: file_facts(paths["A"][k]) for k in ("image", "serial")}

        def on_b(text):
            for k in ("image", "kernel", "serial"):
                text = text.replace(paths["A"][k], paths["B"][k])
            return text
        b = Host(env, "B")
        b.v("define", b.write(dom + ".xml", on_b(a.v("dumpxml", "--inactive", dom).stdout)))
        for snap in ("s1", "s2"):
            b.v("snapshot-create", dom, "--redefine",
                b.write(snap + ".xml", on_b(a.v("snapshot-dumpxml", dom, snap).stdout)))
        b.v("snapshot-revert", dom, "s2")
        check(b.state(dom) == "running", f"B after the revert: {b.state(dom)}")
        check(b.sums(dom) == sums["s2"], f"B's s2: {b.sums(dom)}, A had {sums['s2']}")
        status, info = curl_api(os.path.join(b.daemon.state, "run", dom, "api.sock"), "GET", "vm.info")
        config = info["config"]
        got = {"kernel": config["payload"]["kernel"], "serial": config["serial"]["file"],
               "image": config["disks"][0]["path"]}
        check(status == 200 and got == paths["B"], f"B's shim runs on {got}, not B's {paths['B']}")
        check(config["vsock"]["socket"].startswith(b.daemon.state + "/"),
              f"B's vsock socket: {config['vsock']['socket']}")
        check({k: file_facts(paths["A"][k]) for k in ("image", "serial")} == before,
              "B's revert changed A's image or serial file")
    finally:
        a.close()
        if b:
            b.close()


def case_daemon_two_hosts_s3(env):
    """Through S3 (the RADOS Gateway), the domain's own <vsnap:store>; merge restore."""
    two_hosts(env, "s3://vsnap-test/daemon-two", "merge", per_domain=True)


def case_daemon_push_in_background(env):
    """A push made slow (the test hook sleeps 50 ms a frame): snapshot-create
    returns while it runs, domjobinfo shows it, another snapshot and a
    destroy of the domain go through meanwhile (the push goes on); then the
    daemon is killed (kill -9) in the middle of it. No manifest is listed;
    the next daemon pushes both snapshots, which then verify."""
    w = env.scratch("daemon-kill")
    url = env.nginx.url("store", "daemon-kill")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    a = Host(env, "A", url=url, hook="push-progress:slow")
    try:
        domain_on(a, image, "k", str(uuidlib.uuid4()))
        a.v("start", "k")
        a.guest("k").close()
        t0 = time.monotonic()
        a.v("snapshot-create-as", "k", "p1")
        took = time.monotonic() - t0
        info = {}

        def pushing():
            nonlocal info
            info = a.jobinfo("k")
            return info.get("Job type") == "Bounded" and info.get("Data processed", "0 B") != "0 B"

        wait_for(pushing, timeout=30, interval=0.05, what="domjobinfo to show the push")
        check(info.get("Operation") == "Snapshot" and info.get("Data processed") != info.get("Data total"),
              f"domjobinfo during the push: {info}")
        a.v("snapshot-create-as", "k", "p2")
        a.v("destroy", "k")
        check(a.jobinfo("k").get("Job type") == "Bounded", "destroy ended the push")
        check(a.state("k") == "shut off", f"after destroy: {a.state('k')}")
        pid = a.daemon.proc.pid
        os.kill(pid, signal.SIGKILL)
        a.daemon.proc.wait(timeout=10)
        a.daemon.proc = None
        check(len(a.pending("k")) == 2, f"pushes pending after the kill: {a.pending('k')}")
        check(env_ls(env, url) == [], f"a manifest before the push completed: {env_ls(env, url)}")
        a.start()
        a.wait_push("k")
        ids = sorted(snapshot_ids(a.v("snapshot-dumpxml", "k", s).stdout)[0] for s in ("p1", "p2"))
        check(env_ls(env, url) == ids, f"after the restart: {env_ls(env, url)}, want {ids}")
        env.store([], ["verify", f"{url}/{ids[0]}"])
        env.store([], ["verify", f"{url}/{ids[1]}"])
        # undefine --snapshots-metadata while a push hangs on a store that
        # stopped answering (nginx stopped): undefine waits for the push,
        # holding no lock that readers need; nginx back, the push completes.
        a.v("start", "k")
        a.guest("k").close()
        a.v("snapshot-create-as", "k", "p3")
        p3 = snapshot_ids(a.v("snapshot-dumpxml", "k", "p3").stdout)[0]
        a.v("destroy", "k")
        nginx = stop_nginx_during_push(env, a, pushing)
        try:
            undefine = subprocess.Popen(["virsh", "-q", "-c", a.daemon.uri, "undefine", "k",
                                         "--snapshots-metadata"], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
            t0 = time.monotonic()
            a.v("list", "--all", timeout=10)
            listed = time.monotonic() - t0
            check(undefine.poll() is None, "undefine did not wait for the push under way")
        finally:
            for pid in nginx:
                os.kill(pid, signal.SIGCONT)
        _, err = undefine.communicate(timeout=120)
        check(undefine.returncode == 0, f"undefine during the push: {err}")
        check("k" not in a.v("list", "--all", "--name").stdout.split(), "k is still defined")
        check(p3 in env_ls(env, url), f"the push under way at undefine did not complete: {env_ls(env, url)}")
        print(f"  snapshot-create returned in {took:.2f} s, the push went on; virsh list answered "
              f"in {listed:.2f} s during an undefine waiting for a push")
    finally:
        a.close()


def stop_nginx_during_push(env, a, pushing):
    """nginx stopped (SIGSTOP) while domain k's push is under way; its pids.
    A push can end before domjobinfo shows it, or between that and the stop
    (a loaded machine): then nginx goes on and the push of another snapshot
    is caught instead."""
    for attempt in range(3):
        wait_for(lambda: pushing() or not a.pending("k"), timeout=30, interval=0.05,
                 what="domjobinfo to show the push, or the push to end")
        nginx = nginx_pids(env) if a.pending("k") else []
        for pid in nginx:
            os.kill(pid, signal.SIGSTOP)
        if nginx and a.jobinfo("k").get("Job type") == "Bounded":
            return nginx
        for pid in nginx:
            os.kill(pid, signal.SIGCONT)
        a.v("start", "k")
        a.guest("k").close()
        a.v("snapshot-create-as", "k", f"p3-again{attempt}")
        a.v("destroy", "k")
    raise AssertionError("every push ended before nginx could be stopped under it")


def case_daemon_store_down(env):
    """nginx down: the snapshot is taken and the VM runs; the push shows as
    failed and stays pending; the snapshot reverts, and save/restore to a
    file work as without a store. nginx back: the next snapshot's pushes
    send the failed one too."""
    w = env.scratch("daemon-down")
    url = env.nginx.url("store", "daemon-down")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    a = Host(env, "A", url=url)
    env.nginx.kill()
    try:
        # A store URL of no known form is refused by name at define time.
        bad = a.write("bad.xml", disk_domain_xml("bad", [(image, "vda")]).replace(
            "<memory", "<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
            "<vsnap:store url='ftp://h/x'/></vsnap:vsnap></metadata>\n  <memory", 1))
        r = a.v("define", bad, check=False)
        check(r.returncode != 0 and "ftp://h/x" in r.stderr, f"define with a bad store: {r.stderr}")
        domain_on(a, image, "d", str(uuidlib.uuid4()))
        a.v("start", "d")
        a.guest("d").close()
        a.v("snapshot-create-as", "d", "down1")
        check(a.state("d") == "running", f"after snapshot-create: {a.state('d')}")
        info = {}

        def failed():
            nonlocal info
            info = a.jobinfo("d", completed=True)
            return info.get("Job type") == "Failed"

        wait_for(failed, timeout=90, interval=0.2, what="the push to fail")
        conn = a.daemon.connect()
        stats = conn.lookupByName("d").jobStats(libvirt.VIR_DOMAIN_JOB_STATS_COMPLETED)
        conn.close()
        check(stats.get("type") == libvirt.VIR_DOMAIN_JOB_FAILED and
              "daemon-down" in stats.get("errmsg", ""), f"job stats --completed: {stats}")
        check(len(a.pending("d")) == 1, "the failed push is not pending")
        check("down1" in a.v("snapshot-list", "--name", "d").stdout, "the snapshot is gone")
        a.v("snapshot-revert", "d", "down1")
        check(a.state("d") == "running", f"after a local revert: {a.state('d')}")
        # virsh save FILE stays local, store or not.
        saved = os.path.join(w, "d.save")
        a.v("save", "d", saved)
        a.v("restore", saved)
        check(a.state("d") == "running", f"after save and restore: {a.state('d')}")
        check("failed" in a.daemon.log(), "the failure is not logged")
        env.nginx.start()
        a.v("snapshot-create-as", "d", "down2")
        a.wait_push("d")
        ids = {snapshot_ids(a.v("snapshot-dumpxml", "d", s).stdout)[0] for s in ("down1", "down2")}
        # down2 is a full snapshot (the restore above began a new memory
        # chain) whose disks continue the save's layers: those travel too.
        check(ids <= set(env_ls(env, url)), f"after nginx came back: {env_ls(env, url)}, want {ids}")
    finally:
        if env.nginx.proc.poll() is not None:
            env.nginx.start()
        a.close()


SECRET = "pw-not-to-show-4711"


def hostile_cookies(host, dom, xml, url, image):
    """Redefines whose <cookie> is not one a host writes, and store URLs
    carrying credentials: each refused by name (a credential never echoed),
    nothing left defined, the daemon answering."""
    m = re.search(r"<cookie>.*?</cookie>", xml, re.S)
    check(m, "no <cookie> in the snapshot XML")
    cookie = m.group(0)
    creds = url.replace("http://", f"http://user:{SECRET}@")
    deep = "<x>" * 5000 + "</x>" * 5000
    cases = [
        (cookie.replace(url, "ftp://h/x"), "ftp://h/x"),
        (cookie.replace(url, ""), "empty"),
        (cookie.replace(url, creds), "credentials"),
        (re.sub(r"id='[^']*'", "id='../../../etc'", cookie, count=1), "../../../etc"),
        (cookie.replace("</cookie>", "<other xmlns='urn:x'/></cookie>"), "other"),
        (cookie.replace("</cookie>", deep + "</cookie>"), ""),
        (cookie.replace("/>", ">" + deep + "</vsnap:store>", 1), ""),
    ]
    for i, (bad, named) in enumerate(cases):
        r = host.v("snapshot-create", dom, "--redefine",
                   host.write(f"hostile{i}.xml", xml.replace(cookie, bad)), check=False)
        check(r.returncode != 0 and named in r.stderr and SECRET not in r.stderr,
              f"hostile cookie {i}: {r.returncode} {r.stderr[:500]}")
    check(host.v("snapshot-list", "--name", dom).stdout.strip() == "",
          f"a hostile redefine left a snapshot: {host.v('snapshot-list', '--name', dom).stdout}")
    bad = disk_domain_xml("creds", [(image, "vda")]).replace(
        "<memory", "<metadata><vsnap:vsnap xmlns:vsnap='urn:vsnap:domain:1'>"
        f"<vsnap:store url='{creds}'/></vsnap:vsnap></metadata>\n  <memory", 1)
    r = host.v("define", host.write("creds.xml", bad), check=False)
    check(r.returncode != 0 and "credentials" in r.stderr and SECRET not in r.stderr,
          f"define with credentials in its store URL: {r.stderr}")
    log = host.daemon.log()
    check(SECRET not in log and host.env.s3_env["AWS_SECRET_ACCESS_KEY"] not in log,
          "a credential in the daemon's log")


def background_revert(host, dom, snap):
    """virsh snapshot-revert, not waited for."""
    return subprocess.Popen(["virsh", "-q", "-c", host.daemon.uri, "snapshot-revert", dom, snap],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_pulling(host, dom):
    """domjobinfo shows the pull under way, some bytes in; its figures."""
    info = {}

    def pulling():
        nonlocal info
        info = host.jobinfo(dom)
        return info.get("Job type") == "Bounded" and \
            float(info.get("Data processed", "0 B").split()[0]) > 0

    wait_for(pulling, timeout=30, interval=0.05, what=f"domjobinfo to show the pull on {host.name}")
    check(info.get("Operation") == "Snapshot revert" and
          info.get("Data processed") != info.get("Data total"), f"domjobinfo during the pull: {info}")
    return info


def check_untouched(host, dom):
    """B's domain as before the revert: shut off, no job, no snapshot files here."""
    check(host.state(dom) == "shut off", f"{dom} after the cut-short revert: {host.state(dom)}")
    check(host.jobinfo(dom).get("Job type") == "None", f"a job left: {host.jobinfo(dom)}")
    root = os.path.join(host.daemon.state, "snapshots", dom)
    imported = [d for d, _, files in os.walk(root) if "state.json" in files]
    check(not imported, f"a half-imported snapshot: {imported}")


JOB_WAIT_S = 2   # B's job_wait_timeout in case_daemon_pull_at_revert


def job_calls_time_out(host, dom):
    """Calls that need the job the pulling revert holds give up after
    job_wait_timeout naming the revert; the longest wait."""
    waited = 0.0
    for args in (("start", dom), ("snapshot-delete", dom, "s1")):
        t0 = time.monotonic()
        r = host.v(*args, check=False, timeout=30)
        took = time.monotonic() - t0
        check(r.returncode != 0 and "Timed out during operation: cannot acquire state change lock "
              "(held by snapshot-revert" in r.stderr, f"virsh {args[0]} during the pull: {r.stderr}")
        check(JOB_WAIT_S - 0.2 <= took < JOB_WAIT_S + 1.5,
              f"virsh {args[0]} gave up after {took:.2f} s (job_wait_timeout={JOB_WAIT_S})")
        waited = max(waited, took)
    return waited


def snapshot_on_a(a, image, dom, seed):
    """On host A: dom (copy restores) runs, its guest writes the disk, s1 is
    taken and pushed, then dom is destroyed; (A's sums, s1's XML)."""
    domain_on(a, image, dom, str(uuidlib.uuid4()), restore_mode="copy")
    a.v("start", dom)
    fill_disk(a, dom, DISK_A, seed)
    want = a.sums(dom)
    a.v("snapshot-create-as", dom, "s1")
    check(a.wait_push(dom).get("Job type") == "Completed", "A's push")
    xml = a.v("snapshot-dumpxml", dom, "s1").stdout
    a.v("destroy", dom)
    return want, xml


def case_daemon_pull_at_revert(env):
    """B reverts (copy mode) to A's snapshot through a slow URL (nginx's
    limit_rate over the same store tree): the pull shows in domjobinfo,
    virsh list and dominfo answer quickly during it (no lock held across the
    transfer); nginx killed mid-pull: a clean error naming the store, B's
    domain as it was, no job left; B's daemon killed (kill -9) mid-pull: at
    its restart likewise, and the revert then completes with A's memory and
    disk; domjobinfo --completed shows the pull's end."""
    w = env.scratch("daemon-pull")
    url = env.nginx.url("store", "daemon-pull")
    slow = env.nginx.url("rate-1500k", "daemon-pull")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    dom = "puller"
    a = Host(env, "A", url=url)
    b = None
    try:
        want, xml = snapshot_on_a(a, image, dom, 41)
        check(url in xml, f"A's snapshot XML names no {url}")
        b = Host(env, "B", job_wait=JOB_WAIT_S)
        b.v("define", b.write(dom + ".xml", a.v("dumpxml", "--inactive", dom).stdout))
        hostile_cookies(b, dom, xml, url, image)
        b.v("snapshot-create", dom, "--redefine", b.write("s1.xml", xml.replace(url, slow)))

        # nginx gone mid-pull.
        p = background_revert(b, dom, "s1")
        wait_pulling(b, dom)
        env.nginx.kill()
        try:
            _, err = p.communicate(timeout=120)
        finally:
            env.nginx.start()
        check(p.returncode != 0 and "daemon-pull" in err and "s1" in err,
              f"revert with nginx killed mid-pull: {err}")
        check_untouched(b, dom)
        failed = b.jobinfo(dom, completed=True)
        check(failed.get("Job type") == "Failed", f"domjobinfo --completed after the failed pull: {failed}")

        # B's daemon killed mid-pull.
        p = background_revert(b, dom, "s1")
        wait_pulling(b, dom)
        b.daemon.proc.kill()
        b.daemon.proc.wait(timeout=10)
        b.daemon.proc = None
        p.communicate(timeout=30)
        check(p.returncode != 0, "the revert succeeded with its daemon killed")
        b.start()
        check_untouched(b, dom)

        # The revert that completes; other clients are answered meanwhile.
        p = background_revert(b, dom, "s1")
        during = wait_pulling(b, dom)
        slowest = 0.0
        for args in (("list", "--all"), ("dominfo", dom), ("snapshot-list", dom)):
            t0 = time.monotonic()
            b.v(*args, timeout=10)
            slowest = max(slowest, time.monotonic() - t0)
        check(slowest < 3, f"virsh took {slowest:.1f} s during the pull")
        waited = job_calls_time_out(b, dom)
        check(b.jobinfo(dom).get("Job type") == "Bounded", "the pull ended before the checks did "
              "(the slow URL is too fast to show a lock)")
        _, err = p.communicate(timeout=120)
        check(p.returncode == 0, f"the revert on B: {err}")
        check(b.state(dom) == "running", f"B after the revert: {b.state(dom)}")
        check(b.sums(dom) == want, f"B's s1 in copy mode: {b.sums(dom)}, A had {want}")
        done = b.jobinfo(dom, completed=True)
        check(done.get("Job type") == "Completed" and done.get("Operation") == "Snapshot revert" and
              done.get("Data processed") == done.get("Data total") == during.get("Data total"),
              f"domjobinfo --completed after the pull: {done} (during it: {during})")
        b.v("suspend", dom, timeout=30)   # the job is free again
        b.v("resume", dom, timeout=30)
        print(f"  during the pull: {during.get('Data processed')} of {during.get('Data total')}, "
              f"virsh answered in {slowest:.2f} s at most; start and snapshot-delete gave up "
              f"after {waited:.2f} s at most")
        b.close()
        b = None
        small_cache_two_clients(env, a, dom, xml, want)
    finally:
        if env.nginx.proc.poll() is not None:
            env.nginx.start()
        a.close()
        if b:
            b.close()


def small_cache_two_clients(env, a, dom, xml, want):
    """Host C, its cache smaller than the snapshot's layers: two clients
    revert at once and both are refused naming the cache, nothing half
    there; with a cache large enough, two at once both succeed (one pulls)."""
    c = Host(env, "C", cache_size="1M")
    try:
        c.v("define", c.write(dom + ".xml", a.v("dumpxml", "--inactive", dom).stdout))
        c.v("snapshot-create", dom, "--redefine", c.write("s1.xml", xml))
        for expect_ok in (False, True):
            ps = [background_revert(c, dom, "s1") for _ in range(2)]
            outs = [p.communicate(timeout=120)[1] for p in ps]
            rcs = [p.returncode for p in ps]
            if not expect_ok:
                check(all(rc != 0 and "cache" in err for rc, err in zip(rcs, outs)),
                      f"reverts with a 1 MiB cache: {rcs} {outs}")
                check_untouched(c, dom)
                with open(c.conf) as f:
                    conf = f.read().replace("cache_size=1M", "cache_size=2G")
                with open(c.conf, "w") as f:
                    f.write(conf)
                c.daemon.stop()
                c.start()
            else:
                check(rcs == [0, 0], f"two reverts at once: {rcs} {outs}")
        check(c.state(dom) == "running" and c.sums(dom) == want, f"C's s1: {c.sums(dom)}, want {want}")
    finally:
        c.close()


def check_nothing_half(host, dom):
    """No partial directory of B's snapshots, no import in progress in its cache."""
    root = os.path.join(host.daemon.state, "snapshots", dom)
    partial = [n for _, dirs, files in os.walk(root) for n in dirs + files if ".partial-" in n]
    check(not partial, f"partial directories left: {partial}")
    tmp = os.path.join(host.cache, "tmp")
    check(not os.path.isdir(tmp) or not os.listdir(tmp), f"imports left in the cache: {os.listdir(tmp)}")


def revert_ended(p, started, what):
    """The background revert p ended with an abort naming s1 within 2 s of started."""
    _, err = p.communicate(timeout=60)
    took = time.monotonic() - started
    check(p.returncode != 0 and "operation aborted" in err and "'s1'" in err,
          f"revert after {what}: {p.returncode} {err}")
    check(took < 2, f"the revert took {took:.2f} s to end after {what}")
    return took, err


def case_daemon_abort_revert_pull(env):
    """B runs its own VM and reverts to A's snapshot through a slow URL: virsh
    domjobabort during the pull, with the store stalled (nginx stopped), ends
    the revert within 2 s with "operation aborted" naming the snapshot; the
    old VM runs on (same shim), no job, domjobinfo --completed Cancelled,
    nothing half imported. virsh destroy during the next pull returns within
    2 s, the revert aborted and the domain stays shut off (the snapshot's VM
    never starts after it). The revert after that completes with A's sums."""
    w = env.scratch("daemon-abort-pull")
    url = env.nginx.url("store", "daemon-abort-pull")
    slow = env.nginx.url("rate-1500k", "daemon-abort-pull")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    dom = "aborter"
    a = Host(env, "A", url=url)
    b = None
    try:
        want, xml = snapshot_on_a(a, image, dom, 43)
        b = Host(env, "B")
        b.v("define", b.write(dom + ".xml", a.v("dumpxml", "--inactive", dom).stdout))
        b.v("snapshot-create", dom, "--redefine", b.write("s1.xml", xml.replace(url, slow)))
        b.v("start", dom)
        b.guest(dom).close()
        pid = b.daemon.shim_pids()[dom]

        # domjobabort with the store stalled mid-pull.
        p = background_revert(b, dom, "s1")
        wait_pulling(b, dom)
        nginx = nginx_pids(env)
        for n in nginx:
            os.kill(n, signal.SIGSTOP)
        try:
            time.sleep(0.5)   # the transfers wait for a silent server
            t0 = time.monotonic()
            b.v("domjobabort", dom, timeout=10)
            aborted = time.monotonic() - t0
            took, err = revert_ended(p, t0, "domjobabort")
        finally:
            for n in nginx:
                os.kill(n, signal.SIGCONT)
        check(b.state(dom) == "running" and b.daemon.shim_pids().get(dom) == pid,
              f"the aborted revert touched the VM: {b.state(dom)}, {b.daemon.shim_pids()}")
        check(b.jobinfo(dom).get("Job type") == "None", f"a job left: {b.jobinfo(dom)}")
        done = b.jobinfo(dom, completed=True)
        check(done.get("Job type") == "Cancelled" and done.get("Operation") == "Snapshot revert",
              f"domjobinfo --completed after domjobabort: {done}")
        root = os.path.join(b.daemon.state, "snapshots", dom)
        check(not [d for d, _, files in os.walk(root) if "state.json" in files],
              "a snapshot half imported")
        check_nothing_half(b, dom)
        r = b.v("domjobabort", dom, check=False)
        check(r.returncode != 0 and "no job is active" in r.stderr, f"domjobabort with no job: {r.stderr}")

        # destroy during the pull.
        p = background_revert(b, dom, "s1")
        wait_pulling(b, dom)
        t0 = time.monotonic()
        b.v("destroy", dom, timeout=30)
        destroyed = time.monotonic() - t0
        check(destroyed < 2, f"destroy took {destroyed:.2f} s during the pull")
        _, err = revert_ended(p, t0, "destroy")
        check("destroyed" in err, f"the revert's error does not say the domain was destroyed: {err}")
        time.sleep(1)   # a revert that went on would start its VM about now
        check(b.state(dom) == "shut off", f"after destroy during the revert: {b.state(dom)}")
        check(b.jobinfo(dom, completed=True).get("Job type") == "Cancelled",
              f"domjobinfo --completed after destroy: {b.jobinfo(dom, completed=True)}")
        check_nothing_half(b, dom)

        # The next revert completes.
        p = background_revert(b, dom, "s1")
        _, err = p.communicate(timeout=180)
        check(p.returncode == 0, f"the revert after the aborted ones: {err}")
        check(b.state(dom) == "running" and b.sums(dom) == want,
              f"B's s1 after the aborts: {b.sums(dom)}, A had {want}")
        print(f"  domjobabort returned in {aborted:.2f} s with the store stalled, the revert "
              f"ended {took:.2f} s after it was asked; destroy returned in {destroyed:.2f} s")
    finally:
        a.close()
        if b:
            b.close()


def case_daemon_abort_push(env):
    """virsh domjobabort during a background push (made slow by the test
    hook) returns within 2 s; no job then, domjobinfo --completed Cancelled,
    the store lists no manifest, the snapshot stays pending; the next
    snapshot pushes both, which then verify. domjobabort on a read-only
    connection is refused (the push goes on); with no job it is libvirt's
    "no job is active" (VIR_ERR_OPERATION_INVALID)."""
    w = env.scratch("daemon-abort-push")
    url = env.nginx.url("store", "daemon-abort-push")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    a = Host(env, "A", url=url, hook="push-progress:slow")
    try:
        domain_on(a, image, "ab", str(uuidlib.uuid4()))
        conn = a.daemon.connect()
        try:
            conn.lookupByName("ab").abortJob()
            check(False, "abortJob with no job succeeded")
        except libvirt.libvirtError as e:
            check(e.get_error_code() == libvirt.VIR_ERR_OPERATION_INVALID and
                  "no job is active" in str(e), f"abortJob with no job: {e}")
        a.v("start", "ab")
        a.guest("ab").close()
        a.v("snapshot-create-as", "ab", "p1")
        p1 = snapshot_ids(a.v("snapshot-dumpxml", "ab", "p1").stdout)[0]

        def pushing():
            info = a.jobinfo("ab")
            return info.get("Job type") == "Bounded" and info.get("Data processed", "0 B") != "0 B"

        wait_for(pushing, timeout=30, interval=0.05, what="domjobinfo to show the push")
        ro = subprocess.run(["virsh", "-q", "-c", a.daemon.ro_uri, "domjobabort", "ab"],
                            capture_output=True, text=True, timeout=30)
        check(ro.returncode != 0 and "read-only" in ro.stderr and
              a.jobinfo("ab").get("Job type") == "Bounded",
              f"domjobabort on a read-only connection: {ro.returncode} {ro.stderr}")
        t0 = time.monotonic()
        a.v("domjobabort", "ab", timeout=10)
        aborted = time.monotonic() - t0
        check(aborted < 2, f"domjobabort of the push took {aborted:.2f} s")
        check(a.jobinfo("ab").get("Job type") == "None", f"a job after domjobabort: {a.jobinfo('ab')}")
        done = a.jobinfo("ab", completed=True)
        check(done.get("Job type") == "Cancelled" and done.get("Operation") == "Snapshot",
              f"domjobinfo --completed after domjobabort: {done}")
        check(env_ls(env, url) == [], f"a manifest of the aborted push: {env_ls(env, url)}")
        check(len(a.pending("ab")) == 1, f"the aborted push is not pending: {a.pending('ab')}")
        check(a.state("ab") == "running", f"after domjobabort: {a.state('ab')}")
        try:
            conn.lookupByName("ab").abortJobFlags(0)
            check(False, "abortJobFlags with no job succeeded")
        except libvirt.libvirtError as e:
            check(e.get_error_code() == libvirt.VIR_ERR_OPERATION_INVALID, f"abortJobFlags: {e}")
        conn.close()
        a.v("snapshot-create-as", "ab", "p2")
        p2 = snapshot_ids(a.v("snapshot-dumpxml", "ab", "p2").stdout)[0]
        check(a.wait_push("ab", timeout=180).get("Job type") == "Completed", "the pushes after the abort")
        check(sorted(env_ls(env, url)) == sorted([p1, p2]), f"after p2: {env_ls(env, url)}")
        env.store([], ["verify", f"{url}/{p1}"])
        print(f"  domjobabort of the push returned in {aborted:.2f} s; p1 pushed again with p2")
    finally:
        a.close()


def case_daemon_two_hosts_file(env):
    """Through a file:// store (a directory both hosts see); copy restore."""
    two_hosts(env, "file://" + env.scratch("daemon-file-store"), "copy", per_domain=False)


# --- faults: hostile tests of the daemon's store paths ---------------------------

FAULTS_DOM = "faulty"


class Origin:
    """Host A's snapshots s1 (full) and s2 (its diff), pushed once to an nginx
    prefix of their own and shared by the fault cases: the domain's inactive
    XML, each snapshot's XML, the guest's sums at each, the layer ids."""

    def __init__(self, env):
        self.w = env.scratch("daemon-faults")
        self.prefix = "daemon-faults"
        self.url = env.nginx.url("store", self.prefix)
        self.root = os.path.join(env.nginx.root, self.prefix)
        self.image = make_image(os.path.join(self.w, "root.img"), 16 * MIB)
        a = Host(env, "A", url=self.url)
        try:
            domain_on(a, self.image, FAULTS_DOM, str(uuidlib.uuid4()))
            self.sums, _ = take_two(a, FAULTS_DOM)
            a.v("destroy", FAULTS_DOM)
            self.domain_xml = a.v("dumpxml", "--inactive", FAULTS_DOM).stdout
            self.xml = {s: a.v("snapshot-dumpxml", FAULTS_DOM, s).stdout for s in ("s1", "s2")}
        finally:
            a.close()
        self.ids = {s: snapshot_ids(x)[0] for s, x in self.xml.items()}
        shutil.copy2(self.image, self.image + ".pristine")
        # The daemon's own metadata does not travel; the files come in name order.
        for snap in ("s1", "s2"):
            names = [f["name"] for f in self.manifest(snap)["files"]]
            check(names == sorted(names) and not {"snapshot.ini", "domain.xml"} & set(names),
                  f"{snap}'s manifest names {names}")

    def restore_image(self):
        """The base image as A left it (the identity its layers recorded:
        size, mtime, crc32c), after a host folded its disks back into it."""
        shutil.copy2(self.image + ".pristine", self.image)

    def manifest(self, snap):
        with open(os.path.join(self.root, "manifests", self.ids[snap] + ".json")) as f:
            return json.load(f)

    def object_path(self, snap, name):
        """The object of snap's file name (memory-ranges, a disk layer...)."""
        for f in self.manifest(snap)["files"]:
            if f["name"] == name:
                return os.path.join(self.root, "objects", f["sha256"] + ".zst")
        raise AssertionError(f"{snap}'s manifest has no {name}")

    def learn(self, host, snaps=("s1", "s2"), url=None):
        """host defines the domain (once) and the snapshots from A's XML;
        url: another URL of the same store (a slow one)."""
        if FAULTS_DOM not in host.v("list", "--all", "--name").stdout.split():
            host.v("define", host.write(FAULTS_DOM + ".xml", self.domain_xml))
        for snap in snaps:
            xml = self.xml[snap] if not url else self.xml[snap].replace(self.url, url)
            host.v("snapshot-create", FAULTS_DOM, "--redefine", host.write(snap + ".xml", xml))


def origin(env):
    """The Origin of this run, made at the first fault case that needs it."""
    if getattr(env, "faults_origin", None) is None:
        env.faults_origin = Origin(env)
    return env.faults_origin


def cache_files(cache):
    """Every file of a store cache (relative paths) but its lock files
    (lock, locks/: empty files, flock'ed, which stay by design: removing one
    could let two processes hold "the" lock at once)."""
    out = set()
    for d, _, files in os.walk(cache):
        out.update(os.path.relpath(os.path.join(d, f), cache) for f in files)
    return {f for f in out if f != "lock" and not f.startswith("locks/")}


def snapshot_dirs(host, dom):
    """B's snapshot directories of dom: {dir name: files in it}."""
    root = os.path.join(host.daemon.state, "snapshots", dom)
    if not os.path.isdir(root):
        return {}
    return {e: sorted(os.listdir(os.path.join(root, e))) for e in os.listdir(root)
            if os.path.isdir(os.path.join(root, e))}


def check_no_half_dirs(host, dom):
    """No partial directory; every snapshot directory is one the daemon lists
    (its snapshot.ini there) and holds either all of a snapshot's files or
    only its metadata (learnt, not imported)."""
    dirs = snapshot_dirs(host, dom)
    partial = [d for d in dirs if ".partial" in d or d.startswith(".")]
    check(not partial, f"partial directories of {dom}: {partial}")
    for d, files in dirs.items():
        check("snapshot.ini" in files, f"snapshot directory {d} without its metadata: {files}")
        layers = [f for f in files if f not in ("snapshot.ini", "domain.xml", ".push-pending")]
        check(not layers or "state.json" in layers, f"snapshot directory {d} half there: {files}")
    n = len(host.v("snapshot-list", "--name", dom).stdout.split())
    check(n == len(dirs), f"{len(dirs)} snapshot directories for {n} snapshots: {dirs}")


def leftover_partial(host):
    """The partial directory of an import under way (or cut short by a
    crash) holding everything of s1, a snapshot.ini too (as a store whose
    manifests carried a host's metadata brings): never listed as a snapshot,
    and removed at the daemon's next start."""
    root = os.path.join(host.daemon.state, "snapshots", FAULTS_DOM)
    s1 = next(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)) and
              "name=s1" in open(os.path.join(root, d, "snapshot.ini")).read())
    partial = os.path.join(root, f".{s1}.partial-Ab12Cd")
    shutil.copytree(os.path.join(root, s1), partial)
    names = sorted(host.v("snapshot-list", "--name", FAULTS_DOM).stdout.split())
    check(names == ["s1", "s2"], f"snapshot-list with a partial directory there: {names}")
    host.daemon.stop()
    host.start()
    # (the daemon recovers its domains once it listens)
    wait_for(lambda: not os.path.exists(partial), timeout=10, what="the partial directory to go")
    check_no_half_dirs(host, FAULTS_DOM)


def case_daemon_corrupt_object(env):
    """Objects of s2 (a diff, learnt by host B, whose VM runs s1) damaged in
    the store: a byte flipped inside a frame, the object replaced by another
    valid object (s1's), the object truncated, the manifest replaced by s1's. Each revert to s2 fails naming
    the snapshot and the object; B's VM is the same process, running s1;
    nothing enters B's cache; no half snapshot directory. The good object
    back: the revert works and the guest has A's s2. (And leftover_partial.)"""
    o = origin(env)
    b = Host(env, "B")
    try:
        o.learn(b)
        b.v("snapshot-revert", FAULTS_DOM, "s1")
        check(b.sums(FAULTS_DOM) == o.sums["s1"], "B's s1")
        pid = b.daemon.shim_pids()[FAULTS_DOM]
        mem = o.object_path("s2", "memory-ranges")
        disk = o.object_path("s2", next(f["name"] for f in o.manifest("s2")["files"]
                                        if f["name"].startswith("disk-")))
        manifest = os.path.join(o.root, "manifests", o.ids["s2"] + ".json")
        good = {p: open(p, "rb").read() for p in (mem, disk, manifest)}
        other = open(o.object_path("s1", "memory-ranges"), "rb").read()
        name = {p: os.path.basename(p)[:-4] for p in (mem, disk)}
        name[manifest] = o.ids["s2"]

        def flipped(data):
            at = len(data) // 3   # inside a frame: the seek table is at the end
            return data[:at] + bytes([data[at] ^ 0x5a]) + data[at + 1:]

        cache_before = cache_files(b.cache)
        damages = [("memory layer flipped", mem, flipped(good[mem])),
                   ("disk layer flipped", disk, flipped(good[disk])),
                   ("replaced by s1's", mem, other),
                   ("truncated", mem, good[mem][:-4096]),
                   ("manifest replaced by s1's", manifest,
                    open(os.path.join(o.root, "manifests", o.ids["s1"] + ".json"), "rb").read())]
        try:
            for what, obj, bad in damages:
                with open(obj, "wb") as f:
                    f.write(bad)
                t0 = time.monotonic()
                r = b.v("snapshot-revert", FAULTS_DOM, "s2", check=False, timeout=60)
                with open(obj, "wb") as f:
                    f.write(good[obj])
                print(f"  {what}: refused in {time.monotonic() - t0:.2f} s: "
                      f"{r.stderr.strip().splitlines()[-1]}")
                check(r.returncode != 0 and "'s2'" in r.stderr and name[obj] in r.stderr,
                      f"revert with the object {what}: {r.returncode} {r.stderr}")
                check(b.daemon.shim_pids().get(FAULTS_DOM) == pid and b.state(FAULTS_DOM) == "running",
                      f"the refused revert ({what}) touched the VM")
                check(b.jobinfo(FAULTS_DOM).get("Job type") == "None", f"a job left ({what})")
                added = cache_files(b.cache) - cache_before
                check(not added, f"the failed pull ({what}) left in B's cache: {sorted(added)}")
                check_no_half_dirs(b, FAULTS_DOM)
        finally:
            for p, data in good.items():
                with open(p, "wb") as f:
                    f.write(data)
        check(b.sums(FAULTS_DOM) == o.sums["s1"], "B's VM changed after the refused reverts")
        b.v("snapshot-revert", FAULTS_DOM, "s2")
        check(b.sums(FAULTS_DOM) == o.sums["s2"], f"B's s2 after the repair: {b.sums(FAULTS_DOM)}")
        check_no_half_dirs(b, FAULTS_DOM)
        leftover_partial(b)
    finally:
        b.close()


def mount_tmpfs(path, size):
    os.makedirs(path, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], check=True,
                   capture_output=True, timeout=30)


def resize_tmpfs(path, free_bytes):
    """The tmpfs at path resized to leave free_bytes free (page granular)."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    subprocess.run(["mount", "-o", f"remount,size={used + free_bytes}", path], check=True,
                   capture_output=True, timeout=30)


def umount_when_free(path, pids):
    """umount path once the processes that had files there (shims killed by
    Host.close) are gone."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
        time.sleep(0.05)
    subprocess.run(["umount", path], check=True, capture_output=True, timeout=30)


def case_daemon_cache_disk_full(env):
    """Host B's cache and state directory each on a small tmpfs of its own;
    reverts to s1 that run out of space: in the cache at the memory layer
    (4 MiB free), in the cache after s1's disk layer is in (the memory layer
    one page short), in the state directory (a snapshot file two pages
    short). Each fails saying there is no space and naming the file system's
    file (the cache's, the snapshot's), leaves nothing in the cache and no
    partial directory, and the domain shut off as it was; with room, the
    revert works."""
    o = origin(env)
    manifest = o.manifest("s1")["files"]
    files = {f["name"]: f["size"] for f in manifest}
    order = [f["name"] for f in manifest]
    layers = [n for n in order if n == "memory-ranges" or n.startswith("disk-")]
    check(len(layers) == 2, f"s1's files: {order}")
    pages = {n: (files[n] + 4095) // 4096 for n in layers}
    w = env.scratch("daemon-enospc")
    cache_fs, state_fs = os.path.join(w, "small"), os.path.join(w, "state", "small")
    mount_tmpfs(cache_fs, "4m")
    mount_tmpfs(state_fs, "4m")
    b, pids = None, []
    try:
        b = Host(env, "B", cache=os.path.join(cache_fs, "cache"), state=os.path.join(state_fs, "state"))
        o.learn(b, snaps=("s1",))
        plenty = sum(files.values()) + (64 << 20)
        digest = {n: os.path.basename(o.object_path("s1", n))[:-4] for n in layers}
        # The layers come in the manifest's order: the second one short of a page.
        runs = [("cache: 4 MiB", 4 << 20, plenty, f"allocate {b.cache}/tmp/{digest['memory-ranges']}"),
                (f"cache: {layers[1]} after {layers[0]}", (pages[layers[0]] + pages[layers[1]] - 1) * 4096,
                 plenty, f"allocate {b.cache}/tmp/{digest[layers[1]]}"),
                ("state: 2 pages", plenty, 2 * 4096,
                 os.path.join(b.daemon.state, "snapshots", FAULTS_DOM) + "/")]
        for what, cache_free, state_free, says in runs:
            resize_tmpfs(cache_fs, cache_free)
            resize_tmpfs(state_fs, state_free)
            t0 = time.monotonic()
            r = b.v("snapshot-revert", FAULTS_DOM, "s1", check=False, timeout=60)
            err = r.stderr.strip().splitlines()
            print(f"  {what}: refused in {time.monotonic() - t0:.2f} s: {err[-1] if err else r.returncode}")
            check(r.returncode != 0 and "No space left" in r.stderr and says in r.stderr and
                  "'s1'" in r.stderr, f"revert with no space ({what}): {r.stderr}")
            check_untouched(b, FAULTS_DOM)
            check_no_half_dirs(b, FAULTS_DOM)
            check(not cache_files(b.cache), f"the cache after ENOSPC ({what}): {sorted(cache_files(b.cache))}")
        resize_tmpfs(cache_fs, plenty)
        resize_tmpfs(state_fs, plenty)
        b.v("snapshot-revert", FAULTS_DOM, "s1")
        check(b.sums(FAULTS_DOM) == o.sums["s1"], f"B's s1 once there is room: {b.sums(FAULTS_DOM)}")
    finally:
        if b:
            pids = list(b.daemon.shim_pids().values())
            b.close()
        umount_when_free(cache_fs, pids)
        umount_when_free(state_fs, pids)


def timed_virsh(host, *args, timeout=10):
    t0 = time.monotonic()
    host.v(*args, timeout=timeout)
    return time.monotonic() - t0


def background_virsh(host, *args):
    return subprocess.Popen(["virsh", "-q", "-c", host.daemon.uri] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def push_then_queue(host, dom, first, *queued):
    """Snapshot first (its push slowed by the test hook), then the others
    (their pushes queued behind it); their manifest ids, the first push
    still under way."""
    host.v("snapshot-create-as", dom, first)
    wait_for(lambda: host.jobinfo(dom).get("Job type") == "Bounded", timeout=30, interval=0.05,
             what=f"the push of {first}")
    for snap in queued:
        host.v("snapshot-create-as", dom, snap)
    check(host.jobinfo(dom).get("Job type") == "Bounded", f"{first}'s push ended before the others queued")
    return [snapshot_ids(host.v("snapshot-dumpxml", dom, s).stdout)[0] for s in (first,) + queued]


def while_waiting(host, proc, what):
    """proc (a virsh waiting for the push under way) has not ended; other
    clients are answered meanwhile: the slowest answer's seconds."""
    slowest = max(timed_virsh(host, *args) for args in
                  (("list", "--all"), ("domjobinfo", "q"), ("dominfo", "q"), ("snapshot-list", "q")))
    check(proc.poll() is None, f"{what} did not wait for the push under way")
    check(slowest < 3, f"virsh took {slowest:.1f} s during {what}")
    return slowest


def case_daemon_delete_queued_push(env):
    """Host P pushes slowly (the test hook: 50 ms a frame). Snapshot p1 is
    pushing, p2 and p3 queued behind it. Host B, learning p1 meanwhile,
    cannot revert to it yet (refused naming p1, nothing left on B) and can
    once the push is done. Snapshot-delete p2 waits for p1's
    push (virsh list, domjobinfo, dominfo answer meanwhile), drops p2's push
    and folds p2 into p3, whose push then sends the result (it verifies);
    p2's manifest never appears. p4 pushing, p5 queued, the domain shut off:
    undefine --snapshots-metadata waits likewise and drops p5: p4's manifest
    appears, p5's never; the daemon restarts with nothing to push."""
    w = env.scratch("daemon-queue")
    url = env.nginx.url("store", "daemon-queue")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    h = Host(env, "P", url=url, hook="push-progress:slow")
    b = None
    try:
        domain_on(h, image, "q", str(uuidlib.uuid4()))
        h.v("start", "q")
        h.guest("q").close()
        t0 = time.monotonic()
        p1, p2, p3 = push_then_queue(h, "q", "p1", "p2", "p3")
        # Host B learns p1 while its push is under way: the revert is
        # refused (the store does not have it yet), B's domain untouched.
        b = Host(env, "B")
        b.v("define", b.write("q.xml", h.v("dumpxml", "--inactive", "q").stdout))
        b.v("snapshot-create", "q", "--redefine", b.write("p1.xml", h.v("snapshot-dumpxml", "q", "p1").stdout))
        r = b.v("snapshot-revert", "q", "p1", check=False, timeout=60)
        check(r.returncode != 0 and "'p1'" in r.stderr and p1 in r.stderr,
              f"B's revert to p1 before its manifest is there: {r.returncode} {r.stderr}")
        print(f"  B before p1's push completed: {r.stderr.strip().splitlines()[-1]}")
        check_untouched(b, "q")
        check_no_half_dirs(b, "q")
        check(not cache_files(b.cache), f"B's cache: {cache_files(b.cache)}")
        d = background_virsh(h, "snapshot-delete", "q", "p2")
        slowest = while_waiting(h, d, "snapshot-delete of a queued push")
        _, err = d.communicate(timeout=60)
        check(d.returncode == 0, f"snapshot-delete p2: {err}")
        h.wait_push("q")
        listed = env_ls(env, url)
        check(p1 in listed and p3 in listed and p2 not in listed, f"after deleting p2: {listed}")
        env.store([], ["verify", f"{url}/{p3}"])
        b.v("snapshot-revert", "q", "p1")
        check(b.state("q") == "running", "B's revert to p1 once it is in the store")
        b.close()
        b = None
        ids = [m["id"] for m in env.store([], ["ls", url])]
        check(len(ids) == 2 and ids == sorted(ids), f"vsnap-store ls, not in order: {ids}")
        # The manifest's snapshot XML is p3 as it is now: a diff on p1.
        with open(os.path.join(env.nginx.root, "daemon-queue", "manifests", p3 + ".json")) as f:
            xml = json.load(f)["snapshot_xml"]
        check(re.search(r"<parent>\s*<name>p1</name>", xml) and snapshot_ids(xml)[1] == p1,
              f"p3's manifest has the XML it had before p2 was deleted:\n{xml}")
        print(f"  p1 pushed, p2 dropped, p3 pushed folded in {time.monotonic() - t0:.1f} s")

        # A new memory chain: p4 is full, and slow to push again.
        h.v("destroy", "q")
        h.v("start", "q")
        h.guest("q").close()
        p4, p5 = push_then_queue(h, "q", "p4", "p5")
        h.v("destroy", "q")
        u = background_virsh(h, "undefine", "q", "--snapshots-metadata")
        slowest = max(slowest, while_waiting(h, u, "undefine --snapshots-metadata"))
        _, err = u.communicate(timeout=60)
        check(u.returncode == 0, f"undefine: {err}")
        check("q" not in h.v("list", "--all", "--name").stdout.split(), "q is still defined")
        time.sleep(0.5)   # a dropped push that started anyway would have written by now
        listed = env_ls(env, url)
        check(p4 in listed and p5 not in listed, f"after the undefine: {listed}")
        h.daemon.stop()
        h.start()
        time.sleep(0.5)
        check(h.v("list", "--all", "--name").stdout.split() == [], "a domain came back")
        check(env_ls(env, url) == listed, f"the restarted daemon pushed: {env_ls(env, url)}")
        check(not os.listdir(os.path.join(h.daemon.state, "snapshots")),
              f"snapshots left: {os.listdir(os.path.join(h.daemon.state, 'snapshots'))}")
        print(f"  virsh answered in {slowest:.2f} s at most while deletes waited for pushes")
    finally:
        h.close()
        if b:
            b.close()


def case_daemon_revert_races_delete(env):
    """Host B learnt s1 and s2 (a diff on s1); a revert to s2 and, from
    another client, a snapshot-delete of s2 or of s1 (50 ms before or after,
    or at once), six times over, each from a fresh definition. One of the two wins
    cleanly each time: the revert runs s2 (A's sums) or fails naming s2; the
    delete is done or refused naming the snapshot; no job left, no half
    directory, the daemon answering within a second or so."""
    o = origin(env)
    b = Host(env, "B")
    outcomes = []
    try:
        # Each delete 50 ms after the revert, 50 ms before it, and at once.
        for i, (target, delay) in enumerate([("s2", 0.05), ("s1", 0.05), ("s2", -0.05),
                                             ("s1", -0.05), ("s2", 0), ("s1", 0)]):
            if FAULTS_DOM in b.v("list", "--all", "--name").stdout.split():
                if b.state(FAULTS_DOM) != "shut off":
                    b.v("destroy", FAULTS_DOM)
                # (folds B's disk chain back into the image)
                b.v("undefine", FAULTS_DOM, "--snapshots-metadata")
                o.restore_image()
            o.learn(b)
            first, then = (("snapshot-revert", FAULTS_DOM, "s2"), ("snapshot-delete", FAULTS_DOM, target))
            first, then = (first, then) if delay >= 0 else (then, first)
            procs = [background_virsh(b, *first)]
            time.sleep(abs(delay))
            procs.append(background_virsh(b, *then))
            rev, dele = procs if delay >= 0 else procs[::-1]
            rev_err = rev.communicate(timeout=60)[1]
            del_err = dele.communicate(timeout=60)[1]
            what = f"iteration {i} (delete {target} {delay * 1000:+.0f} ms after the revert)"
            check(b.daemon.proc.poll() is None, f"{what}: the daemon died:\n{b.daemon.log()[-3000:]}")
            check(timed_virsh(b, "list", "--all") < 3, f"{what}: virsh list was slow")
            check(rev.returncode == 0 or "s2" in rev_err, f"{what}: the revert's error: {rev_err}")
            check(dele.returncode == 0 or f"'{target}'" in del_err, f"{what}: the delete's error: {del_err}")
            check(rev.returncode == 0 or dele.returncode == 0,
                  f"{what}: neither won: {rev_err} / {del_err}")
            check(b.jobinfo(FAULTS_DOM).get("Job type") == "None", f"{what}: a job left")
            check_no_half_dirs(b, FAULTS_DOM)
            if rev.returncode == 0:
                check(b.state(FAULTS_DOM) == "running" and b.sums(FAULTS_DOM) == o.sums["s2"],
                      f"{what}: B's s2 after the revert won: {b.sums(FAULTS_DOM)}")
            else:
                check(b.state(FAULTS_DOM) == "shut off", f"{what}: after a failed revert: {b.state(FAULTS_DOM)}")
            left = b.v("snapshot-list", "--name", FAULTS_DOM).stdout.split()
            check((target in left) == (dele.returncode != 0), f"{what}: snapshots left {left}")
            outcomes.append(f"{target}:{'R' if rev.returncode == 0 else '-'}{'D' if dele.returncode == 0 else '-'}")
        print(f"  outcomes (R revert won, D delete done): {' '.join(outcomes)}")
    finally:
        b.close()
        o.restore_image()


def hammer(uri, doms, seconds, clients=8):
    """clients python-libvirt connections, each asking list, domjobinfo,
    dominfo and snapshot-list of doms for seconds: (calls made, slowest
    call's seconds (the connection's open too), errors)."""
    import threading
    stats = {"calls": 0, "slowest": 0.0, "errors": []}
    lock = threading.Lock()

    def client():
        t0 = time.monotonic()
        try:
            conn = libvirt.open(uri)
        except libvirt.libvirtError as e:
            with lock:
                stats["errors"].append(f"open: {e}")
            return
        with lock:
            stats["slowest"] = max(stats["slowest"], time.monotonic() - t0)
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for name in doms:
                    for call in (lambda: conn.listAllDomains(0),
                                 lambda: conn.lookupByName(name).jobInfo(),
                                 lambda: conn.lookupByName(name).jobStats(),
                                 lambda: conn.lookupByName(name).info(),
                                 lambda: conn.lookupByName(name).snapshotListNames()):
                        t0 = time.monotonic()
                        try:
                            call()
                        except libvirt.libvirtError as e:
                            with lock:
                                stats["errors"].append(str(e))
                        took = time.monotonic() - t0
                        with lock:
                            stats["calls"] += 1
                            stats["slowest"] = max(stats["slowest"], took)
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 60)
    check(not any(t.is_alive() for t in threads), "a client never returned")
    return stats["calls"], stats["slowest"], stats["errors"]


def blocked_writers(uri, dom, n=40, connections=3):
    """n calls of setAutostart on dom (each waits for the domain's job) on
    a few read-write connections: more than the daemon's 32 workers. The
    threads; join them."""
    import threading
    conns = [libvirt.open(uri) for _ in range(connections)]
    errors = []

    def call(conn):
        try:
            conn.lookupByName(dom).setAutostart(0)
        except libvirt.libvirtError as e:
            errors.append(str(e))

    threads = [threading.Thread(target=call, args=(conns[i % connections],)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, conns, errors


def case_daemon_many_clients(env):
    """Host D pushes a snapshot of its domain (slowed by the test hook) and
    reverts to s1 learnt from A through a rate-limited URL (pulling); 40
    calls that wait for that domain's job (setAutostart, on 3 connections:
    more than the 32 workers of read-write clients) are queued; 8
    python-libvirt clients ask list, domjobinfo, dominfo and snapshot-list
    of both domains meanwhile: every call answers within 2 s (before the
    priority workers, virsh list waited for the whole pull), none fails;
    domjobabort, the workers still taken, ends the revert at once (aborted,
    the domain as it was); the waiting calls succeed, the push completes."""
    o = origin(env)
    w = env.scratch("daemon-clients")
    url = env.nginx.url("store", "daemon-clients")
    image = make_image(os.path.join(w, "root.img"), 16 * MIB)
    d = Host(env, "D", url=url, hook="push-progress:slow")
    try:
        domain_on(d, image, "pusher", str(uuidlib.uuid4()))
        o.learn(d, snaps=("s1",), url=env.nginx.url("rate-3000k", o.prefix))
        d.v("start", "pusher")
        d.guest("pusher").close()
        d.v("snapshot-create-as", "pusher", "c1")
        rev = background_virsh(d, "snapshot-revert", FAULTS_DOM, "s1")
        wait_pulling(d, FAULTS_DOM)
        check(d.jobinfo("pusher").get("Job type") == "Bounded", "the push ended before the clients came")
        writers, conns, writer_errors = blocked_writers(d.daemon.uri, FAULTS_DOM)
        time.sleep(0.3)
        virsh_list = timed_virsh(d, "list", "--all")
        calls, slowest, errors = hammer(d.daemon.uri, ["pusher", FAULTS_DOM], 1.5)
        busy = [dom for dom in ("pusher", FAULTS_DOM) if d.jobinfo(dom).get("Job type") == "Bounded"]
        check(not errors, f"calls failed: {errors[:5]}")
        check(slowest < 2 and virsh_list < 2, f"a call took {slowest:.2f} s, virsh list {virsh_list:.2f} s")
        check(FAULTS_DOM in busy, "the pull ended before the clients were done: it showed no wait")
        # domjobabort, every worker still taken by the waiting calls.
        abort = timed_virsh(d, "domjobabort", FAULTS_DOM)
        _, err = rev.communicate(timeout=120)
        check(abort < 2 and rev.returncode != 0 and "abort" in err,
              f"domjobabort took {abort:.2f} s; the revert: {rev.returncode} {err}")
        for t in writers:
            t.join(timeout=60)
        for c in conns:
            c.close()
        check(not writer_errors and not any(t.is_alive() for t in writers),
              f"the calls that waited for the job: {writer_errors[:3]}")
        check_untouched(d, FAULTS_DOM)
        check(d.wait_push("pusher").get("Job type") == "Completed", "the push")
        print(f"  8 clients beside 40 waiting calls: {calls} calls in 1.5 s, the slowest "
              f"{slowest * 1000:.0f} ms, virsh list {virsh_list * 1000:.0f} ms, domjobabort "
              f"{abort * 1000:.0f} ms (jobs still under way at the end: {busy})")
    finally:
        d.close()


CASES = [case_daemon_two_hosts_http, case_daemon_two_hosts_s3, case_daemon_two_hosts_file,
         case_daemon_store_revert_uses_its_own_paths, case_daemon_https_store,
         case_daemon_push_in_background,
         case_daemon_store_down, case_daemon_pull_at_revert, case_daemon_abort_revert_pull,
         case_daemon_abort_push, case_daemon_corrupt_object, case_daemon_cache_disk_full,
         case_daemon_delete_queued_push, case_daemon_revert_races_delete,
         case_daemon_many_clients]

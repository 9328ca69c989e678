"""virtvsnapd with a snapshot store, run by test-store.py against the servers
it started (nginx, Ceph's RADOS Gateway): real daemons (each "host" its own
state directory, sockets and cache), real virsh, the test guest with a disk.

- two hosts sharing a store (nginx, S3): host A pushes a memory + disk
  snapshot and its diff child in the background (domjobinfo shows the
  push), host B learns them from A's XML (define, snapshot-create
  --redefine), reverts and runs with A's memory and disk (SUM, BLKSUM);
  a revert on B whose base image is missing is refused by name, the
  running VM untouched; a `cp -a` copy of the image is accepted;
- a push in the background: domjobinfo shows it, other operations on the
  domain go on, destroy does not end it; kill -9 of the daemon during it:
  at its next start the push is done again and the manifest is listed;
- a store that is down: the snapshot is taken and the VM runs, the push
  shows as failed;
- a revert on B that pulls slowly (nginx's limit_rate) in copy mode:
  domjobinfo shows the pull and --completed its end, virsh list and
  dominfo answer meanwhile; nginx killed mid-pull and the daemon killed
  (kill -9) mid-pull each leave B's domain as it was, no job, no snapshot
  half there, and the next revert works; hostile <cookie>s and store URLs
  with credentials are refused at redefine/define without echoing them;
  a host whose cache is smaller than the layers refuses two reverts at
  once naming the cache, and with a larger cache both succeed;
- virsh domjobabort during a revert's pull (the store stalled) and destroy
  during one: each ends the revert within 2 s, aborted, the domain as it
  was (or destroyed), nothing half imported, the next revert works;
  domjobabort of a background push: no manifest, still pending, pushed
  with the next snapshot; domjobabort with no job refused as libvirt does.

Each case takes the Env of test-store.py (env.nginx, env.rgw, env.s3_env,
STORE through env.store)."""

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
from vsnapd import Daemon, wait_for  # noqa: E402

MEM_A = (16 * MIB, 48 * MIB)     # filled by the guest at boot (vsnap.fill_mib=48)
MEM_B = (72 * MIB, 16 * MIB)     # filled after the first snapshot
DISK_A = (0, 2 * MIB)
DISK_B = (4 * MIB, 2 * MIB)


def check(cond, what):
    if not cond:
        raise AssertionError(what)


class Host:
    """One host: a virtvsnapd with its own state, sockets and store cache."""

    def __init__(self, env, name, url=None, hook=None, cache_size="2G"):
        self.env = env
        self.daemon = Daemon(parent=env.dir)
        self.cache = os.path.join(self.daemon.dir, "cache")
        self.conf = os.path.join(self.daemon.dir, "virtvsnapd.conf")
        s3 = env.s3_env
        with open(self.conf, "w") as f:
            f.write("[store]\n" + (f"url={url}\n" if url else "") +
                    f"cache_dir={self.cache}\ncache_size={cache_size}\nconnections=4\nrange_size=4M\n"
                    f"threads=2\n[s3]\nendpoint={env.rgw.endpoint}\n"
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


def take_two(a, dom):
    """s1 (full memory, first disk layer) and s2 (its diff), each pushed;
    the guest's sums at each."""
    a.v("start", dom)
    g = a.guest(dom)
    try:
        g.fill(0, DISK_A[0], DISK_A[1], 31)
        g.flush(0)
    finally:
        g.close()
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
        g = b.guest(dom)
        try:
            g.fill(0, DISK_B[0], DISK_B[1], 35)
            g.flush(0)
        finally:
            g.close()
        here = b.sums(dom)
        b.v("snapshot-create-as", dom, "b1")
        g = b.guest(dom)
        try:
            g.fill(0, DISK_B[0], DISK_B[1], 36)
        finally:
            g.close()
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
        wait_for(pushing, timeout=30, interval=0.05, what="domjobinfo to show p3's push")
        nginx = nginx_pids(env)
        for pid in nginx:
            os.kill(pid, signal.SIGSTOP)
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
        domain_on(a, image, dom, str(uuidlib.uuid4()), restore_mode="copy")
        a.v("start", dom)
        g = a.guest(dom)
        try:
            g.fill(0, DISK_A[0], DISK_A[1], 41)
            g.flush(0)
        finally:
            g.close()
        want = a.sums(dom)
        a.v("snapshot-create-as", dom, "s1")
        check(a.wait_push(dom).get("Job type") == "Completed", "A's push")
        xml = a.v("snapshot-dumpxml", dom, "s1").stdout
        check(url in xml, f"A's snapshot XML names no {url}")
        a.v("destroy", dom)
        b = Host(env, "B")
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
        print(f"  during the pull: {during.get('Data processed')} of {during.get('Data total')}, "
              f"virsh answered in {slowest:.2f} s at most")
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
        domain_on(a, image, dom, str(uuidlib.uuid4()), restore_mode="copy")
        a.v("start", dom)
        g = a.guest(dom)
        try:
            g.fill(0, DISK_A[0], DISK_A[1], 43)
            g.flush(0)
        finally:
            g.close()
        want = a.sums(dom)
        a.v("snapshot-create-as", dom, "s1")
        check(a.wait_push(dom).get("Job type") == "Completed", "A's push")
        xml = a.v("snapshot-dumpxml", dom, "s1").stdout
        a.v("destroy", dom)
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


CASES = [case_daemon_two_hosts_http, case_daemon_two_hosts_s3, case_daemon_two_hosts_file,
         case_daemon_push_in_background,
         case_daemon_store_down, case_daemon_pull_at_revert, case_daemon_abort_revert_pull,
         case_daemon_abort_push]

#!/usr/bin/python3
"""The snapshot store end to end: vsnap-store against real servers (nginx with
WebDAV and limit_rate, Ceph's RADOS Gateway as S3), snapshots of the real
shim with the test guest, restored on demand from pulled directories and
checked by the guest's SUM of its regions.

    test_store.py <vsnap-store> <vsnap-shim> <vsnap-testguest> <store-idle-client> [CASE...]

https:// and S3 over TLS run through nginx's TLS server (servers.Tls: a
throwaway CA made with openssl in the work directory).

The servers and the snapshot chain are made once; the cases then run one
after another (each with its own cache and destination directories: the
"hosts"), and every failing case is reported by name.

VSNAP_STORE_NO_S3=1: nginx and file:// only, no Ceph (the S3 cases are
skipped, the shim's second store is a second nginx prefix): the sanitizer
build's suite store-san runs that, the Ceph cluster starts once per run."""

import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time

# absolute: a case runs vsnap-store in a directory of its own (relative_cache_dir)
STORE, SHIM, GUEST, IDLE_CLIENT = (os.path.abspath(a) for a in sys.argv[1:5])
ONLY = sys.argv[5:]
NO_S3 = os.environ.get("VSNAP_STORE_NO_S3") == "1"
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "persist"))
from persisttest import ApiShim, Fail, MIB, check, connect  # noqa: E402
from servers import ConnectionCounter, Nginx, Rgw, StallingProxy, TlsHelloRelay, free_port  # noqa: E402
import shim_store  # noqa: E402
from caserun import run_cases  # noqa: E402

REGION_A = (16 * MIB, 64 * MIB)
REGION_B = (80 * MIB, 16 * MIB)
REGION_C = (96 * MIB, 32 * MIB)


SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def check_no_sanitizer_report(what, stderr):
    """A sanitizer build's report fails the case even where the command was
    expected to fail (a refused pull must not fail by a crash)."""
    for mark in SANITIZER_MARKS:
        if mark in stderr:
            raise Fail(f"{what}: sanitizer report:\n{stderr[stderr.index(mark) - 200:][:6000]}")


class Env:
    """What every case shares: the servers, the snapshots, a scratch dir."""

    def __init__(self, workdir):
        self.dir = workdir
        # the gateway's port first: nginx's TLS server relays to it
        rgw_port = None if NO_S3 else free_port()
        self.nginx = Nginx(workdir, rgw_port)
        self.rgw, self.s3_env = None, {}
        self.short = NO_S3   # the sanitizer's run: cases skip what only waits
        if not NO_S3:
            t0 = time.monotonic()
            self.rgw = Rgw(workdir, port=rgw_port)
            print(f"rgw up in {time.monotonic() - t0:.1f} s", flush=True)
            self.s3_env = self.rgw.env()
            self.store(["--retries", "0"], ["ls", "s3://vsnap-test/none"], ok=False)  # warm-up
            self.s3_request("PUT", "vsnap-test")
        self.snaps = os.path.join(workdir, "snaps")
        os.makedirs(self.snaps)
        self.make_snapshots()
        self.counter = 0

    def s3_request(self, method, path):
        e = self.s3_env
        r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", method,
                            "--aws-sigv4", f"aws:amz:{e['AWS_REGION']}:s3",
                            "--user", f"{e['AWS_ACCESS_KEY_ID']}:{e['AWS_SECRET_ACCESS_KEY']}",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                            f"{self.rgw.endpoint}/{path}"], capture_output=True, text=True, timeout=60)
        check(r.stdout in ("200", "204"), f"S3 {method} {path}: {r.stdout} {r.stderr}")

    def make_snapshots(self):
        """base (64 MiB fill), d1 (its diff: region B filled), full2 (a new
        base with region C filled too), each with the guest's sums."""
        self.sums = {}
        src = ApiShim(SHIM, workdir=self.snaps, name="src")
        try:
            src.boot(GUEST, "vsnap.fill_mib=64 vsnap.seed=7 vsnap.heartbeat_ms=100")
            conn = connect(src)
            self.take(src, conn, "base")
            conn.ok(f"FILL {REGION_B[0]:#x} {REGION_B[1]:#x} 11")
            self.take(src, conn, "d1", parent="base")
            conn.ok(f"FILL {REGION_C[0]:#x} {REGION_C[1]:#x} 13")
            self.take(src, conn, "full2")
            conn.close()
        finally:
            src.close()

    def take(self, src, conn, name, parent=None):
        self.sums[name] = [conn.sum(*r) for r in (REGION_A, REGION_B, REGION_C)]
        src.snapshot_paused(self.path(name), self.path(parent) if parent else None)

    def path(self, name):
        return os.path.join(self.snaps, name)

    def layer_id(self, name):
        return json.load(open(os.path.join(self.path(name), "state.json")))["memory"]["id"]

    def scratch(self, name):
        self.counter += 1
        p = os.path.join(self.dir, f"{self.counter:02d}-{name}")
        os.makedirs(p)
        return p

    def store(self, opts, args, ok=True, timeout=300, env=None, cwd=None):
        full_env = {**os.environ, **self.s3_env, **(env or {})}
        r = subprocess.run([STORE, "--quiet", "--json"] + opts + args, capture_output=True,
                           text=True, timeout=timeout, env=full_env, cwd=cwd)
        check_no_sanitizer_report(f"vsnap-store {' '.join(args)}", r.stderr)
        if ok and r.returncode != 0:
            raise Fail(f"vsnap-store {' '.join(opts + args)} -> {r.returncode}: {r.stderr}")
        if not ok and r.returncode == 0:
            raise Fail(f"vsnap-store {' '.join(opts + args)} succeeded: {r.stdout}")
        return json.loads(r.stdout) if ok and r.stdout.strip() else r

    def start_store(self, opts, args):
        return StoreProcess([STORE, "--quiet", "--json"] + opts + args, dict(os.environ, **self.s3_env))

    def push(self, name, url, opts=()):
        return self.store(list(opts), ["push", self.path(name), url])

    def pull(self, ref, dest, cache, opts=(), ok=True):
        return self.store(["--cache-dir", cache] + list(opts), ["pull", ref, dest], ok=ok)

    def close(self):
        if self.rgw:
            self.rgw.close()
        self.nginx.close()


class StoreProcess(subprocess.Popen):
    """vsnap-store running in the background; communicate() checks its
    stderr for a sanitizer report."""

    def __init__(self, argv, env):
        super().__init__(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.what = " ".join(os.path.basename(a) for a in argv[:1] + argv[3:])

    def communicate(self, *args, **kwargs):
        out, err = super().communicate(*args, **kwargs)
        check_no_sanitizer_report(self.what, err or "")
        return out, err


def restore_and_check(env, snapdir, name, workdir):
    """Restore snapdir on demand in a new shim and compare the guest's sums
    with those taken right before the snapshot."""
    with ApiShim(SHIM, workdir=workdir, name="dst") as dst:
        status, reply = dst.restore(snapdir, "ondemand", kernel=GUEST)
        check(status == 204, f"restore {snapdir}: {status} {reply}" + dst.describe())
        conn = connect(dst)
        got = [conn.sum(*r) for r in (REGION_A, REGION_B, REGION_C)]
        conn.close()
        check(got == env.sums[name], f"{name} restored from {snapdir}: sums {got}, expected {env.sums[name]}")


def cache_layers(cache):
    d = os.path.join(cache, "layers")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def cache_tmp(cache):
    d = os.path.join(cache, "tmp")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def objects_of(root):
    d = os.path.join(root, "objects")
    return sorted(os.path.join(d, n) for n in os.listdir(d) if n.endswith(".zst"))


def layer_object(env, root, name):
    digest = hashlib.sha256(open(os.path.join(env.path(name), "memory-ranges"), "rb").read()).hexdigest()
    return os.path.join(root, "objects", digest + ".zst")


# --- cases ---------------------------------------------------------------------

def case_two_hosts_file(env):
    """Host A pushes the chain to a file:// store; host B (its own cache and
    directory) pulls d1 (and with it base) and restores it."""
    w = env.scratch("file")
    root = os.path.join(w, "store")
    r = env.push("d1", "file://" + root)
    check(r["id"] == env.layer_id("d1"), f"push answered id {r['id']}")
    ids = [e["id"] for e in env.store([], ["ls", "file://" + root])]
    check(sorted(ids) == sorted([env.layer_id("base"), env.layer_id("d1")]), f"ls: {ids}")
    dest, cache = os.path.join(w, "hostB-d1"), os.path.join(w, "hostB-cache")
    p = env.pull(f"file://{root}/{r['id']}", dest, cache)
    check(p["layers_fetched"] == 2 and p["layers_cached"] == 0, f"pull: {p}")
    for f in ("memory-ranges", "config.json"):
        check(open(os.path.join(dest, f), "rb").read() == open(os.path.join(env.path("d1"), f), "rb").read(),
              f"pulled {f} differs")
    state = json.load(open(os.path.join(dest, "state.json")))
    check(state["memory"]["parent_url"].startswith("file://" + cache), f"parent: {state['memory']}")
    restore_and_check(env, dest, "d1", w)


def case_relative_cache_dir(env):
    """--cache-dir and DEST relative to the working directory: the pulled
    child names its parent in the cache by an absolute path (a relative one
    is refused by the snapshot format, and would break on any other cwd)."""
    w = env.scratch("relative")
    root = os.path.join(w, "store")
    r = env.push("d1", "file://" + root)
    env.store(["--cache-dir", "cache"], ["pull", f"file://{root}/{r['id']}", "dest"], cwd=w)
    state = json.load(open(os.path.join(w, "dest", "state.json")))
    want = "file://" + os.path.join(w, "cache", "snapshots") + "/"
    check(state["memory"]["parent_url"].startswith(want), f"parent: {state['memory']}, expected {want}...")
    restore_and_check(env, os.path.join(w, "dest"), "d1", w)


def case_objects_are_zstd(env):
    """Plain `zstd -d` decompresses every object to the bytes its name is the
    digest of, and the seek table at its end is the spec's: frames of 1 MiB
    with checksums that fill the object exactly."""
    w = env.scratch("zstd")
    root = os.path.join(w, "store")
    env.push("d1", "file://" + root)
    for obj in objects_of(root):
        out = subprocess.run(["zstd", "-dc", obj], capture_output=True, check=True).stdout
        digest = os.path.basename(obj)[:-4]
        check(hashlib.sha256(out).hexdigest() == digest, f"zstd -d {obj} is not its digest")
        data = open(obj, "rb").read()
        nframes, desc, magic = struct.unpack("<IBI", data[-9:])
        check(magic == 0x8F92EAB1 and desc == 0x80, f"{obj}: footer {magic:#x} {desc:#x}")
        table = 8 + 12 * nframes + 9
        skip_magic, size = struct.unpack("<II", data[-table:-table + 8])
        check(skip_magic == 0x184D2A5E and size == table - 8, f"{obj}: skippable frame header")
        entries = [struct.unpack("<III", data[-table + 8 + 12 * i:-table + 20 + 12 * i]) for i in range(nframes)]
        check(sum(e[0] for e in entries) + table == len(data), f"{obj}: frames do not fill the object")
        check(sum(e[1] for e in entries) == len(out), f"{obj}: frame sizes do not add up")
        check(all(e[1] == MIB for e in entries[:-1]), f"{obj}: frames are not 1 MiB")


def case_two_hosts_http(env):
    """Push through nginx's WebDAV PUT, pull with ranged GETs on 4
    connections on host B, restore; the tree nginx serves is a file:// store
    with the same layout, and a second pull on B is a cache hit that GETs no
    object."""
    w = env.scratch("http")
    url = env.nginx.url("store", "hosts")
    r = env.push("d1", url)
    dest, cache = os.path.join(w, "hostB-d1"), os.path.join(w, "hostB-cache")
    env.pull(f"{url}/{r['id']}", dest, cache, ["--connections", "4", "--range-size", "2M"])
    restore_and_check(env, dest, "d1", w)
    file_root = os.path.join(env.nginx.root, "hosts")
    ids = [e["id"] for e in env.store([], ["ls", url])]
    check(sorted(ids) == sorted([env.layer_id("base"), env.layer_id("d1")]), f"ls over http: {ids}")
    env.pull(f"file://{file_root}/{r['id']}", os.path.join(w, "via-file"), os.path.join(w, "c2"))
    before = len(env.nginx.access_lines())
    hit = env.pull(f"{url}/{r['id']}", os.path.join(w, "hit"), cache)
    # d1's layer is a hit; base is there already as d1's pulled parent
    check(hit["layers_cached"] == 1 and hit["layers_fetched"] == 0, f"second pull: {hit}")
    layer_gets = [line for line in env.nginx.access_lines()[before:]
                  if line[1].endswith(".zst") and int(line[3]) > 1 * MIB]
    check(not layer_gets, f"a cache hit fetched layer data: {layer_gets}")
    layer = os.path.join(w, "hit", "memory-ranges")
    check(os.stat(layer).st_nlink >= 3, "a hit's layer is not the cached file (hard link)")


def case_two_hosts_s3(env):
    """Push to the RADOS Gateway (multipart for the 64 MiB base), ls, pull on
    host B, restore."""
    w = env.scratch("s3")
    url = "s3://vsnap-test/hosts"
    r = env.push("d1", url, ["--connections", "4"])
    ids = [e["id"] for e in env.store([], ["ls", url])]
    check(sorted(ids) == sorted([env.layer_id("base"), env.layer_id("d1")]), f"ls: {ids}")
    env.store([], ["verify", f"{url}/{r['id']}"])
    dest, cache = os.path.join(w, "hostB-d1"), os.path.join(w, "hostB-cache")
    env.pull(f"{url}/{r['id']}", dest, cache, ["--connections", "4", "--range-size", "4M"])
    restore_and_check(env, dest, "d1", w)
    again = env.push("d1", url)
    check(again["objects_sent"] == 0, f"a second push sent objects: {again}")


def case_ranges_follow_each_other_at_once(env):
    """One connection and 1 MiB ranges: each range starts as soon as the
    one before it ends (the fetch loop used to wait up to a second for a
    socket event first: about 64 s for base's 64 ranges)."""
    w = env.scratch("ranges")
    url = env.nginx.url("store", "ranges")
    env.push("base", url)
    t0 = time.monotonic()
    env.pull(f"{url}/{env.layer_id('base')}", os.path.join(w, "d"), os.path.join(w, "cache"),
             ["--connections", "1", "--range-size", "1M", "--threads", "1"])
    elapsed = time.monotonic() - t0
    check(elapsed < 20, f"a pull of 64 ranges on one connection took {elapsed:.1f} s")


def case_push_skips_what_the_store_has(env):
    """full2 shares config.json with base: pushing it after base skips that
    object, and pushing base again sends nothing."""
    w = env.scratch("skip")
    url = "file://" + os.path.join(w, "store")
    first = env.push("base", url)
    check(first["objects_sent"] == 3, f"base push: {first}")
    check(env.push("base", url)["objects_sent"] == 0, "second push of base sent objects")
    r = env.push("full2", url)
    check(r["objects_skipped"] >= 1, f"full2 push skipped nothing: {r}")


def case_push_repairs_a_damaged_object(env):
    """A push that died halfway left a short object and no manifest: the next
    push of that snapshot writes the object anew instead of trusting it."""
    w = env.scratch("repair")
    root = os.path.join(env.nginx.root, os.path.basename(w))
    env.push("base", "file://" + root)
    os.unlink(os.path.join(root, "manifests", env.layer_id("base") + ".json"))
    obj = layer_object(env, root, "base")
    with open(obj, "r+b") as f:
        f.truncate(os.path.getsize(obj) // 2)
    r = env.push("base", env.nginx.url("store", os.path.basename(w)))
    check(r["objects_sent"] == 1, f"push after the damage: {r}")
    out = subprocess.run(["zstd", "-dc", obj], capture_output=True, check=True).stdout
    check(hashlib.sha256(out).hexdigest() == os.path.basename(obj)[:-4], "the object was not repaired")


def corrupt_copy(env, w, flip_at=None, truncate_by=None):
    """A file:// store (also served by nginx) with d1's chain, its base layer
    object damaged."""
    name = os.path.basename(w)
    root = os.path.join(env.nginx.root, name)
    env.push("d1", "file://" + root)
    obj = layer_object(env, root, "base")
    data = bytearray(open(obj, "rb").read())
    if flip_at is not None:
        data[int(len(data) * flip_at)] ^= 0x55
    if truncate_by is not None:
        del data[-truncate_by:]
    open(obj, "wb").write(bytes(data))
    return root, env.nginx.url("store", name), os.path.basename(obj)[:-4]


def check_clean_failure(r, cache, dest, words):
    for word in words:
        check(word in r.stderr, f"error does not say {word!r}: {r.stderr}")
    check(not cache_layers(cache) and not cache_tmp(cache), f"the cache holds {cache_layers(cache)} {cache_tmp(cache)}")
    check(not os.path.exists(dest), "a destination appeared")
    parent = os.path.dirname(dest)
    check(not [n for n in os.listdir(parent) if ".partial" in n], "a partial directory is left")


def case_corrupt_frame(env):
    """A byte flipped inside a frame: the pull stops naming the object and
    the frame, nothing enters the cache, no directory appears."""
    w = env.scratch("corrupt")
    root, url, digest = corrupt_copy(env, w, flip_at=0.5)
    for ref in (f"file://{root}", url):
        cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
        r = env.pull(f"{ref}/{env.layer_id('d1')}", dest, cache, ok=False)
        check_clean_failure(r, cache, dest, [digest, "frame"])
        r = env.store([], ["verify", f"{ref}/{env.layer_id('base')}"], ok=False)
        check(digest in r.stderr, f"verify: {r.stderr}")


def case_truncated_object(env):
    """An object shorter than its manifest says: over http the seek table's
    range is not satisfiable (416), from the file it is short; a clean failure
    naming the object either way."""
    w = env.scratch("truncated")
    root, url, digest = corrupt_copy(env, w, truncate_by=1000)
    r = env.pull(f"{url}/{env.layer_id('d1')}", os.path.join(w, "d"), os.path.join(w, "c"), ok=False)
    check_clean_failure(r, os.path.join(w, "c"), os.path.join(w, "d"), [digest])
    check("416" in r.stderr or "seek table" in r.stderr, f"error: {r.stderr}")
    r = env.pull(f"file://{root}/{env.layer_id('d1')}", os.path.join(w, "d"), os.path.join(w, "c"), ok=False)
    check_clean_failure(r, os.path.join(w, "c"), os.path.join(w, "d"), [digest])


def case_http_errors(env):
    """403, 404 (manifest and object) and 500 answers: clear errors naming
    what was asked for; 500 only after the retries."""
    w = env.scratch("errors")
    sid = env.layer_id("d1")
    for prefix, words in (("e403", ["403", "access denied"]), ("e500", ["500", "attempts"]
                                                                    if False else ["500"])):
        r = env.pull(f"{env.nginx.url(prefix, 'x')}/{sid}", os.path.join(w, "d"), os.path.join(w, "c"),
                     ["--retries", "2"], ok=False)
        for word in words + [f"manifests/{sid}.json"]:
            check(word in r.stderr, f"{prefix}: {r.stderr}")
    tries = [line for line in env.nginx.access_lines() if line[1].startswith("/e500/")]
    check(len(tries) == 3, f"500 was asked {len(tries)} times, not 1 + 2 retries")
    r = env.pull(f"{env.nginx.url('store', 'nothing')}/{sid}", os.path.join(w, "d"), os.path.join(w, "c"), ok=False)
    check("404" in r.stderr and "no such object" in r.stderr, f"missing manifest: {r.stderr}")
    name = os.path.basename(w)
    root = os.path.join(env.nginx.root, name)
    env.push("d1", "file://" + root)
    obj = layer_object(env, root, "d1")
    os.unlink(obj)
    r = env.pull(f"{env.nginx.url('store', name)}/{sid}", os.path.join(w, "d"), os.path.join(w, "c"), ok=False)
    check("404" in r.stderr and os.path.basename(obj) in r.stderr, f"missing object: {r.stderr}")


def slow_store(env, w, rate_k):
    """d1's chain under nginx's root, and its URL through limit_rate."""
    name = os.path.basename(w)
    env.push("d1", "file://" + os.path.join(env.nginx.root, name))
    return env.nginx.url(f"rate-{rate_k}k", name)


def case_server_dies_mid_pull(env):
    """nginx killed while ranges are in flight and back 0.5 s later: the
    ranges are retried from their last whole frame and the result is exact.
    Killed for good: the pull ends with an error after its retries, and the
    cache is as it was."""
    w = env.scratch("dead")
    url = slow_store(env, w, 16384)   # 16 MiB/s per connection: ~2.5 s for the chain on 2
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    p = env.start_store(["--cache-dir", cache, "--connections", "2", "--range-size", "16M"],
                        ["pull", f"{url}/{env.layer_id('d1')}", dest])
    time.sleep(1.0)
    env.nginx.kill()
    time.sleep(0.5)
    env.nginx.start()
    out, err = p.communicate(timeout=120)
    check(p.returncode == 0, f"pull across a server restart failed: {err}")
    restore_and_check(env, dest, "d1", w)
    cache2, dest2 = os.path.join(w, "cache2"), os.path.join(w, "dest2")
    p = env.start_store(["--cache-dir", cache2, "--connections", "2", "--retries", "2"],
                        ["pull", f"{url}/{env.layer_id('d1')}", dest2])
    time.sleep(1.0)
    env.nginx.kill()
    try:
        out, err = p.communicate(timeout=60)
    finally:
        env.nginx.start()
    check(p.returncode != 0, "pull from a dead server succeeded")
    check("attempts" in err and ".zst" in err, f"error: {err}")
    check(not cache_layers(cache2) or env.layer_id("d1") not in str(cache_layers(cache2)), "")
    check(not os.path.exists(dest2), "a destination appeared")


def case_concurrent_imports(env):
    """Two pulls of one snapshot at once into one cache: one download (the
    bytes nginx sent for the base layer's object are one object's), both
    directories complete."""
    w = env.scratch("concurrent")
    url = slow_store(env, w, 32768)
    cache = os.path.join(w, "cache")
    before = len(env.nginx.access_lines())
    procs = [env.start_store(["--cache-dir", cache, "--connections", "2"],
                             ["pull", f"{url}/{env.layer_id('d1')}", os.path.join(w, f"d{i}")])
             for i in range(2)]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results):
        check(p.returncode == 0, f"concurrent pull failed: {err}")
    stats = [json.loads(out) for out, _ in results]
    check(sum(s["layers_fetched"] for s in stats) == 2, f"two layers, fetched {stats}")
    root = os.path.join(env.nginx.root, os.path.basename(w))
    for name in ("base", "d1"):
        obj = os.path.basename(layer_object(env, root, name))
        sent = sum(int(line[3]) for line in env.nginx.access_lines()[before:] if line[1].endswith(obj))
        size = os.path.getsize(os.path.join(root, "objects", obj))
        check(sent <= size + 4096, f"nginx sent {sent} bytes of {name}'s {size}-byte object: two downloads")
    for i in range(2):
        check(os.stat(os.path.join(w, f"d{i}", "memory-ranges")).st_size > 0, "")
    restore_and_check(env, os.path.join(w, "d1"), "d1", w)


def case_kill_pull(env):
    """kill -9 of a pull: its half-written layer never enters the cache; gc
    removes it; the next pull is whole."""
    w = env.scratch("kill")
    url = slow_store(env, w, 8192)
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    p = env.start_store(["--cache-dir", cache, "--connections", "1"], ["pull", f"{url}/{env.layer_id('d1')}", dest])
    # killed once its first layer is being written (a fixed wait raced a
    # slow start on a loaded machine), a little into it
    deadline = time.monotonic() + 20
    while not cache_tmp(cache) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    p.kill()
    p.communicate(timeout=30)
    check(not cache_layers(cache), f"a killed pull left layers: {cache_layers(cache)}")
    check(cache_tmp(cache), "the killed pull had no temporary file (was it done already?)")
    env.store(["--cache-dir", cache], ["cache", "gc"])
    check(not cache_tmp(cache), f"gc left {cache_tmp(cache)}")
    env.pull(f"{url}/{env.layer_id('d1')}", dest, cache)
    restore_and_check(env, dest, "d1", w)


def case_interrupt_pull(env):
    """SIGINT of a pull (Ctrl-C) with the server stalled: it ends within
    2 s (exit 130), its temporary layer removed without a gc, no layer in
    the cache, no destination or partial directory; the next pull is whole."""
    w = env.scratch("interrupt")
    url = slow_store(env, w, 8192)
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    p = env.start_store(["--cache-dir", cache, "--connections", "1"], ["pull", f"{url}/{env.layer_id('d1')}", dest])
    time.sleep(1.5)
    check(cache_tmp(cache), "the pull had no temporary file (was it done already?)")
    nginx = env.nginx.proc.pid
    os.kill(nginx, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        os.kill(nginx, signal.SIGCONT)
    check(p.returncode == 130 and "cancelled" in err, f"the interrupted pull: {p.returncode} {err}")
    check(took < 2, f"the interrupted pull took {took:.2f} s to end")
    check(not cache_tmp(cache) and not cache_layers(cache),
          f"an interrupted pull left {cache_tmp(cache)} {cache_layers(cache)}")
    check(not [n for n in os.listdir(w) if n == "dest" or ".partial-" in n],
          f"an interrupted pull left {os.listdir(w)}")
    env.pull(f"{url}/{env.layer_id('d1')}", dest, cache)
    restore_and_check(env, dest, "d1", w)
    print(f"  the pull ended {took:.2f} s after SIGINT")


def case_eviction_by_size(env):
    """A cache bounded in bytes: pulling full2 after d1's chain evicts the
    least recently used layers first, and the total stays under the bound."""
    w = env.scratch("evict")
    root = os.path.join(w, "store")
    env.push("d1", "file://" + root)
    env.push("full2", "file://" + root)
    cache = os.path.join(w, "cache")
    sizes = {n: os.path.getsize(os.path.join(env.path(n), "memory-ranges")) for n in ("base", "d1", "full2")}
    limit = sizes["full2"] + sizes["d1"] + MIB
    check(limit < sizes["full2"] + sizes["d1"] + sizes["base"], "sizes do not make eviction necessary")
    opts = ["--cache-size", str(limit)]
    env.pull(f"file://{root}/{env.layer_id('d1')}", os.path.join(w, "d1"), cache, opts)
    env.pull(f"file://{root}/{env.layer_id('full2')}", os.path.join(w, "full2"), cache, opts)
    entries = env.store(["--cache-dir", cache, "--cache-size", str(limit)], ["cache", "ls"])
    digests = {hashlib.sha256(open(os.path.join(env.path(n), "memory-ranges"), "rb").read()).hexdigest(): n
               for n in sizes}
    names = sorted(digests[e["digest"]] for e in entries)
    check(names == ["d1", "full2"], f"the cache holds {names}: base (least recently used) should be gone")
    size = env.store(["--cache-dir", cache, "--cache-size", str(limit)], ["cache", "size"])
    check(size["bytes"] <= limit, f"cache holds {size['bytes']} bytes, bound {limit}")
    check(not os.path.exists(os.path.join(cache, "snapshots", env.layer_id("base"))),
          "base's pulled directory stayed after its layer was evicted")
    # the pulled d1 directory still works: its layers are its own hard links
    restore_and_check(env, os.path.join(w, "full2"), "full2", w)


def case_mapped_layer_not_evicted(env):
    """A layer that a running VM maps (on-demand restore of a pulled
    snapshot) is in use: a pull that would need its room fails with a clear
    error and evicts nothing in use; once the VM is gone it succeeds."""
    w = env.scratch("pinned")
    root = os.path.join(w, "store")
    env.push("d1", "file://" + root)
    env.push("full2", "file://" + root)
    cache = os.path.join(w, "cache")
    sizes = {n: os.path.getsize(os.path.join(env.path(n), "memory-ranges")) for n in ("base", "d1", "full2")}
    limit = sizes["full2"] + MIB   # full2 fits only if base and d1 go
    opts = ["--cache-size", str(limit)]
    d1 = os.path.join(w, "d1")
    env.pull(f"file://{root}/{env.layer_id('d1')}", d1, cache, opts)
    with ApiShim(SHIM, workdir=w, name="vm") as vm:
        status, reply = vm.restore(d1, "ondemand", kernel=GUEST)
        check(status == 204, f"restore: {status} {reply}")
        connect(vm).close()
        entries = env.store(["--cache-dir", cache] + opts, ["cache", "ls"])
        check(all(e["in_use"] for e in entries) and len(entries) == 2, f"cache ls while mapped: {entries}")
        r = env.pull(f"file://{root}/{env.layer_id('full2')}", os.path.join(w, "full2"), cache, opts, ok=False)
        check("in use" in r.stderr, f"error: {r.stderr}")
        check(len(cache_layers(cache)) == 2, f"a mapped layer was evicted: {cache_layers(cache)}")
        conn = connect(vm)
        check(conn.sum(*REGION_B) == env.sums["d1"][1], "the running VM's memory changed")
        conn.close()
    env.pull(f"file://{root}/{env.layer_id('full2')}", os.path.join(w, "full2"), cache, opts)


def case_no_space_in_cache(env):
    """A cache directory on a file system too small for the layer: a clear
    error, nothing in the cache."""
    w = env.scratch("enospc")
    mnt = os.path.join(w, "small")
    os.makedirs(mnt)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", mnt], capture_output=True, text=True)
    if r.returncode != 0:
        print(f"  (skipped: cannot mount a tmpfs here: {r.stderr.strip()})")
        return
    try:
        root = os.path.join(w, "store")
        env.push("d1", "file://" + root)
        cache, dest = os.path.join(mnt, "cache"), os.path.join(w, "dest")
        r = env.pull(f"file://{root}/{env.layer_id('d1')}", dest, cache, ok=False)
        check("No space" in r.stderr or "no space" in r.stderr, f"error: {r.stderr}")
        check(not cache_layers(cache) and not cache_tmp(cache), "the cache holds something")
    finally:
        subprocess.run(["umount", mnt], check=True)


def case_ls_in_order(env):
    """ls lists the manifests in the order of their ids (it sorted the
    pointers to them), whatever order the store's listing has."""
    import uuid
    root = os.path.join(env.scratch("ls-order"), "store")
    os.makedirs(os.path.join(root, "manifests"))
    for _ in range(12):
        open(os.path.join(root, "manifests", f"{uuid.uuid4()}.json"), "w").close()
    ids = [e["id"] for e in env.store([], ["ls", "file://" + root])]
    check(len(ids) == 12 and ids == sorted(ids), f"ls: {ids}")


def case_timeout_bounds_a_pull(env):
    """[store] timeout bounds a whole pull: against a server that never
    answers for objects, vsnap-store fails when it passes, naming the object
    and the deadline, with nothing in the cache; a timeout that is not whole
    seconds is refused naming the key."""
    w = env.scratch("timeout")
    url = slow_store(env, w, 65536)
    conf = os.path.join(w, "store.conf")
    with open(conf, "w") as f:
        f.write("[store]\ntimeout = 2\n")
    stall = StallingProxy(env.nginx)
    try:
        cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
        ref = f"{stall.url('store', os.path.basename(w))}/{env.layer_id('d1')}"
        t0 = time.monotonic()
        r = env.pull(ref, dest, cache, ["--config", conf], ok=False)
        elapsed = time.monotonic() - t0
        check("deadline of 2 s" in r.stderr and ".zst" in r.stderr, f"error: {r.stderr}")
        check(1.5 < elapsed < 6, f"the pull failed after {elapsed:.1f} s, its deadline 2 s")
        check(not cache_layers(cache) and not os.path.exists(dest), "the timed-out pull left something")
    finally:
        stall.close()
    with open(conf, "w") as f:
        f.write("[store]\ntimeout = 5m\n")
    r = env.pull(f"{url}/{env.layer_id('d1')}", os.path.join(w, "d2"), os.path.join(w, "c2"), ["--config", conf],
                 ok=False)
    check("[store] timeout" in r.stderr and "5m" in r.stderr, f"a bad timeout: {r.stderr}")


# The fetch's connections; a pull may use one more: a connection libcurl
# gives up (one the server closed, a reply it could not read to the end) is
# replaced, and one spare keeps the bound from failing on such a replacement.
REUSE_CONNECTIONS = 4
REUSE_BOUND = REUSE_CONNECTIONS + 1


def case_pull_reuses_connections(env):
    """A pull of a memory + disk chain (the shim's s2 over s1: two manifests,
    four layers, their files) from nginx on 4 connections with 1 MiB ranges
    runs all its requests on at most 4 + 1 TCP connections, where it opened
    one per request: the fetch's connections stay open from layer to layer
    and carry the manifests, seek tables and small files between."""
    o = shim_store.origin(env)
    w = env.scratch("reuse")
    before = len(env.nginx.access_lines())
    t0 = time.monotonic()
    r = env.pull(f"{o.http}/{o.id}", os.path.join(w, "dest"), os.path.join(w, "cache"),
                 ["--connections", str(REUSE_CONNECTIONS), "--range-size", "1M"])
    elapsed = time.monotonic() - t0
    lines = env.nginx.access_lines()[before:]
    conns = {line[5] for line in lines}
    check(r["layers_fetched"] >= 3, f"the pull fetched {r['layers_fetched']} layers")
    check(len(lines) > 3 * REUSE_BOUND, f"only {len(lines)} requests: the bound says nothing")
    check(len(conns) <= REUSE_BOUND,
          f"{len(lines)} requests on {len(conns)} connections (at most {REUSE_BOUND})")
    print(f"  pull over http: {len(lines)} requests on {len(conns)} connections, {elapsed:.2f} s", flush=True)


def case_push_reuses_connections(env):
    """A push of the chain d1 over base to nginx: each object's streamed PUT
    opens a connection of its own (its body cannot be sent again on a
    connection found closed), every other request (HEADs, the manifests'
    PUTs) reuses one: at most one per object + 1."""
    w = env.scratch("push-reuse")
    before = len(env.nginx.access_lines())
    r = env.push("d1", env.nginx.url("store", os.path.basename(w)))
    lines = env.nginx.access_lines()[before:]
    conns = {line[5] for line in lines}
    streamed = [line for line in lines if line[0] == "PUT" and line[1].endswith(".zst")]
    check(streamed and len(lines) > len(streamed) + 3, f"push: {len(lines)} requests, {r}")
    check(len(conns) <= len(streamed) + 1,
          f"push: {len(lines)} requests, {len(streamed)} objects, on {len(conns)} connections")
    print(f"  push over http: {len(lines)} requests ({len(streamed)} objects) on {len(conns)} connections",
          flush=True)


def case_s3_reuses_connections(env):
    """Push and pull of d1's chain through the RADOS Gateway, counted at a
    TCP relay in front of it: the gateway's access log (beast) names the
    client's address without its port, and the handle it prints repeats
    across connections, so it cannot tell them apart. The push's requests
    (HEADs, PUTs, the manifests) on at most 2 connections, the pull's on
    4 + 1; they used to open one per request."""
    w = env.scratch("s3-reuse")
    relay = ConnectionCounter(env.rgw.port)
    try:
        s3 = {"AWS_ENDPOINT_URL": relay.endpoint}
        url = "s3://vsnap-test/reuse"
        r = env.store([], ["push", env.path("d1"), url], env=s3)
        pushed = relay.accepted
        check(pushed <= 2, f"the push opened {pushed} connections")
        env.store(["--cache-dir", os.path.join(w, "cache"), "--connections", str(REUSE_CONNECTIONS),
                   "--range-size", "1M"], ["pull", f"{url}/{r['id']}", os.path.join(w, "dest")], env=s3)
        pulled = relay.accepted - pushed
        check(pulled <= REUSE_BOUND, f"the pull opened {pulled} connections (at most {REUSE_BOUND})")
        print(f"  S3: push on {pushed} connections, pull on {pulled}", flush=True)
    finally:
        relay.close()
    restore_and_check(env, os.path.join(w, "dest"), "d1", w)


def case_idle_connections_closed_by_the_server(env):
    """nginx closes keep-alive connections idle for 1 s (/idle-1s/); a
    client pausing 2 s between rounds of requests finds the connection it
    would reuse closed before each of them, and every request still
    succeeds with one retry at most. nginx's log shows both: requests of a
    round share a connection, and each round needed a new one (the pause
    is 1 s longer than nginx's timeout: a loaded machine delays its timer,
    and a connection nginx had not closed yet would be reused)."""
    w = env.scratch("idle")
    prefix = os.path.basename(w)
    os.makedirs(os.path.join(env.nginx.root, prefix))
    rounds = 5
    before = len(env.nginx.access_lines())
    r = subprocess.run([IDLE_CLIENT, env.nginx.url("idle-1s", prefix), "2000", str(rounds)],
                       capture_output=True, text=True, timeout=120)
    check_no_sanitizer_report("store-idle-client", r.stderr)
    check(r.returncode == 0, f"store-idle-client -> {r.returncode}: {r.stderr}")
    lines = env.nginx.access_lines()[before:]
    per_round = 5
    check(len(lines) == 1 + per_round * rounds, f"{len(lines)} requests, not 1 + {per_round} x {rounds}")
    seen, reused = set(), 0
    for i, line in enumerate(lines):
        if (i - 1) % per_round == 0:
            check(line[5] not in seen, f"round {(i - 1) // per_round}'s first request on a connection "
                                       f"idle for the pause: nginx closed none")
        reused += line[5] in seen
        seen.add(line[5])
    check(reused >= 2 * rounds, f"{len(lines)} requests on {len(seen)} connections: little reuse")



# --- TLS: https:// and S3 through nginx's TLS server, its throwaway CA -------

CERT_PROBLEM = "SSL certificate problem"


def ca_opts(env):
    return ["--ca-file", env.nginx.tls.ca]


def layer_files(d):
    """A snapshot directory's layers (memory and disk): what must arrive
    byte for byte (state.json names the parent where each host keeps it)."""
    return sorted(n for n in os.listdir(d) if n == "memory-ranges" or n.endswith(".layer"))


def tls_connections(lines):
    """{connection: (session, protocol, first request's path, opened at,
    client port)} in the order nginx accepted them (opened at: when it was
    logged less how long its connection had been open)."""
    conns = {}
    for line in lines:
        if line[9] == "1":
            conns[line[5]] = (line[6], line[7], line[1], float(line[10]) - float(line[11]), int(line[12]))
    return dict(sorted(conns.items(), key=lambda item: item[1][3]))


def case_https_round_trip(env):
    """A memory + disk chain (the shim's s2 over s1) on host A, pushed
    through https:// (WebDAV PUT over TLS) with --ca-file, pulled on host B
    through https:// with --ca-file: B's layers are A's bytes. A shim on host
    C whose --store-config names [store] ca_file restores it from https://
    on demand: SUM and BLKSUM are the origin's."""
    o = shim_store.origin(env)
    w = env.scratch("https")
    a = os.path.join(w, "hostA")
    env.pull(f"{o.http}/{o.id}", a, os.path.join(w, "hostA-cache"))
    url = env.nginx.tls_url("store", "tls-round-trip")
    before = len(env.nginx.tls_access_lines())
    r = env.store(ca_opts(env), ["push", a, url])
    check(r["id"] == o.id and r["objects_sent"] >= 4, f"push over https: {r}")
    pushed = env.nginx.tls_access_lines()[before:]
    check(any(line[0] == "PUT" and line[1].endswith(".zst") and line[2] in ("201", "204") for line in pushed),
          f"no object PUT through the TLS server: {pushed}")
    dest, cache = os.path.join(w, "hostB"), os.path.join(w, "hostB-cache")
    p = env.pull(f"{url}/{o.id}", dest, cache, ca_opts(env) + ["--connections", "4", "--range-size", "1M"])
    check(p["layers_fetched"] >= 3, f"pull over https: {p}")
    names = layer_files(a)
    check("memory-ranges" in names and any(n.startswith("disk-") for n in names), f"host A's layers: {names}")
    check(layer_files(dest) == names, f"host B's layers {layer_files(dest)}, host A's {names}")
    for n in names:
        check(open(os.path.join(dest, n), "rb").read() == open(os.path.join(a, n), "rb").read(),
              f"{n} pulled over https differs from host A's")
    conns = tls_connections(pushed)
    print(f"  push over https: {len(pushed)} requests on {len(conns)} connections "
          f"({sum(c[0] == 'r' for c in conns.values())} resumed a TLS session)", flush=True)
    hostc = shim_store.Host(env, w, "hostC", ca_file=env.nginx.tls.ca)
    with hostc.shim() as vm:
        shim_store.restore_checked(env, vm, f"{url}/{o.id}", hostc.work, o)


def timed_store(env, opts, args, env_vars=None):
    t0 = time.monotonic()
    r = env.store(opts, args, ok=False, env=env_vars)
    return r, time.monotonic() - t0


def case_https_untrusted(env):
    """Without the CA (the default retries on): push and pull fail with
    libcurl's words and the URL, in under 2 s (a retried request would back
    off 0.2 + 0.4 + 0.8 + 1.6 s), no HTTP request reached nginx (the
    handshake failed), nothing entered the store, the cache or the
    destination. So does a certificate that does not name the host
    (127.0.0.2), the CA given. A CA bundle that cannot be used is refused
    before any request, naming the file and the option."""
    w = env.scratch("https-untrusted")
    name = os.path.basename(w)
    url = env.nginx.tls_url("store", name)
    before = len(env.nginx.tls_access_lines())
    r, took = timed_store(env, [], ["push", env.path("d1"), url])
    check(len(env.nginx.tls_access_lines()) == before, "the refused push's requests reached nginx")
    check(CERT_PROBLEM in r.stderr and url in r.stderr and "not retried" in r.stderr, f"push: {r.stderr}")
    check(took < 2, f"the refused push took {took:.2f} s")
    check(not os.path.exists(os.path.join(env.nginx.root, name)), "the refused push wrote to the store")
    env.push("d1", url, ca_opts(env))
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    env.pull(f"file://{env.nginx.root}/{name}/{env.layer_id('base')}", os.path.join(w, "had"), cache)
    had = cache_layers(cache)
    mark = len(env.nginx.tls_access_lines())
    r, took_pull = timed_store(env, ["--cache-dir", cache], ["pull", f"{url}/{env.layer_id('d1')}", dest])
    check(CERT_PROBLEM in r.stderr and f"{url}/manifests/" in r.stderr, f"pull: {r.stderr}")
    check(took_pull < 2, f"the refused pull took {took_pull:.2f} s")
    check(cache_layers(cache) == had and not cache_tmp(cache), f"the cache: {cache_layers(cache)}, had {had}")
    check(not os.path.exists(dest) and not [n for n in os.listdir(w) if ".partial" in n],
          f"the refused pull left {os.listdir(w)}")
    check(len(env.nginx.tls_access_lines()) == mark, "the refused pull's requests reached nginx")
    other = env.nginx.tls_url("store", name, host="127.0.0.2")
    r, took_name = timed_store(env, ["--cache-dir", cache] + ca_opts(env), ["pull", f"{other}/{env.layer_id('d1')}", dest])
    check("no alternative certificate subject name" in r.stderr and other in r.stderr and took_name < 2,
          f"a certificate for another name ({took_name:.2f} s): {r.stderr}")
    check(cache_layers(cache) == had and not cache_tmp(cache) and not os.path.exists(dest), "after the wrong name")
    lines = env.nginx.tls_access_lines()
    check(len(lines) == mark, "the wrong name's requests reached nginx")
    missing = os.path.join(w, "no-such-ca.pem")
    key = os.path.join(env.nginx.tls.dir, "server.key")
    for ca, words in ((missing, ["--ca-file", missing, "cannot read"]), (key, ["--ca-file", key, "not a CA bundle"])):
        r, _ = timed_store(env, ["--cache-dir", cache, "--ca-file", ca], ["pull", f"{url}/{env.layer_id('d1')}", dest])
        for word in words:
            check(word in r.stderr, f"--ca-file {ca}: {r.stderr}")
    conf = os.path.join(w, "store.conf")
    with open(conf, "w") as f:
        f.write(f"[store]\nca_file = {missing}\n")
    r, _ = timed_store(env, ["--config", conf], ["ls", url])
    check("[store] ca_file" in r.stderr and missing in r.stderr, f"[store] ca_file {missing}: {r.stderr}")
    check(len(env.nginx.tls_access_lines()) == len(lines), "a refused CA bundle still sent requests")
    print(f"  refused without the CA: push {took:.2f} s, pull {took_pull:.2f} s; another name: "
          f"{took_name:.2f} s", flush=True)


def case_https_reuses_connections_and_sessions(env):
    """A pull of the shim's memory + disk chain through the TLS server on 4
    connections with 1 MiB ranges: all its requests on at most 4 + 1
    connections and on more than one (the server offers HTTP/2, which
    would carry every range on one), HTTP/1.1 and TLS 1.3; the transport's
    handles share TLS sessions (its CURLSH), so a later connection offers
    one another connection made, and the server resumes every session
    offered. The pull goes through a relay that reads each ClientHello
    (TlsHelloRelay in servers.py): which connections offer one is libcurl's
    session cache's business, not an order to assert. The first cannot
    (there is none yet); on a fresh machine under AddressSanitizer, two
    connections opened for a layer's ranges just after a third had resumed
    a session sent ClientHellos with no pre_shared_key (1 run of 6), so the
    order of full handshakes and resumptions is not what the test checks."""
    o = shim_store.origin(env)
    w = env.scratch("https-reuse")
    relay = TlsHelloRelay(env.nginx.tls_port)
    before = len(env.nginx.tls_access_lines())
    t0 = time.monotonic()
    try:
        r = env.pull(f"{relay.tls_endpoint}/store/shim/{o.id}", os.path.join(w, "dest"),
                     os.path.join(w, "cache"),
                     ca_opts(env) + ["--connections", str(REUSE_CONNECTIONS), "--range-size", "1M"])
    finally:
        relay.close()
    elapsed = time.monotonic() - t0
    lines = env.nginx.tls_access_lines()[before:]
    conns = tls_connections(lines)
    sessions = [(s, p, path, relay.offered.get(port)) for s, p, path, _, port in conns.values()]
    first_request = lines[0][1] if lines else None
    offered = [c for c in sessions if c[3]]
    check(r["layers_fetched"] >= 3 and len(lines) > 3 * REUSE_BOUND, f"{len(lines)} requests: {r}")
    check(2 <= len(conns) <= REUSE_BOUND,
          f"{len(lines)} requests on {len(conns)} connections (2 to {REUSE_BOUND})")
    check(all(line[8] == "HTTP/1.1" for line in lines), f"HTTP versions: {sorted({l[8] for l in lines})}")
    check(all(p == "TLSv1.3" for _, p, _, _ in sessions), f"protocols: {sessions}")
    check(all(c[3] is not None for c in sessions), f"a connection the relay did not see a ClientHello on: {sessions}")
    check(first_request and f"/manifests/{o.id}" in first_request, f"the first request: {first_request}")
    check([(s, offer) for s, _, path, offer in sessions if path == first_request] == [(".", False)],
          f"the manifest's connection offered a session or resumed one (r: resumed): {sessions}")
    check(offered, f"no connection offered a session another one made: the handles share none: {sessions}")
    check(all(c[0] == ("r" if c[3] else ".") for c in sessions),
          f"a session offered and not resumed, or one resumed without an offer (r: resumed): {sessions}")
    print(f"  pull over https: {len(lines)} requests on {len(conns)} connections, {len(offered)} offered "
          f"a session and resumed it (in the order opened: {' '.join(c[0] for c in sessions)}), "
          f"{elapsed:.2f} s", flush=True)


def case_s3_over_tls(env):
    """S3 through nginx's TLS server (relaying to the RADOS Gateway, the
    Host header kept for SigV4): a push of d1's chain (multipart for the
    64 MiB base) with the CA in AWS_CA_BUNDLE, a pull with the CA in the
    configuration's [s3] ca_file, which wins over an AWS_CA_BUNDLE naming
    a file that does not exist; restored, the guest's sums are the
    origin's. Without a CA: refused, libcurl's words. The gateway's plain
    http endpoint ignores a stale AWS_CA_BUNDLE."""
    w = env.scratch("s3-tls")
    url = "s3://vsnap-test/tls"
    before = len(env.nginx.tls_access_lines())
    tls_env = {"AWS_ENDPOINT_URL": env.nginx.tls_endpoint, "AWS_CA_BUNDLE": env.nginx.tls.ca}
    r = env.store([], ["push", env.path("d1"), url], env=tls_env)
    lines = env.nginx.tls_access_lines()[before:]
    check(any(line[0] == "POST" and "/vsnap-test/tls/objects/" in line[1] for line in lines),
          f"no multipart upload through the TLS server: {lines}")
    conf = os.path.join(w, "store.conf")
    with open(conf, "w") as f:
        f.write(f"[s3]\nendpoint = {env.nginx.tls_endpoint}\nca_file = {env.nginx.tls.ca}\n")
    dest = os.path.join(w, "dest")
    env.store(["--config", conf, "--cache-dir", os.path.join(w, "cache"), "--connections", "4"],
              ["pull", f"{url}/{r['id']}", dest], env={"AWS_CA_BUNDLE": os.path.join(w, "absent.pem")})
    restore_and_check(env, dest, "d1", w)
    r2, took = timed_store(env, [], ["ls", url], env_vars={"AWS_ENDPOINT_URL": env.nginx.tls_endpoint})
    check(CERT_PROBLEM in r2.stderr and took < 2, f"S3 over TLS without the CA ({took:.2f} s): {r2.stderr}")
    r2, _ = timed_store(env, [], ["ls", url], env_vars={**tls_env, "AWS_CA_BUNDLE": os.path.join(w, "absent.pem")})
    check("AWS_CA_BUNDLE" in r2.stderr and "absent.pem" in r2.stderr, f"a missing AWS_CA_BUNDLE: {r2.stderr}")
    # the gateway's own plain-http endpoint has no use for a bundle, stale or not
    listed = env.store([], ["ls", url], env={"AWS_CA_BUNDLE": os.path.join(w, "absent.pem")})
    check(r["id"] in [m["id"] for m in listed], f"ls over plain http with a stale AWS_CA_BUNDLE: {listed}")

CASES = [v for k, v in list(globals().items()) if k.startswith("case_")]
shim_store.setup(SHIM, GUEST)
CASES += shim_store.CASES
if os.environ.get("VIRTVSNAPD") and not NO_S3:
    import daemon_cases  # noqa: E402  (virtvsnapd with a store: tests/store/daemon_cases.py)
    CASES += daemon_cases.CASES


S3_CASES = {case_two_hosts_s3, case_s3_reuses_connections, case_s3_over_tls}


def main():
    for tool in ("nginx",) + (() if NO_S3 else ("radosgw", "ceph-mon", "ceph-osd", "monmaptool")):
        if not shutil.which(tool):
            print(f"{tool} is missing (scripts/setup.sh installs it)")
            return 1
    return run_cases(CASES, Env, "vsnap-store-", wanted, unmount_small)


def wanted(case):
    return (not ONLY or case.__name__[5:] in ONLY) and not (NO_S3 and case in S3_CASES)


def unmount_small(workdir):
    """The small file systems cases mounted (named small/) go before the directory."""
    subprocess.run(["umount", "-q"] + [os.path.join(r, d) for r, ds, _ in os.walk(workdir)
                                      for d in ds if d == "small"], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())

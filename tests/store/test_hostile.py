#!/usr/bin/python3
"""A snapshot store is untrusted input (issue 24, "The store"): vsnap-store
pulls from a hostile HTTP store of the test's own (hostile_store.py, Python's
http.server on 127.0.0.1) and must refuse what it serves, quickly, by name,
keeping nothing of it and within bounded memory and file descriptors.

    test_hostile.py <vsnap-store> <vsnap-shim> <vsnap-testguest> [CASE...]

Two real snapshots (the shim and the test guest, different fills) are made
once and pushed to a good store: the victim and the attacker. Then each case
serves one of the attacker's lies (its docstring says which) and checks
what vsnap-store made of it: the error, the time, its memory and file
descriptors, what is left in the cache and beside the destination."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid

STORE, SHIM, GUEST = (os.path.abspath(a) for a in sys.argv[1:4])
ONLY = sys.argv[4:]
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "persist"))
from persisttest import ApiShim, Fail, check, connect  # noqa: E402
import hostile_store as hs  # noqa: E402
from caserun import run_cases  # noqa: E402

MIB = 1 << 20
LAYER = "memory-ranges"
# what a refused pull may take at most (vsnap-store, the cache, the
# transport): the bombs below claim 512 MiB and more
RSS_BOUND_KIB = 96 * 1024


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


class Run:
    """vsnap-store run to its end: exit status, output, and what it held at
    most, sampled every 10 ms: file descriptors, and RSS (KiB: the VmHWM of
    its own image; wait4's ru_maxrss would count the test's memory too,
    which the vforked child shared before its exec)."""

    def __init__(self, args, timeout=60, config=None):
        argv = [STORE, "--quiet", "--json"] + (["--config", config] if config else []) + args
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdout=self.out, stderr=self.err)
        self.max_fds = self.rss_kib = 0
        done = threading.Event()
        sampler = threading.Thread(target=self.sample, args=(p.pid, done), daemon=True)
        sampler.start()
        killer = threading.Timer(timeout, p.kill)
        killer.start()
        _, status = os.waitpid(p.pid, 0)
        killer.cancel()
        done.set()
        sampler.join()
        p.returncode = os.waitstatus_to_exitcode(status)
        self.seconds = time.monotonic() - t0
        self.timed_out = self.seconds >= timeout
        self.rc = p.returncode
        self.stdout, self.stderr = self.read(self.out), self.read(self.err)
        self.what = " ".join(args)

    @staticmethod
    def read(f):
        f.seek(0)
        return f.read().decode(errors="replace")

    def sample(self, pid, done):
        while not done.is_set():
            try:
                self.max_fds = max(self.max_fds, len(os.listdir(f"/proc/{pid}/fd")))
                with open(f"/proc/{pid}/status") as f:
                    hwm = [line.split()[1] for line in f if line.startswith("VmHWM:")]
                exe = os.readlink(f"/proc/{pid}/exe")
                if hwm and exe == os.path.realpath(STORE):   # not the test's image before the exec
                    self.rss_kib = max(self.rss_kib, int(hwm[0]))
            except OSError:
                pass
            time.sleep(0.01)

    def refused(self, *words):
        """It failed, in time, saying each of words."""
        check(not self.timed_out, f"vsnap-store {self.what} still ran after {self.seconds:.0f} s")
        check(self.rc not in (0, -9), f"vsnap-store {self.what} -> {self.rc}: {self.stdout}")
        for w in words:
            check(w in self.stderr, f"vsnap-store {self.what}: {w!r} not in its error: {self.stderr}")
        return self


class Env:
    def __init__(self, workdir):
        self.dir = workdir
        self.counter = 0
        self.server = hs.HostileServer(os.path.join(workdir, "www"))
        self.snaps = os.path.join(workdir, "snaps")
        os.makedirs(self.snaps)
        self.make_snapshot("victim", 7)
        self.make_snapshot("attacker", 9)
        self.good = self.server.store("good")
        for name in ("victim", "attacker"):
            self.run(["push", self.path(name), "file://" + self.good.dir])

    def make_snapshot(self, name, seed):
        src = ApiShim(SHIM, workdir=self.snaps, name=name)
        try:
            src.boot(GUEST, f"vsnap.fill_mib=8 vsnap.seed={seed} vsnap.heartbeat_ms=100", memory_mib=64)
            connect(src).close()
            src.snapshot_paused(self.path(name))
        finally:
            src.close()

    def path(self, name):
        return os.path.join(self.snaps, name)

    def layer_id(self, name):
        return json.load(open(os.path.join(self.path(name), "state.json")))["memory"]["id"]

    def layer_digest(self, name):
        return sha256_file(os.path.join(self.path(name), LAYER))

    def scratch(self, name):
        self.counter += 1
        p = os.path.join(self.dir, f"{self.counter:02d}-{name}")
        os.makedirs(p)
        return p

    def run(self, args, ok=True, **kw):
        r = Run(args, **kw)
        if ok:
            check(r.rc == 0, f"vsnap-store {r.what} -> {r.rc}: {r.stderr}")
        return r

    def pull(self, url, sid, dest, cache, ok=True, opts=(), **kw):
        return self.run(["--cache-dir", cache] + list(opts) + ["pull", f"{url}/{sid}", dest], ok=ok, **kw)

    def close(self):
        self.server.close()


def cache_files(cache, sub):
    d = os.path.join(cache, sub)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def check_cache_gained_nothing(cache, before=()):
    for sub in ("layers", "tmp"):
        left = [n for n in cache_files(cache, sub) if n not in before]
        check(not left, f"the refused pull left {sub}/{left} in the cache")


def check_nothing_left(w, dest):
    check(not os.path.exists(dest), f"{dest} exists after a refused pull")
    partial = [n for n in os.listdir(w) if ".partial-" in n]
    check(not partial, f"a refused pull left {partial}")


def one_file_snapshot(store, entry_name, kind, size, obj, table, digest=None):
    """A manifest of a new id holding one file, its object in the store."""
    sid = str(uuid.uuid4())
    digest = digest or hashlib.sha256(sid.encode()).hexdigest()
    store.put_object(digest, obj)
    store.put_manifest(hs.manifest(sid, [hs.file_entry(entry_name, kind, size, digest, obj, table)]))
    return sid


# --- cases ---------------------------------------------------------------------

def case_poisoned_layer(env):
    """The attacker's layer served under the victim's digest, its header's
    id and CRC patched to the victim's: refused, naming the store, the
    object and both digests, the cache left empty; the victim then pulled
    from the good store into the same cache is the victim's, byte for byte."""
    w = env.scratch("poisoned")
    evil = env.server.store("evil-poison")
    vid, vdigest = env.layer_id("victim"), env.layer_digest("victim")
    m = env.good.manifest(vid)
    for f in m["files"]:
        if f["name"] != LAYER:
            shutil.copy(os.path.join(env.good.dir, "objects", f"{f['sha256']}.zst"),
                        os.path.join(evil.dir, "objects"))
    fake = hs.patch_layer_id(open(os.path.join(env.path("attacker"), LAYER), "rb").read(), vid)
    obj, table = hs.seekable_of(fake)
    evil.put_object(vdigest, obj)
    m["files"] = [hs.file_entry(LAYER, "layer", len(fake), vdigest, obj, table) if f["name"] == LAYER else f
                  for f in m["files"]]
    evil.put_manifest(m)
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    env.pull(evil.url(), vid, dest, cache, ok=False).refused(
        evil.url(), f"objects/{vdigest}.zst", vdigest, hashlib.sha256(fake).hexdigest())
    check_cache_gained_nothing(cache)
    check_nothing_left(w, dest)
    good = os.path.join(w, "good")
    env.pull(env.good.url(), vid, good, cache)
    check(sha256_file(os.path.join(good, LAYER)) == vdigest, "the victim pulled from the good store "
          "after the evil one is not the victim's layer")


def case_cache_hit_checks(env):
    """A layer in the cache that was never checked (what a vsnap that did
    not compare digests left: here the attacker's bytes under the victim's
    digest) is no hit; nor is a checked one whose size changed since."""
    w = env.scratch("hit")
    vid, vdigest = env.layer_id("victim"), env.layer_digest("victim")
    cache = os.path.join(w, "cache")
    env.run(["--cache-dir", cache, "cache", "size"])   # makes the cache's folders
    fake = hs.patch_layer_id(open(os.path.join(env.path("attacker"), LAYER), "rb").read(), vid)
    with open(os.path.join(cache, "layers", vdigest), "wb") as f:
        f.write(fake)
    dest = os.path.join(w, "dest")
    r = json.loads(env.pull(env.good.url(), vid, dest, cache).stdout)
    check(sha256_file(os.path.join(dest, LAYER)) == vdigest,
          f"a pull hit an unchecked cache entry holding other bytes: {r}")
    with open(os.path.join(cache, "layers", vdigest), "ab") as f:
        f.write(b"\0" * 4096)
    dest2 = os.path.join(w, "dest2")
    r = json.loads(env.pull(env.good.url(), vid, dest2, cache).stdout)
    check(r["layers_fetched"] == 1 and sha256_file(os.path.join(dest2, LAYER)) == vdigest,
          f"a pull hit a cached layer whose size changed: {r}")


def case_layer_bomb(env):
    """A layer of one frame claiming 512 MiB (32 KiB of RLE blocks): refused
    before a buffer is sized by it, the pull's memory bounded, nothing in
    the cache."""
    w = env.scratch("layer-bomb")
    evil = env.server.store("evil-layer-bomb")
    size = 512 * MIB
    obj, table = hs.seekable([(hs.rle_frame(size), size)])
    sid = one_file_snapshot(evil, LAYER, "layer", size, obj, table)
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    r = env.pull(evil.url(), sid, dest, cache, ok=False).refused("frame 0", "64 MiB")
    check(r.rss_kib < RSS_BOUND_KIB, f"the refused layer bomb took {r.rss_kib} KiB of memory")
    check_cache_gained_nothing(cache)
    check_nothing_left(w, dest)


def case_small_file_bombs(env):
    """state.json claiming 256 MiB and 2^62 bytes, config.json 32 MiB (each
    object a few KiB of RLE frames within the frame limit): refused before
    the object is fetched, naming the file and what it may hold."""
    w = env.scratch("file-bombs")
    evil = env.server.store("evil-file-bombs")
    cases = (("state.json", 256 * MIB, "64 MiB"), ("state.json", 1 << 62, "64 MiB"),
             ("config.json", 32 * MIB, "16 MiB"))
    for name, size, limit in cases:
        frames = [(hs.rle_frame(min(64 * MIB, size)), min(64 * MIB, size))] * 4
        obj, table = hs.seekable(frames)
        sid = one_file_snapshot(evil, name, "file", size, obj, table)
        dest = os.path.join(w, f"dest-{name}-{size}")
        before = len(env.server.log)
        r = env.pull(evil.url(), sid, dest, os.path.join(w, "cache"), ok=False).refused(name, limit)
        check(r.rss_kib < RSS_BOUND_KIB, f"{name} of {size} bytes: {r.rss_kib} KiB of memory")
        fetched = [line for line in env.server.log[before:] if "/objects/" in line]
        check(not fetched, f"{name} claiming {size} bytes was fetched: {fetched}")
        check_nothing_left(w, dest)


def case_huge_claim_keeps_the_cache(env):
    """A layer claiming 2^62 bytes is refused before anything is evicted:
    the victim's layer, cached before, is still there."""
    w = env.scratch("huge")
    vid = env.layer_id("victim")
    cache = os.path.join(w, "cache")
    env.pull(env.good.url(), vid, os.path.join(w, "victim"), cache)
    before = cache_files(cache, "layers")
    check(len(before) == 1, f"the victim's pull cached {before}")
    evil = env.server.store("evil-huge")
    obj, table = hs.seekable_of(b"x" * 4096)
    sid = one_file_snapshot(evil, LAYER, "layer", 1 << 62, obj, table)
    dest = os.path.join(w, "dest")
    env.pull(evil.url(), sid, dest, cache, ok=False).refused(str(1 << 62), "before evicting")
    check(cache_files(cache, "layers") == before, f"a 2^62-byte claim emptied the cache: "
          f"{before} -> {cache_files(cache, 'layers')}")
    check_nothing_left(w, dest)


def case_self_parent(env):
    """A manifest naming itself as its parent, and two naming each other:
    refused at once as a cycle (it waited on its own lock for an hour)."""
    w = env.scratch("self-parent")
    evil = env.server.store("evil-cycle")
    m = env.good.manifest(env.layer_id("victim"))
    sid = str(uuid.uuid4())
    evil.put_manifest({**m, "id": sid, "parent": sid})
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    evil.put_manifest(hs.manifest(a, [], parent=b))
    evil.put_manifest(hs.manifest(b, [], disk_parents=[a]))
    for top in (sid, a):
        dest = os.path.join(w, f"dest-{top}")
        r = env.pull(evil.url(), top, dest, os.path.join(w, "cache"), ok=False, timeout=20)
        r.refused("cycle")
        check(r.seconds < 10, f"the cycle took {r.seconds:.1f} s to refuse")
        check_nothing_left(w, dest)


def case_endless_parents(env):
    """A store that invents a new parent for every manifest asked for: the
    pull stops at the format's chain limit and says so, holding a handful of
    file descriptors all along and making no lock file per level."""
    w = env.scratch("endless")
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    url = f"http://127.0.0.1:{env.server.port}/endless"
    r = env.pull(url, str(uuid.uuid4()), dest, cache, ok=False, timeout=120)
    r.refused("deeper than the format's limit on a chain", "4096")
    check(r.max_fds <= 32, f"the endless chain held up to {r.max_fds} file descriptors")
    locks = cache_files(cache, "locks")
    check(len(locks) <= 1, f"the endless chain left {len(locks)} lock files")
    check_nothing_left(w, dest)
    print(f"  refused after {r.seconds:.1f} s, at most {r.max_fds} fds", flush=True)


def case_trickle(env):
    """Objects sent at 1 byte a second: with a floor of 1 KiB/s over a 2 s
    window and one retry, the pull fails in seconds, saying it was too slow
    (libcurl's floor of 1 byte/s never tripped at exactly that)."""
    w = env.scratch("trickle")
    conf = os.path.join(w, "store.conf")
    with open(conf, "w") as f:
        f.write("[store]\nmin_rate = 1K\nmin_rate_window = 2\n")
    cache, dest = os.path.join(w, "cache"), os.path.join(w, "dest")
    r = env.pull(env.good.url(trickle=True), env.layer_id("victim"), dest, cache, ok=False,
                 opts=["--config", conf, "--retries", "1"], timeout=30)
    r.refused("too slow", "2 attempts")
    check(r.seconds < 15, f"the trickle took {r.seconds:.1f} s to cut off")
    check_cache_gained_nothing(cache)
    check_nothing_left(w, dest)
    print(f"  cut off after {r.seconds:.1f} s", flush=True)


CASES = [v for k, v in list(globals().items()) if k.startswith("case_")]


def main():
    if not shutil.which("zstd"):
        print("zstd is missing (scripts/setup.sh installs it)")
        return 1
    return run_cases(CASES, Env, "vsnap-hostile-", lambda case: not ONLY or case.__name__[5:] in ONLY)


if __name__ == "__main__":
    sys.exit(main())

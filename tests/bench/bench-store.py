#!/usr/bin/python3
"""The snapshot store's pull path, in one run, as ratios (issue 11):

  connections  through nginx with limit_rate per connection (an object
               store's per-connection throughput) and without: one
               connection + one decompression thread against N connections
               + N threads, and the plain baseline `curl URL | zstd -d`
  threads      N connections, 1 against N decompression threads
  streamed     vsnap-store's pull (frames decompressed as they arrive)
               against downloading the objects first, then `zstd -d`
               (the baselines fsync what they wrote, as the cache does)
  cache        a pull that hits the cache against one that misses, and
               restore to READY on a hit against a miss (pull + restore)
  levels       compressed size and push time at zstd levels 1, 3 and 9

The snapshot: a VM of --memory-mib with --fill-mib used (the test guest's
fill: incompressible), plus a disk-sized layer of real Debian files (the
host's /usr, --disk-mib, compressible like a root file system) in the same
directory, so it moves as a disk layer would. One JSON line per measurement
and a summary line with every ratio. Targets: >= 3x the single-stream pull
with the per-connection limit, >= 1.5x without it.

usage: bench-store.py STORE SHIM GUEST RESULTS.jsonl [--rate-mib N] ...
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "store"))
sys.path.insert(0, os.path.join(HERE, "..", "persist"))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from persisttest import ApiShim, connect  # noqa: E402
from servers import Nginx  # noqa: E402
from vsnaptest import append_jsonl  # noqa: E402

MIB = 1 << 20


def disk_layer(path, size):
    """A layer-sized file of real Debian files (the host's /usr), starting
    with the layer magic so that the store moves it through the cache as it
    moves disk layers."""
    with open(path, "wb") as out:
        out.write(b"VSNAPLYR")
        tar = subprocess.Popen(["tar", "-c", "--ignore-failed-read", "-f", "-", "/usr/lib", "/usr/share",
                                "/usr/bin"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        left = size - 8
        while left > 0:
            chunk = tar.stdout.read(min(left, 4 * MIB))
            if not chunk:
                break
            out.write(chunk)
            left -= len(chunk)
        tar.kill()
        tar.wait()
    os.chmod(path, 0o600)


class Bench:
    def __init__(self, args, workdir):
        self.args = args
        self.dir = workdir
        self.rows = []
        self.nginx = Nginx(workdir)
        self.snap = os.path.join(workdir, "snap")
        self.make_snapshot()
        self.push_root = os.path.join(self.nginx.root, "bench")
        r = self.store(["push", self.snap, "file://" + self.push_root])
        self.id = r["id"]
        self.objects = sorted(os.path.join(self.push_root, "objects", n)
                              for n in os.listdir(os.path.join(self.push_root, "objects")))
        self.big = [o for o in self.objects if os.path.getsize(o) > MIB]
        self.n = 0

    def make_snapshot(self):
        a = self.args
        src = ApiShim(a.shim, workdir=self.dir, name="src")
        try:
            src.boot(a.guest, f"vsnap.fill_mib={a.fill_mib} vsnap.seed=7 vsnap.heartbeat_ms=100",
                     memory_mib=a.memory_mib)
            connect(src).close()
            src.snapshot_paused(self.snap)
        finally:
            src.close()
        disk_layer(os.path.join(self.snap, "disk-root.layer"), a.disk_mib * MIB)

    def store(self, args, opts=()):
        r = subprocess.run([self.args.store, "--quiet", "--json"] + list(opts) + args,
                           capture_output=True, text=True, timeout=1200)
        if r.returncode != 0:
            raise SystemExit(f"vsnap-store {' '.join(list(opts) + args)}: {r.stderr}")
        return json.loads(r.stdout) if r.stdout.strip() else None

    def fresh(self, name):
        self.n += 1
        return os.path.join(self.dir, f"{self.n:02d}-{name}")

    def pull(self, name, url, opts, cache=None):
        """Wall time of a pull into a fresh (or the given) cache."""
        cache = cache or self.fresh(name + "-cache")
        dest = self.fresh(name)
        t0 = time.monotonic()
        self.store(["pull", f"{url}/{self.id}", dest], ["--cache-dir", cache] + list(opts))
        return time.monotonic() - t0, dest, cache

    def shell_time(self, script):
        t0 = time.monotonic()
        subprocess.run(["bash", "-c", "set -euo pipefail; " + script], check=True, timeout=1200)
        return time.monotonic() - t0

    def curl_zstd(self, base_url, streamed):
        out = self.fresh("curl")
        os.makedirs(out)
        if streamed:
            script = " ; ".join(f"curl -sf {base_url}/objects/{os.path.basename(o)} | zstd -qdc > {out}/{i}"
                                f" && sync {out}/{i}" for i, o in enumerate(self.big))
        else:
            script = " ; ".join(f"curl -sf -o {out}/{i}.zst {base_url}/objects/{os.path.basename(o)} && "
                                f"zstd -qd --rm {out}/{i}.zst -o {out}/{i} && sync {out}/{i}"
                                for i, o in enumerate(self.big))
        t = self.shell_time(script)
        shutil.rmtree(out)
        return t

    def row(self, **kw):
        kw = {"bench": "store", **kw}
        self.rows.append(kw)
        print(json.dumps(kw), flush=True)
        return kw

    def run(self):
        a = self.args
        n = a.connections
        data = sum(os.path.getsize(os.path.join(self.snap, f)) for f in os.listdir(self.snap))
        compressed = sum(os.path.getsize(o) for o in self.objects)
        self.row(what="snapshot", bytes=data, compressed_bytes=compressed,
                 memory_mib=a.memory_mib, fill_mib=a.fill_mib, disk_mib=a.disk_mib)
        whole = str(1 << 40)   # one range per object: a single stream
        single = ["--connections", "1", "--threads", "1", "--range-size", whole]
        parallel = ["--connections", str(n), "--threads", str(a.threads), "--range-size", a.range_size]
        limited = self.nginx.url(f"rate-{a.rate_mib * 1024}k", "bench")
        free = self.nginx.url("store", "bench")
        t = {}
        t["limited_single"], _, _ = self.pull("lim1", limited, single)
        t["limited_parallel"], _, _ = self.pull("limN", limited, parallel)
        t["limited_curl_zstd"] = self.curl_zstd(limited, True)
        t["free_single"], _, _ = self.pull("free1", free, single)
        t["free_parallel"], dest, cache = self.pull("freeN", free, parallel)
        t["free_curl_zstd"] = self.curl_zstd(free, True)
        t["free_download_then_zstd"] = self.curl_zstd(free, False)
        t["free_conns_1_thread"], _, _ = self.pull("free-1thr", free, ["--connections", str(n), "--threads", "1",
                                                                       "--range-size", a.range_size])
        t["cache_hit"], hit_dest, _ = self.pull("hit", free, parallel, cache=cache)
        for k, v in t.items():
            self.row(what="pull", case=k, seconds=round(v, 3), mib_per_s=round(data / MIB / v, 1))
        # restore to READY: on a hit (the pulled directory) and a miss (pull, then restore)
        t_ready_hit = self.restore_ready(hit_dest)
        miss_t, miss_dest, _ = self.pull("miss", free, parallel)
        t_ready_miss = miss_t + self.restore_ready(miss_dest)
        self.row(what="restore_ready", hit_s=round(t_ready_hit, 3), miss_s=round(t_ready_miss, 3))
        for level in (1, 3, 9):
            root = self.fresh(f"level{level}")
            t0 = time.monotonic()
            self.store(["push", self.snap, "file://" + root], ["--level", str(level)])
            secs = time.monotonic() - t0
            size = sum(os.path.getsize(os.path.join(root, "objects", o)) for o in os.listdir(os.path.join(root, "objects")))
            self.row(what="push", level=level, seconds=round(secs, 3), compressed_bytes=size,
                     ratio=round(data / size, 3))
            shutil.rmtree(root)
        summary = self.row(what="summary", connections=n, threads=a.threads, rate_mib_per_conn=a.rate_mib,
                           limited_parallel_over_single=round(t["limited_single"] / t["limited_parallel"], 2),
                           limited_parallel_over_curl_zstd=round(t["limited_curl_zstd"] / t["limited_parallel"], 2),
                           free_parallel_over_single=round(t["free_single"] / t["free_parallel"], 2),
                           free_parallel_over_curl_zstd=round(t["free_curl_zstd"] / t["free_parallel"], 2),
                           threads_n_over_1=round(t["free_conns_1_thread"] / t["free_parallel"], 2),
                           streamed_over_download_then_decompress=round(t["free_download_then_zstd"] / t["free_parallel"], 2),
                           cache_hit_over_miss=round(t["free_parallel"] / t["cache_hit"], 2),
                           ready_miss_over_hit=round(t_ready_miss / t_ready_hit, 2),
                           targets={"limited_parallel_over_single": 3.0, "free_parallel_over_single": 1.5})
        return summary

    def restore_ready(self, snapdir):
        with ApiShim(self.args.shim, workdir=self.dir, name=f"r{self.n}") as dst:
            t0 = time.monotonic()
            status, reply = dst.restore(snapdir, "ondemand")
            if status != 204:
                raise SystemExit(f"restore {snapdir}: {status} {reply}")
            connect(dst).close()
            self.n += 1
            return time.monotonic() - t0

    def close(self):
        self.nginx.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("store")
    p.add_argument("shim")
    p.add_argument("guest")
    p.add_argument("results")
    p.add_argument("--memory-mib", type=int, default=4096)
    p.add_argument("--fill-mib", type=int, default=256)
    p.add_argument("--disk-mib", type=int, default=512)
    p.add_argument("--rate-mib", type=int, default=25, help="nginx limit_rate per connection, MiB/s")
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--threads", type=int, default=max(2, os.cpu_count() or 2))
    p.add_argument("--range-size", default="8M")
    args = p.parse_args()
    workdir = tempfile.mkdtemp(prefix="vsnap-bench-store-")
    try:
        b = Bench(args, workdir)
        try:
            summary = b.run()
        finally:
            b.close()
        append_jsonl(args.results, b.rows)
        print(json.dumps(summary, indent=1))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

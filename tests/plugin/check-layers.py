#!/usr/bin/env python3
"""The include structure of plugin/ (virtvsnapd), checked from the sources.

Layers from top to bottom; a layer holds one or more modules (a module is a
set of files, usually one .c with its .h). A file may include the files of
its own module and of any module in a lower layer; never a higher layer's,
and never another module of its own layer (modules side by side do not call
each other: snapshot.c and save.c, say). Every file of plugin/ must belong
to a module, so a new file is placed on purpose.

usage: check-layers.py PLUGIN_DIR
"""

import fnmatch
import os
import re
import sys

# (layer, [module, ...]); a module is a list of glob patterns under plugin/.
LAYERS = [
    ("main", [["main.c"]]),
    ("rpc: server", [["rpc/server.*"]]),
    ("rpc: dispatch", [["rpc/dispatch.*"]]),
    ("rpc: procedures", [["rpc/xdr-connect.c"], ["rpc/xdr-domain.c"], ["rpc/xdr-block.c"],
                         ["rpc/xdr-events.c"],
                         ["rpc/xdr-snapshot.c"], ["rpc/xdr-network.c"]]),
    ("rpc: what a procedure implements", [["rpc/procedure.h"]]),
    ("rpc: event registry, streams", [["rpc/event-registry.*"], ["rpc/stream.*"]]),
    ("rpc: client", [["rpc/client.*"]]),
    ("rpc: wire", [["rpc/wire.*", "rpc/protocol.h"]]),
    ("driver", [["driver.*", "driver-net.*"], ["driver-block.*"], ["node.*"]]),
    ("persist: entry points", [["persist/snapshot.*"], ["persist/save.*"]]),
    ("persist: operations", [["persist/restore.*"], ["persist/lineage.*"],
                             ["persist/snapshot-vm.*"], ["persist/snapshot-disks.*"],
                             ["persist/job.*"],
                             # the store: pushes, pulls at revert and their jobs
                             ["persist/push.*", "persist/pull-job.*", "persist/import.*"]]),
    ("persist: files", [["persist/snapshot-tree.*"], ["persist/managed-image.*"],
                        ["persist/revert-intent.*"],
                        ["persist/save-image.*"]]),
    ("persist: snapshot directories", [["persist/snapshot-dir.*"]]),
    # process.c starts a run's watcher, and the watcher ends the run: one module.
    ("process", [["process.*", "process-net.*", "shim-events.*"]]),
    ("monitor", [["monitor.*", "http-fds.*"]]),
    # The host side of interfaces: taps and bridges, and ports of libvirt
    # networks (the host's network driver, through libvirt's client library).
    ("host network", [["netdev.*"], ["network-port.*", "host-networks.*"]]),
    # What a launched shim is confined to: its jail's paths, user, cgroup.
    ("jail", [["jail.*"]]),
    ("cgroup", [["cgroup.*"]]),
    ("shared state", [["state.h"]]),
    ("events", [["events.*"]]),
    ("domains", [["domain.*"]]),
    # One operation per domain at a time, waited for with a bound.
    ("domain job lock", [["domain-job-lock.*"]]),
    # Each domain's disk chains between runs (the domain's disk directory).
    ("disk state", [["disk-state.*"]]),
    # Each domain's save area: where its saves and managed saves write.
    ("save area", [["save-area.*"]]),
    ("files", [["atomic-file.*"], ["caller.*"]]),
    # The XML and capabilities configuration, and the GError domain of
    # libvirt's error codes that every layer uses (conf/virt-error.h).
    ("conf", [["conf/*"]]),
    # Test-only crash points (VSNAPD_TEST_HOOK), reachable from anywhere.
    ("test hooks", [["test-hook.*"]]),
]

# Where a quoted include is looked up, after the including file's own
# directory: the daemon's include directories (plugin/meson.build).
INCLUDE_DIRS = ["", "rpc", "conf"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
IGNORED = {"meson.build", "README.md"}


def module_of(path):
    for rank, (layer, modules) in enumerate(LAYERS):
        for index, patterns in enumerate(modules):
            if any(fnmatch.fnmatch(path, p) for p in patterns):
                return rank, index, layer
    return None


def sources(root):
    for base, _, files in os.walk(root):
        for name in files:
            if name.endswith((".c", ".h")):
                yield os.path.relpath(os.path.join(base, name), root)


def resolve(root, including, target):
    """The plugin/ file an include names, or None for one from elsewhere."""
    here = os.path.dirname(including)
    for d in [here] + INCLUDE_DIRS:
        candidate = os.path.normpath(os.path.join(d, target))
        if os.path.isfile(os.path.join(root, candidate)):
            return candidate
    return None


def check(root):
    problems = []
    files = sorted(sources(root))
    for path in files:
        if module_of(path) is None:
            problems.append(f"{path}: in no layer (add it to LAYERS in {sys.argv[0]})")
    for path in files:
        own = module_of(path)
        if own is None:
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = f.read()
        for target in INCLUDE.findall(text):
            dep = resolve(root, path, target)
            theirs = module_of(dep) if dep else None
            if theirs is None:
                continue   # outside plugin/ (glib, the shim's headers, generated)
            if theirs[0] < own[0]:
                problems.append(f"{path} ({own[2]}) includes {dep} of a higher layer "
                                f"({theirs[2]})")
            elif theirs[0] == own[0] and theirs[1] != own[1]:
                problems.append(f"{path} includes {dep}: modules side by side in layer "
                                f"'{own[2]}' must not use each other")
    return problems


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    problems = check(sys.argv[1])
    for p in problems:
        print(p)
    if problems:
        sys.exit(1)
    print(f"plugin/: {len(LAYERS)} layers, every include points down")


if __name__ == "__main__":
    main()

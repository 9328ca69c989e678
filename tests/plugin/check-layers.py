#!/usr/bin/python3
"""virtvsnapd's folders are its layers: the order, checked by tests/lib/layers.py.

usage: check-layers.py PLUGIN_SOURCE_DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import layers  # noqa: E402

# Highest first; folders on one line are peers and do not include each other.
LAYERS = [
    ["main"],                         # main.c: the daemon
    ["rpc"],                          # libvirt's RPC protocol: server, dispatch, procedures
    ["driver"],                       # the API entry points
    ["persist"],                      # snapshots, saves, restores, the store's jobs
    ["run"],                          # starting, confining, watching shims
    ["monitor", "host", "domain"],    # the shim's API client; taps, networks, cgroups; domains
    ["conf"],                         # domain, snapshot and capabilities XML
    ["util"],                         # atomic files, callers, libvirt's errors, test hooks
]

if __name__ == "__main__":
    sys.exit(layers.main(sys.argv, LAYERS, {"main.c": "main"}, "plugin/"))

#!/usr/bin/python3
"""The shim's folders are its layers: the order, checked by tests/lib/layers.py.

usage: check-layers.py SHIM_SOURCE_DIR
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import layers  # noqa: E402

# Highest first; folders on one line are peers and do not include each other.
LAYERS = [
    ["main"],                 # main.c: the program
    ["api"],                  # REST API and command line
    ["vmm"],                  # the VM lifecycle, event monitor, readiness
    ["persist"],              # snapshot and restore of a whole VM
    ["core"],                 # the KVM core: VM, run loop, vCPUs, CPUID
    ["devices"],              # legacy/, virtio/, vsock/, blk/, backend/
    ["block"],                # disk images behind struct blk_backend
    ["boot"],                 # the Linux boot protocol and tables
    ["ram-snapshot"],         # guest RAM to and from layers, restore modes, uffd
    ["platform", "config", "state"],  # the machine map, RAM, buses; VmConfig; state.json values
    ["sandbox"],              # seccomp allow-lists, --confine
]

if __name__ == "__main__":
    sys.exit(layers.main(sys.argv, LAYERS, {"main.c": "main"}, "shim/"))

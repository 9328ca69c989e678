#!/usr/bin/python3
"""No tracked file points outside the repository: what the project relies on
is written in its own docs (docs/), so a fresh clone is complete. Fails on any
tracked file that names the development machines' shared folder, its
reference notes or the KVM probe's findings (git grep over the checkout).

usage: test_self_contained.py <source root>
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkout import SKIP, is_checkout  # noqa: E402

# Built from parts, so that this file does not match itself.
FORBIDDEN = ["shared" + "/reference", "FINDINGS" + ".md", "../" + "shared", "kvm" + "-probe"]


def main():
    root = sys.argv[1]
    if not is_checkout(root):
        return SKIP
    argv = ["git", "-C", root, "grep", "-n", "-I", "-F"]
    for pattern in FORBIDDEN:
        argv += ["-e", pattern]
    found = subprocess.run(argv, capture_output=True, text=True)
    if found.returncode == 1:   # no match
        print(f"no tracked file names {', '.join(FORBIDDEN)}")
        return 0
    if found.returncode != 0:
        print(f"git grep failed: {found.stderr.strip()}")
        return 1
    print("tracked files that point outside the repository (write what they rely on in docs/):")
    print(found.stdout, end="")
    return 1


if __name__ == "__main__":
    sys.exit(main())

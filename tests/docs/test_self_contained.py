#!/usr/bin/python3
"""No tracked file points outside the repository: what the project relies on
is written in its own docs (docs/), so a fresh clone is complete. Fails on any
tracked file that names the development machines' shared folder, its
reference notes or the KVM probe's findings (git grep over the checkout).

usage: test_self_contained.py <source root>
"""

import subprocess
import sys

# Built from parts, so that this file does not match itself.
FORBIDDEN = ["shared" + "/reference", "FINDINGS" + ".md", "../" + "shared", "kvm" + "-probe"]


def main():
    root = sys.argv[1]
    inside = subprocess.run(["git", "-C", root, "rev-parse", "--is-inside-work-tree"],
                            capture_output=True, text=True)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        print(f"{root} is not a git checkout: nothing to check")
        return 77
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

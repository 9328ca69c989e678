"""What the docs checks share: they read the files git tracks, so they run
only in a git checkout (77, meson's skip, elsewhere, as in an unpacked
release tarball)."""

import subprocess

SKIP = 77


def is_checkout(root):
    """True if root is inside a git work tree; else says why it skips."""
    inside = subprocess.run(["git", "-C", root, "rev-parse", "--is-inside-work-tree"],
                            capture_output=True, text=True)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        print(f"{root} is not a git checkout: nothing to check")
        return False
    return True

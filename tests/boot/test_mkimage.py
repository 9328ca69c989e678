#!/usr/bin/python3
"""guest/mkimage.sh builds a Debian root file system image with debootstrap
(systemd, nothing of vsnap inside); here it is built and its contents read
back with e2fsprogs, not booted (a stock kernel does not reach userspace on
this machine's KVM, see shim/README.md).

The image and the downloaded packages are cached in the build directory and
rebuilt when mkimage.sh changes, so only the first run (a few minutes)
downloads anything. Exits 77 (skip) only when the Debian mirror cannot be
reached; everything else that goes wrong fails.

usage: test_mkimage.py <source root> <cache dir>
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import urllib.request

BUILD_TIMEOUT = 1200  # s: debootstrap of a minimal trixie took 3-4 minutes here
SUITE = "trixie"


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def mirror_of(mkimage):
    """The mirror mkimage.sh would pick: the machine's apt mirror."""
    out = subprocess.run(["bash", "-c", f"source <(sed -n '/^machine_mirror()/,/^}}/p' {mkimage}); machine_mirror"],
                         capture_output=True, text=True, timeout=30).stdout.strip()
    return out or "http://deb.debian.org/debian"


def reachable(mirror):
    try:
        with urllib.request.urlopen(f"{mirror.rstrip('/')}/dists/{SUITE}/Release", timeout=20) as r:
            return r.status == 200, ""
    except OSError as e:
        return False, str(e)


def build(mkimage, image, cache, stamp, digest):
    os.makedirs(cache, exist_ok=True)
    if os.path.exists(image) and os.path.exists(stamp) and open(stamp).read() == digest:
        print(f"cached image {image} (mkimage.sh unchanged)")
        return
    res = subprocess.run([mkimage, "-o", image, "-r", SUITE, "-c", os.path.join(cache, "debs"),
                          "-n", "vsnap-stock"], capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    print(res.stdout)
    if res.returncode != 0:
        fail(f"mkimage.sh failed ({res.returncode}):\n{res.stderr}")
    with open(stamp, "w") as f:
        f.write(digest)


def debugfs(image, request):
    res = subprocess.run(["debugfs", "-R", request, image], capture_output=True, text=True, timeout=60)
    return res.stdout


def check_contents(image):
    fsck = subprocess.run(["e2fsck", "-fn", image], capture_output=True, text=True, timeout=120)
    if fsck.returncode != 0:
        fail(f"e2fsck finds the file system unclean:\n{fsck.stdout}{fsck.stderr}")
    label = subprocess.run(["dumpe2fs", "-h", image], capture_output=True, text=True, timeout=30).stdout
    if not re.search(r"Filesystem volume name:\s+vsnap-root", label):
        fail("the file system is not labelled vsnap-root")
    fstab = debugfs(image, "cat /etc/fstab")
    if not re.search(r"^/dev/vda\s+/\s+ext4", fstab, re.M):
        fail(f"/etc/fstab does not mount /dev/vda as /: {fstab!r}")
    if debugfs(image, "cat /etc/hostname").strip() != "vsnap-stock":
        fail("/etc/hostname is not the one given")
    if debugfs(image, "cat /etc/machine-id").strip():
        fail("/etc/machine-id is set: every clone would share it (systemd fills it at first boot)")
    init = debugfs(image, "stat /usr/sbin/init")
    if "Type: symlink" not in init or "systemd" not in init:
        fail(f"/usr/sbin/init is not systemd:\n{init}")
    if "Type: regular" not in debugfs(image, "stat /usr/lib/systemd/systemd"):
        fail("no /usr/lib/systemd/systemd in the image")
    status = debugfs(image, "cat /var/lib/dpkg/status")
    packages = dict(re.findall(r"^Package: (\S+)\n(?:.*\n)*?Version: (\S+)", status, re.M))
    version = packages.get("systemd", "")
    major = int(re.match(r"(\d+)", version).group(1)) if version else 0
    print(f"systemd {version}, {len(packages)} packages")
    if major < 256:
        fail(f"systemd {version or 'missing'}: vmm.notify_socket over vsock-stream needs 256 or later")
    vsnap = [p for p in packages if "vsnap" in p]
    if vsnap or "vsnap-agent" in debugfs(image, "ls -l /usr/bin") + debugfs(image, "ls -l /usr/local/bin"):
        fail(f"the image carries vsnap software: {vsnap}")
    for unit in ("serial-getty@.service", "networking.service"):
        if "Type: regular" not in debugfs(image, f"stat /usr/lib/systemd/system/{unit}"):
            fail(f"no {unit} in the image")


def main():
    if len(sys.argv) != 3:
        fail("usage: test_mkimage.py <source root> <cache dir>")
    source, cache = sys.argv[1], sys.argv[2]
    mkimage = os.path.join(source, "guest", "mkimage.sh")
    for tool in ("debootstrap", "debugfs", "e2fsck", "dumpe2fs"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            fail(f"{tool} is missing (scripts/setup.sh installs debootstrap and e2fsprogs)")
    mirror = mirror_of(mkimage)
    ok, why = reachable(mirror)
    if not ok:
        print(f"SKIP: the Debian mirror {mirror} cannot be reached ({why}): nothing to build from")
        sys.exit(77)
    with open(mkimage, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    image = os.path.join(cache, "stock.img")
    build(mkimage, image, cache, os.path.join(cache, "stock.img.sha256"), digest)
    check_contents(image)
    print(f"ok: {image} from {mirror}: systemd, no agent, root on /dev/vda")


if __name__ == "__main__":
    main()

"""virt-install (Debian's virtinst) against the vsnap connection, as its users
run it to import a disk image: it looks the image up as a storage volume
(virStorageVolLookupByPath), defines and autostarts a dir pool for the
image's directory on the host's storage driver (here libvirtd's, in
namespaces of the test's own, tests/clients/hostdrivers.py), then creates
and starts the domain. The guest reads the image's bytes through its disk;
its interface got a port on the libvirt network."""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostdrivers  # noqa: E402
from hostdrivers import NETWORK, SUBNET, HostDrivers, daemon_with_storage_uri  # noqa: E402
from disktest import DiskGuest, file_sum  # noqa: E402
from vsnapd import TESTGUEST, needs_guest, wait_for  # noqa: E402

MIB = 1 << 20
VIRTINST = "/usr/share/virt-manager"


def virt_install(uri, name, image, home, extra=()):
    """virt-install --import of image as a raw virtio disk, with an interface
    on NETWORK and the test guest as the kernel; home for its log and cache."""
    argv = ["virt-install", "--connect", uri, "--name", name, "--memory", "64", "--vcpus", "1",
            # virtinst picks virtio buses only for QEMU connections; vsnap's are virtio.
            "--osinfo", "linux2022", "--import", "--disk", f"{image},format=raw,bus=virtio",
            "--network", f"network={NETWORK},model=virtio",
            "--boot", f"kernel={TESTGUEST},kernel_args=console=ttyS0 vsnap.ip={SUBNET}.2/24",
            "--graphics", "none", "--vsock", "cid.auto=yes", "--noautoconsole"] + list(extra)
    env = dict(os.environ, HOME=home)
    return subprocess.run(argv, capture_output=True, text=True, timeout=240, env=env)


# virtinst's own answer to "does this connection have the storage API?"
# (support.conn_storage: listAllStoragePools, VIR_ERR_NO_SUPPORT meaning no).
SUPPORT_CHECK = f"""
import sys
sys.path.insert(0, {VIRTINST!r})
from virtinst import VirtinstConnection
conn = VirtinstConnection(sys.argv[1])
conn.open(None, None)
print(conn.support.conn_storage())
"""


def virtinst_sees_storage(uri):
    res = subprocess.run(["/usr/bin/python3", "-c", SUPPORT_CHECK, uri], capture_output=True, text=True,
                         timeout=60)
    if res.returncode != 0:
        raise AssertionError(f"virtinst's support check failed: {res.stderr}")
    return res.stdout.strip() == "True"


def have_virtinst():
    return os.access("/usr/bin/virt-install", os.X_OK) and os.path.isdir(os.path.join(VIRTINST, "virtinst"))


@needs_guest
@unittest.skipUnless(have_virtinst(), "virt-install (Debian's virtinst) is not installed")
class VirtInstallTest(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("network and mount namespaces need root")
        self.env = HostDrivers()

    def tearDown(self):
        self.env.close()

    def test_import_raw_disk(self):
        images = os.path.join(self.env.daemon.dir, "images")
        os.makedirs(images)
        image = os.path.join(images, "disk.raw")
        with open(image, "wb") as f:
            f.write(os.urandom(4 * MIB))
        self.assertTrue(virtinst_sees_storage(self.env.daemon.uri))
        home = os.path.join(self.env.daemon.dir, "home")
        os.makedirs(home)
        res = virt_install(self.env.daemon.uri, "vi1", image, home)
        self.assertEqual(res.returncode, 0, f"{res.stdout}\n{res.stderr}\n{self.env.log()}")
        self.assertIn("running", self.env.daemon.virsh("domstate", "vi1").stdout)

        # The image's directory became an autostarted dir pool of the storage
        # driver, holding the image as a volume.
        host = self.env.storage()
        try:
            pool = host.storagePoolLookupByTargetPath(images)
            self.assertEqual((pool.isActive(), pool.isPersistent(), pool.autostart()), (1, 1, 1))
            self.assertEqual(pool.listVolumes(), ["disk.raw"])
        finally:
            host.close()

        live = self.env.daemon.virsh("dumpxml", "vi1").stdout
        self.assertIn(f"<source file='{image}'", live)
        self.assertIn("portid='", live)
        self.assertEqual(len(self.env.driver.virsh("net-port-list", NETWORK).split()), 1)

        guest = DiskGuest(os.path.join(self.env.daemon.state, "run", "vi1", "vsock.sock"))
        try:
            self.assertEqual(guest.info(0), f"BLK 0 {4 * MIB // 512} 0")   # sectors, writable
            self.assertEqual(guest.sum(0, 0, 4 * MIB), file_sum(image, 0, 4 * MIB))
        finally:
            guest.close()
        self.env.daemon.virsh("destroy", "vi1")
        wait_for(lambda: self.env.driver.virsh("net-port-list", NETWORK).split() == [], what="the port's release")
        self.env.daemon.virsh("undefine", "vi1")


@unittest.skipUnless(have_virtinst(), "virt-install (Debian's virtinst) is not installed")
class WithoutDriverTest(unittest.TestCase):
    def test_virtinst_sees_no_storage_api(self):
        """Without a storage driver virtinst finds no storage API on the
        connection (it asked virConnectListAllStoragePools and got
        VIR_ERR_NO_SUPPORT), instead of an empty pool list that sends it on
        to volume look-ups which fail."""
        daemon = daemon_with_storage_uri("storage:///system?socket=/nonexistent/libvirt-sock")
        try:
            self.assertFalse(virtinst_sees_storage(daemon.uri))
        finally:
            daemon.cleanup()


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""virsh save and restore with the image on another filesystem than the
daemon's state directory: tmpfs (/dev/shm) and the disk, both ways. Between
filesystems the image cannot be moved with copy_file_range or rename (EXDEV);
it must be copied, synced, and renamed within the target filesystem."""

import os
import shutil
import tempfile
import unittest

from test_snapshots import REGION_A, REGION_B, SnapshotTestBase

SHM = "/dev/shm"


class CrossFilesystemSave:
    """Mixed into a SnapshotTestBase; image_parent is where images go."""
    image_parent = None

    def setUp(self):
        super().setUp()
        if not os.path.isdir(SHM):
            self.skipTest(f"{SHM} does not exist")
        self.images = tempfile.mkdtemp(prefix="vsnap-save-fs-", dir=self.image_parent)
        self.addCleanup(shutil.rmtree, self.images, True)
        if os.stat(self.images).st_dev == os.stat(self.daemon.state).st_dev:
            self.skipTest(f"{self.images} and {self.daemon.state} are on one filesystem here")

    def test_save_restore_define_across_filesystems(self):
        self.start_guest("xfs")
        g = self.guest("xfs")
        g.fill(REGION_A, 41)
        g.fill(REGION_B, 42)
        want = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        image = os.path.join(self.images, "xfs.img")
        self.v("save", "xfs", image)
        self.assertEqual(self.state("xfs"), "shut off (saved)")
        with open(image, "rb") as f:
            self.assertEqual(f.read(8), b"VSNAPSAV")
        self.assertEqual(os.listdir(self.images), ["xfs.img"], "a temporary file was left")
        # save-image-define rewrites the image where it is.
        xml = self.v("save-image-dumpxml", image).stdout.replace(
            "</name>", "</name>\n  <description>kept on another filesystem</description>", 1)
        xml_path = os.path.join(self.daemon.dir, "xfs-image.xml")
        with open(xml_path, "w") as f:
            f.write(xml)
        self.v("save-image-define", image, xml_path)
        self.assertIn("kept on another filesystem", self.v("save-image-dumpxml", image).stdout)
        self.v("restore", image)
        self.assertEqual(self.state("xfs"), "running (restored)")
        self.assertEqual(self.sums("xfs"), want)
        self.v("destroy", "xfs")


class StateOnDiskImageOnTmpfsTest(CrossFilesystemSave, SnapshotTestBase):
    image_parent = SHM


class StateOnTmpfsImageOnDiskTest(CrossFilesystemSave, SnapshotTestBase):
    daemon_parent = SHM


if __name__ == "__main__":
    unittest.main(verbosity=2)

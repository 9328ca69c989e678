"""A revert checks all of the snapshot before it touches the running domain,
and a snapshot's files are bound to it: config.json and state.json by their
checksums (common/snapshot/), the layer by its id, the directory by the id
the daemon recorded when it took the snapshot. Each damaged or swapped file
is refused by name while the domain keeps running in the same shim with the
same memory."""

import json
import os
import shutil
import sys
import uuid
import unittest

from test_snapshots import REGION_A, REGION_B, SnapshotTestBase

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import write_state_json  # noqa: E402


class IntegrityTest(SnapshotTestBase):
    def setUp(self):
        super().setUp()
        self.start_guest("i1")
        g = self.guest("i1")
        g.fill(REGION_A, 11)
        g.close()
        self.v("snapshot-create-as", "i1", "s1")
        g = self.guest("i1")
        g.fill(REGION_A, 12)
        g.fill(REGION_B, 13)
        self.at_s2 = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        self.v("snapshot-create-as", "i1", "s2")
        g = self.guest("i1")
        g.fill(REGION_A, 14)
        self.running_sums = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        self.pid = self.daemon.shim_pids()["i1"]
        self.dirs = {name: d for name, (d, _) in self.snapshot_dirs("i1").items()}

    def refused(self, snap, *needles):
        res = self.v("snapshot-revert", "i1", snap, check=False)
        self.assertNotEqual(res.returncode, 0, f"revert to {snap} was not refused")
        for needle in needles:
            self.assertIn(needle, res.stderr)
        # Nothing was touched: same shim, same state, same memory.
        self.assertEqual(self.state("i1"), "running (booted)", res.stderr)
        self.assertEqual(self.daemon.shim_pids()["i1"], self.pid)
        self.assertEqual(self.sums("i1"), self.running_sums)
        return res.stderr.strip()

    def damaged(self, snap, name, change, *needles):
        """Apply change(path) to a file of snap, expect the revert refused,
        put the file back."""
        path = os.path.join(self.dirs[snap], name)
        keep = path + ".good"
        shutil.copy2(path, keep)
        try:
            change(path)
            message = self.refused(snap, *needles)
            print(f"{name}: {message}")
        finally:
            os.replace(keep, path)

    def test_damaged_config_and_state_are_refused_before_the_domain_stops(self):
        def write(text):
            def change(path):
                with open(path, "w") as f:
                    f.write(text)
            return change

        def edit_json(edit, reseal=False):
            def change(path):
                with open(path) as f:
                    doc = json.load(f)
                edit(doc)
                if reseal:
                    write_state_json(path, doc)
                else:
                    with open(path, "w") as f:
                        json.dump(doc, f)
            return change

        def truncate(path):
            os.truncate(path, os.path.getsize(path) // 2)

        self.damaged("s2", "config.json", write("\x00garbage{"), "config.json")
        self.damaged("s2", "config.json", truncate, "config.json")
        self.damaged("s2", "config.json", os.unlink, "config.json")
        self.damaged("s2", "config.json",
                     edit_json(lambda c: c["memory"].update(size=c["memory"]["size"] * 2)),
                     "config.json")
        self.damaged("s2", "state.json",
                     edit_json(lambda s: s["memory"].update(ram_size=s["memory"]["ram_size"] * 2)),
                     "state.json")
        self.damaged("s2", "state.json",
                     edit_json(lambda s: s["vcpus"][0].update(regs=s["vcpus"][0]["regs"][::-1])),
                     "state.json", "checksum")
        # After all that the snapshot itself is fine.
        self.check_revert("i1", "s2", self.at_s2)

    def test_files_of_other_snapshots_are_refused_by_name(self):
        # Another domain's snapshot, for its config.json (its own vsock CID).
        self.start_guest("other", memory_mib=128)
        self.v("snapshot-create-as", "other", "o1")
        other = self.snapshot_dirs("other")["o1"][0]
        self.v("destroy", "other")

        def copy_from(src):
            return lambda path: shutil.copyfile(os.path.join(src, os.path.basename(path)), path)

        self.damaged("s2", "config.json", copy_from(other), "config.json", "SHA-256")
        # s1's layer in s2's directory: not the layer s2's records name.
        self.damaged("s2", "memory-ranges", copy_from(self.dirs["s1"]), "memory-ranges")

        def random_id(resealed):
            def change(path):
                with open(path) as f:
                    doc = json.load(f)
                doc["memory"]["id"] = str(uuid.uuid4())
                if resealed:
                    write_state_json(path, doc)
                else:
                    with open(path, "w") as f:
                        json.dump(doc, f)
            return change

        self.damaged("s2", "state.json", random_id(False), "state.json")
        self.damaged("s2", "state.json", random_id(True), "snapshot layer")
        # All of s1's files in s2's directory: a whole snapshot, but not s2.
        s2 = self.dirs["s2"]
        keep = os.path.join(self.daemon.dir, "s2-kept")   # outside the snapshot tree
        shutil.copytree(s2, keep)
        try:
            for name in ("config.json", "state.json", "memory-ranges"):
                shutil.copyfile(os.path.join(self.dirs["s1"], name), os.path.join(s2, name))
            os.unlink(os.path.join(s2, "memory-ranges.seal"))
            print("s1 in s2's place:", self.refused("s2", "replaced"))
        finally:
            shutil.rmtree(s2)
            os.rename(keep, s2)
        self.check_revert("i1", "s2", self.at_s2)


if __name__ == "__main__":
    unittest.main(verbosity=2)

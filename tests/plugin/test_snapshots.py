"""Snapshots, save/restore and managed save through real virsh and
python3-libvirt, with the test guest's memory checked through its vsock
command port (CONNECT 5000 on the domain's vsock socket: FILL / SUM)."""

import json
import os
import random
import subprocess
import sys
import threading
import time
import unittest

import libvirt

from vsnapd import (DaemonTest, RawClient, VirshEvents, decode_error, domain_xml, needs_guest,
                    wait_for)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import Fail, http_unix, wait_command_port  # noqa: E402

MIB = 1 << 20
# Regions the guest may write: RAM from 16 MiB up (the test guest's rule).
REGION_A = (16 * MIB, 4 * MIB)
REGION_B = (24 * MIB, 2 * MIB)


class Guest:
    """The test guest's command port, reached through the domain's vsock socket."""

    def __init__(self, path, timeout=30):
        try:
            self.conn = wait_command_port(path, timeout, connect_timeout=10)
        except Fail as e:
            raise AssertionError(str(e)) from None

    def cmd(self, text):
        return self.conn.cmd(text)

    def fill(self, region, seed):
        assert self.cmd(f"FILL {region[0]:#x} {region[1]} {seed}") == "OK"

    def sum(self, region):
        answer = self.cmd(f"SUM {region[0]:#x} {region[1]}")
        assert answer.startswith("SUM "), answer
        return answer[4:]

    def close(self):
        self.conn.close()


@needs_guest
class SnapshotTestBase(DaemonTest):
    def setUp(self):
        super().setUp()
        self.v = self.daemon.virsh

    def vsock_path(self, name):
        return os.path.join(self.daemon.state, "run", name, "vsock.sock")

    def guest(self, name):
        return Guest(self.vsock_path(name))

    def sums(self, name):
        g = self.guest(name)
        try:
            return g.sum(REGION_A), g.sum(REGION_B)
        finally:
            g.close()

    def start_guest(self, name, memory_mib=128):
        self.define(name, memory_mib=memory_mib)
        self.v("start", name)
        self.guest(name).close()

    def managed_memory(self, name):
        path = os.path.join(self.daemon.state, "saves", name, "managed", "state.json")
        with open(path) as f:
            return json.load(f)["memory"]

    def snapshot_dirs(self, name):
        """snapshot name -> (directory, state.json's memory object)."""
        root = os.path.join(self.daemon.state, "snapshots", name)
        out = {}
        for entry in os.listdir(root) if os.path.isdir(root) else []:
            d = os.path.join(root, entry)
            ini = os.path.join(d, "snapshot.ini")
            if not os.path.exists(ini):
                continue
            with open(ini) as f:
                snap = [l.split("=", 1)[1].strip() for l in f if l.startswith("name=")][0]
            with open(os.path.join(d, "state.json")) as f:
                out[snap] = (d, json.load(f)["memory"])
        return out

    def make_chain(self, name, n=5):
        """n snapshots, each after new memory contents; returns the sums at each."""
        expected = {}
        g = self.guest(name)
        try:
            for i in range(n):
                g.fill(REGION_A, 100 + i)
                if i % 2 == 0:
                    g.fill(REGION_B, 200 + i)
                expected[f"s{i}"] = (g.sum(REGION_A), g.sum(REGION_B))
                self.v("snapshot-create-as", name, f"s{i}", f"memory state {i}")
        finally:
            g.close()
        return expected

    def check_revert(self, name, snap, want, *flags):
        self.v("snapshot-revert", name, snap, *flags)
        self.assertEqual(self.sums(name), want, f"memory after reverting to {snap}")


class ChainTest(SnapshotTestBase):
    def test_chain_of_five_revert_shuffled_delete_inner(self):
        self.start_guest("c1")
        expected = self.make_chain("c1")
        dirs = self.snapshot_dirs("c1")
        # First snapshot full; each later one a diff on the one before.
        self.assertEqual(dirs["s0"][1]["kind"], "full")
        for i in range(1, 5):
            self.assertEqual(dirs[f"s{i}"][1]["kind"], "diff", f"s{i}")
            self.assertEqual(dirs[f"s{i}"][1]["parent_id"], dirs[f"s{i-1}"][1]["id"])
        tree = self.v("snapshot-list", "c1", "--tree").stdout
        self.assertIn("s4", tree)
        self.assertEqual(self.v("snapshot-current", "c1", "--name").stdout.strip(), "s4")
        self.assertEqual(self.v("snapshot-parent", "c1", "s3").stdout.strip(), "s2")
        self.assertIn("memory state 2", self.v("snapshot-dumpxml", "c1", "s2").stdout)
        # snapshot-edit changes the description (a REDEFINE of the same snapshot).
        env = dict(os.environ, EDITOR="sed -i s/memory.state.2/edited/")
        subprocess.run(["virsh", "-q", "-c", self.daemon.uri, "snapshot-edit", "c1", "s2"],
                       env=env, check=True, capture_output=True, timeout=60)
        self.assertIn("<description>edited</description>",
                      self.v("snapshot-dumpxml", "c1", "s2").stdout)
        self.assertEqual(self.v("list", "--all", "--name", "--with-snapshot").stdout.split(),
                         ["c1"])
        self.assertEqual(self.v("list", "--all", "--name", "--without-snapshot").stdout.split(),
                         [])

        order = [f"s{i}" for i in range(5)]
        random.Random(6).shuffle(order)
        for snap in order:
            self.check_revert("c1", snap, expected[snap])
            self.assertEqual(self.state("c1"), "running (from snapshot)")
            self.assertEqual(self.v("snapshot-current", "c1", "--name").stdout.strip(), snap)

        # Delete an inner snapshot: its child keeps its id and takes its pages.
        s3_id = dirs["s3"][1]["id"]
        self.v("snapshot-delete", "c1", "s2")
        dirs = self.snapshot_dirs("c1")
        self.assertNotIn("s2", dirs)
        self.assertEqual(dirs["s3"][1]["id"], s3_id)
        self.assertEqual(dirs["s3"][1]["parent_id"], dirs["s1"][1]["id"])
        self.assertEqual(self.v("snapshot-parent", "c1", "s3").stdout.strip(), "s1")
        for snap in ("s4", "s3", "s1", "s0"):
            self.check_revert("c1", snap, expected[snap])

        # Deleting the base folds it into its child, which becomes full.
        self.v("snapshot-delete", "c1", "s0")
        self.assertEqual(self.snapshot_dirs("c1")["s1"][1]["kind"], "full")
        self.check_revert("c1", "s4", expected["s4"])
        # --children-only keeps s1, --children removes the rest.
        self.v("snapshot-delete", "c1", "s3", "--children-only")
        self.assertEqual(sorted(self.snapshot_dirs("c1")), ["s1", "s3"])
        self.check_revert("c1", "s3", expected["s3"])
        self.v("snapshot-delete", "c1", "s1", "--children")
        self.assertEqual(self.snapshot_dirs("c1"), {})
        self.assertEqual(self.v("snapshot-list", "c1", "--name").stdout.strip(), "")

    def test_diff_only_without_a_break(self):
        self.start_guest("c2")
        self.v("snapshot-create-as", "c2", "a")
        self.v("snapshot-create-as", "c2", "b")
        self.v("destroy", "c2")
        self.v("start", "c2")
        self.guest("c2").close()
        # A fresh boot is not a continuation of the current snapshot: full.
        self.v("snapshot-create-as", "c2", "c")
        dirs = self.snapshot_dirs("c2")
        self.assertEqual([dirs[n][1]["kind"] for n in "abc"], ["full", "diff", "full"])
        self.assertEqual(self.v("snapshot-parent", "c2", "c").stdout.strip(), "b")
        # After a revert the next snapshot is a diff on the reverted one.
        self.v("snapshot-revert", "c2", "a")
        self.v("snapshot-create-as", "c2", "d")
        d = self.snapshot_dirs("c2")["d"][1]
        self.assertEqual(d["kind"], "diff")
        self.assertEqual(d["parent_id"], dirs["a"][1]["id"])
        # A shut off domain reverts into a running one.
        self.v("destroy", "c2")
        self.v("snapshot-revert", "c2", "b")
        self.assertEqual(self.state("c2"), "running (from snapshot)")
        self.guest("c2").close()

    def test_paused_and_running_flags_and_readiness_event(self):
        self.start_guest("c3")
        g = self.guest("c3")
        g.fill(REGION_A, 9)
        want = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        self.v("snapshot-create-as", "c3", "p")
        self.v("snapshot-revert", "c3", "p", "--paused")
        self.assertEqual(self.state("c3"), "paused (from snapshot)")
        self.v("resume", "c3")
        self.assertEqual(self.sums("c3"), want)
        self.v("suspend", "c3")
        self.v("snapshot-create-as", "c3", "q")
        self.assertIn("<state>paused</state>", self.v("snapshot-dumpxml", "c3", "q").stdout)
        self.v("snapshot-revert", "c3", "q")
        self.assertEqual(self.state("c3"), "paused (from snapshot)")
        self.v("snapshot-revert", "c3", "q", "--running")
        self.assertEqual(self.state("c3"), "running (from snapshot)")
        bad = self.v("snapshot-revert", "c3", "q", "--running", "--paused", check=False)
        self.assertNotEqual(bad.returncode, 0)

        # Readiness is announced again after a revert (agent-lifecycle event).
        libvirt.virEventRegisterDefaultImpl()
        threading.Thread(target=lambda: [libvirt.virEventRunDefaultImpl() for _ in iter(int, 1)],
                         daemon=True).start()
        conn = self.daemon.connect()
        agent = []
        cb = conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_AGENT_LIFECYCLE,
            lambda c, dom, state, reason, opaque: agent.append(state), None)
        dom = conn.lookupByName("c3")
        dom.revertToSnapshot(dom.snapshotLookupByName("p"))
        wait_for(lambda: agent, what="agent-lifecycle after the revert")
        self.assertEqual(agent[0], libvirt.VIR_CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED)
        # The python API sees the tree too.
        self.assertEqual(sorted(s.getName() for s in dom.listAllSnapshots()), ["p", "q"])
        self.assertTrue(dom.snapshotLookupByName("q").isCurrent() == 0)
        self.assertTrue(dom.snapshotLookupByName("p").isCurrent())
        self.assertEqual(dom.snapshotNum(), 2)
        conn.domainEventDeregisterAny(cb)
        conn.close()


class SaveTest(SnapshotTestBase):
    def test_save_restore_and_dumpxml(self):
        self.start_guest("v1")
        g = self.guest("v1")
        g.fill(REGION_A, 31)
        want = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        image = os.path.join(self.daemon.dir, "v1.save")
        self.v("save", "v1", image)
        self.assertEqual(self.state("v1"), "shut off (saved)")
        with open(image, "rb") as f:
            self.assertEqual(f.read(8), b"VSNAPSAV")
        self.assertIn("<name>v1</name>", self.v("save-image-dumpxml", image).stdout)
        self.v("restore", image)
        self.assertEqual(self.state("v1"), "running (restored)")
        self.assertEqual(self.sums("v1"), want)
        # restore --xml: its serial file reaches the shim through config_overrides.
        self.v("save", "v1", image)
        xml = self.v("save-image-dumpxml", image).stdout
        log = os.path.join(self.daemon.dir, "v1-serial.log")
        xml = xml.replace("</devices>", f"<serial type='file'><source path='{log}'/></serial>"
                                        "</devices>")
        xml_path = os.path.join(self.daemon.dir, "v1-restore.xml")
        with open(xml_path, "w") as f:
            f.write(xml)
        # save-image-define: a new description and a paused start, kept in the image.
        described = self.v("save-image-dumpxml", image).stdout.replace(
            "</name>", "</name>\n  <description>edited image</description>", 1)
        described_path = os.path.join(self.daemon.dir, "v1-described.xml")
        with open(described_path, "w") as f:
            f.write(described)
        self.v("save-image-define", image, described_path, "--paused")
        self.assertIn("edited image", self.v("save-image-dumpxml", image).stdout)
        with open(described_path, "w") as f:
            f.write(described.replace("<name>v1</name>", "<name>v9</name>"))
        res = self.v("save-image-define", image, described_path, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("same name, uuid", res.stderr)
        # No --paused here: the image itself now says paused.
        self.v("restore", image, "--xml", xml_path)
        self.assertEqual(self.state("v1"), "paused (user)")
        self.v("resume", "v1")
        self.assertEqual(self.sums("v1"), want)
        self.assertTrue(os.path.exists(log), "the restored VM's serial goes to the --xml file")

    def test_progress_in_job_info(self):
        self.start_guest("v2", memory_mib=1024)
        g = self.guest("v2")
        g.fill((16 * MIB, 512 * MIB), 3)
        g.close()
        conn = self.daemon.connect()
        dom = conn.lookupByName("v2")
        samples, done = [], threading.Event()

        def poll():
            while not done.is_set():
                try:
                    samples.append(dom.jobStats())
                except libvirt.libvirtError:
                    pass
                time.sleep(0.01)

        poller = threading.Thread(target=poll)
        poller.start()
        try:
            self.v("save", "v2", os.path.join(self.daemon.dir, "v2.save"), "--verbose")
        finally:
            done.set()
            poller.join()
        bounded = [s for s in samples if s.get("type") == libvirt.VIR_DOMAIN_JOB_BOUNDED]
        self.assertTrue(bounded, "no job was seen while the save ran")
        self.assertEqual(bounded[0]["operation"], libvirt.VIR_DOMAIN_JOB_OPERATION_SAVE)
        self.assertTrue(any(0 < s["data_processed"] <= s["data_total"] for s in bounded),
                        f"no progress seen: {bounded[:3]} ... {bounded[-3:]}")
        self.assertEqual(dom.jobStats()["type"], libvirt.VIR_DOMAIN_JOB_NONE)
        conn.close()

    def test_damaged_images(self):
        self.start_guest("v3")
        image = os.path.join(self.daemon.dir, "v3.save")
        self.v("save", "v3", image)
        with open(image, "rb") as f:
            data = bytearray(f.read())
        flipped = os.path.join(self.daemon.dir, "flipped.save")
        data[4096 + 10] ^= 1          # inside the domain.xml section
        with open(flipped, "wb") as f:
            f.write(data)
        res = self.v("restore", flipped, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("checksum", res.stderr)
        truncated = os.path.join(self.daemon.dir, "truncated.save")
        with open(truncated, "wb") as f:
            f.write(data[:len(data) // 2])
        res = self.v("restore", truncated, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("truncated", res.stderr)
        self.assertEqual(self.state("v3"), "shut off (saved)")
        self.v("restore", image)
        self.assertEqual(self.state("v3"), "running (restored)")

    def test_bad_images(self):
        junk = os.path.join(self.daemon.dir, "junk.save")
        with open(junk, "wb") as f:
            f.write(b"not a save image" * 300)
        for cmd in (["restore", junk], ["save-image-dumpxml", junk],
                    ["restore", "/nonexistent/image"]):
            res = self.v(*cmd, check=False)
            self.assertNotEqual(res.returncode, 0, cmd)
            self.assertIn("save image", res.stderr)

    def test_managedsave_is_a_diff_on_the_current_snapshot(self):
        self.start_guest("m2")
        g = self.guest("m2")
        g.fill(REGION_A, 41)
        g.close()
        self.v("snapshot-create-as", "m2", "base")
        g = self.guest("m2")
        g.fill(REGION_B, 42)
        want = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        self.v("managedsave", "m2")
        self.assertEqual(self.managed_memory("m2")["kind"], "diff")
        # Deleting the snapshot it sits on folds that snapshot into the image.
        self.v("snapshot-delete", "m2", "base")
        self.assertEqual(self.managed_memory("m2")["kind"], "full")
        self.v("start", "m2")
        self.assertEqual(self.state("m2"), "running (restored)")
        self.assertEqual(self.sums("m2"), want)

    def test_managedsave_then_start(self):
        self.start_guest("m1")
        g = self.guest("m1")
        g.fill(REGION_B, 77)
        want = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        self.v("managedsave", "m1")
        self.assertEqual(self.state("m1"), "shut off (saved)")
        self.assertIn("yes", [l.split()[-1] for l in self.v("dominfo", "m1").stdout.splitlines()
                              if l.startswith("Managed save")])
        # undefine refuses to lose the image without --managed-save.
        self.assertNotEqual(self.v("undefine", "m1", check=False).returncode, 0)
        self.v("start", "m1")
        self.assertEqual(self.state("m1"), "running (restored)")
        self.assertEqual(self.sums("m1"), want)
        conn = self.daemon.connect()
        self.assertEqual(conn.lookupByName("m1").hasManagedSaveImage(), 0)
        self.v("managedsave", "m1")
        self.v("managedsave-remove", "m1")
        self.v("start", "m1")
        self.assertEqual(self.state("m1"), "running (booted)")
        conn.close()


class RestartTest(SnapshotTestBase):
    def test_metadata_survives_daemon_restart(self):
        self.start_guest("r1")
        expected = self.make_chain("r1", n=3)
        self.v("managedsave", "r1")
        self.daemon.stop()
        self.daemon.start()
        self.assertEqual(self.v("snapshot-list", "r1", "--name").stdout.split(), ["s0", "s1", "s2"])
        self.assertEqual(self.v("snapshot-current", "r1", "--name").stdout.strip(), "s2")
        self.v("start", "r1")
        self.assertEqual(self.sums("r1"), expected["s2"])
        # A shim reattached after a restart keeps its lineage (s4 below).
        self.daemon.stop()
        self.daemon.start()
        self.v("snapshot-create-as", "r1", "s3")
        self.assertEqual(self.snapshot_dirs("r1")["s3"][1]["kind"], "full",
                         "a VM started from a managed image is not a continuation of s2")
        self.daemon.stop()
        self.daemon.start()
        self.v("snapshot-create-as", "r1", "s4")
        self.assertEqual(self.snapshot_dirs("r1")["s4"][1]["kind"], "diff")
        for snap in ("s0", "s2", "s1"):
            self.check_revert("r1", snap, expected[snap])


class EventOrderTest(SnapshotTestBase):
    def test_lifecycle_events_of_revert_save_restore(self):
        self.start_guest("e1")
        self.v("snapshot-create-as", "e1", "s")
        watcher = VirshEvents(self.daemon, "e1", "--event", "lifecycle")
        image = os.path.join(self.daemon.dir, "e1.save")
        try:
            def probe(attempt):
                self.v("suspend", "e1")
                self.v("resume", "e1")
                return "Resumed Unpaused"
            start = watcher.wait_registered(probe)
            self.v("snapshot-revert", "e1", "s")
            self.v("snapshot-revert", "e1", "s", "--paused")
            self.v("save", "e1", image, "--running")
            self.v("restore", image)
            self.v("managedsave", "e1", "--paused")
            self.v("start", "e1")
            watcher.wait_for_line("Suspended Restored", after=start)
        finally:
            out = watcher.stop()
        lines = [l.split(": ", 1)[1] for l in out.splitlines()[start:]
                 if l.startswith("event 'lifecycle'")]
        self.assertEqual(lines, [
            "Stopped Snapshot", "Started Snapshot",
            "Stopped Snapshot", "Started Snapshot", "Suspended Snapshot",
            "Stopped Saved", "Started Restored",
            "Stopped Saved", "Started Restored", "Suspended Restored"], out)


class RestoreModeTest(SnapshotTestBase):
    """The restore mode is the host's choice of how to bring memory back, so
    it comes from the domain's own definition as last defined (a redefinition
    made while the domain runs included), never from the definition saved
    with the snapshot or image."""

    def shim_restore_mode(self, name):
        api = os.path.join(self.daemon.state, "run", name, "api.sock")
        status, body = http_unix(api, "GET", "/api/v1/vm.info")
        self.assertEqual(status, 200, body)
        return json.loads(body)["vsnap"]["snapshot"]["restore_mode"]

    def redefine(self, name, uid, mode):
        path = os.path.join(self.daemon.dir, f"{name}-{mode}.xml")
        with open(path, "w") as f:
            f.write(domain_xml(name, uuid=uid, memory_mib=128, restore_mode=mode))
        self.v("define", path)

    def test_revert_uses_the_mode_defined_while_running(self):
        uid = "6a1d3c52-0d5e-4f7e-9a43-5f0e1c2b3a41"
        self.redefine("rm1", uid, "copy")
        self.v("start", "rm1")
        self.guest("rm1").close()
        self.v("snapshot-create-as", "rm1", "s0")   # its saved definition says copy
        self.redefine("rm1", uid, "merge")          # pending until the VM stops
        self.v("snapshot-revert", "rm1", "s0")
        self.assertEqual(self.shim_restore_mode("rm1"), "merge")

    def test_restore_and_managed_start_use_the_defined_mode(self):
        uid = "0b7f9e21-6c3a-4d15-8e2f-1a9b8c7d6e52"
        self.redefine("rm2", uid, "copy")
        self.v("start", "rm2")
        self.guest("rm2").close()
        image = os.path.join(self.daemon.dir, "rm2.save")
        self.v("save", "rm2", image)               # the image's definition says copy
        self.redefine("rm2", uid, "merge")
        self.v("restore", image)
        self.assertEqual(self.shim_restore_mode("rm2"), "merge")
        self.v("managedsave", "rm2")
        self.redefine("rm2", uid, "ondemand")
        self.v("start", "rm2")
        self.assertEqual(self.shim_restore_mode("rm2"), "ondemand")


    def ondemand_stats(self, name):
        """domstats' vsnap.ondemand.* once the record of the last revert is
        settled (it is kept 200 ms after READY)."""
        wait_for(lambda: "vsnap.ready=yes" in self.v("domstats", "--state", name).stdout, what="readiness")
        time.sleep(0.5)
        out = self.v("domstats", "--state", name).stdout
        return dict(line.strip().split("=", 1) for line in out.splitlines() if "vsnap.ondemand." in line)

    def test_ondemand_revert_records_and_serves_the_working_set(self):
        """The first on-demand revert to a snapshot records what the guest
        touched (its confined shim records it, the daemon writes it into the
        snapshot's directory),
        the next one serves it first; domstats shows both."""
        uid = "3c8e1f4a-2b6d-4e0f-9a17-6d5c4b3a2918"
        self.redefine("ws1", uid, "ondemand")
        self.v("start", "ws1")
        want = self.sums("ws1")
        self.v("snapshot-create-as", "ws1", "s0")
        self.v("snapshot-revert", "ws1", "s0")
        first = self.ondemand_stats("ws1")
        self.assertEqual(first.get("vsnap.ondemand.record"), "recorded", first)
        self.assertEqual(self.sums("ws1"), want)
        self.v("snapshot-revert", "ws1", "s0")
        again = self.ondemand_stats("ws1")
        self.assertEqual(again.get("vsnap.ondemand.record"), "used", again)
        self.assertGreater(int(again["vsnap.ondemand.prefetch_hits"]), 0, again)
        self.assertLess(int(again["vsnap.ondemand.faults"]), int(first["vsnap.ondemand.faults"]), (first, again))
        self.assertEqual(self.sums("ws1"), want)


    def test_save_image_restores_record_nothing(self):
        """A save image is restored once: on demand without a working-set
        record (recording would hold readahead back for nothing)."""
        uid = "7e4a2c18-93b5-4d06-a1f2-8c3b5e6d7f90"
        self.redefine("ws2", uid, "ondemand")
        self.v("start", "ws2")
        want = self.sums("ws2")
        image = os.path.join(self.daemon.dir, "ws2.save")
        self.v("save", "ws2", image)
        self.v("restore", image)
        stats = self.ondemand_stats("ws2")
        self.assertEqual(stats.get("vsnap.ondemand.record"), "none", stats)
        self.assertEqual(stats.get("vsnap.ondemand.workset_blocks"), "0", stats)
        self.assertEqual(self.sums("ws2"), want)

    def test_shared_revert_maps_one_image_of_the_snapshot(self):
        """mode='shared': each revert maps the snapshot's one image (built by
        the first); the memory is the snapshot's; deleting the snapshot takes
        the image with it."""
        uid = "5d2b7e90-41c3-4a8f-b6e1-0c9d8f7a6b54"
        self.redefine("sh1", uid, "shared")
        self.v("start", "sh1")
        want = self.sums("sh1")
        self.v("snapshot-create-as", "sh1", "s0")
        snap_dir = self.snapshot_dirs("sh1")["s0"][0]
        for _ in range(2):
            self.v("snapshot-revert", "sh1", "s0")
            self.assertEqual(self.shim_restore_mode("sh1"), "shared")
            self.assertEqual(self.sums("sh1"), want)
        images = [n for n in os.listdir(snap_dir) if n.startswith(".memory-image-")]
        self.assertEqual(len(images), 1, os.listdir(snap_dir))
        self.v("destroy", "sh1")
        self.v("snapshot-delete", "sh1", "s0")
        self.assertFalse(os.path.exists(snap_dir), "the snapshot's directory, image included, is gone")


class UndefineTest(SnapshotTestBase):
    def test_unreadable_snapshot_metadata_refuses_undefine(self):
        self.start_guest("ud1")
        self.v("snapshot-create-as", "ud1", "keep")
        self.v("destroy", "ud1")
        tree = os.path.join(self.daemon.state, "snapshots", "ud1")
        # The daemon runs as root here, so permissions would not stop it: a
        # file where the tree's directory belongs makes it unreadable.
        os.rename(tree, tree + ".aside")
        open(tree, "w").close()
        conn = self.daemon.connect()
        try:
            with self.assertRaises(libvirt.libvirtError) as caught:
                conn.lookupByName("ud1").undefine()
            self.assertIn("snapshots cannot be listed", str(caught.exception))
            os.unlink(tree)
            os.rename(tree + ".aside", tree)
            self.assertEqual(self.v("snapshot-list", "ud1", "--name").stdout.split(), ["keep"])
            conn.lookupByName("ud1").undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
        finally:
            conn.close()
        self.assertFalse(os.path.exists(tree))


COMPACT = os.path.join(os.path.dirname(os.environ.get("VIRTVSNAPD", "/nonexistent")), "..",
                       "tools", "vsnap-compact")


class CrashTest(SnapshotTestBase):
    @unittest.skipUnless(os.access(COMPACT, os.X_OK), "tools/vsnap-compact is not built")
    def test_interrupted_deletes_are_finished(self):
        self.start_guest("k1")
        expected = self.make_chain("k1", n=5)
        dirs = self.snapshot_dirs("k1")
        # Crash after marking s1 for deletion, before anything was folded.
        open(os.path.join(dirs["s1"][0], "deleting"), "w").close()
        # Crash after s3 was folded into s4 (the layer rewritten), before the
        # records were updated: s4's state.json still names s3.
        subprocess.run([COMPACT, "--fold", os.path.join(dirs["s3"][0], "memory-ranges"),
                        os.path.join(dirs["s4"][0], "memory-ranges")], check=True,
                       capture_output=True, timeout=60)
        open(os.path.join(dirs["s3"][0], "deleting"), "w").close()
        self.daemon.stop()
        self.daemon.start()
        listed = self.v("snapshot-list", "k1", "--name").stdout.split()
        self.assertEqual(sorted(listed), ["s0", "s2", "s4"])
        # The start finished both deletes (no call of a client did); every
        # survivor reverts right.
        self.assertEqual(sorted(self.snapshot_dirs("k1")), ["s0", "s2", "s4"])
        for snap in ("s4", "s2", "s0"):
            self.check_revert("k1", snap, expected[snap])
        dirs = self.snapshot_dirs("k1")
        self.assertEqual(sorted(dirs), ["s0", "s2", "s4"])
        self.assertEqual(dirs["s2"][1]["parent_id"], dirs["s0"][1]["id"])
        self.assertEqual(dirs["s4"][1]["parent_id"], dirs["s2"][1]["id"])
        self.assertEqual(self.v("snapshot-parent", "k1", "s4").stdout.strip(), "s2")
        self.assertEqual(len(os.listdir(os.path.dirname(dirs["s0"][0]))), 4)  # 3 + current

    def tree_files(self, name):
        """Every file and directory under the domain's snapshots: relative
        path -> (inode, size, mtime): a write or an atomic replace shows."""
        root = os.path.join(self.daemon.state, "snapshots", name)
        out = {}
        for top, dirs, files in os.walk(root):
            for entry in dirs + files:
                st = os.lstat(os.path.join(top, entry))
                out[os.path.relpath(os.path.join(top, entry), root)] = (
                    st.st_ino, st.st_size, st.st_mtime_ns)
        return out

    def changed(self, before, after):
        return sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))

    @unittest.skipUnless(os.access(COMPACT, os.X_OK), "tools/vsnap-compact is not built")
    def test_a_revert_leaves_an_interrupted_delete_to_its_owner(self):
        self.start_guest("k2")
        expected = self.make_chain("k2", n=5)
        dirs = self.snapshot_dirs("k2")
        # Two deletes cut short while this daemon runs (as an error in the
        # middle of a fold leaves them): s1 marked, nothing folded yet; s3
        # folded into s4 (its layer rewritten) but s4's record still names s3.
        open(os.path.join(dirs["s1"][0], "deleting"), "w").close()
        subprocess.run([COMPACT, "--fold", os.path.join(dirs["s3"][0], "memory-ranges"),
                        os.path.join(dirs["s4"][0], "memory-ranges")], check=True,
                       capture_output=True, timeout=60)
        open(os.path.join(dirs["s3"][0], "deleting"), "w").close()
        before = self.tree_files("k2")
        # Queries read, and change nothing on disk.
        self.assertEqual(self.v("snapshot-list", "k2", "--name").stdout.split(), ["s0", "s2", "s4"])
        for cmd in (["snapshot-list", "k2", "--tree"], ["snapshot-dumpxml", "k2", "s2"],
                    ["snapshot-info", "k2", "s4"], ["snapshot-current", "k2"],
                    ["snapshot-parent", "k2", "s4"]):
            self.v(*cmd)
        self.assertEqual(self.changed(before, self.tree_files("k2")), [])
        # A revert to s4, whose chain s3's delete left half folded, is refused
        # by its check before anything stops, naming what is unfinished.
        pid = self.daemon.shim_pids()["k2"]
        res = self.v("snapshot-revert", "k2", "s4", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("cannot revert to snapshot 's4'", res.stderr)
        self.assertIn("snapshot 's3' is being deleted", res.stderr)
        self.assertEqual(self.daemon.shim_pids()["k2"], pid)
        self.assertEqual(self.state("k2"), "running (booted)")
        self.assertEqual(self.changed(before, self.tree_files("k2")), [])
        # A revert to s2 (a diff on s1) runs; of the tree it changes only
        # which snapshot is current, and neither delete is finished by it.
        self.check_revert("k2", "s2", expected["s2"])
        self.assertEqual(self.changed(before, self.tree_files("k2")), ["current"])
        self.assertNotIn("interrupted delete", self.daemon.log())
        # The owner, the domain's next snapshot-delete, finishes both first
        # (logged), then deletes what it was asked to.
        self.v("snapshot-delete", "k2", "s0")
        log = self.daemon.log()
        for snap in ("s1", "s3"):
            self.assertIn(f"finishing the interrupted delete of snapshot '{snap}'", log)
        dirs = self.snapshot_dirs("k2")
        self.assertEqual(sorted(dirs), ["s2", "s4"])
        self.assertEqual(dirs["s4"][1]["parent_id"], dirs["s2"][1]["id"])
        self.assertEqual(self.v("snapshot-parent", "k2", "s4").stdout.strip(), "s2")
        for snap in ("s4", "s2"):
            self.check_revert("k2", snap, expected[snap])
        # So does a snapshot-create, whose new snapshot's parent is the
        # current one as the finished delete leaves it.
        open(os.path.join(dirs["s4"][0], "deleting"), "w").close()
        self.v("snapshot-create-as", "k2", "s5")
        self.assertIn("finishing the interrupted delete of snapshot 's4'", self.daemon.log())
        self.assertEqual(sorted(self.snapshot_dirs("k2")), ["s2", "s5"])
        self.assertEqual(self.v("snapshot-parent", "k2", "s5").stdout.strip(), "s2")


class BadInputTest(SnapshotTestBase):
    def test_refusals(self):
        self.start_guest("b1")
        self.v("snapshot-create-as", "b1", "one")
        cases = [
            (["snapshot-create-as", "b1", "a/b"], "'/'"),
            (["snapshot-create-as", "b1", "one"], "already exists"),
            (["snapshot-create-as", "b1", "two", "--disk-only"], "disk-only"),
            (["snapshot-create-as", "b1", "two", "--quiesce"], "quiesce"),
            (["snapshot-create-as", "b1", "two", "--no-metadata"], "metadata"),
            (["snapshot-revert", "b1", "nope"], "no domain snapshot"),
            (["snapshot-delete", "b1", "one", "--metadata"], "metadata"),
            (["snapshot-create", "b1", "--redefine", os.devnull], "XML"),
        ]
        for cmd, text in cases:
            res = self.v(*cmd, check=False)
            self.assertNotEqual(res.returncode, 0, cmd)
            self.assertIn(text, res.stderr, cmd)
        self.v("destroy", "b1")
        res = self.v("snapshot-create-as", "b1", "off", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("not running", res.stderr)
        res = self.v("undefine", "b1", check=False)
        self.assertIn("snapshots", res.stderr)
        self.v("undefine", "b1", "--snapshots-metadata")
        self.assertFalse(os.path.exists(os.path.join(self.daemon.state, "snapshots", "b1")))

    def test_read_only_connection(self):
        self.start_guest("ro1")
        self.v("snapshot-create-as", "ro1", "s")
        self.assertEqual(self.v("snapshot-list", "ro1", "--name", ro=True).stdout.split(), ["s"])
        self.assertIn("<name>s</name>", self.v("snapshot-dumpxml", "ro1", "s", ro=True).stdout)
        for cmd in (["snapshot-create-as", "ro1", "t"], ["snapshot-revert", "ro1", "s"],
                    ["snapshot-delete", "ro1", "s"], ["managedsave", "ro1"],
                    ["save", "ro1", os.path.join(self.daemon.dir, "ro.save")]):
            res = self.v(*cmd, ro=True, check=False)
            self.assertNotEqual(res.returncode, 0, cmd)
            self.assertIn("read-only", res.stderr, cmd)
        self.assertEqual(self.state("ro1"), "running (booted)")

    def test_transient_domain_leaves_no_snapshots_to_a_namesake(self):
        path = os.path.join(self.daemon.dir, "tr.xml")
        with open(path, "w") as f:
            f.write(domain_xml("tr", memory_mib=128))
        self.v("create", path)
        self.guest("tr").close()
        self.v("snapshot-create-as", "tr", "old")
        self.v("destroy", "tr")
        self.define("tr")      # another uuid, same name
        self.assertEqual(self.v("snapshot-list", "tr", "--name").stdout.strip(), "")
        self.v("undefine", "tr")

    def test_corrupt_layer_leaves_the_domain_alone(self):
        self.start_guest("b2")
        self.v("snapshot-create-as", "b2", "base")
        g = self.guest("b2")
        g.fill(REGION_A, 5)
        g.close()
        self.v("snapshot-create-as", "b2", "top")
        g = self.guest("b2")
        g.fill(REGION_A, 6)
        want = (g.sum(REGION_A), g.sum(REGION_B))
        g.close()
        pid = self.daemon.shim_pids()["b2"]
        # One flipped byte in the page data of the top layer: the file changed
        # since the daemon sealed it, so its data is checked before the revert.
        top_layer = os.path.join(self.snapshot_dirs("b2")["top"][0], "memory-ranges")
        with open(top_layer, "r+b") as f:
            f.seek(4096 + 100)             # data starts at 4 KiB
            byte = f.read(1)
            f.seek(4096 + 100)
            f.write(bytes([byte[0] ^ 0x01]))
        res = self.v("snapshot-revert", "b2", "top", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("memory-ranges", res.stderr)
        self.assertIn("checksum", res.stderr)
        self.assertEqual(self.state("b2"), "running (booted)")
        self.assertEqual(self.daemon.shim_pids()["b2"], pid)
        self.assertEqual(self.sums("b2"), want)
        layer = os.path.join(self.snapshot_dirs("b2")["base"][0], "memory-ranges")
        with open(layer, "r+b") as f:      # one flipped byte in the base's header
            f.seek(40)
            byte = f.read(1)
            f.seek(40)
            f.write(bytes([byte[0] ^ 0x40]))
        res = self.v("snapshot-revert", "b2", "top", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("memory-ranges", res.stderr)
        self.assertIn("checksum", res.stderr)
        # Same shim, same state, same memory.
        self.assertEqual(self.state("b2"), "running (booted)")
        self.assertEqual(self.daemon.shim_pids()["b2"], pid)
        self.assertEqual(self.sums("b2"), want)
        # Truncated layer: refused the same way.
        with open(layer, "r+b") as f:
            f.truncate(8192)
        res = self.v("snapshot-revert", "b2", "base", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertEqual(self.daemon.shim_pids()["b2"], pid)


# The procedures of rpc/xdr-snapshot.c.
SNAPSHOT_PROCS = [54, 55, 163, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 232,
                  233, 235, 236, 244, 246, 247, 271, 272, 274, 275, 298]


class GarbageTest(DaemonTest):
    def test_garbage_arguments(self):
        import random
        import struct
        rng = random.Random(4321)
        c = RawClient(self.daemon.sock, timeout=10)
        c.open()
        for proc in SNAPSHOT_PROCS:
            for _ in range(8):
                size = rng.choice([0, 1, 4, 8, 20, 64, 300])
                body = bytes(rng.getrandbits(8) for _ in range(size))
                if size >= 8 and rng.random() < 0.5:
                    body = struct.pack(">I", rng.choice([0xFFFFFFFF, 1 << 24, 3])) + body[4:]
                try:
                    status, reply = c.call(proc, body)
                except (ConnectionError, OSError):
                    c = RawClient(self.daemon.sock, timeout=10)
                    c.open()
                    continue
                self.assertEqual(status, 1, f"procedure {proc} accepted garbage")
                code, _, message = decode_error(reply)
                self.assertGreater(code, 0)
                self.assertTrue(message)
        self.assertEqual(c.call(3)[0], 0)
        c.close()
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.log())

    def test_bad_paths_and_names(self):
        self.define("g1")
        v = self.daemon.virsh
        for cmd, text in [
            (["save", "g1", "relative.save"], "not running"),
            (["restore", self.daemon.dir], "save image"),
            (["restore", "/etc/hostname"], "save image"),
            (["save-image-dumpxml", "/dev/null"], "save image"),
            (["snapshot-revert", "g1", "../../etc"], "no domain snapshot"),
            (["snapshot-dumpxml", "g1", "a/../b"], "no domain snapshot"),
            (["managedsave", "g1"], "not running"),
        ]:
            res = v(*cmd, check=False)
            self.assertNotEqual(res.returncode, 0, cmd)
            self.assertIn(text, res.stderr, cmd)
        self.assertIsNone(self.daemon.proc.poll(), self.daemon.log())


if __name__ == "__main__":
    unittest.main(verbosity=2)

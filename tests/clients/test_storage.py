"""Storage pool and volume calls on the vsnap connection: forwarded to the
host's storage driver (libvirtd's, in namespaces of the test's own) with its
answers and errors unchanged; every one of them VIR_ERR_NO_SUPPORT, naming
its API, when no storage driver answers; bounded in time when the driver
dies or stops answering. Real python3-libvirt and virsh on both ends."""

import os
import random
import signal
import socket
import struct
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostdrivers  # noqa: E402
import libvirt  # noqa: E402
from hostdrivers import STORAGE_PROCS, HostDrivers, daemon_with_storage_uri, raw_call  # noqa: E402

MIB = 1 << 20


def pool_xml(name, target):
    return f"<pool type='dir'><name>{name}</name><target><path>{target}</path></target></pool>"


def vol_xml(name, size):
    return (f"<volume><name>{name}</name><capacity unit='bytes'>{size}</capacity>"
            f"<target><format type='raw'/></target></volume>")


def error_of(call):
    try:
        call()
    except libvirt.libvirtError as e:
        return e.get_error_code(), e.get_error_message()
    raise AssertionError("the call did not fail")


class WithDriverTest(unittest.TestCase):
    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("network and mount namespaces need root")
        self.env = HostDrivers()
        self.conn = self.env.daemon.connect()
        self.host = self.env.storage()

    def tearDown(self):
        for c in (self.conn, self.host):
            c.close()
        self.env.close()

    def test_pools_and_volumes(self):
        """A dir pool defined, built, started and autostarted through vsnap is
        the storage driver's pool; its volumes are created, looked up (by
        name, key and path), resized, cloned, wiped and deleted there; every
        answer is the driver's own."""
        target = os.path.join(self.env.daemon.dir, "pool")
        pool = self.conn.storagePoolDefineXML(pool_xml("vsp", target), 0)
        theirs = self.host.storagePoolLookupByName("vsp")
        self.assertEqual((pool.name(), pool.UUIDString()), ("vsp", theirs.UUIDString()))
        self.assertEqual((pool.isActive(), pool.isPersistent(), self.conn.listDefinedStoragePools(),
                          self.conn.numOfDefinedStoragePools()), (0, 1, ["vsp"], 1))
        pool.build(0)
        self.assertTrue(os.path.isdir(target))
        pool.create(0)
        pool.setAutostart(1)
        self.assertEqual((pool.isActive(), pool.autostart(), theirs.autostart()), (1, 1, 1))
        self.assertEqual((self.conn.listStoragePools(), self.conn.numOfStoragePools()), (["vsp"], 1))
        self.assertEqual([p.name() for p in self.conn.listAllStoragePools()], ["vsp"])
        self.assertEqual(self.conn.listAllStoragePools(libvirt.VIR_CONNECT_LIST_STORAGE_POOLS_INACTIVE), [])
        self.assertEqual(self.conn.storagePoolLookupByUUID(theirs.UUID()).name(), "vsp")
        self.assertEqual(self.conn.storagePoolLookupByTargetPath(target).name(), "vsp")
        self.assertEqual(pool.info()[:2], theirs.info()[:2])
        self.assertEqual(pool.XMLDesc(0), theirs.XMLDesc(0))

        vol = pool.createXML(vol_xml("a.raw", MIB), 0)
        path = os.path.join(target, "a.raw")
        self.assertEqual((vol.path(), os.path.getsize(path)), (path, MIB))
        self.assertEqual(self.conn.storageVolLookupByPath(path).name(), "a.raw")
        self.assertEqual(self.conn.storageVolLookupByKey(vol.key()).path(), path)
        self.assertEqual(pool.storageVolLookupByName("a.raw").key(), vol.key())
        self.assertEqual(vol.storagePoolLookupByVolume().name(), "vsp")
        self.assertEqual(vol.info(), self.host.storageVolLookupByPath(path).info())
        self.assertEqual(vol.info()[:2], [libvirt.VIR_STORAGE_VOL_FILE, MIB])
        self.assertEqual(vol.infoFlags(libvirt.VIR_STORAGE_VOL_GET_PHYSICAL),
                         self.host.storageVolLookupByPath(path).infoFlags(libvirt.VIR_STORAGE_VOL_GET_PHYSICAL))
        self.assertIn(f"<capacity unit='bytes'>{MIB}</capacity>", vol.XMLDesc(0))
        vol.resize(2 * MIB, 0)
        self.assertEqual(os.path.getsize(path), 2 * MIB)
        with open(path, "r+b") as f:
            f.write(b"vsnap" * 1000)
        clone = pool.createXMLFrom(vol_xml("b.raw", 2 * MIB), vol, 0)
        with open(clone.path(), "rb") as f:
            self.assertEqual(f.read(5000), b"vsnap" * 1000)
        vol.wipePattern(libvirt.VIR_STORAGE_VOL_WIPE_ALG_ZERO, 0)
        clone.wipe(0)
        for p in (path, clone.path()):
            with open(p, "rb") as f:
                self.assertEqual(f.read(5000), bytes(5000), p)
        self.assertEqual((sorted(pool.listVolumes()), pool.numOfVolumes()), (["a.raw", "b.raw"], 2))
        self.assertEqual(sorted(v.name() for v in pool.listAllVolumes()), ["a.raw", "b.raw"])
        pool.refresh(0)

        # Errors come back as the driver gives them.
        for ours, theirs_call in (
                (lambda: self.conn.storageVolLookupByPath("/no/such.raw"),
                 lambda: self.host.storageVolLookupByPath("/no/such.raw")),
                (lambda: self.conn.storagePoolLookupByName("nope"), lambda: self.host.storagePoolLookupByName("nope")),
                (lambda: self.conn.findStoragePoolSources("dir", None, 0),
                 lambda: self.host.findStoragePoolSources("dir", None, 0))):
            self.assertEqual(error_of(ours), error_of(theirs_call))
        self.assertEqual(error_of(lambda: self.conn.storageVolLookupByPath("/no/such.raw"))[0],
                         libvirt.VIR_ERR_NO_STORAGE_VOL)
        self.assertEqual(self.conn.getStoragePoolCapabilities(0), self.host.getStoragePoolCapabilities(0))

        clone.delete(0)
        vol.delete(0)
        self.assertFalse(os.path.exists(path))
        pool.destroy()
        pool.delete(0)
        self.assertFalse(os.path.exists(target))
        pool.undefine()
        self.assertEqual((self.conn.listAllStoragePools(), self.host.listAllStoragePools()), ([], []))
        res = self.env.daemon.virsh("pool-list", "--all")
        self.assertEqual(res.stdout.strip(), "")

    def test_read_only_clients(self):
        """A read-only client lists and looks up pools; every call that
        changes storage is refused to it before it reaches the driver."""
        target = os.path.join(self.env.daemon.dir, "ro-pool")
        os.makedirs(target)
        self.host.storagePoolCreateXML(pool_xml("vsro", target), 0)
        ro = self.env.daemon.connect(readonly=True)
        try:
            self.assertEqual([p.name() for p in ro.listAllStoragePools()], ["vsro"])
            self.assertEqual(ro.storagePoolLookupByName("vsro").isActive(), 1)
        finally:
            ro.close()
        for proc, api, body, writes in STORAGE_PROCS:
            if not writes:
                continue
            status, err = raw_call(self.env.daemon.sock_ro, proc, body, ro=True)
            self.assertEqual((status, err[0]), (1, libvirt.VIR_ERR_OPERATION_DENIED), (proc, api, err))
        self.assertEqual([p.name() for p in self.host.listAllStoragePools()], ["vsro"])

    def test_garbage_arguments(self):
        """Random bodies (some with huge declared lengths) for every storage
        procedure: each gets an error reply or a dropped connection; the
        daemon and the storage driver go on serving, and nothing was made."""
        rng = random.Random(22)
        for proc, api, _, _ in STORAGE_PROCS:
            for _ in range(6):
                body = bytes(rng.getrandbits(8) for _ in range(rng.choice([0, 3, 8, 40, 300])))
                if len(body) >= 8 and rng.random() < 0.5:
                    body = struct.pack(">I", rng.choice([0xFFFFFFFF, 0x7FFFFFFF, 1 << 24])) + body[4:]
                try:
                    status, err = raw_call(self.env.daemon.sock, proc, body, timeout=30)
                except (ConnectionError, OSError):
                    continue
                if status == 1:
                    self.assertTrue(err[0] > 0 and err[2], (proc, api, err))
        self.assertIsNone(self.env.daemon.proc.poll(), self.env.log())
        self.assertEqual((self.conn.listAllStoragePools(), self.host.listAllStoragePools()), ([], []))

    def test_driver_killed(self):
        """kill -9 of the storage driver: the next calls answer
        VIR_ERR_NO_SUPPORT at once; the daemon and its domains' calls go on."""
        self.assertEqual(self.conn.listAllStoragePools(), [])
        os.kill(self.env.driver.proc.pid, signal.SIGKILL)
        self.env.driver.proc.wait(timeout=10)
        t0 = time.monotonic()
        code, message = error_of(self.conn.listAllStoragePools)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(code, libvirt.VIR_ERR_NO_SUPPORT)
        self.assertIn("virConnectListAllStoragePools is not supported by vsnap without the host's storage driver",
                      message)
        self.assertEqual(self.conn.listAllDomains(), [])


class WithoutDriverTest(unittest.TestCase):
    def setUp(self):
        self.closers = []

    def tearDown(self):
        for close in reversed(self.closers):
            close()

    def daemon(self, storage_uri):
        daemon = daemon_with_storage_uri(storage_uri)
        self.closers.append(daemon.cleanup)
        return daemon

    def test_every_storage_call_unsupported(self):
        """No storage driver answers: every forwarded procedure, the pool
        listings included, answers VIR_ERR_NO_SUPPORT naming its API (virtinst
        takes that to mean "no storage API"), on both sockets; virsh says so."""
        daemon = self.daemon("storage:///system?socket=/nonexistent/libvirt-sock")
        for proc, api, body, writes in STORAGE_PROCS:
            status, err = raw_call(daemon.sock, proc, body)
            self.assertEqual((status, err[0]), (1, libvirt.VIR_ERR_NO_SUPPORT), (proc, api, err))
            self.assertIn(f": {api} is not supported by vsnap without the host's storage driver", err[2])
            self.assertIn("cannot reach the host's storage driver", err[2])
            if not writes:
                status, err = raw_call(daemon.sock_ro, proc, body, ro=True)
                self.assertEqual((status, err[0]), (1, libvirt.VIR_ERR_NO_SUPPORT), (proc, api, err))
        conn = daemon.connect()
        try:
            for call in (conn.listAllStoragePools, conn.numOfStoragePools, conn.listStoragePools,
                         conn.listDefinedStoragePools, lambda: conn.storageVolLookupByPath("/x.raw"),
                         lambda: conn.storagePoolLookupByName("default")):
                self.assertEqual(error_of(call)[0], libvirt.VIR_ERR_NO_SUPPORT)
        finally:
            conn.close()
        res = daemon.virsh("pool-list", "--all", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("is not supported by vsnap without the host's storage driver", res.stderr)

    def test_silent_driver(self):
        """A storage driver that accepts connections and never answers: each
        of 8 clients calling at once gets VIR_ERR_NO_SUPPORT within the open's
        time limit (10 s), not a call that never ends."""
        path = os.path.join(hostdrivers.temp_dir("vsnapd-silent-"), "sock")
        silent = socket.socket(socket.AF_UNIX)
        silent.bind(path)
        silent.listen(64)
        self.closers.append(lambda: hostdrivers.remove_tree(os.path.dirname(path)))
        self.closers.append(silent.close)
        daemon = self.daemon(f"storage:///system?socket={path}")
        results = []

        def one():
            t0 = time.monotonic()
            status, err = raw_call(daemon.sock, 281, hostdrivers.args_of(281), timeout=60)
            results.append((time.monotonic() - t0, status, err))
        threads = [threading.Thread(target=one) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self.assertEqual(len(results), 8)
        for seconds, status, err in results:
            self.assertEqual((status, err[0]), (1, libvirt.VIR_ERR_NO_SUPPORT))
            self.assertIn("did not answer in time", err[2])
            self.assertLess(seconds, 20)
        self.assertEqual(daemon.virsh("list", "--all").returncode, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

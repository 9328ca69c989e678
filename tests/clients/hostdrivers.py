"""Helpers for the client tests (virt-install, Ansible, the storage calls):
the host's libvirt drivers and a daemon under test that reaches them.

HostDrivers runs libvirtd (Debian 12's, which holds the network and storage
drivers) as tests/netd/netd.py's NetworkDaemon does: in a network namespace
and a mount namespace of its own where libvirt's directories are private and
empty, with an isolated network (no <forward>, no DHCP) defined and started
on it. The virtvsnapd under test runs inside the same namespaces, so its
default network:///system and storage:///system reach that libvirtd, and its
taps go onto that network's bridge. Nothing of the host's own libvirt is seen
or touched.

STORAGE_PROCS lists every storage procedure the daemon forwards, with
arguments that decode (for raw calls that need no real pool)."""

import os
import shutil
import struct
import sys
import tempfile
import uuid as uuidlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "netd"), os.path.join(HERE, "..", "plugin"), os.path.join(HERE, "..", "lib")]
import libvirt  # noqa: E402
import netd  # noqa: E402
import vsnapd  # noqa: E402
from vsnapd import xdr_opt_string, xdr_string  # noqa: E402

NETWORK, BRIDGE, SUBNET = "vsnclient", "vsnclientbr", "10.79.0"


class HostDrivers:
    """libvirtd with an isolated network NETWORK on BRIDGE, and a daemon
    under test in its namespaces. close() stops both and removes all."""

    def __init__(self):
        self.host = netd.Netns("c")
        self.driver = self.daemon = None
        try:
            self.driver = netd.NetworkDaemon(self.host)
            path = os.path.join(self.driver.dir, "net.xml")
            with open(path, "w") as f:
                f.write(f"<network><name>{NETWORK}</name><bridge name='{BRIDGE}'/>"
                        f"<ip address='{SUBNET}.1' prefix='24'/><dns enable='no'/></network>")
            self.driver.virsh("net-define", path)
            self.driver.virsh("net-start", NETWORK)
            self.daemon = vsnapd.Daemon().start(prefix=self.driver.enter_prefix())
        except BaseException:
            self.close()
            raise

    def storage(self):
        """A connection of the test's own to the storage driver."""
        return libvirt.open(self.driver.storage_uri)

    def log(self):
        return (self.daemon.log() if self.daemon else "") + "\n--- libvirtd ---\n" + (
            self.driver.log() if self.driver else "")

    def close(self):
        if self.daemon:
            self.daemon.cleanup()
        if self.driver:
            self.driver.close()
        self.host.close()


def daemon_with_storage_uri(uri):
    """A daemon (in the host's namespaces) whose storage driver is at uri."""
    daemon = vsnapd.Daemon()
    conf = os.path.join(daemon.dir, "virtvsnapd.conf")
    with open(conf, "w") as f:
        f.write(f"[daemon]\nstorage_uri={uri}\n")
    return daemon.start(extra=("--config", conf))


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)


# ---- raw calls of every storage procedure ----------------------------------------

def _u32(v):
    return struct.pack(">I", v)


def _u64(v):
    return struct.pack(">Q", v)


def _pool(name="nopool"):
    return xdr_string(name) + uuidlib.uuid4().bytes


def _vol():
    return xdr_string("nopool") + xdr_string("novol") + xdr_string("/no/such/key")


XML = xdr_string("<pool type='dir'><name>x</name><target><path>/nonexistent</path></target></pool>")

# (procedure, API name, arguments, changes state)
STORAGE_PROCS = [
    (71, "virConnectNumOfStoragePools", b"", False),
    (72, "virConnectListStoragePools", _u32(16), False),
    (73, "virConnectNumOfDefinedStoragePools", b"", False),
    (74, "virConnectListDefinedStoragePools", _u32(16), False),
    (75, "virConnectFindStoragePoolSources", xdr_string("logical") + xdr_opt_string(None) + _u32(0), True),
    (76, "virStoragePoolCreateXML", XML + _u32(0), True),
    (77, "virStoragePoolDefineXML", XML + _u32(0), True),
    (78, "virStoragePoolCreate", _pool() + _u32(0), True),
    (79, "virStoragePoolBuild", _pool() + _u32(0), True),
    (80, "virStoragePoolDestroy", _pool(), True),
    (81, "virStoragePoolDelete", _pool() + _u32(0), True),
    (82, "virStoragePoolUndefine", _pool(), True),
    (83, "virStoragePoolRefresh", _pool() + _u32(0), True),
    (84, "virStoragePoolLookupByName", xdr_string("nopool"), False),
    (85, "virStoragePoolLookupByUUID", uuidlib.uuid4().bytes, False),
    (86, "virStoragePoolLookupByVolume", _vol(), False),
    (87, "virStoragePoolGetInfo", _pool(), False),
    (88, "virStoragePoolGetXMLDesc", _pool() + _u32(0), False),
    (89, "virStoragePoolGetAutostart", _pool(), False),
    (90, "virStoragePoolSetAutostart", _pool() + _u32(1), True),
    (91, "virStoragePoolNumOfVolumes", _pool(), False),
    (92, "virStoragePoolListVolumes", _pool() + _u32(16), False),
    (93, "virStorageVolCreateXML", _pool() + xdr_string("<volume/>") + _u32(0), True),
    (94, "virStorageVolDelete", _vol() + _u32(0), True),
    (95, "virStorageVolLookupByName", _pool() + xdr_string("novol"), False),
    (96, "virStorageVolLookupByKey", xdr_string("/no/such/key"), False),
    (97, "virStorageVolLookupByPath", xdr_string("/no/such/path"), False),
    (98, "virStorageVolGetInfo", _vol(), False),
    (99, "virStorageVolGetXMLDesc", _vol() + _u32(0), False),
    (100, "virStorageVolGetPath", _vol(), False),
    (125, "virStorageVolCreateXMLFrom", _pool() + xdr_string("<volume/>") + _vol() + _u32(0), True),
    (154, "virStoragePoolIsActive", _pool(), False),
    (155, "virStoragePoolIsPersistent", _pool(), False),
    (165, "virStorageVolWipe", _vol() + _u32(0), True),
    (259, "virStorageVolWipePattern", _vol() + _u32(0) + _u32(0), True),
    (260, "virStorageVolResize", _vol() + _u64(1 << 20) + _u32(0), True),
    (281, "virConnectListAllStoragePools", _u32(1) + _u32(0), False),
    (282, "virStoragePoolListAllVolumes", _pool() + _u32(1) + _u32(0), False),
    (378, "virStorageVolGetInfoFlags", _vol() + _u32(0), False),
    (391, "virStoragePoolLookupByTargetPath", xdr_string("/no/such/dir"), False),
    (403, "virConnectGetStoragePoolCapabilities", _u32(0), False),
]


def args_of(proc):
    return next(body for p, _, body, _ in STORAGE_PROCS if p == proc)


def raw_call(sock_path, proc, body, ro=False, timeout=60):
    """(status, (code, domain, message) or None) of one call on a new
    connection to sock_path, opened read-only when ro."""
    client = vsnapd.RawClient(sock_path, timeout=timeout)
    try:
        client.open(libvirt.VIR_CONNECT_RO if ro else 0)
        status, reply = client.call(proc, body)
        return status, (vsnapd.decode_error(reply) if status == 1 else None)
    finally:
        client.close()


def temp_dir(prefix):
    return tempfile.mkdtemp(prefix=prefix)

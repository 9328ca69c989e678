"""virsh dump --memory-only through real virsh and python3-libvirt: an ELF64
core (ET_CORE) whose first program header is a PT_NOTE with one NT_PRSTATUS
"CORE" note per vCPU, and one PT_LOAD per guest RAM range at its
guest-physical address, holding what the guest wrote there (the test guest's
vsnap.fill_mib pattern, checked with vsnap-pattern). Without --live the VM is
paused for it and runs again after; a dump that fails (a full disk, a
read-only file system, a directory that does not exist) leaves the VM as it
was and no file; formats other than ELF are refused by name."""

import os
import struct
import subprocess
import tempfile
import unittest

import libvirt

from disktest import PATTERN, file_sum, pattern_sum
from vsnapd import DaemonTest, needs_guest

MIB = 1 << 20
FILL_BASE = 16 * MIB     # the test guest's fill region (guest/testguest/layout.h)
FILL_MIB = 4
SEED = 11
PT_LOAD, PT_NOTE, ET_CORE, NT_PRSTATUS = 1, 4, 4, 1
PRSTATUS_SIZE = 336      # struct elf_prstatus on x86-64
PR_REG_OFFSET = 112      # pr_reg in it; rip is register 16 of user_regs_struct


def read_core(path):
    """(e_type, [program headers], [(name, type, desc)])"""
    with open(path, "rb") as f:
        eh = f.read(64)
        assert eh[:4] == b"\x7fELF" and eh[4] == 2 and eh[5] == 1, "not an ELF64 little-endian file"
        e_type, e_machine = struct.unpack_from("<HH", eh, 16)
        e_phoff, = struct.unpack_from("<Q", eh, 32)
        e_phentsize, e_phnum = struct.unpack_from("<HH", eh, 54)
        f.seek(e_phoff)
        phdrs = []
        for _ in range(e_phnum):
            p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align = \
                struct.unpack("<IIQQQQQQ", f.read(e_phentsize))
            phdrs.append(dict(type=p_type, offset=p_offset, paddr=p_paddr, filesz=p_filesz, memsz=p_memsz))
        notes = []
        note = phdrs[0]
        f.seek(note["offset"])
        data = f.read(note["filesz"])
        pos = 0
        while pos < len(data):
            namesz, descsz, ntype = struct.unpack_from("<III", data, pos)
            pos += 12
            name = data[pos:pos + namesz].rstrip(b"\0").decode()
            pos += (namesz + 3) // 4 * 4
            notes.append((name, ntype, data[pos:pos + descsz]))
            pos += (descsz + 3) // 4 * 4
    return e_type, e_machine, phdrs, notes


@needs_guest
class DumpTest(DaemonTest):
    def setUp(self):
        super().setUp()
        if not PATTERN:
            self.skipTest("VSNAP_PATTERN is not set")
        self.define("d", vcpus=2, memory_mib=64, cmdline=f"vsnap.fill_mib={FILL_MIB} vsnap.seed={SEED}")
        self.v("start", "d")
        self.mounts = []

    def tearDown(self):
        self.v("destroy", "d", check=False)
        for mnt in self.mounts:
            subprocess.run(["umount", "-l", mnt])
        super().tearDown()

    def v(self, *args, **kw):
        return self.daemon.virsh(*args, **kw)

    def wait_ready(self):
        from vsnaptest import wait_command_port
        wait_command_port(os.path.join(self.daemon.state, "run", "d", "vsock.sock"), timeout=60,
                          connect_timeout=30).close()

    def check_core(self, path, vcpus=2, memory=64 * MIB):
        e_type, machine, phdrs, notes = read_core(path)
        self.assertEqual(e_type, ET_CORE)
        self.assertEqual(machine, 62)    # EM_X86_64
        self.assertEqual(phdrs[0]["type"], PT_NOTE)
        self.assertEqual([(n, t, len(d)) for n, t, d in notes], [("CORE", NT_PRSTATUS, PRSTATUS_SIZE)] * vcpus)
        rip = struct.unpack_from("<Q", notes[0][2], PR_REG_OFFSET + 16 * 8)[0]
        self.assertGreaterEqual(rip, 1 * MIB, "vCPU 0's rip is in the guest image (loaded at 1 MiB)")
        loads = [p for p in phdrs[1:] if p["type"] == PT_LOAD]
        self.assertEqual(len(loads), len(phdrs) - 1)
        self.assertEqual(sum(p["memsz"] for p in loads), memory)
        ram = next(p for p in loads if p["paddr"] <= FILL_BASE < p["paddr"] + p["filesz"])
        self.assertEqual(ram["paddr"], 0)
        offset = ram["offset"] + FILL_BASE - ram["paddr"]
        self.assertEqual(file_sum(path, offset, FILL_MIB * MIB), pattern_sum(SEED, FILL_MIB * MIB))
        # Past the fill region the guest wrote nothing: zeros (a hole in the file).
        after = offset + FILL_MIB * MIB
        self.assertEqual(file_sum(path, after, MIB), file_sum("/dev/zero", 0, MIB))

    def test_virsh_dump_memory_only(self):
        self.wait_ready()
        path = os.path.join(self.daemon.dir, "d.core")
        self.v("dump", "d", path, "--memory-only")
        self.check_core(path)
        self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
        self.assertLess(os.stat(path).st_blocks * 512, 40 * MIB, "RAM that reads as zeros is a hole")
        self.assertEqual(self.state("d"), "running (unpaused)")
        # An existing file is replaced whole.
        self.v("dump", "d", path, "--memory-only", "--format", "elf")
        self.check_core(path)
        self.assertEqual(sorted(os.listdir(self.daemon.dir)).count("d.core"), 1)

    def test_python_live_and_paused(self):
        self.wait_ready()
        dom = self.daemon.connect().lookupByName("d")
        live = os.path.join(self.daemon.dir, "live.core")
        dom.coreDumpWithFormat(live, libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_RAW,
                               libvirt.VIR_DUMP_MEMORY_ONLY | libvirt.VIR_DUMP_LIVE)
        self.check_core(live)
        self.assertEqual(dom.state()[0], libvirt.VIR_DOMAIN_RUNNING)
        dom.suspend()
        paused = os.path.join(self.daemon.dir, "paused.core")
        dom.coreDump(paused, libvirt.VIR_DUMP_MEMORY_ONLY)
        self.check_core(paused)
        self.assertEqual(dom.state(), [libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PAUSED_USER])
        dom.resume()

    def test_refusals(self):
        dom = self.daemon.connect().lookupByName("d")
        path = os.path.join(self.daemon.dir, "x.core")
        for fmt, name in ((libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_KDUMP_ZLIB, "kdump-zlib"),
                          (libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_KDUMP_SNAPPY, "kdump-snappy"),
                          (libvirt.VIR_DOMAIN_CORE_DUMP_FORMAT_WIN_DMP, "win-dmp")):
            with self.assertRaises(libvirt.libvirtError) as e:
                dom.coreDumpWithFormat(path, fmt, libvirt.VIR_DUMP_MEMORY_ONLY)
            self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_UNSUPPORTED)
            self.assertIn(name, str(e.exception))
        res = self.v("dump", "d", path, check=False)
        self.assertIn("--memory-only", res.stderr)
        self.assertFalse(os.path.exists(path))
        self.v("destroy", "d")
        with self.assertRaises(libvirt.libvirtError) as e:
            dom.coreDump(path, libvirt.VIR_DUMP_MEMORY_ONLY)
        self.assertEqual(e.exception.get_error_code(), libvirt.VIR_ERR_OPERATION_INVALID)
        self.assertFalse(os.path.exists(path))

    def mount_tmpfs(self, options):
        mnt = tempfile.mkdtemp(dir=self.daemon.dir)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", mnt]).returncode != 0:
            self.skipTest("cannot mount a tmpfs here")
        self.mounts.append(mnt)
        return mnt

    def test_full_disk_leaves_vm_running_and_no_file(self):
        self.wait_ready()
        mnt = self.mount_tmpfs("size=2m")
        old = os.path.join(mnt, "d.core")
        with open(old, "w") as f:
            f.write("an older dump")
        res = self.v("dump", "d", old, "--memory-only", check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("No space left on device", res.stderr)
        self.assertEqual(os.listdir(mnt), ["d.core"])
        with open(old) as f:
            self.assertEqual(f.read(), "an older dump")
        self.assertEqual(self.state("d"), "running (unpaused)")
        self.wait_ready()     # and the guest still answers

    def test_unwritable_places(self):
        ro = self.mount_tmpfs("size=1m,ro")
        for path in (os.path.join(ro, "d.core"), os.path.join(self.daemon.dir, "no", "such", "d.core")):
            res = self.v("dump", "d", path, "--memory-only", check=False)
            self.assertNotEqual(res.returncode, 0)
            self.assertIn("cannot create the dump file", res.stderr)
            self.assertFalse(os.path.exists(path))
        self.assertEqual(os.listdir(ro), [])
        self.assertEqual(self.state("d"), "running (booted)")

    def test_ram_above_4g_is_its_own_load_segment(self):
        # 4 GiB of RAM: 3 GiB below the 32-bit MMIO hole, the rest from 4 GiB.
        self.v("destroy", "d")
        self.v("undefine", "d")
        self.define("d", vcpus=1, memory_mib=4096, cmdline=f"vsnap.fill_mib={FILL_MIB} vsnap.seed={SEED}")
        self.v("start", "d")
        self.wait_ready()
        path = os.path.join(self.daemon.dir, "big.core")
        self.v("dump", "d", path, "--memory-only")
        self.check_core(path, vcpus=1, memory=4096 * MIB)
        loads = [(p["paddr"], p["memsz"]) for p in read_core(path)[2][1:]]
        self.assertEqual(loads, [(0, 3072 * MIB), (4096 * MIB, 1024 * MIB)])
        self.assertLess(os.stat(path).st_blocks * 512, 64 * MIB)

    def test_crash_after_dump(self):
        self.wait_ready()
        path = os.path.join(self.daemon.dir, "c.core")
        self.v("dump", "d", path, "--memory-only", "--crash")
        self.check_core(path)
        self.assertEqual(self.state("d"), "shut off (crashed)")


if __name__ == "__main__":
    unittest.main()

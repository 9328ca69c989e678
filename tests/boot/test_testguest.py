#!/usr/bin/python3
"""The test guest on the real shim (real KVM): boot with 1 and 2 vCPUs, 512 MiB
and 8 GiB, the fill checksum against the host reference (tests/lib), delay timing
(which needs the shim's TSC leaf), command-line errors, power-off, reset, and
the API: vm.info, vm.pause/vm.resume (seen through the guest's heartbeat) and
vm.power-button.

usage: test_testguest.py <vsnap-shim> <vsnap-testguest> <vsnap-pattern> <source root>
"""

import os
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from vsnaptest import Shim, ShimError, pattern_checksum  # noqa: E402

MIB = 1 << 20
BOOT_TIMEOUT = 60  # s; a boot takes well under a second, the rest is slack for a loaded CI machine
PREFIX = "vsnap-testguest: "


def c_defines(path):
    """#define NAME value lines of a C header, values evaluated when they are
    simple integer expressions (0x600, (1u << 8))."""
    out = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s*#define\s+(\w+)\s+([^/]+?)\s*(/\*.*)?$", line)
            if not m:
                continue
            expr = re.sub(r"(?<=[0-9a-fA-F])(ull|ul|u|ULL|UL|U)\b", "", m.group(2))
            if re.fullmatch(r"[0-9a-fA-FxX()<>\s|]+", expr):
                out[m.group(1)] = eval(expr, {"__builtins__": {}})  # digits and operators only
    return out


class Constants(unittest.TestCase):
    """The guest cannot include the shim's headers (they need glib); the numbers
    it copies must still agree."""

    def test_acpi_ports_agree_with_shim(self):
        shim = c_defines(os.path.join(SRC, "shim", "platform", "include", "platform", "layout.h"))
        guest = c_defines(os.path.join(SRC, "guest", "testguest", "acpi.h"))
        for name in ["ACPI_PM1A_EVT_PORT", "ACPI_PM1A_CNT_PORT", "ACPI_S5_SLP_TYP",
                     "ACPI_PM1_PWRBTN_STS", "ACPI_PM1_SLP_EN"]:
            with self.subTest(name=name):
                self.assertIn(name, shim)
                self.assertEqual(guest.get(name), shim[name])

    def test_mmio_window_agrees_with_shim(self):
        shim = c_defines(os.path.join(SRC, "shim", "platform", "include", "platform", "layout.h"))
        guest = c_defines(os.path.join(SRC, "guest", "testguest", "layout.h"))
        self.assertEqual(guest["GUEST_MMIO_BASE"], shim["MMIO_VIRTIO_BASE"])


class GuestTestCase(unittest.TestCase):
    def shim(self, cmdline, memory="512M", cpus=1, api=False, extra_args=()):
        vm = Shim(SHIM, GUEST, cmdline=cmdline, memory=memory, cpus=cpus, api=api,
                  extra_args=extra_args)
        self.addCleanup(vm.close)
        vm.start()
        return vm

    def assert_clean_serial(self, vm):
        for line in vm.serial().splitlines():
            self.assertNotRegex(line, r"exception|error|warning", vm.describe())

    def wait_powered_off(self, vm, timeout=BOOT_TIMEOUT):
        rc = vm.wait_exit(timeout)
        self.assertEqual(rc, 0, "shim exit code after a guest power-off" + vm.describe())


class Boot(GuestTestCase):
    def test_fill_checksum_on_each_shape(self):
        expected = pattern_checksum(PATTERN, 7, 64 * MIB)
        for cpus, memory in [(1, "512M"), (2, "512M"), (1, "8G"), (2, "8G")]:
            with self.subTest(cpus=cpus, memory=memory):
                vm = self.shim("console=ttyS0 vsnap.fill_mib=64 vsnap.seed=7 vsnap.halt_after_ready=1",
                               memory=memory, cpus=cpus)
                vm.wait_for_serial(r"^vsnap-testguest: booted$", BOOT_TIMEOUT)
                m = vm.wait_for_serial(r"^vsnap-testguest: ready sum=([0-9a-f]{16})$", BOOT_TIMEOUT)
                self.assertEqual(m.group(1), expected, vm.describe())
                vm.wait_for_serial(r"^vsnap-testguest: halt_after_ready, powering off$", BOOT_TIMEOUT)
                self.wait_powered_off(vm)
                self.assert_clean_serial(vm)

    def test_no_fill_reports_offset_basis(self):
        vm = self.shim("vsnap.halt_after_ready=1")
        m = vm.wait_for_serial(r"^vsnap-testguest: ready sum=([0-9a-f]{16})$", BOOT_TIMEOUT)
        self.assertEqual(m.group(1), pattern_checksum(PATTERN, 0, 0))
        self.assertEqual(m.group(1), "cbf29ce484222325")
        self.wait_powered_off(vm)

    def test_other_seed_other_checksum(self):
        vm = self.shim("vsnap.fill_mib=3 vsnap.seed=0xfeedface12345678 vsnap.halt_after_ready=1")
        m = vm.wait_for_serial(r"^vsnap-testguest: ready sum=([0-9a-f]{16})$", BOOT_TIMEOUT)
        self.assertEqual(m.group(1), pattern_checksum(PATTERN, 0xFEEDFACE12345678, 3 * MIB))
        self.assertNotEqual(m.group(1), pattern_checksum(PATTERN, 7, 3 * MIB))
        self.wait_powered_off(vm)

    def test_delay_uses_the_tsc_frequency(self):
        # The guest times delay_ms with RDTSC and the shim's CPUID 0x40000010; a
        # missing or wrong frequency shows up as a delay far from what was asked.
        vm = self.shim("vsnap.delay_ms=1500 vsnap.halt_after_ready=1")
        vm.wait_for_serial(r"^vsnap-testguest: booted$", BOOT_TIMEOUT)
        booted = time.monotonic()
        vm.wait_for_serial(r"^vsnap-testguest: ready sum=", BOOT_TIMEOUT)
        elapsed = time.monotonic() - booted
        self.assertGreater(elapsed, 1.2, vm.describe())
        self.assertLess(elapsed, 6.0, vm.describe())
        self.assert_clean_serial(vm)
        self.wait_powered_off(vm)

    def test_idle_guest_leaves_the_host_cpu_free(self):
        # Idle means HLT with the LAPIC timer (woken every 10 ms to poll the power
        # button), not a spin. Measured here: ~0.02 of a core halting; spinning
        # (vsnap.idle_spin=1) ~0.3 on a busy machine and up to 1.0 on an idle one.
        vm = self.shim("vsnap.heartbeat_ms=200")
        vm.wait_for_serial(r"^vsnap-testguest: tick 1$", BOOT_TIMEOUT)
        before, t0 = cpu_seconds(vm.proc.pid), time.monotonic()
        time.sleep(2.0)
        used, wall = cpu_seconds(vm.proc.pid) - before, time.monotonic() - t0
        self.assertLess(used / wall, 0.12, f"idle guest used {used:.2f}s of CPU in {wall:.2f}s")
        self.assertGreaterEqual(len(re.findall(r"^vsnap-testguest: tick", vm.serial(), re.M)), 5,
                                "guest stopped running while idle" + vm.describe())
        self.assert_clean_serial(vm)

    def test_bad_option_is_reported_and_powers_off(self):
        vm = self.shim("vsnap.fill_mib=12x vsnap.halt_after_ready=1")
        vm.wait_for_serial(r"^vsnap-testguest: error: option vsnap\.fill_mib=12x: ", BOOT_TIMEOUT)
        self.wait_powered_off(vm)
        self.assertNotIn("ready", vm.serial())

    def test_command_line_forms(self):
        cases = [
            # (cmdline, a line that must appear, whether it reaches "ready")
            ("root=/dev/vda ro quiet vsnap.fill_mib=1 vsnap.seed=0x7 vsnap.halt_after_ready=1",
             "ready sum=" + pattern_checksum(PATTERN, 7, MIB), True),
            ("vsnap.future_option=3 vsnap.halt_after_ready=1",
             "warning: option vsnap.future_option=3: unknown option, ignored", True),
            ("vsnap.halt_after_ready=2", "error: option vsnap.halt_after_ready=2: expected 0 or 1", False),
            ("vsnap.seed", "error: option vsnap.seed: expected a decimal", False),
            ("vsnap.seed=99999999999999999999 vsnap.halt_after_ready=1",
             "error: option vsnap.seed=99999999999999999999: ", False),
            ("vsnap.halt_after_ready=1 vsnap.reboot_after_ready=1", "error: only one of", False),
        ]
        for cmdline, line, ready in cases:
            with self.subTest(cmdline=cmdline):
                vm = self.shim(cmdline)
                vm.wait_for_serial("^" + re.escape(PREFIX + line), BOOT_TIMEOUT)
                self.wait_powered_off(vm)
                self.assertEqual("ready sum=" in vm.serial(), ready, vm.describe())

    def test_page_fault_is_reported(self):
        # Exercises the IDT, the TSS stack switch from CPL3 and the report.
        vm = self.shim("vsnap.fault_after_ready=1")
        m = vm.wait_for_serial(r"^vsnap-testguest: exception 14 error=([0-9a-f]{16}) rip=[0-9a-f]{16} "
                               r"rsp=[0-9a-f]{16} cr2=([0-9a-f]{16}), powering off$", BOOT_TIMEOUT)
        self.assertEqual(int(m.group(1), 16), 4, "error code: a user-mode read of a not-present page")
        self.assertEqual(m.group(2), "0000004000000000")
        self.wait_powered_off(vm)

    def test_fill_beyond_ram_is_refused(self):
        vm = self.shim("vsnap.fill_mib=600 vsnap.halt_after_ready=1", memory="512M")
        vm.wait_for_serial(r"^vsnap-testguest: error: vsnap\.fill_mib=600: ", BOOT_TIMEOUT)
        self.wait_powered_off(vm)
        self.assertNotIn("ready", vm.serial())

    def test_reboot_after_ready_resets_the_vm(self):
        # The shim rebuilds the VM on a guest reset (as Cloud Hypervisor does) and
        # keeps the serial output going, so the guest boots again, and with this
        # option resets again.
        vm = self.shim("vsnap.reboot_after_ready=1")
        deadline = time.monotonic() + BOOT_TIMEOUT
        while len(re.findall(r"^vsnap-testguest: booted$", vm.serial(), re.M)) < 2:
            self.assertIsNone(vm.proc.poll(), "shim exited instead of rebooting" + vm.describe())
            self.assertLess(time.monotonic(), deadline, "guest did not boot a second time" + vm.describe())
            time.sleep(0.05)
        self.assertIn("vsnap-testguest: reboot_after_ready, resetting", vm.serial())
        self.assert_clean_serial(vm)


def cpu_seconds(pid):
    """User + system CPU time of a process (all its threads), from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Api(GuestTestCase):
    def ticks(self, vm):
        return re.findall(r"^vsnap-testguest: tick (\d+)$", vm.serial(), re.M)

    def wait_for_more_ticks(self, vm, than, timeout=10):
        deadline = time.monotonic() + timeout
        while len(self.ticks(vm)) <= than:
            self.assertLess(time.monotonic(), deadline, "no heartbeat from the guest" + vm.describe())
            time.sleep(0.05)

    def state(self, vm):
        status, info = vm.api("GET", "vm.info")
        self.assertEqual(status, 200, info)
        return info["state"]

    def test_info_pause_resume_power_button(self):
        vm = self.shim("vsnap.fill_mib=8 vsnap.seed=3 vsnap.heartbeat_ms=100", api=True, cpus=2)
        m = vm.wait_for_serial(r"^vsnap-testguest: ready sum=([0-9a-f]{16})$", BOOT_TIMEOUT)
        self.assertEqual(m.group(1), pattern_checksum(PATTERN, 3, 8 * MIB))
        self.assertEqual(self.state(vm), "Running")
        self.wait_for_more_ticks(vm, 0)

        status, body = vm.api("PUT", "vm.pause")
        self.assertEqual(status, 204, body)
        self.assertEqual(self.state(vm), "Paused")
        # A tick line may be half written when the vCPU stops; compare whole output.
        frozen = vm.serial()
        time.sleep(0.8)  # 8 heartbeats' worth
        self.assertEqual(vm.serial(), frozen, "guest ran while paused" + vm.describe())

        status, body = vm.api("PUT", "vm.resume")
        self.assertEqual(status, 204, body)
        self.assertEqual(self.state(vm), "Running")
        self.wait_for_more_ticks(vm, len(self.ticks(vm)))

        status, body = vm.api("PUT", "vm.power-button")
        self.assertEqual(status, 204, body)
        vm.wait_for_serial(r"^vsnap-testguest: power button, powering off$", BOOT_TIMEOUT)
        # With an API socket the shim may stay up with the VM shut down, as
        # Cloud Hypervisor can; either way the VM must be gone.
        deadline = time.monotonic() + BOOT_TIMEOUT
        while vm.proc.poll() is None:
            try:
                if self.state(vm) == "Shutdown":
                    break
            except ShimError:
                pass  # the shim is exiting right now
            self.assertLess(time.monotonic(), deadline, "VM still up after the power button" + vm.describe())
            time.sleep(0.05)
        if vm.proc.poll() is not None:
            self.assertEqual(vm.proc.returncode, 0, vm.describe())
        self.assert_clean_serial(vm)


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    SHIM, GUEST, PATTERN, SRC = sys.argv[1:5]
    del sys.argv[1:5]
    for path in (SHIM, GUEST, PATTERN):
        if not os.access(path, os.X_OK):
            sys.exit(f"test-testguest: {path} is missing or not executable (build it first)")
    unittest.main(verbosity=2)

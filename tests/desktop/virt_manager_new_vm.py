"""virt-manager's New VM wizard against vsnap, as a user imports a disk
image: File > New Virtual Machine > "Import existing disk image", the
image's path, Generic Linux 2022, 64 MiB and 1 CPU, a name, then Finish.

The host's storage and network drivers are a libvirtd of the test's own in
namespaces of its own (tests/clients/hostdrivers.py), as on a Debian host
with libvirt-daemon installed: the wizard finds the image's directory as a
storage pool there, and its NIC goes on that libvirtd's network.

virtinst gives a connection that is not QEMU's an IDE disk, an e1000 NIC,
a USB tablet, VNC graphics and a VGA video card; vsnap has none of those
devices and refuses each by name. So:
  1. Finish without customizing: an error dialog names the disk's bus
     (bus='ide', and that vsnap's disks are virtio), and no domain is left
     defined (the wizard creates a transient domain first; nothing is
     defined when that is refused).
  2. Finish with "Customize configuration before install", in the window
     that opens: the disk bus to VirtIO, the NIC model to virtio, the
     tablet, the VNC display and the VGA video removed, Boot Options >
     Direct kernel boot with the test guest, a VirtIO VSOCK device added
     (the test guest's command port), Begin Installation. The domain runs,
     its guest reads the image through its disk (BLKSUM equals the file's
     checksum), the image's directory is a pool of the storage driver.

One screenshot per step in OUT. Run by scripts/virt-manager-smoke.sh new-vm
(in an X server and a D-Bus session of its own; as root: namespaces).

    virt_manager_new_vm.py   (input from the environment)
    OUT    where screenshots and virt-manager's log go
    VIRTVSNAPD, VSNAP_SHIM, VSNAP_SCHEMA_DIR, VSNAP_TESTGUEST, VSNAP_PATTERN
           the programs under test (as meson gives them to tests/plugin)
"""

import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE] + [os.path.join(HERE, "..", d) for d in ("clients", "netd", "plugin", "lib")]
import vmmui  # noqa: E402  (configures dogtail before anything imports its tree)
from vmmui import (Abort, answer_yes, check, dialog_text, error_dialogs, find, need,  # noqa: E402
                   press, require, say, screenshot, showing, type_into, wait_for)
import hostdrivers  # noqa: E402
from disktest import DiskGuest, file_sum  # noqa: E402
from vsnapd import TESTGUEST  # noqa: E402

vmmui.OUT = OUT = os.environ["OUT"]
MIB = 1 << 20
IMAGE_BYTES = 4 * MIB
PLAIN = "wizard-plain"    # finished without customizing: refused
NAME = "wizard-vm"        # customized: runs
KERNEL_ARGS = "console=ttyS0"
# What virtinst adds for a connection that is not QEMU's and vsnap has no
# device for: removed in the customize window.
UNSUPPORTED_DEVICES = ["Tablet", "Display VNC", "Video VGA"]


class Host:
    """The daemon under test and the host's drivers, and the image."""

    def __init__(self):
        self.drivers = hostdrivers.HostDrivers()
        self.uri = self.drivers.daemon.uri
        self.images = os.path.join(self.drivers.daemon.dir, "images")
        os.makedirs(self.images)
        self.image = os.path.join(self.images, "disk.raw")
        with open(self.image, "wb") as f:
            f.write(os.urandom(IMAGE_BYTES))

    def virsh(self, *args, check_rc=True):
        return vmmui.virsh(self.uri, *args, check_rc=check_rc)

    def defined(self):
        return self.virsh("list", "--all", "--name").split()

    def criticals(self):
        """GLib criticals and warnings in the daemon's log and its shims' logs."""
        logs = [self.drivers.daemon.log()]
        for path in glob.glob(os.path.join(self.drivers.daemon.state, "log", "*.log")):
            with open(path, errors="replace") as f:
                logs.append(f.read())
        return [line for log in logs for line in log.splitlines()
                if "CRITICAL **" in line or "WARNING **" in line]

    def close(self):
        for name in self.defined():
            self.virsh("destroy", name, check_rc=False)
            self.virsh("undefine", name, check_rc=False)
        self.drivers.close()


# ---- the wizard's pages ----

def open_wizard(app):
    manager = need(app, "Virtual Machine Manager", "frame", timeout=30)
    press(need(manager, "File", "menu"))
    press(need(app, "New Virtual Machine", "menu item"))
    wizard = need(app, "New VM", "frame", timeout=20)
    screenshot("wizard-install-method")
    return wizard


def forward(wizard, page_label, what):
    press(need(wizard, "Forward", "push button"))
    require(find(wizard, page_label, "label", timeout=15) is not None,
            f"Forward goes on to the {what} page")


def choose_import(app, wizard, image):
    press(need(wizard, "Import existing disk image", "radio button"))
    forward(wizard, "Provide the existing storage path:", "storage path")
    type_into(need(wizard, "import-entry", "text"), image)
    type_into(need(wizard, "oslist-entry", "text"), "linux2022")
    popover = need(app, "oslist-popover", timeout=10)
    press(need(popover, "Generic Linux 2022 (linux2022)", "table cell"))
    screenshot("wizard-import-path-and-os")


def memory_and_cpus(wizard):
    forward(wizard, "Choose Memory and CPU settings:", "memory and CPU")
    spins = {s.name: s for s in showing(wizard, "spin button")}
    require("cpus" in spins and "" in spins, f"the memory and CPU spin buttons show ({sorted(spins)})")
    type_into(spins[""], "64")     # memory, MiB (its spin button has no name)
    spins[""].keyCombo("Tab")
    type_into(spins["cpus"], "1")
    spins["cpus"].keyCombo("Tab")
    check(wait_for(lambda: (spins[""].text, spins["cpus"].text) == ("64", "1"), 5),
          "memory 64 MiB and 1 CPU typed in")
    screenshot("wizard-memory-cpus")


def summary(wizard, name):
    forward(wizard, "Ready to begin the installation", "summary")
    page = need(wizard, role="page tab list")
    entries = showing(page, "text")
    require(len(entries) == 1, f"the summary page shows one entry, the name ({len(entries)})")
    type_into(entries[0], name)
    screenshot("wizard-summary-" + name)


def wizard_to_summary(app, host, name):
    wizard = open_wizard(app)
    choose_import(app, wizard, host.image)
    memory_and_cpus(wizard)
    summary(wizard, name)
    return wizard


# ---- 1. Finish as virtinst made it: refused, clearly ----

def finish_uncustomized(app, host, wizard):
    press(need(wizard, "Finish", "push button"))
    dialog = wait_for(lambda: next(iter(vmmui.alerts(app)), None), 30)
    require(dialog is not None, "Finish without customizing shows a dialog")
    text = dialog_text(dialog)
    say(f"the wizard's error: {text!r}")
    screenshot("refused-ide-disk")
    check("bus='ide'" in text and "virtio" in text,
          "the error dialog names the disk's bus (bus='ide') and that vsnap's disks are virtio")
    check("hda" in text, "the error dialog names the disk (hda)")
    check(PLAIN not in host.defined(), f"no domain {PLAIN} is left defined ({host.defined()})")
    check(not os.path.exists(os.path.join(host.drivers.daemon.state, "run", PLAIN)),
          f"no run directory of {PLAIN} is left")
    press(need(dialog, "Close", "push button"))


# ---- 2. Customize, then Begin Installation ----

def hardware(window):
    hw = need(window, "hw-list", "table")
    return hw, [c.name for c in hw.findChildren(vmmui.GenericPredicate(roleName="table cell")) if c.name]


def select(window, entry):
    hw, _ = hardware(window)
    press(need(hw, entry, "table cell"))


def apply(app, window, what):
    press(need(window, "config-apply", "push button"))
    time.sleep(0.5)
    errors = error_dialogs(app)
    require(not errors, f"{what}: applied without an error dialog ({errors})")
    screenshot("customize-" + what.lower().replace(" ", "-"))


def combo_text(tab, name=None):
    """The entry of an editable combo box (disk bus, NIC model)."""
    combo = need(tab, name, "combo box")
    return need(combo, role="text")


def disk_bus_virtio(app, window):
    select(window, "IDE Disk 1")
    type_into(combo_text(need(window, "disk-tab")), "virtio")
    apply(app, window, "disk bus VirtIO")
    check("VirtIO Disk 1" in hardware(window)[1], "the disk is VirtIO Disk 1")


def nic_model_virtio(app, window):
    nic = next((e for e in hardware(window)[1] if e.startswith("NIC ")), None)
    require(nic is not None, f"the customize window lists a NIC ({hardware(window)[1]})")
    select(window, nic)
    type_into(combo_text(need(window, "network-tab"), "e1000"), "virtio")
    apply(app, window, "NIC model virtio")


def remove_unsupported(app, window):
    for entry in UNSUPPORTED_DEVICES:
        select(window, entry)
        press(need(window, "config-remove", "push button"))
        answer_yes(app, f"removing {entry}")
        check(wait_for(lambda: entry not in hardware(window)[1], 10), f"{entry} removed")
    screenshot("customize-removed")


def direct_kernel_boot(app, window):
    select(window, "Boot Options")
    tab = need(window, "boot-tab")
    expander = need(tab, "Direct kernel boot", "toggle button")
    vmmui.press_title(expander)
    enable = need(tab, "Enable direct kernel boot", "check box")
    press(enable)
    kernel = need(need(tab, "kernel-browse", "push button").parent, role="text")
    type_into(kernel, TESTGUEST)
    panel = need(tab, "Kernel args:", "label").parent
    args = [t for t in showing(panel, "text") if t.parent == panel]
    require(len(args) == 1, "the Kernel args: entry shows")
    type_into(args[0], KERNEL_ARGS)
    apply(app, window, "direct kernel boot")


def add_vsock(app, window):
    press(need(window, "add-hardware", "push button"))
    add = need(app, "Add New Virtual Hardware", "frame", timeout=15)
    press(need(add, "VirtIO VSOCK", "table cell"))
    screenshot("add-hardware-vsock")
    press(need(add, "Finish", "push button"))
    check(wait_for(lambda: "VirtIO VSOCK" in hardware(window)[1], 10), "a VirtIO VSOCK device added")


def customize(app, host, wizard):
    entries = showing(need(wizard, role="page tab list"), "text")
    type_into(entries[0], NAME)
    press(need(wizard, "Customize configuration before install", "check box"))
    screenshot("wizard-summary-customize")
    press(need(wizard, "Finish", "push button"))
    window = need(app, f"{NAME} on vsnap", "frame", timeout=30)
    say("customize window: " + ", ".join(hardware(window)[1]))
    screenshot("customize-window")
    disk_bus_virtio(app, window)
    nic_model_virtio(app, window)
    remove_unsupported(app, window)
    direct_kernel_boot(app, window)
    add_vsock(app, window)
    press(need(window, "Begin Installation", "push button"))
    # Until the domain runs or an error dialog says why it does not.
    wait_for(lambda: error_dialogs(app) or host.virsh("domstate", NAME, check_rc=False) == "running", 30)
    errors = error_dialogs(app)
    running = host.virsh("domstate", NAME, check_rc=False) == "running"
    screenshot("began")
    check(not errors, "Begin Installation: no error dialog" + (f" ({errors})" if errors else ""))
    if not check(running, f"Begin Installation: virsh domstate {NAME} says running"):
        raise Abort(f"{NAME} does not run")


def guest_reads_the_image(host):
    live = host.virsh("dumpxml", NAME)
    for want in (f"<source file='{host.image}'", "<target dev='vda' bus='virtio'/>",
                 "<model type='virtio'/>", f"<source network='{hostdrivers.NETWORK}' portid='",
                 f"<kernel>{TESTGUEST}</kernel>",
                 f"<cmdline>{KERNEL_ARGS}</cmdline>"):
        check(want in live, f"the live XML has {want}")
    guest = DiskGuest(os.path.join(host.drivers.daemon.state, "run", NAME, "vsock.sock"), timeout=30)
    try:
        check(guest.info(0) == f"BLK 0 {IMAGE_BYTES // 512} 0",
              "the guest sees one writable disk of the image's size")
        got, want = guest.sum(0, 0, IMAGE_BYTES), file_sum(host.image, 0, IMAGE_BYTES)
        check(got == want, f"the guest's BLKSUM of its disk is the image's checksum ({got}, {want})")
    finally:
        guest.close()
    storage = host.drivers.storage()
    try:
        pool = storage.storagePoolLookupByTargetPath(host.images)
        check(pool.listVolumes() == ["disk.raw"],
              f"the image's directory is a pool of the storage driver ({pool.name()})")
    except Exception as e:
        check(False, f"the image's directory is a pool of the storage driver ({e})")
    finally:
        storage.close()


def main():
    if os.geteuid() != 0:
        print("virt-manager new-vm: the host's drivers run in namespaces: needs root (skipped)")
        return 77
    host = Host()
    proc = None
    try:
        proc, app = vmmui.start_virt_manager(host.uri)
        wizard = wizard_to_summary(app, host, PLAIN)
        finish_uncustomized(app, host, wizard)
        customize(app, host, wizard)
        guest_reads_the_image(host)
        check(find(need(app, "Virtual Machine Manager", "frame"), f"{NAME}\nRunning", "table cell")
              is not None, f"the manager lists {NAME} Running")
    except Abort:
        pass
    except Exception as e:   # dogtail's own errors: a node that never appeared
        check(False, f"{type(e).__name__}: {e}")
    finally:
        screenshot("last")
        if proc:
            vmmui.stop_virt_manager(proc)
        criticals = host.criticals()
        host.close()
    check(not criticals, f"no GLib critical or warning in the daemon's and shims' logs ({criticals[:3]})")
    shown = vmmui.log_error_dialogs()
    check(len(shown) == 1, f"virt-manager showed one error dialog, the refusal ({len(shown)})")
    say(f"{len(vmmui.failures)} failed checks; screenshots in {OUT}")
    return 1 if vmmui.failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""virt-manager as its users use it, against a private virtvsnapd: Debian's
virt-manager 4.1 driven through its accessibility tree (python3-dogtail,
which virt-manager's own UI tests use), with a screenshot of each step.

Runs inside an X server and a D-Bus session of its own
(scripts/virt-manager-smoke.sh starts it under xvfb-run and
dbus-run-session). The domain exists and runs before this starts; its guest
is the test guest with a pty serial console, a vsock device, a heartbeat on
the serial line and a spinning idle loop (so the CPU graph has something to
show), and one snapshot made by virsh.

    virt_manager_ui.py   (all input from the environment)
    URI    the daemon's read-write URI          NAME  the domain
    STATE  the daemon's state directory (for the guest's vsock socket)
    OUT    where screenshots and virt-manager's log go
    PRE_SNAPSHOT  the snapshot virsh made

Checks, each printed as "ok" or "FAIL" (exit 1 on any failure):
  - the domain list shows the domain Running and a CPU graph with a curve;
  - Pause, Resume, Shut Down, Run and Force Off from the manager's toolbar
    change what `virsh domstate` reports;
  - the details window shows Overview, CPUs, Memory, Serial 1, the vsock
    device and every other hardware entry (disks, NICs) without an error;
  - a title and description typed into the Overview and applied are what
    `virsh desc` reports, live and in the persistent definition;
  - the snapshots view lists the virsh snapshot, creates one and reverts to
    it: the guest's memory checksum (SUM on its command port) is back;
  - the serial console view shows the guest's heartbeat lines.
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import vmmui  # noqa: E402  (configures dogtail before anything imports its tree)
from vmmui import (Abort, GenericPredicate, answer_yes, check, close_error_dialogs,  # noqa: E402
                   error_dialogs, find, need, press, require, say, screenshot, type_into, wait_for)
from vsnaptest import wait_command_port  # noqa: E402

URI = os.environ["URI"]
NAME = os.environ["NAME"]
STATE = os.environ["STATE"]
vmmui.OUT = OUT = os.environ["OUT"]
PRE_SNAPSHOT = os.environ["PRE_SNAPSHOT"]
MIB = 1 << 20
REGION = (16 * MIB, 4 * MIB)   # guest RAM the test guest lets us write


def virsh(*args, check_rc=True):
    return vmmui.virsh(URI, *args, check_rc=check_rc)


def domstate():
    return virsh("domstate", NAME)


def wait_domstate(want, timeout=30):
    return wait_for(lambda: domstate() == want, timeout)


def guest_sum(fill_seed=None):
    conn = wait_command_port(os.path.join(STATE, "run", NAME, "vsock.sock"), 30,
                             connect_timeout=10)
    try:
        if fill_seed is not None:
            answer = conn.cmd(f"FILL {REGION[0]:#x} {REGION[1]} {fill_seed}")
            require(answer == "OK", f"FILL answered {answer!r}")
        answer = conn.cmd(f"SUM {REGION[0]:#x} {REGION[1]}")
        require(answer.startswith("SUM "), f"SUM answered {answer!r}")
        return answer[4:]
    finally:
        conn.close()


# ---- screenshots ----

def non_background_rows(png, x, y, w, h):
    """How many pixel rows of the region hold something else than the
    region's most common colour (its background)."""
    out = subprocess.run(["convert", png, "-crop", f"{w}x{h}+{x}+{y}", "+repage", "txt:-"],
                         capture_output=True, text=True, timeout=30).stdout
    pixels = {}
    for line in out.splitlines()[1:]:
        coords, _, rest = line.partition(":")
        col, row = (int(v) for v in coords.split(","))
        colour = rest.split()[-1]
        pixels[(col, row)] = colour
    if not pixels:
        return 0
    background = max(set(pixels.values()), key=list(pixels.values()).count)
    # Leave the frame (2 px) out: an empty graph is only its frame.
    rows = {r for (c, r), colour in pixels.items()
            if colour != background and 2 <= c < w - 2 and 2 <= r < h - 2}
    return len(rows)


# ---- the steps ----

def domain_list(app):
    manager = need(app, "Virtual Machine Manager", "frame", timeout=30)
    row = find(manager, f"{NAME}\nRunning", "table cell", timeout=30)
    require(row is not None, f"the domain list shows {NAME} Running")
    # The CPU graph's cell reports no extent of its own: it is where the
    # "CPU usage" column crosses the domain's row. Let it gather a few
    # samples (short-poll), then look at its pixels: an empty graph is a
    # white box, a graph of the spinning guest a curve over a filled area.
    column = need(manager, "CPU usage", "table column header")
    time.sleep(2)
    png = screenshot("manager")
    (x, _), (w, _) = column.position, column.size
    (_, y), (_, h) = row.position, row.size
    rows = non_background_rows(png, x, y, w, h)
    check(rows >= 3, f"the CPU usage graph has a curve ({rows} of {h} rows drawn)")
    return manager, row


def toolbar_actions(app, manager):
    # Select the domain, as a user does before pressing a toolbar button.
    press(need(manager, f"{NAME}\nRunning", "table cell"))
    toolbar = need(manager, role="tool bar")
    pause = need(toolbar, "Pause", "toggle button")

    press(pause)
    check(wait_domstate("paused"), "Pause: virsh domstate says paused")
    check(find(manager, f"{NAME}\nPaused", "table cell") is not None, "the list shows Paused")
    screenshot("paused")

    press(pause)
    check(wait_domstate("running"), "Resume (Pause again): virsh domstate says running")

    press(need(toolbar, "Shut Down", "push button"))
    check(wait_domstate("shut off"), "Shut Down: the guest powered off (ACPI), shut off")
    check(find(manager, f"{NAME}\nShutoff", "table cell") is not None, "the list shows Shutoff")
    screenshot("shut-off")

    press(need(toolbar, "Run", "push button"))
    check(wait_domstate("running"), "Run: virsh domstate says running")
    guest_sum()   # the guest is up again before it is forced off

    press(need(toolbar, "Menu", "toggle button"))
    press(need(app, "Force Off", "menu item"))
    answer_yes(app, "Force Off")
    check(wait_domstate("shut off"), "Force Off: virsh domstate says shut off")

    press(need(toolbar, "Run", "push button"))
    check(wait_domstate("running"), "Run: running again")
    check(find(manager, f"{NAME}\nRunning", "table cell", timeout=20) is not None,
          "the list shows Running")


def details(app, manager):
    press(need(manager, "Open", "push button"))
    window = need(app, f"{NAME} on vsnap", "frame", timeout=20)
    press(need(window, "Details", "radio button"))
    hw = need(window, "hw-list", "table")
    entries = [c.name for c in hw.findChildren(GenericPredicate(roleName="table cell"))
               if c.name]
    say("hardware list: " + ", ".join(entries))
    for want in ["Overview", "CPUs", "Memory", "Serial 1", "VirtIO VSOCK"]:
        check(want in entries, f"the details list has {want}")
    for entry in entries:
        press(need(hw, entry, "table cell"))
        time.sleep(0.3)
        errors = error_dialogs(app)
        check(not errors, f"details '{entry}' opens without an error" +
              (f": {errors}" if errors else ""))
        close_error_dialogs(app)
        screenshot("details-" + entry.lower().replace(" ", "-"))
    return window


def overview_metadata(app, window):
    """The Overview's title and description, applied: virt-manager redefines
    the domain and sets both live (virDomainSetMetadata, live and config)."""
    hw = need(window, "hw-list", "table")
    press(need(hw, "Overview", "table cell"))
    title = need(window, "Title:", "label").labelee
    description = need(window, "Description:", "label").labelee
    require(title is not None and description is not None, "the Title: and Description: labels name their fields")
    type_into(title, "vsnap web")
    type_into(description, "set in virt-manager")
    press(need(window, "config-apply", "push button"))
    for scope in ("--live", "--config"):
        got = wait_for(lambda: virsh("desc", NAME, "--title", scope, check_rc=False) == "vsnap web", 10)
        check(got, f"Overview Apply: virsh desc --title {scope} says 'vsnap web'")
        got = wait_for(lambda: virsh("desc", NAME, scope, check_rc=False) == "set in virt-manager", 10)
        check(got, f"Overview Apply: virsh desc {scope} says 'set in virt-manager'")
    errors = error_dialogs(app)
    check(not errors, "no error dialog after Overview Apply" + (f": {errors}" if errors else ""))
    close_error_dialogs(app)
    screenshot("overview-metadata")


def snapshots(app, window):
    press(need(window, "Snapshots", "radio button"))
    listing = need(window, "snapshot-list", "table")
    check(find(listing, f"{PRE_SNAPSHOT}\nVM State: Running", "table cell") is not None,
          f"the snapshots view lists {PRE_SNAPSHOT} (made by virsh)")
    want = guest_sum(fill_seed=4242)

    press(need(window, "snapshot-add", "push button"))
    dialog = need(app, "Create snapshot", "frame", timeout=10)
    # The entry the "Name:" label names (both fields are unnamed texts).
    name = need(dialog, "Name:", "label").labelee
    require(name is not None and name.roleName == "text", "the Name: label names its entry")
    press(name)
    name.keyCombo("<Control>a")   # typed over the proposed name, as a user does
    name.typeText("vmm-ui")
    press(need(dialog, "Finish", "push button"))
    made = wait_for(lambda: "vmm-ui" in virsh("snapshot-list", NAME, "--name").split(), 30)
    check(made, "Create snapshot (Finish): virsh snapshot-list shows vmm-ui")
    cell = find(listing, "vmm-ui\nVM State: Running", "table cell", timeout=10)
    require(cell is not None, "the snapshots view lists vmm-ui")
    screenshot("snapshots")

    changed = guest_sum(fill_seed=777)
    check(changed != want, "the guest's memory changed after the snapshot")
    press(cell)
    press(need(window, "snapshot-start", "push button"))
    answer_yes(app, "running a snapshot")
    back = wait_for(lambda: guest_sum() == want, 30, interval=0.5)
    check(back, f"revert (Run selected snapshot): the guest's SUM is the snapshot's ({want})")
    check(domstate() == "running", "running after the revert")
    errors = error_dialogs(app)
    check(not errors, "no error dialog in the snapshots view" + (f": {errors}" if errors else ""))
    screenshot("reverted")


def serial_console(app, window):
    press(need(window, "Console", "radio button"))
    terminal = need(window, "Serial Terminal", "terminal", timeout=10)
    shown = wait_for(lambda: "vsnap-testguest: tick" in terminal.text, 15, interval=0.3)
    check(shown, "the serial console shows the guest's heartbeat ('vsnap-testguest: tick')")
    screenshot("serial-console")


def main():
    proc, app = vmmui.start_virt_manager(URI, short_poll=True)
    try:
        manager, _ = domain_list(app)
        toolbar_actions(app, manager)
        window = details(app, manager)
        overview_metadata(app, window)
        snapshots(app, window)
        serial_console(app, window)
    except Abort:
        pass
    except Exception as e:   # dogtail's own errors: a node that never appeared
        check(False, f"{type(e).__name__}: {e}")
    finally:
        screenshot("last")
        vmmui.stop_virt_manager(proc)
    check(not vmmui.log_error_dialogs(), "virt-manager's log has no error dialog")
    say(f"{len(vmmui.failures)} failed checks; screenshots in {OUT}")
    return 1 if vmmui.failures else 0


if __name__ == "__main__":
    sys.exit(main())

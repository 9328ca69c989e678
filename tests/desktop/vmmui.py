"""What both desktop scripts share: dogtail set up for one private session,
the checks they print ("ok" / "FAIL"), screenshots, and the look-ups and
clicks in virt-manager's accessibility tree.

    import vmmui
    vmmui.OUT = out_dir          # before the first screenshot or start()
    proc, app = vmmui.start_virt_manager(uri)
"""

import os
import subprocess
import sys
import time

from dogtail.config import config

# No log files of dogtail's own (they go to a fixed /tmp path), no check of
# the desktop's accessibility setting (GTK 3 always exports its tree to the
# session's AT-SPI bus), short delays: this runs in one private session.
config.logDebugToFile = False
config.logDebugToStdOut = False
config.checkForA11y = False
config.actionDelay = 0.1
config.defaultDelay = 0.1
config.typingDelay = 0.02
config.searchBackoffDuration = 0.2
config.searchCutoffCount = 25

from dogtail import rawinput, tree  # noqa: E402  (after the configuration)
from dogtail.predicate import GenericPredicate  # noqa: E402

# dogtail replaces the exception hook with one that prints nothing; an
# error the scripts do not catch must still say where it happened.
sys.excepthook = sys.__excepthook__

OUT = None
T0 = time.monotonic()
failures = []
_shots = 0


def say(text):
    print(f"[{time.monotonic() - T0:5.1f}s] {text}", flush=True)


def check(cond, what):
    say(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)
    return cond


class Abort(Exception):
    """A step whose failure leaves nothing sensible to do after it."""


def require(cond, what):
    """A condition the next steps need: silent when it holds."""
    if not cond:
        check(False, what)
        raise Abort(what)


def wait_for(predicate, timeout, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:   # a node that went away while we looked at it
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            return None
        time.sleep(interval)


def screenshot(label):
    global _shots
    _shots += 1
    path = os.path.join(OUT, f"{_shots:02d}-{label}.png")
    subprocess.run(["import", "-window", "root", path], check=False, timeout=20)
    return path


def virsh(uri, *args, check_rc=True):
    res = subprocess.run(["virsh", "-q", "-c", uri, *args], capture_output=True, text=True,
                         timeout=60)
    if check_rc and res.returncode != 0:
        raise Abort(f"virsh {' '.join(args)}: {res.stderr.strip()}")
    return res.stdout.strip()


# ---- the accessibility tree ----

def find(parent, name=None, role=None, timeout=10):
    """The first showing descendant with this name and role, or None."""
    pred = GenericPredicate(name=name, roleName=role)
    return wait_for(lambda: parent.findChild(pred, retry=False, requireResult=False,
                                             showingOnly=True), timeout)


def showing(parent, role):
    """Every showing descendant with this role."""
    return [n for n in parent.findChildren(GenericPredicate(roleName=role)) if n.showing]


def need(parent, name=None, role=None, timeout=10):
    node = find(parent, name, role, timeout)
    if node is None:
        try:
            seen = sorted({n.name for n in parent.findChildren(GenericPredicate(roleName=role))})
        except Exception:
            seen = []
        require(False, f"virt-manager shows a {role} {name!r} in {parent.name!r} "
                f"(its {role}s: {seen})")
    return node


def press(node):
    """A real click: pointer events through XTest at the node's place. (Not
    the accessible "click" action: a handler that runs a modal dialog, as
    Force Off does, would hold that call until D-Bus gives up.)"""
    node.click()


def press_title(node):
    """A real click near the left end of node: an expander toggles on its
    title, not at the middle of its row where press() clicks."""
    x, y = node.position
    rawinput.click(x + 10, y + node.size[1] // 2)


def type_into(node, text):
    """Click into an entry, select what it holds and type over it, as a
    user does."""
    press(node)
    node.keyCombo("<Control>a")
    node.typeText(text)


def alerts(app):
    """Message dialogs (errors and questions) now showing."""
    return [w for w in app.children
            if w.roleName in ("alert", "dialog") and w.showing]


def dialog_text(dialog):
    return " / ".join(n.name for n in dialog.findChildren(GenericPredicate(roleName="label")) if n.name)


def error_dialogs(app):
    """Error dialogs now showing, with their text; the question dialogs that
    confirmations use are not errors."""
    found = []
    for w in alerts(app):
        buttons = [n.name for n in w.findChildren(GenericPredicate(roleName="push button"))]
        if "Yes" not in buttons:
            found.append(f"{w.name}: {dialog_text(w)}")
    return found


def answer_yes(app, what, timeout=10):
    """virt-manager asks before some actions (force off, revert, removing a
    device); say yes."""
    dialog = wait_for(lambda: next((w for w in alerts(app)
                                    if find(w, "Yes", "push button", timeout=0)), None),
                      timeout)
    require(dialog is not None, f"virt-manager asks before {what}")
    press(need(dialog, "Yes", "push button"))


def close_error_dialogs(app):
    for w in alerts(app):
        for label in ("Close", "OK"):
            b = find(w, label, "push button", timeout=0)
            if b:
                press(b)
                break


# ---- virt-manager itself ----

def start_virt_manager(uri, short_poll=False):
    """virt-manager on uri, its log and libvirt's client RPC log in OUT."""
    env = dict(os.environ,
               LIBVIRT_LOG_OUTPUTS=f"1:file:{OUT}/libvirt-client.log",
               LIBVIRT_LOG_FILTERS="1:rpc.netclient 4:*")
    # The suite's G_DEBUG=fatal-criticals is for vsnap's programs; virt-manager's
    # own GTK logs a critical when the customize window closes (gtk_notebook_get_tab_label)
    env.pop("G_DEBUG", None)
    log = open(os.path.join(OUT, "virt-manager.log"), "w")
    # first-run: settings in memory (nothing remembered between runs);
    # short-poll: statistics every 0.1 s instead of 3 s, so graphs fill.
    options = "first-run,short-poll" if short_poll else "first-run"
    proc = subprocess.Popen(["virt-manager", "--debug", "--no-fork",
                             f"--test-options={options}", "--connect", uri],
                            env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT)
    log.close()
    app = wait_for(lambda: tree.root.application("virt-manager"), 60, interval=0.3)
    check(app is not None, "virt-manager appeared on the accessibility bus")
    require(app is not None, "virt-manager appeared")
    return proc, app


def stop_virt_manager(proc):
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def log_error_dialogs():
    """The error dialogs virt-manager's log recorded (each one it showed)."""
    with open(os.path.join(OUT, "virt-manager.log"), errors="replace") as f:
        return [line for line in f if "error dialog message" in line]

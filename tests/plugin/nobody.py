"""Code run as nobody, a user every Debian system has. The checkout may be
where nobody cannot reach it (root on a fresh machine clones into /root,
mode 0700), so what nobody runs from it (the test helpers, the daemon, the
schemas) is copied first into a directory anyone may read."""

import os
import pwd
import resource
import shutil
import tempfile

NOBODY = pwd.getpwnam("nobody")
HERE = os.path.dirname(os.path.abspath(__file__))


def as_nobody(nofile=None):
    """A preexec_fn that becomes nobody (with RLIMIT_NOFILE nofile if given)."""
    def switch():
        if nofile:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        os.setgid(NOBODY.pw_gid)
        os.setgroups([])
        os.setuid(NOBODY.pw_uid)
    return switch


class ReadableCopy:
    """A temporary directory (mode 0755) with copies of files and folders,
    each readable by anyone, and executable by anyone where its owner could
    execute it."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="vsnapd-nobody-")
        os.chmod(self.dir, 0o755)

    def copy(self, path):
        """Copies path (a file or a folder) into the directory: the copy's path."""
        dest = os.path.join(self.dir, os.path.basename(path))
        if os.path.isdir(path):
            shutil.copytree(path, dest)
        else:
            shutil.copy2(path, dest)
        _open_to_all(dest)
        for root, dirs, files in os.walk(dest):
            for name in dirs + files:
                _open_to_all(os.path.join(root, name))
        return dest

    def helpers(self):
        """The folder holding a copy of vsnapd.py (the raw RPC client), for sys.path."""
        self.copy(os.path.join(HERE, "vsnapd.py"))
        return self.dir

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def _open_to_all(path):
    if os.path.islink(path):
        return   # a link's own mode is never checked
    executable = os.path.isdir(path) or os.stat(path).st_mode & 0o100
    os.chmod(path, 0o755 if executable else 0o644)

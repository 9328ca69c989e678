#!/usr/bin/python3
"""Every repository path a document or a comment names exists: files move,
and the prose that cites them is not compiled, so it drifts without this.

What counts as a path: a word with a slash in it whose last part has one of
the repository's file extensions (persist/recovery.c, tests/lib/vsnaptest.py)
or that ends in a slash and starts with one of the repository's folder names
(plugin/conf/, tests/netd/). Where it is looked for: in Markdown files and
man pages, the whole text; in C, Python, shell and meson files, the comments
(and Python's docstrings), never the code, whose paths the build and the
tests check themselves.

Where a path may point: from the repository's root, from the folder of the
file that names it or any folder above (a daemon file's persist/recovery.c
is plugin/persist/recovery.c), for a test from the source folder its folder
mirrors (tests/shim/block/'s block/blk-raw.c is shim/block/blk-raw.c), or
from a folder the #include lines start from (a public header folder,
include/, for conf/xml-util.h; common/ for snapshot/layer.h). A path git ignores is made by a build or a run
(debian/vsnap/) and may be absent. Not checked: absolute paths (the host's,
not the repository's), paths under build*/ (made by meson), paths with a
placeholder (<dir>/run, $BUILD/...), another project's paths, written
after its name (Linux's drivers/virt/vmgenid.c, Xen: xen/include/...), and
this file (its examples are relative to other folders).

usage: test_paths_exist.py <source root>
"""

import ast
import glob
import io
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkout import SKIP, is_checkout  # noqa: E402
import tokenize

PROSE = (".md", ".scd")
C_LIKE = (".c", ".h", ".S")
HASH_COMMENTS = (".sh", ".build", ".txt")
# a word made of path characters, not part of a longer one, not absolute
WORD = re.compile(r"(?<![\w./*<>${}~:@-])([A-Za-z0-9_*][\w.*+-]*(?:/[\w.*+-]+)+/?)")
C_COMMENT_OR_STRING = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
HASH_COMMENT = re.compile(r"(?:^|\s)#(.*)$", re.M)
# Projects whose source files vsnap's comments cite by their own paths.
OTHER_PROJECTS = ("Linux", "Xen", "Cloud Hypervisor", "Firecracker", "QEMU", "libvirt", "kvmtool",
                  "libcurl", "nginx", "systemd", "glibc", "OpenSSL", "libxml2", "GLib")
AFTER_OTHER_PROJECT = re.compile(r"(?:^|\W)(?:%s)(?:'s)?[ :(]*$" % "|".join(map(re.escape, OTHER_PROJECTS)))


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True, text=True, check=True)
    return [p for p in out.stdout.split("\0") if p and os.path.isfile(os.path.join(root, p))]


def known_extensions(files):
    exts = {os.path.splitext(p)[1] for p in files} - {""}
    return exts | {".build"}


def folder_names(files):
    names = set()
    for p in files:
        names.update(os.path.dirname(p).split("/"))
    return names - {""}


def c_comments(text):
    return [m.group(0) for m in C_COMMENT_OR_STRING.finditer(text) if m.group(0).startswith("/")]


def python_comments(text):
    """Comments and docstrings: the text a reader takes as prose."""
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                found.append(tok.string)
        tree = ast.parse(text)
    except (SyntaxError, tokenize.TokenError):
        return found
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                found.append(doc)
    return found


def prose_of(path, text):
    """The parts of a file that are prose (documents, comments)."""
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if ext in PROSE or name.startswith("README"):
        return [text]
    if ext in C_LIKE:
        return c_comments(text)
    if ext == ".py" or text.startswith("#!/usr/bin/python") or text.startswith("#!/usr/bin/env python"):
        return python_comments(text)
    if ext in HASH_COMMENTS or name == "meson.build" or text.startswith("#!"):
        return [m.group(1) for m in HASH_COMMENT.finditer(text)]
    return []


def is_candidate(word, exts, folders):
    if word.startswith("build") or word.startswith("./build"):
        return False
    last = word.rstrip("/").rsplit("/", 1)[-1]
    if word.endswith("/"):
        return word.split("/", 1)[0] in folders
    ext = os.path.splitext(last)[1]
    return ext in exts and not re.fullmatch(r"\.\d+", ext)


def with_ancestors(folder):
    found = []
    while folder:
        found.append(folder)
        folder = os.path.dirname(folder)
    return found


def bases_for(path, include_dirs):
    """The folders a path named in file path may be relative to."""
    bases = [""] + with_ancestors(os.path.dirname(path))
    if path.startswith("tests/"):
        bases += with_ancestors(os.path.dirname(path[len("tests/"):]))
    return bases + include_dirs


def exists(root, word, bases):
    for base in bases:
        full = os.path.normpath(os.path.join(root, base, word))
        if "*" in word:
            if glob.glob(full):
                return True
        elif os.path.exists(full):
            return True
    return False


def words_in(chunk):
    for m in WORD.finditer(chunk):
        line_before = chunk[chunk.rfind("\n", 0, m.start()) + 1:m.start()]
        if AFTER_OTHER_PROJECT.search(line_before[-40:]):
            continue
        word = m.group(1).rstrip(".,;:)")
        # a sentence's full stop after a folder: "in tests/netd/."
        if word.endswith("/."):
            word = word[:-1]
        yield word


def ignored(root, word):
    """True if git ignores the path (a build's or a run's output)."""
    res = subprocess.run(["git", "-C", root, "check-ignore", "-q", "--no-index", word], capture_output=True)
    return res.returncode == 0


def main():
    root = sys.argv[1]
    if not is_checkout(root):
        return SKIP
    files = tracked_files(root)
    exts, folders = known_extensions(files), folder_names(files)
    include_dirs = ["common"] + sorted({p.split("/include/")[0] + "/include" for p in files if "/include/" in p})
    missing, checked = [], 0
    this = os.path.relpath(os.path.abspath(__file__), os.path.abspath(root))
    for path in files:
        if path == this:
            continue
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        bases = bases_for(path, include_dirs)
        for chunk in prose_of(path, text):
            for word in words_in(chunk):
                if not is_candidate(word, exts, folders):
                    continue
                checked += 1
                if not exists(root, word, bases) and not ignored(root, word):
                    missing.append((path, word))
    if missing:
        print("paths named in documents and comments that do not exist in the repository:")
        for path, word in sorted(set(missing)):
            print(f"  {path}: {word}")
        return 1
    print(f"{checked} paths named in {len(files)} tracked files: all exist")
    return 0


if __name__ == "__main__":
    sys.exit(main())

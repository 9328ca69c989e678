"""The include structure of a program whose folders are its layers, checked
from the sources (tests/shim/check-layers.py and tests/plugin/check-layers.py
give the order).

Every `#include "..."` of a folder's file resolves beside the including file
(the folder's private headers) or to a lower folder's public header,
`<folder>/include/<folder>/<name>.h`, spelled "<folder>/<name>.h"; folders on
one line are peers and do not include each other. Includes sit at the top of
a file, every file belongs to a folder of the order, and no folder's
meson.build compiles another folder's files. The build enforces most of this
(each folder is a library that depends only on the folders below it); this
check names the violation in words and keeps the order written down.
"""
import os
import re

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ANY_INCLUDE = re.compile(r"^\s*#\s*include\b")
# Lines that may come before or between the includes of a file.
PREAMBLE = re.compile(r"^\s*(#\s*(pragma|define|include|if|ifdef|ifndef|endif|else|undef)\b|$)")


def strip_comments(text):
    """The text with comments blanked, line breaks kept (string literals in
    include lines hold no comment markers)."""
    return re.sub(r"/\*.*?\*/|//[^\n]*",
                  lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)


class Program:
    def __init__(self, root, layers, top_level):
        self.root = os.path.realpath(root)
        self.layers = layers
        self.top_level = top_level
        self.rank = {g: r for r, groups in enumerate(reversed(layers)) for g in groups}
        self.problems = []

    def group_of(self, path):
        parts = os.path.relpath(path, self.root).split(os.sep)
        if len(parts) == 1:
            return self.top_level.get(parts[0])
        return parts[0] if parts[0] in self.rank else None

    def resolve(self, including, name):
        """Where the compiler finds "name": beside the including file, then
        as a folder's public header. None: outside the program."""
        here = os.path.normpath(os.path.join(os.path.dirname(including), name))
        if os.path.isfile(here):
            return here
        folder = name.split("/", 1)[0]
        public = os.path.join(self.root, folder, "include", name)
        return public if "/" in name and os.path.isfile(public) else None

    def check_source(self, path):
        rel = os.path.relpath(path, self.root)
        group = self.group_of(path)
        if group is None:
            self.problems.append(f"{rel}: not in any layer (add its folder to the order)")
            return
        with open(path, encoding="utf-8") as f:
            lines = strip_comments(f.read()).split("\n")
        in_code = False
        for number, line in enumerate(lines, 1):
            if ANY_INCLUDE.match(line) and in_code:
                self.problems.append(f"{rel}:{number}: include after code (includes sit at the top)")
            if not PREAMBLE.match(line):
                in_code = True
            m = INCLUDE.match(line)
            if m:
                self.check_include(rel, number, group, path, m.group(1))

    def check_include(self, rel, number, group, path, name):
        target = self.resolve(path, name)
        if target is None:
            if "/" in name and name.split("/", 1)[0] in self.rank:
                self.problems.append(f"{rel}:{number}: \"{name}\" is no public header of "
                                     f"{name.split('/', 1)[0]}/")
            return
        tgroup = self.group_of(target)
        if tgroup == group:
            return
        trel = os.path.relpath(target, self.root)
        if self.rank[tgroup] >= self.rank[group]:
            how = "a higher" if self.rank[tgroup] > self.rank[group] else "a peer"
            self.problems.append(f"{rel}:{number}: {group} includes {trel} of {how} layer ({tgroup})")

    def check_meson(self, path):
        rel = os.path.relpath(path, self.root)
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"#[^\n]*", "", f.read())
        for m in re.finditer(r"'(\.\./[^']*)'", text):
            self.problems.append(f"{rel}: compiles {m.group(1)}, a file of another folder")

    def check(self):
        for base, dirs, files in os.walk(self.root):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(base, name)
                if name.endswith((".c", ".h")):
                    self.check_source(path)
                elif name == "meson.build":
                    self.check_meson(path)
        return list(dict.fromkeys(self.problems))


def main(argv, layers, top_level, what):
    if len(argv) != 2:
        raise SystemExit(f"usage: {argv[0]} SOURCE_DIR")
    problems = Program(argv[1], layers, top_level).check()
    for p in problems:
        print(p)
    if problems:
        order = " -> ".join(" / ".join(groups) for groups in layers)
        print(f"\n{len(problems)} layering problems; the order is {order}")
        return 1
    print(f"{what}: {len(layers)} layers, every include points down")
    return 0

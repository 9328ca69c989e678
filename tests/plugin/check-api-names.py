#!/usr/bin/python3
"""plugin/rpc/api-names.c against the libvirt installed here and against
plugin/rpc/include/rpc/protocol.h: every procedure number from 1 to the last
has a name; each name is what scripts/gen-api-names.py derives from the procedure's
protocol name and the installed libvirt-api.xml (so a name is an API this
libvirt has, or the event or step it names); and every number protocol.h
gives (transcribed on its own from the same protocol) carries the same
protocol name here.

usage: check-api-names.py SOURCE_ROOT [LIBVIRT_API_XML]
"""

import importlib.util
import os
import re
import sys


def load_generator(root):
    path = os.path.join(root, "scripts", "gen-api-names.py")
    spec = importlib.util.spec_from_file_location("gen_api_names", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def table(root):
    """{number: (name, protocol name)} of api-names.c."""
    text = open(os.path.join(root, "plugin", "rpc", "api-names.c")).read()
    rows = re.findall(r'^\s*\[(\d+)\] = "([^"]+)", /\* (\w+) \*/$', text, re.M)
    return {int(num): (name, proc) for num, name, proc in rows}


def protocol_h(root):
    text = open(os.path.join(root, "plugin", "rpc", "include", "rpc", "protocol.h")).read()
    body = text[text.index("enum remote_proc {"):]
    return {int(num): name for name, num in re.findall(r"\bPROC_(\w+) = (\d+),", body)}


def main():
    root = sys.argv[1]
    gen = load_generator(root)
    functions, enums = gen.read_api(sys.argv[2] if len(sys.argv) > 2 else gen.DEFAULT_API)
    rows = table(root)
    problems = []
    last = max(rows)
    if last < 443:
        problems.append(f"the table ends at {last}, before libvirt 9.0's 443")
    problems += [f"procedure {n} has no name" for n in range(1, last + 1) if n not in rows]
    for num, (name, proc) in sorted(rows.items()):
        derived = gen.name_of(proc, functions, enums)
        if derived != name:
            problems.append(f"procedure {num} ({proc}) is named '{name}'; the installed API gives '{derived}'")
    for num, proc in sorted(protocol_h(root).items()):
        if num not in rows or rows[num][1] != proc:
            problems.append(f"protocol.h has PROC_{proc} = {num}; api-names.c has "
                            f"{rows[num][1] if num in rows else 'nothing'} there")
    for problem in problems:
        print(problem)
    if problems:
        sys.exit(1)
    print(f"api-names.c: procedures 1 to {last} named, as the installed libvirt-api.xml gives them")


if __name__ == "__main__":
    main()

"""The man pages say what the programs do: every option a program's help
lists is documented in its page (as *--option* or *-o* in the scdoc source),
every key of virtvsnapd.conf is in virtvsnapd(8), and each built page
renders without a groff warning.

    test_man.py PAGE.scd BUILT-PAGE-or-"" HELP-COMMAND...

HELP-COMMAND prints the program's help (its output is read whatever its
exit status). With a conf= argument before the page (conf=FILE), the keys
of that key file must be in the page too."""

import re
import subprocess
import sys


def help_options(argv):
    res = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    text = res.stdout + res.stderr
    # "--long", "-s" at the start of an option description or in a usage line.
    longs = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", text))
    shorts = set(re.findall(r"(?:^|[\s\[,|])(-[a-zA-Z])\b", text, re.M))
    return text, longs | shorts


def conf_keys(path):
    with open(path) as f:
        return {m.group(1) for m in re.finditer(r"^#?([a-z_]+)=", f.read(), re.M)}


def main(args):
    conf = None
    if args[0].startswith("conf="):
        conf = args.pop(0)[5:]
    source, built, command = args[0], args[1], args[2:]
    with open(source) as f:
        page = f.read()
    problems = []
    text, options = help_options(command)
    if not options:
        problems.append(f"{' '.join(command)} printed no options:\n{text}")
    for opt in sorted(options):
        if f"*{opt}*" not in page:
            problems.append(f"{source} does not document {opt} (from {command[0]} {command[1:]})")
    if conf:
        for key in sorted(conf_keys(conf)):
            if f"*{key}*" not in page:
                problems.append(f"{source} does not document the configuration key {key}")
    if built:
        res = subprocess.run(["groff", "-man", "-ww", "-z", "-Tutf8", built],
                             capture_output=True, text=True, timeout=30)
        if res.returncode != 0 or res.stderr.strip():
            problems.append(f"groff warns about {built}:\n{res.stderr}")
    for p in problems:
        print("FAIL:", p)
    print(f"{source}: {len(options)} options checked" + (f", keys of {conf}" if conf else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

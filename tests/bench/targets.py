"""The benchmarks' targets, in one form (issue 22): each target compares a
measured value with a limit computed from a reference measured in the same
run, and says whether it was met.

A target is a dict (it goes into the benchmark's JSON line as it is):

  name       what is compared, e.g. "snapshot.ready_minus_running_512m_ondemand"
  value      the measured value
  op         "<=" or ">="
  limit      the limit the value is held to
  unit       "ms", "s", "x" (a ratio) ...
  reference  how the limit was computed, with the same-run numbers it came from
  status     "met", "missed", "cannot" (this host cannot meet it; why says
             why) or "not judged" (smoke mode, or nothing measured)
  why        for "cannot" and "not judged"; for "missed" when the benchmark
             knows more

Smoke mode (VSNAP_BENCH_SMOKE=1, the bench-smoke test suite): each benchmark
runs once at its smallest size; targets are still built, so their code runs,
but none is judged.

`python3 targets.py table RESULTS.jsonl [FIRST_LINE]` prints one table of
every target in the JSON lines from FIRST_LINE (1-based) on and exits 1
naming the missed ones.
"""

import json
import os
import sys

STATUSES = ("met", "missed", "cannot", "not judged")


def smoke():
    """True in the CI smoke mode: one run, the smallest size, no judging."""
    return os.environ.get("VSNAP_BENCH_SMOKE") == "1"


def target(name, value, op, limit, reference, unit="", cannot=None, why=None):
    """A target. cannot: None, or why this host cannot meet it (it is then
    listed as "cannot" when missed, not hidden; met is still met)."""
    if op not in ("<=", ">="):
        raise ValueError(f"target {name}: op {op!r}")
    t = {"name": name, "value": _round(value), "op": op, "limit": _round(limit), "unit": unit,
         "reference": reference}
    if smoke():
        t.update(status="not judged", why="smoke mode (VSNAP_BENCH_SMOKE=1: one run, smallest size)")
    elif value is None or limit is None:
        t.update(status="not judged", why=why or "not measured in this run")
    elif (value <= limit) if op == "<=" else (value >= limit):
        t["status"] = "met"
    elif cannot:
        t.update(status="cannot", why=cannot)
    else:
        t["status"] = "missed"
        if why:
            t["why"] = why
    return t


def at_most(name, value, limit, reference, unit="", **kw):
    return target(name, value, "<=", limit, reference, unit, **kw)


def at_least(name, value, limit, reference, unit="", **kw):
    return target(name, value, ">=", limit, reference, unit, **kw)


def touch_target(name, ready_minus_running_ms, fresh_touch_ms, **kw):
    """READY minus running after a restore against the host's own cost: a
    freshly booted guest's first touch of as much fresh RAM (the TOUCH
    command, timed the same way) x 1.2 + 20 ms."""
    limit = None if fresh_touch_ms is None else fresh_touch_ms * 1.2 + 20
    ref = ("fresh touch x 1.2 + 20 ms; fresh touch (TOUCH of as much never-touched RAM in a booted guest, "
           f"same run) = {_fmt(fresh_touch_ms)} ms")
    return at_most(name, ready_minus_running_ms, limit, ref, "ms", **kw)


def summary_status(targets):
    """The worst status of a list of targets, for a summary line."""
    for s in ("missed", "cannot", "not judged", "met"):
        if any(t["status"] == s for t in targets):
            return s
    return "none"


def _round(v):
    return round(v, 3) if isinstance(v, float) else v


def _fmt(v):
    if v is None:
        return "n/a"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


# ---- run.sh's table ----

def read_targets(path, first_line=1):
    """(benchmark, target) of every target in path's lines from first_line
    on; a benchmark whose summary sets no target gives (benchmark, None)."""
    found = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if n < first_line or not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError:
                continue
            ts = row.get("targets")
            if isinstance(ts, list):
                bench = row.get("benchmark") or row.get("bench") or "?"
                found += [(bench, t) for t in ts if isinstance(t, dict) and "status" in t] or [(bench, None)]
    return found


def table(found):
    rows = [("benchmark", "target", "value", "limit", "status", "reference / why")]
    for bench, t in found:
        if t is None:
            rows.append((bench, "-", "", "", "no target", "the benchmark's issue sets none (figures only)"))
            continue
        why = t.get("why")
        note = t["reference"] + (f" -- {why}" if why else "")
        rows.append((bench, t["name"], f"{_fmt(t['value'])} {t['unit']}".strip(),
                     f"{t['op']} {_fmt(t['limit'])}", t["status"], note))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5] for r in rows)


def main(argv):
    if len(argv) < 3 or argv[1] != "table":
        print("usage: targets.py table RESULTS.jsonl [FIRST_LINE]", file=sys.stderr)
        return 2
    found = read_targets(argv[2], int(argv[3]) if len(argv) > 3 else 1)
    print(table(found))
    found = [(b, t) for b, t in found if t]
    counts = {s: sum(1 for _, t in found if t["status"] == s) for s in STATUSES}
    print(", ".join(f"{n} {s}" for s, n in counts.items()))
    missed = [f"{b}:{t['name']}" for b, t in found if t["status"] == "missed"]
    if missed:
        print("targets missed: " + " ".join(missed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

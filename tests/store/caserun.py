"""The case loop of the store suites (test_store.py, test_hostile.py): each
case function case_NAME(env) runs in turn on one shared Env made in a fresh
work directory, PASS or FAIL with its traceback is printed per case, and the
exit status says whether any failed."""

import shutil
import tempfile
import time
import traceback


def run_cases(cases, make_env, prefix, wanted=lambda case: True, cleanup=lambda workdir: None):
    """Run every case of cases that wanted(case) keeps on make_env(workdir);
    cleanup(workdir) runs before the work directory is removed. 0 when all
    passed, else 1."""
    workdir = tempfile.mkdtemp(prefix=prefix)
    failed = []
    try:
        env = make_env(workdir)
        try:
            for case in cases:
                if not wanted(case):
                    continue
                name = case.__name__[5:]
                t0 = time.monotonic()
                try:
                    case(env)
                    print(f"PASS {name} ({time.monotonic() - t0:.1f} s)", flush=True)
                except Exception:
                    failed.append(name)
                    print(f"FAIL {name}\n{traceback.format_exc()}", flush=True)
        finally:
            env.close()
    finally:
        cleanup(workdir)
        shutil.rmtree(workdir, ignore_errors=True)
    if failed:
        print("failed:", " ".join(failed))
        return 1
    return 0

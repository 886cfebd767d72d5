"""Run a test file's full sweep: the clip x rig (or clip-pair) cases the suite keeps only a
representative few of, with the same checks.

The test files read SIGNSIM_SWEEP: set, their parametrisations and fixtures take every
case (as before the suite was cut, see bench/README.md, "Checks moved from the suite").
This runs pytest on those files in a child process with it set, prints pytest's report
and returns its exit code, which a bench passes on: non-zero when a check fails.
SIGNSIM_SWEEP_PYTEST_ARGS adds pytest options (e.g. "-x" to stop at the first failure).
"""
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent


def run(*test_files, extra=()):
    """pytest on tests/<file> ... with SIGNSIM_SWEEP=1; its exit code (0: every check passed)."""
    env = dict(os.environ, SIGNSIM_SWEEP="1")
    cmd = [sys.executable, "-m", "pytest", *(str(ROOT / "tests" / f) for f in test_files),
           "-q", "-rfEX", "--durations=10", *extra,
           *os.environ.get("SIGNSIM_SWEEP_PYTEST_ARGS", "").split()]
    print("SIGNSIM_SWEEP=1", " ".join(cmd), flush=True)
    # pytest's report goes through this process's stdout line by line, so a bench's
    # --write-results (bench/results.py) records it too
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          bufsize=1) as proc:
        for line in proc.stdout:
            print(line, end="", flush=True)
    code = proc.returncode
    print(f"sweep {'passed' if code == 0 else f'FAILED (pytest exit {code})'}: {' '.join(test_files)}", flush=True)
    return code

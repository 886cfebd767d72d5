"""What every bench shares: threshold checks that set the exit status, and
`--write-results`, which records the run's output as the bench's section of
bench/RESULTS.md (date, commit, machine, command, exit status, the printed table).

    import results
    results.check("bulk key writing >= 2 M keys/s", rate >= 2e6)
    ...
    if __name__ == "__main__":
        results.run(main)

A bench exits 1 when a check failed (each failure is printed as `FAIL: <what>`), with
its own non-zero status when it ends with one, else 0.
"""
import contextlib
import datetime
import io
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
HEADER = ("# Bench results\n\nWritten by the bench scripts (`--write-results`), one section per "
          "bench, each from one run; see bench/README.md for what each measures.\n")
_failed = []


def check(what, ok):
    """Record a threshold check: `what` states the threshold, `ok` whether it held.
    Returns ok."""
    if not ok:
        _failed.append(what)
        print(f"FAIL: {what}", flush=True)
    return bool(ok)


class _Tee(io.TextIOBase):
    def __init__(self, stream):
        self.stream, self.text = stream, io.StringIO()

    def write(self, s):
        self.text.write(s)
        return self.stream.write(s)

    def flush(self):
        self.stream.flush()


def run(main):
    """Run the bench's main(); exit with its status (1 when a check failed). With
    `--write-results` (taken out of sys.argv first) its stdout also goes into RESULTS.md."""
    write = "--write-results" in sys.argv
    if write:
        sys.argv.remove("--write-results")
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        try:
            code = main() or 0
        except SystemExit as ex:
            code = ex.code if isinstance(ex.code, int) else (0 if ex.code is None else 1)
            if isinstance(ex.code, str):
                print(ex.code, file=sys.stderr)
    if _failed and code == 0:
        code = 1
    if write:
        write_section(pathlib.Path(sys.argv[0]).name, " ".join(sys.argv[1:]), tee.text.getvalue(), code)
    sys.exit(code)


def write_section(name, args, output, code):
    """Replace (or add) the section `## name` of RESULTS.md with this run."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    # RESULTS.md itself does not count: the benches of one session write it in turn
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                            ":(exclude)bench/RESULTS.md"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    body = (f"## {name}\n\n{when} · commit {commit}{' (modified tree)' if dirty else ''} · "
            f"{os.cpu_count()} cores, load {load} at the end · `bench/{name}{' ' + args if args else ''}` · "
            f"exit {code}\n\n```text\n{output.rstrip()}\n```\n")
    text = RESULTS.read_text(encoding="utf-8") if RESULTS.exists() else HEADER
    sections = re.split(r"(?m)^(?=## )", text)
    head, rest = sections[0], [s for s in sections[1:] if not s.startswith(f"## {name}\n")]
    rest = sorted(rest + [body], key=lambda s: s.split("\n", 1)[0])
    RESULTS.write_text(head.rstrip() + "\n\n" + "\n".join(s.rstrip() + "\n" for s in rest), encoding="utf-8")

"""Progress of a long use case in named stages, with a time-left estimate.

A use case that runs long takes `progress`: None or a callable
`progress(stage, k, n, fraction)` — the stage's name, its place k (1-based) of n stages,
and the fraction of it done, in [0, 1]; it may raise to abort (the UI's cancel). `Stages`
drives that callable and times each stage; `Lines` turns the calls into throttled text
lines for the CLI (`[bake 4/8] simulation 43 % eta 12 s`); `overall` is the whole task's
fraction for a progress bar. `startup_seconds` is how long a CLI process ran before its command
(the `startup` stage).
"""
import os
import sys
import time
from contextlib import contextmanager

AFTER_S = 2.0  # s: a stage prints progress once it has run this long
EVERY_S = 1.0  # s: at most one line per stage this often (plus its end)
MAX_TICK = 0.99  # a tick inside a stage stays below 1, its end (work after the last tick may remain)


def overall(k, n, fraction):
    """The task's fraction done in [0, 1] with stage k of n at `fraction` (stages counted equal)."""
    return (k - 1 + fraction) / max(n, 1)


def eta(elapsed, fraction):
    """Seconds left when `fraction` (0–1) took `elapsed` seconds; None before any progress."""
    return None if fraction <= 0 else elapsed * (1 - fraction) / fraction


def eta_text(seconds):
    """'eta 12 s' ('eta 3 min 5 s' from a minute on); '' for None."""
    if seconds is None:
        return ""
    s = int(round(seconds))
    return f"eta {s // 60} min {s % 60} s" if s >= 60 else f"eta {s} s"


LAUNCHER_PID = "SIGNSIM_LAUNCHER_PID"  # set by tools/launch.py to its process id, before `import bpy`


def startup_seconds():
    """Wall seconds this process ran before the command started (Python, Blender and the
    extension loading) when it was started for one command — by tools/launch.py (`./signsim`),
    or by Blender's `-c signsim` — from the start time Linux gives in /proc/self/stat
    against CLOCK_BOOTTIME (both counted from boot). None for an in-process call (the tests,
    the UI) or where the OS does not say."""
    import bpy
    if os.environ.get(LAUNCHER_PID) != str(os.getpid()) and not bpy.app.binary_path:
        return None
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in clock ticks
        return max(time.clock_gettime(time.CLOCK_BOOTTIME) - started, 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def unique(names):
    """The names with each repeat suffixed by its place among its kind ('take.bvh',
    'take.bvh (2)'), for stages named after files or clips, which may share a name (a
    stage is entered by its name)."""
    out = []
    for name in names:
        unique_name, count = name, 1
        while unique_name in out:
            count += 1
            unique_name = f"{name} ({count})"
        out.append(unique_name)
    return tuple(out)


class Stages:
    """The stages of one task, timed and reported to `progress` (see the module).

    names: the stages in order (k of n counts in them; `plan` replaces them once they are
    known; each name once — `unique` makes names of files so). `with stages(name) as tick:` reports (name, k, n, 0) on entry, tick(fraction)
    inside (at most MAX_TICK), (name, k, n, 1) — the stage's end — on a normal exit, and
    adds the stage's wall seconds to `seconds[name]` (a stage entered twice adds up).
    before: {stage: wall seconds} of stages that ran before this object existed (a CLI
    command's `startup`, see startup_seconds): listed first by timed and summary, not
    counted in k of n.
    """

    def __init__(self, names, progress=None, before=None):
        self.plan(names)
        self.progress = progress
        self.before = dict(before or {})
        self.seconds = {}

    def plan(self, names):
        self.names = tuple(names)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"stage names repeat: {self.names}")

    @contextmanager
    def __call__(self, name):
        k, n = self.names.index(name) + 1, len(self.names)

        def tick(fraction, end=False):
            if self.progress is not None:
                self.progress(name, k, n, 1.0 if end else min(max(float(fraction), 0.0), MAX_TICK))
        start = time.perf_counter()
        try:
            tick(0.0)
            yield tick
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start
        tick(1.0, end=True)

    def timed(self):
        """{stage: wall seconds} of the stages run: `before`'s, then the planned order."""
        return {**self.before, **{name: self.seconds[name] for name in self.names if name in self.seconds}}

    def finish(self, report):
        """Report the summary ('   stages: …') at level 'INFO' (errors.INFO, which errors
        cannot give here: it imports this module) through `report(level, message)`; returns
        {stage: wall seconds, to the millisecond} of timed (a result's "stage_seconds")."""
        report("INFO", f"   stages: {self.summary()}")
        return {name: round(s, 3) for name, s in self.timed().items()}

    def summary(self):
        """'startup 1.4 s, reading 1.2 s, …, total 9.9 s' (stages in order)."""
        timed = self.timed()
        parts = [f"{name} {s:.1f} s" for name, s in timed.items()]
        return ", ".join(parts + [f"total {sum(timed.values()):.1f} s"])


def as_stages(progress, names):
    """`progress` when it is a Stages already (a use case run as part of a larger one), else
    Stages(names, progress)."""
    return progress if isinstance(progress, Stages) else Stages(names, progress)


class Lines:
    """A progress callable printing `[task k/n] stage 43 % eta 12 s` through write(line):
    for a stage once it has run `after` seconds (default AFTER_S), at most every `every`
    seconds (default EVERY_S), and `[task k/n] stage done in 14 s` at its end when the
    stage lasted that long."""

    def __init__(self, task, write, after=None, every=None):
        self.task, self.write = task, write
        self.after = AFTER_S if after is None else after
        self.every = EVERY_S if every is None else every
        self._stage, self._start, self._last = None, 0.0, None

    def __call__(self, stage, k, n, fraction):
        now = time.monotonic()
        if (stage, k) != self._stage:  # a new stage, or one entered again after its end
            self._stage, self._start, self._last = (stage, k), now, None
        elapsed = now - self._start
        head = f"[{self.task} {k}/{n}] {stage}"
        if fraction >= 1.0:
            if elapsed >= self.after:
                self.write(f"{head} done in {elapsed:.0f} s")
            self._stage = None
        elif elapsed >= self.after and (self._last is None or now - self._last >= self.every):
            self._last = now
            self.write(" ".join(filter(None, (f"{head} {100 * fraction:.0f} %", eta_text(eta(elapsed, fraction))))))


def cli_lines(say, task):
    """Lines for a CLI command: through `say` (stdout), or on stderr when `say` is silent
    (--json), so the last stdout line stays the JSON."""
    def write(line):
        if getattr(say, "silent", False):
            print(line, file=sys.stderr, flush=True)
        else:
            say(line)
    return Lines(task, write)

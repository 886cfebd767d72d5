"""The motion library at scale: import rate, memory, file size, list and search times.

    .venv/bin/python bench/bench_library.py [--clips 2000] [--library 10000] [--big-mb 200]

1. Generates `--clips` small distinct BVH clips (tests/helpers/library_samples.py's
   12-joint human, each with its own motion) in one folder.
2. Times Blender's plain BVH importer on the same files (bpy.ops.import_anim.bvh, one
   call per file into an empty file, in a child process, the first PLAIN_FILES files).
3. Builds the library with one `./signsim import FOLDER` process per folder of new
   distinct clips (a first folder of FIRST clips, then folders of `--clips`) until it
   holds `--library` clips; per call: clips/s overall and over the first and last 10 %
   of the files (from the progress lines; per wall second and per CPU second of the
   child, which a shared machine does not distort), wall and CPU time, peak memory
   (ru_maxrss of the child).
4. Probes: at about FIRST, `--clips` and `--library` clips, one import call of PROBE new
   clips; its peak memory must not grow with the library (±20 %).
5. Prints the library's files and sizes, `./signsim list` wall and CPU time (Blender's
   start included) with no filter and with text, tag and duration filters, and the
   in-process search time (library.api.list_clips) for the same filters.
6. With --big-mb N: a BVH of about N MB (a real file's rows repeated) imported in a child
   process; prints its peak memory.

Goals: list ≤ 2 s, search ≤ 50 ms at 10 000 clips; import ≥ 5 clips/s sustained; peak
memory of an import call within 20 % whatever the library size; 200 MB BVH ≤ 1.5 GB.

    .venv/bin/python bench/bench_library.py --concurrent

runs instead tests/library/test_library_store.py's test_concurrent_imports_keep_every_clip
at full size (4 `./signsim import` processes at once, 10 rounds; the suite runs 3 x 2):
every clip kept after each round. Exits non-zero when a clip is lost or an import fails.
The machine may be shared: wall times are then longer than CPU times (both printed).
"""
import argparse
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
sys.path.insert(0, str(ROOT / "tools"))
import library_samples as S  # noqa: E402

SIGNSIM = str(ROOT / "signsim")
# Each file into an empty file (the importer slows down as a scene fills up); only the
# import itself is timed, over the first PLAIN_FILES files.
PLAIN_FILES = 300
PLAIN = f"""
import sys, time, pathlib, bpy
files = sorted(pathlib.Path(sys.argv[1]).glob('*.bvh'))[:{PLAIN_FILES}]
spent = 0.0
for f in files:
    bpy.ops.wm.read_homefile(use_empty=True)
    t = time.perf_counter()
    bpy.ops.import_anim.bvh(filepath=str(f))
    spent += time.perf_counter() - t
print(len(files) / spent)
"""


def make_clips(folder, n, offset=0):
    """n distinct small clips (20–60 frames, own amplitudes) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(offset, offset + n):
        a, frames = 5 + (i % 17), 20 + (i % 41)
        rows = S.still_rows(frames, Head=lambda t, a=a, i=i: (a * math.sin(t / 4 + i), 0, 0))
        S.write(folder / f"clip_{i:05d}.bvh", S.bvh_text(rows))
    return folder


def _cpu_of(pid):
    """CPU seconds (user + system) a running process has used so far (Linux /proc), or nan."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(cmd, **kw):
    """(stdout lines, their arrival times as (wall s, the child's CPU s so far), wall s,
    CPU s, peak resident MB) of a child."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    out_lines, stamps = [], []
    for line in proc.stdout:
        out_lines.append(line)
        stamps.append((time.perf_counter(), _cpu_of(proc.pid)))
    err = proc.stderr.read()
    _pid, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bench: {' '.join(map(str, cmd[:3]))} failed: {err.strip()[-300:]}")
    return (out_lines, stamps, time.perf_counter() - t, usage.ru_utime + usage.ru_stime,
            usage.ru_maxrss / 1024.0)


def import_rate(lines, stamps):
    """(clips per wall second, clips per CPU second of the child) over the first and the
    last 10 % of a call's progress lines: ((first, last), (first, last))."""
    idx = [k for k, ln in enumerate(lines) if FILE_LINE.match(ln)]
    n = len(idx)
    if n < 4:
        return (float("nan"),) * 2, (float("nan"),) * 2
    w = max(n // 10, 2)
    rates = []
    for clock in (0, 1):
        rates.append(((w - 1) / (stamps[idx[w - 1]][clock] - stamps[idx[0]][clock]),
                      (w - 1) / (stamps[idx[-1]][clock] - stamps[idx[-w]][clock])))
    return tuple(rates)


FILE_LINE = re.compile(r"\[\d+/\d+\] ")  # import's line as each file starts ('[k/n] name')
FIRST = 100     # clips of the first folder (the first probe's library size)
PROBE = 20      # clips of a probe import


def count(lib):
    if not lib.exists():
        return 0
    return len(json.loads(run([SIGNSIM, "list", "--library", str(lib), "--json"])[0][-1])["clips"])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=2000)
    parser.add_argument("--library", type=int, default=10000)
    parser.add_argument("--big-mb", type=float, default=0.0)
    parser.add_argument("--work", default=None, help="folder for the files (default: a temp folder)")
    parser.add_argument("--concurrent", action="store_true",
                        help="only the concurrent-imports check at full size (4 processes x 10 rounds)")
    args = parser.parse_args()
    if args.concurrent:
        sys.path.insert(0, str(ROOT / "bench"))
        import sweep
        sys.exit(sweep.run("library/test_library_store.py", extra=["-k", "test_concurrent_imports_keep_every_clip"]))
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="signsim-bench-library-"))
    lib = work / "library.blend"
    print(f"work folder: {work}")

    offset = [0]

    def folder_of(n):
        f = make_clips(work / f"batch_{offset[0]:06d}", n, offset=offset[0])
        offset[0] += n
        return f

    folder = folder_of(args.clips)
    out, _s, wall, _cpu, _rss = run([sys.executable, "-c", PLAIN, str(folder)],
                                    env=dict(os.environ, PYTHONPATH=""))
    plain = float(out[-1])
    print(f"Blender's plain BVH importer: {plain:.1f} clips/s (first {min(PLAIN_FILES, args.clips)} "
          "files, one call each into an empty file)", flush=True)

    def imp(folder, what):
        have = count(lib)
        lines, stamps, wall, cpu, rss = run([SIGNSIM, "import", str(folder), "--library", str(lib)])
        n = sum(1 for ln in lines if FILE_LINE.match(ln))
        (first, last), (first_cpu, last_cpu) = import_rate(lines, stamps)
        size = sum(f.stat().st_size for f in [lib, *(work / "library.blend.parts").glob("*.blend")]
                   if f.exists()) / 2**20
        print(f"{what:6s} into {have:6d} clips: {n:5d} files in {wall:7.1f} s wall, {cpu:7.1f} s CPU = "
              f"{n / wall:6.2f} clips/s (first 10 %: {first:6.2f}, last 10 %: {last:6.2f}; per CPU s "
              f"{first_cpu:6.1f}, {last_cpu:6.1f}); "
              f"peak {rss:6.0f} MB; library {size:6.1f} MB", flush=True)
        return have, n, wall, cpu, rss

    rows, probes = [], []
    rows.append(imp(folder_of(FIRST), "import"))
    probes.append(imp(folder_of(PROBE), "probe"))
    rows.append(imp(folder, "import"))     # the --clips folder the plain importer read
    probes.append(imp(folder_of(PROBE), "probe"))
    while True:
        have = count(lib)
        if have >= args.library:
            break
        rows.append(imp(folder_of(min(args.clips, args.library - have)), "import"))
    probes.append(imp(folder_of(PROBE), "probe"))
    have = count(lib)
    peaks = [p[4] for p in probes]
    print(f"probe import ({PROBE} files) peak memory at library sizes "
          + ", ".join(f"{p[0]}: {p[4]:.0f} MB" for p in probes)
          + f" — spread {(max(peaks) / min(peaks) - 1) * 100:.0f} %")
    big = [r for r in rows if r[1] >= args.clips]
    print(f"sustained import over {args.clips}-file folders: "
          + ", ".join(f"{r[1] / r[2]:.1f}" for r in big) + " clips/s wall; "
          + ", ".join(f"{r[1] / r[3]:.1f}" for r in big) + " clips/s per CPU second")
    print(f"SignSim import vs plain: {big[0][1] / big[0][2]:.2f} / {plain:.2f} clips/s = "
          f"{big[0][1] / big[0][2] / plain:.2f}")
    parts = sorted((work / "library.blend.parts").glob("*.blend"))
    size = (lib.stat().st_size + sum(p.stat().st_size for p in parts)) / 2**20
    print(f"library: {have} clips, {size:.1f} MB in {1 + len(parts)} part files + "
          f"{os.path.getsize(str(lib) + '.index.sqlite') / 2**20:.1f} MB index; "
          f"files beside it: {sorted(p.name for p in work.iterdir() if p.is_file())}")
    filters = {"none": [], "text": ["--text", "clip_00042"], "tag": ["--tags", "duration:short"],
               "duration": ["--min-duration", "1.0", "--max-duration", "1.5"]}
    for name, flags in filters.items():
        walls, cpus = [], []
        for _ in range(3):
            _o, _s, wall, cpu, _rss = run([SIGNSIM, "list", "--library", str(lib), "--json", *flags])
            walls.append(wall)
            cpus.append(cpu)
        print(f"./signsim list ({name:8s}): {min(walls):.2f}–{max(walls):.2f} s wall, "
              f"{min(cpus):.2f}–{max(cpus):.2f} s CPU over 3 runs, Blender's start included")
    code = f"""
import sys, time
sys.path.insert(0, {str(ROOT / 'tools')!r})
import devenv
tmp = devenv.isolate_user_resources("signsim-bench-")
import bpy
api = devenv.enable_from_source(tmp).signsim_addon.library.api
lib = {str(lib)!r}
for name, kw in (("text", dict(text="clip_00042")), ("tag", dict(tags=["duration:short"])),
                 ("duration", dict(min_duration=1.0, max_duration=1.5)), ("none", {{}})):
    t, c = time.perf_counter(), time.process_time()
    api.list_clips(lib, **kw)
    first = (time.perf_counter() - t) * 1000, (time.process_time() - c) * 1000
    t, c = time.perf_counter(), time.process_time()
    for _ in range(5):
        n = len(api.list_clips(lib, **kw))
    print(f"in-process search ({{name:8s}}): {{(time.perf_counter() - t) / 5 * 1000:.1f}} ms wall, "
          f"{{(time.process_time() - c) / 5 * 1000:.1f}} ms CPU (first call {{first[0]:.1f}} ms wall, "
          f"{{first[1]:.1f}} ms CPU), {{n}} clips")
"""
    out, _s, _w, _c, _r = run([sys.executable, "-c", code])
    print("".join(out), end="")
    if args.big_mb:
        real = (ROOT.parent / "shared" / "data" / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh").read_text()
        head, rest = real.split("Frame Time:", 1)
        ft, body = rest.split("\n", 1)
        body = body.strip() + "\n"
        reps = max(1, int(args.big_mb * 2**20 / len(body)))
        big = work / "big" / "long.bvh"
        big.parent.mkdir(exist_ok=True)
        with open(big, "w") as f:
            f.write(f"{head}Frame Time:{ft}\n")
            for _ in range(reps):
                f.write(body)
        size = big.stat().st_size / 2**20
        lines, _s, wall, cpu, rss = run([SIGNSIM, "import", str(big), "--library", str(work / "big" / "lib.blend")])
        print(f"{size:.0f} MB BVH: imported in {wall:.0f} s wall, {cpu:.0f} s CPU, peak {rss:.0f} MB "
              f"({rss / size:.1f}× the file); progress lines: {sum('%' in ln for ln in lines)}")


if __name__ == "__main__":
    results.run(main)

"""Time SignSim's library import against Blender's plain BVH importer on the same files.

    .venv/bin/python bench/bench_import.py [FILE_OR_FOLDER ...] [--repeat N]

Default input: ../shared/data/mocap (the real third-party files). Plain = one
`bpy.ops.import_anim.bvh` per file with default options into an empty file. Library =
one `library.import_paths` call for all files into a fresh library (validation, up axis
and unit detection, Euler→quaternion with continuous hemispheres, cleaning, asset
metadata, the atomic library write and removing everything from the open file). The best
of N runs of each is compared; the ratio library / plain is printed last (target ≤ 1.15).
"""
import argparse
import contextlib
import io
import pathlib
import shutil
import sys
import tempfile
import time

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import devenv  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*",
                        default=[str(ROOT.parent / "shared" / "data" / "mocap")])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = devenv.isolate_user_resources("signsim-bench-")
    import bpy
    addon = devenv.enable_from_source(tmp)
    library = addon.signsim_addon.library.api
    files, _failed = library.collect_files(args.paths)
    files = [f for f in files if f.lower().endswith(".bvh")]
    if not files:
        print("no BVH files found", file=sys.stderr)
        return 2
    print(f"{len(files)} BVH files, best of {args.repeat} runs")

    def plain():
        bpy.ops.wm.read_homefile(use_empty=True)
        t = time.perf_counter()
        for f in files:
            bpy.ops.import_anim.bvh(filepath=f)
        return time.perf_counter() - t

    def signsim():
        bpy.ops.wm.read_homefile(use_empty=True)
        out = pathlib.Path(tempfile.mkdtemp(prefix="signsim-bench-lib-"))
        try:
            t = time.perf_counter()
            result = library.import_paths(files, str(out / "library.blend"))
            dt = time.perf_counter() - t
        finally:
            shutil.rmtree(out, ignore_errors=True)
        if result["failed"]:
            raise SystemExit(f"library import failed: {result['failed']}")
        return dt

    times = {"plain": [], "library": []}
    for _ in range(args.repeat):
        for name, fn in (("plain", plain), ("library", signsim)):
            with contextlib.redirect_stdout(io.StringIO()):  # the importer's progress prints
                times[name].append(fn())
    best = {k: min(v) for k, v in times.items()}
    for name, label in (("plain", "plain Blender importer"), ("library", "SignSim library import")):
        runs = ", ".join(f"{t:.3f}" for t in times[name])
        print(f"{label}: {best[name]:.3f} s  (runs: {runs})")
    ratio = best["library"] / best["plain"]
    print(f"ratio library/plain: {ratio:.3f} (target <= 1.15)")
    results.check("library import at most 1.15x Blender's plain BVH importer", ratio <= 1.15)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    results.run(main)

"""Key writing speed and the bake's real-time factor on the demo clip, measured in one run.

    .venv/bin/python bench/bench_bake.py

Prints keys/s of signsim_addon.keys.write_curves (target ≥ 2 M keys/s) next to
keyframe_points.insert on the same curves (the ratio is what matters on a noisy machine),
and the bake's real-time factor (clip duration / solve time, target ≥ 50) on the bundled
sample clip, in CPU time (time.process_time: on a shared machine wall time also measures
the other jobs) and wall time. The solver's first compile is timed separately (it
happens once per installation, not per bake).
"""
import argparse
import pathlib
import sys
import tempfile
import time

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-bench-")
import bpy  # noqa: E402
import numpy as np  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
keys = ADDON.signsim_addon.keys
bake = ADDON.signsim_addon.bake.job
cli = ADDON.signsim_addon.cli


def bench_keys(n_bones=40, n_frames=12000, n_insert_frames=600):
    bpy.ops.wm.read_homefile(use_empty=True)
    action = bpy.data.actions.new("bench")
    slot = action.slots.new('OBJECT', "Bench")
    frames = np.arange(1, n_frames + 1, dtype=float)
    values = np.sin(frames / 10.0)
    curves = [(f'pose.bones["b{j}"].rotation_quaternion', k, f"b{j}", values) for j in range(n_bones) for k in range(4)]
    t = time.perf_counter()
    keys.write_curves(action, slot, curves, frames)
    bulk = len(curves) * n_frames / (time.perf_counter() - t)
    bag = keys.channelbag(action, slot)
    fc = bag.fcurves.new("location", index=0)
    t = time.perf_counter()
    for f in range(n_insert_frames):
        fc.keyframe_points.insert(f + 1, float(values[f]), options={'FAST'})
    one_by_one = n_insert_frames / (time.perf_counter() - t)
    return bulk, one_by_one


def bench_bake():
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "rt.blend"
        assert cli.main(["retarget", "--clip", str(ROOT / "sample_blends" / "fingerspelling.bvh"),
                         "--rig", str(ROOT / "sample_blends" / "signer.blend"), "--out", str(out)]) == 0
        bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    job = bake.prepare(bpy.context.scene, bpy.data.objects["Signer"])
    compile_seconds, compiled = ADDON.solver.physics.warm_up.warm_up()
    t, cpu = time.perf_counter(), time.process_time()
    bake.solve(job)
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    duration = job.reference.times[-1] - job.reference.times[0]
    return duration, seconds, cpu, compile_seconds if compiled else None


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    bulk, one = bench_keys()
    print(f"keys written in bulk: {bulk / 1e6:.2f} M keys/s (target >= 2 M); "
          f"keyframe_points.insert: {one / 1e3:.1f} k keys/s; ratio {bulk / one:.0f}x")
    results.check("bulk key writing >= 2 M keys/s", bulk >= 2e6)
    duration, seconds, cpu, compile_seconds = bench_bake()
    print("solver kernels: " + ("loaded from the cache" if compile_seconds is None
                                else f"compiled once in {compile_seconds:.1f} s CPU (not counted below)"))
    print(f"bake of the demo clip (solve and metrics): {duration:.2f} s of motion in {cpu:.2f} s CPU "
          f"({seconds:.2f} s wall): real-time factor {duration / cpu:.2f} CPU, {duration / seconds:.2f} wall "
          f"(target >= 50)")
    results.check("bake of the demo clip >= 50x real time (CPU)", duration / cpu >= 50)


if __name__ == "__main__":
    results.run(main)

"""Key writing speed and the bake's real-time factor on the demo clip, measured in one run.

    .venv/bin/python bench/bench_bake.py

Prints keys/s of signsim_addon.keys.write_curves (target ≥ 2 M keys/s) next to
keyframe_points.insert on the same curves (the ratio is what matters on a noisy machine),
and the bake's real-time factor (clip duration / solve time) on the bundled sample clip.
"""
import argparse
import pathlib
import sys
import tempfile
import time

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
    t = time.perf_counter()
    bake.solve(job)
    seconds = time.perf_counter() - t
    duration = job.reference.times[-1] - job.reference.times[0]
    return duration, seconds


def main():
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    bulk, one = bench_keys()
    print(f"keys written in bulk: {bulk / 1e6:.2f} M keys/s (target >= 2 M); "
          f"keyframe_points.insert: {one / 1e3:.1f} k keys/s; ratio {bulk / one:.0f}x")
    duration, seconds = bench_bake()
    print(f"bake of the demo clip: {duration:.2f} s of motion in {seconds:.2f} s: "
          f"real-time factor {duration / seconds:.2f}")


if __name__ == "__main__":
    main()

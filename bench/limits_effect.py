"""How much of the bake's distance from the reference the joint model causes.

    .venv/bin/python bench/limits_effect.py [--frames N]

For each rig and clip: retarget, then bake the first N frames twice — with the joints
fitted to the reference (limits widened to its range, hinges that leave their axis made
balls: rig.fit_to_reference, what the bake does) and with the rig's defaults alone
(anatomical limit boxes on the local rotation vector, middle and distal finger joints
hinged about local X). Prints tracking RMS of fingers and thumb, the worst bone, and the
frames on which some bone is more than 90° from the reference.

Measured (150 frames, default preset; fitted vs defaults): fingers/thumb RMS signer
fingerspell_80 9.8/13.1° vs 66.1/52.1° (frames > 90°: 6 vs 150), jesse dance 0.8/0.5° vs
16.1/14.7°; base mesh jesse dance 0.7/0.5° vs 19.0/15.3°, test3_fingers 0.35° vs 10.4°;
robot jesse dance 5.6/8.6° vs 18.0/53.2°. (The generated clips still retarget upside down.)
"""
import argparse
import contextlib
import io
import pathlib
import sys
import tempfile

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-bench-")
import bpy  # noqa: E402
import numpy as np  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
bake = ADDON.signsim_addon.bake.api
rig_reader = ADDON.signsim_addon.body.rig
cli = ADDON.signsim_addon.cli
quat = ADDON.solver.core.quat
DATA = ROOT.parent / "shared" / "data"
CLIPS = ("generated/fingerspell_80.bvh", "mocap/animdrawings_rokoko_jesse_dance.bvh",
         "mocap/pybvh_bvh_test3_fingers.bvh")
CHARACTERS = {"godot": "godot_male_base_mesh_cc0.glb", "robot": "threejs_RobotExpressive.glb"}


def rig_file(key, folder):
    if key == "signer":
        return ROOT / "sample_blends" / "signer.blend"
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=str(DATA / "characters" / CHARACTERS[key]))
    path = folder / f"{key}.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return path


def measure(job, solved):
    err = np.degrees(quat.angle_between(job.reference.rotations, solved.rotations))
    groups = job.rig.model.groups
    rms = {g: float(np.sqrt(np.mean(err[:, [i for i, x in enumerate(groups) if x == g]] ** 2)))
           for g in ("fingers", "thumb")}
    worst = np.unravel_index(np.argmax(err), err.shape)
    return rms, job.rig.bone_names[worst[1]], float(err[worst]), int(np.count_nonzero(err.max(axis=1) > 90.0))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=150)
    args = parser.parse_args()
    fit = rig_reader.fit_to_reference
    print(f"{'rig':8} {'clip':42} {'joints':8} {'fingers°':>9} {'thumb°':>7} {'worst bone':>16} {'°':>6} {'>90°':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        for key in ("signer", "godot", "robot"):
            rig = rig_file(key, folder)
            for clip in CLIPS:
                out = folder / "clip.blend"
                with contextlib.redirect_stdout(io.StringIO()):
                    code = cli.main(["retarget", "--clip", str(DATA / clip), "--rig", str(rig), "--out", str(out)])
                if code != 0:
                    continue
                for mode in ("fitted", "defaults"):
                    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
                    ob = next(o for o in bpy.data.objects if o.type == 'ARMATURE' and o.animation_data
                              and o.animation_data.action)
                    first = int(ob.animation_data.action.frame_range[0])
                    rig_reader.fit_to_reference = fit if mode == "fitted" else (lambda r, _rot: r)
                    try:
                        job = bake.prepare(bpy.context.scene, ob, preset="default",
                                           frame_range=(first, first + args.frames - 1))
                        rms, bone, deg, far = measure(job, bake.solve(job))
                    finally:
                        rig_reader.fit_to_reference = fit
                    print(f"{key:8} {clip:42} {mode:8} {rms['fingers']:9.2f} {rms['thumb']:7.2f} {bone:>16} "
                          f"{deg:6.1f} {far:5d}", flush=True)


if __name__ == "__main__":
    results.run(main)

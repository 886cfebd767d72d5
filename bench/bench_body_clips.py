"""Real and generated hand clips retargeted onto three characters and baked: the sweep
tests/bake/test_body.py ran for every clip × rig (the suite keeps one clip on each rig).

    .venv/bin/python bench/bench_body_clips.py [--rig signer] [--clip generated/clap_fast.bvh]

For each clip of HAND_CLIPS on the bundled signer and the two shared glTF characters
(../shared/data; exits 2 without it), the first CLIP_FRAMES frames of the retargeted clip
are baked with the default preset and checked as the test did: 0 fallbacks, no joint-limit
excess on the reference (the limits hold the input), no warning of a fallback or a limit,
face and torso volumes found and hand–face and hand–torso contact pairs tested, finite
rotations. Prints a line per case and exits 1 when any check fails.
"""
import argparse
import pathlib
import sys
import tempfile

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests" / "helpers"))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-bench-")
import bpy  # noqa: E402
import numpy as np  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
from retarget_rigs import character  # noqa: E402

HAND_CLIPS = ("mocap/pybvh_bvh_test3_fingers.bvh", "mocap/animdrawings_rokoko_jesse_dance.bvh",
              "mocap/bvhpython_test_freebvh_mixamorig.bvh", "mocap/makehuman_face-poseunits.bvh",
              "generated/fingerspell_80.bvh", "generated/fingerspell_80_noisy.bvh", "generated/clap_fast.bvh")
RIGS = ("signer", "godot", "robot")
CLIP_FRAMES = 48  # enough for contacts and limits to act; the whole clips take minutes each


def rig_files(folder):
    out = {"signer": ROOT / "sample_blends" / "signer.blend"}
    for key in ("godot", "robot"):
        bpy.ops.wm.read_homefile(use_empty=True)
        character(SHARED, key)
        out[key] = folder / f"{key}.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(out[key]))
    return out


def check(rig_file, clip, folder):
    """The failed checks (list of str, empty when all hold) of `clip` baked on `rig_file`."""
    bake = ADDON.signsim_addon.bake.api
    out = folder / "clip.blend"
    if ADDON.signsim_addon.cli.main(["retarget", "--clip", str(SHARED / clip), "--rig", str(rig_file),
                                     "--out", str(out)]) != 0:
        return ["retarget failed"]
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    ob = next(o for o in bpy.data.objects if o.type == 'ARMATURE' and o.animation_data and o.animation_data.action)
    first = int(ob.animation_data.action.frame_range[0])
    job = bake.prepare(bpy.context.scene, ob, frame_range=(first, first + CLIP_FRAMES - 1), preset="default")
    solved = bake.solve(job)
    m = solved.metrics
    kinds = {mesh.kind for mesh in job.rig.meshes}
    failed = []
    if m["baked"]["fallbacks"] != 0:
        failed.append(f"fallbacks {m['baked']['fallbacks']} (must be 0)")
    if m["reference"]["joint_limit_excess_deg"] != 0.0:
        failed.append(f"reference limit excess {m['reference']['joint_limit_excess_deg']}° (must be 0)")
    if any("fell back" in w or "limit" in w for w in m["warnings"]):
        failed.append("a fallback or limit warning")
    if not {"face", "torso"} <= kinds:
        failed.append(f"volumes {sorted(kinds)} lack face or torso")
    if not (m["contact_pairs"].get("hand–face") and m["contact_pairs"].get("hand–torso")):
        failed.append("hand–face or hand–torso contact pairs not tested")
    if not np.all(np.isfinite(solved.rotations)):
        failed.append("non-finite rotations")
    return failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rig", action="append", choices=RIGS, help="only this rig (repeatable)")
    parser.add_argument("--clip", action="append", choices=HAND_CLIPS, help="only this clip (repeatable)")
    args = parser.parse_args()
    if not SHARED.is_dir():
        print(f"third-party data not found at {SHARED}", file=sys.stderr)
        sys.exit(2)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        files = rig_files(folder)
        for rig in args.rig or RIGS:
            for clip in args.clip or HAND_CLIPS:
                failed = check(files[rig], clip, folder)
                bad += bool(failed)
                print(f"{rig:7} {clip:45} " + ("ok" if not failed else "FAIL: " + "; ".join(failed)), flush=True)
    print(f"{bad} failing case(s)" if bad else "all cases pass")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    results.run(main)

"""Retarget time with contacts kept against the plain retarget, per clip and rig.

    .venv/bin/python bench/bench_contacts.py

Runs `retarget_files` (what `signsim retarget` runs: open the rig, import the clip,
retarget, save) on the bundled signer, the CC0 base mesh and the robot (saved to .blend
files first) for chin_cheek.bvh and ../shared/data/generated/clap_fast.bvh, with and
without contacts, REPEAT times each, and prints the median CPU time
(time.process_time: steadier than wall time on a shared machine) and the ratio. The
contract: contacts at most double the retarget time.

    .venv/bin/python bench/bench_contacts.py --skin

runs instead the full clip x rig sweep of tests/retarget/test_contact_preserve.py's
test_contacts_kept_on_the_skin (3 clips x 5 rigs, the expected refusals as strict
xfails) with its checks on the evaluated skin: gap ≤ 2 mm, penetration ≤ 1 mm, spot
≤ 5 mm, off-contact rotation ≤ 0.5°, fingertip jerk ratio ≤ 1.1. Exits non-zero when
a check fails (or a refused case starts to pass).
"""
import pathlib
import statistics
import sys
import tempfile
import time

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "bench"))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-bench-")
import bpy  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
retarget = ADDON.signsim_addon.retarget.api
DATA = ROOT.parent / "shared" / "data"
CLIPS = {"chin_cheek": ROOT / "sample_blends" / "chin_cheek.bvh", "clap": DATA / "generated" / "clap_fast.bvh"}
CHARACTERS = {"godot": "godot_male_base_mesh_cc0.glb", "robot": "threejs_RobotExpressive.glb"}
REPEAT = 3


def rig_files(folder):
    """{rig: .blend path}: the bundled signer, and each shared character imported and saved."""
    out = {"signer": ROOT / "sample_blends" / "signer.blend"}
    for key, name in CHARACTERS.items():
        bpy.ops.wm.read_homefile(use_empty=True)
        bpy.ops.import_scene.gltf(filepath=str(DATA / "characters" / name))
        bpy.context.scene.render.fps = 30
        path = pathlib.Path(folder) / f"{key}.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(path))
        out[key] = path
    return out


def timed(rig, clip, contacts, out):
    t = time.process_time()
    result = retarget.retarget_files(retarget.RetargetRequest(clips=(str(clip),), rig=str(rig), out=str(out),
                                                              contacts=contacts))
    return time.process_time() - t, result


def main():
    if "--skin" in sys.argv[1:]:
        import sweep
        sys.exit(sweep.run("retarget/test_contact_preserve.py", extra=["-k", "test_contacts_kept_on_the_skin"]))
    with tempfile.TemporaryDirectory() as folder:
        rigs = rig_files(folder)
        print(f"{'clip':<11} {'rig':<7} {'contacts':>8} {'kept':>5} {'plain s':>8} {'kept s':>8} {'ratio':>6}")
        ratios = []
        for clip, clip_path in CLIPS.items():
            if not clip_path.is_file():
                print(f"{clip}: {clip_path} not found, skipped")
                continue
            for rig, rig_path in rigs.items():
                out = pathlib.Path(folder) / f"{clip}_{rig}.blend"
                plain = statistics.median(timed(rig_path, clip_path, False, out)[0] for _ in range(REPEAT))
                runs = [timed(rig_path, clip_path, True, out) for _ in range(REPEAT)]
                kept = statistics.median(r[0] for r in runs)
                found = runs[0][1]["contacts"]
                n_kept = sum(1 for c in found if "skipped" not in c)
                ratios.append(kept / plain)
                print(f"{clip:<11} {rig:<7} {len(found):>8} {n_kept:>5} {plain:>8.2f} {kept:>8.2f} {kept / plain:>6.2f}")
        print(f"worst ratio {max(ratios):.2f} (contract ≤ 2), mean {statistics.mean(ratios):.2f}")
        results.check("retarget with contacts at most 2x the plain retarget on every pair", max(ratios) <= 2)


if __name__ == "__main__":
    results.run(main)

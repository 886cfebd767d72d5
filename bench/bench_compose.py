"""Transition points against blending at the clip ends, per seam, on the bundled signer.

    .venv/bin/python bench/bench_compose.py

Composes pairs of clips from ../shared/data/mocap and sample_blends twice: with the
transition search (the default, --search 1 s) and with --search 0 (blend at the clip
ends). Prints one row per seam: D = ‖v_A(t_end) − v_B(t_start)‖ (rad/s, all bones) at the
chosen points and at the clip ends, the frames cut from A and B, the window each gets
(shortest passing every check) and whether it passes; then the means and the run time.

    .venv/bin/python bench/bench_compose.py --seams

runs instead the full seam sweep of tests/compose/test_seams.py and test_seams_chains.py
(SIGNSIM_SWEEP=1): every pair and 10-clip chain, the three stepping chains, all four hard
cuts and the walk chain in the plant checks, measured on Blender's evaluated output with
the tests' thresholds (no bone turns past 20° in a frame beyond the clips, planted feet
slide ≤ 1 cm beyond the clips, no hop of both feet > 1 cm, the counts of seams and plants
checked, chain seam 9). Exits non-zero when a check fails.
"""
import pathlib
import sys
import time

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-bench-")
import bpy  # noqa: E402
import numpy as np  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
compose = ADDON.signsim_addon.compose.api

MOCAP = ROOT.parent / "shared" / "data" / "mocap"
SAMPLES = ROOT / "sample_blends"
CLIPS = {
    "bye": (MOCAP / "bandai_dataset-1_bye_active_001.bvh", None, None),
    "mixamo": (MOCAP / "bvhpython_test_freebvh_mixamorig.bvh", None, None),
    "cmu": (MOCAP / "cmu_01_01_cgspeed__fairmotion.bvh", 1600, 2080),
    "jesse": (MOCAP / "animdrawings_rokoko_jesse_dance.bvh", 1, 500),
    "chin": (SAMPLES / "chin_cheek.bvh", None, None),
    "fingers": (SAMPLES / "fingerspelling.bvh", None, None),
}
PAIRS = [("bye", "mixamo"), ("mixamo", "chin"), ("fingers", "jesse"), ("cmu", "bye"), ("chin", "fingers"),
         ("jesse", "cmu"), ("bye", "chin"), ("fingers", "mixamo")]


def spec(name):
    path, t_in, t_out = CLIPS[name]
    return compose.ClipSpec(str(path), t_in, t_out)


def main():
    if "--seams" in sys.argv[1:]:
        sys.path.insert(0, str(ROOT / "bench"))
        import sweep
        sys.exit(sweep.run("compose/test_seams.py", "compose/test_seams_chains.py"))
    bpy.ops.wm.open_mainfile(filepath=str(SAMPLES / "signer.blend"))
    signer = bpy.data.objects["Signer"]
    rows = []
    t0 = time.perf_counter()
    for a, b in PAIRS:
        searched = compose.compose(signer, [spec(a), spec(b)])["seams"][0]
        ends = compose.compose(signer, [spec(a), spec(b)], search=0)["seams"][0]
        rows.append((f"{a} → {b}", searched, ends))
    elapsed = time.perf_counter() - t0
    print(f"{'seam':<20} {'D ends':>8} {'D chosen':>9} {'cut A+B':>8} {'window':>7} {'passes':>7}"
          f" {'window@ends':>12} {'passes@ends':>12}")
    for name, s, e in rows:
        print(f"{name:<20} {e['D']:8.2f} {s['D']:9.2f} {s['cut'][0]:>4}+{s['cut'][1]:<3} {s['window']:7d}"
              f" {str(not s['flagged']):>7} {e['window']:12d} {str(not e['flagged']):>12}")
    d_ends = np.mean([e["D"] for _n, _s, e in rows])
    d_chosen = np.mean([s["D"] for _n, s, _e in rows])
    print(f"{'mean':<20} {d_ends:8.2f} {d_chosen:9.2f}   (D at the chosen points / at the clip ends: "
          f"{d_chosen / d_ends:.2f})")
    print(f"seams passing: {sum(not s['flagged'] for _n, s, _e in rows)}/{len(rows)} with the search, "
          f"{sum(not e['flagged'] for _n, _s, e in rows)}/{len(rows)} at the clip ends; "
          f"{2 * len(rows)} compositions in {elapsed:.1f} s")


if __name__ == "__main__":
    results.run(main)

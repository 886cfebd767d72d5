"""Quality of the physics pass on real rigs and clips, measured independently of the solver.

    .venv/bin/python bench/quality.py [--rig signer|basemesh|RIG.blend …] [--clip CLIP …]
                                      [--json OUT.json] [--repeat]
    .venv/bin/python bench/quality.py --table OUT.json …   # the summary of saved runs

For every rig and clip: retarget with the product, bake with the product (preset
"default"), write the baked action, then measure from the keys as Blender evaluates them
(pose-bone tails, the evaluated skin mesh), never from the solver's own model:

- tracking: RMS geodesic angle per joint group, on frames without contact (neither the
  solver's reported contact nor the exact mesh test within ±3 frames) and overall; the
  worst bone/frame, and whether that frame is a contact frame;
- jerk: Σ‖Δ³p‖² of the fingertip tails, baked vs reference (%);
- lag: the time shift (ms, sub-frame) that best aligns the baked fingertip trajectories
  with the reference's (least squares);
- penetration by contact kind with the exact mesh test the bake reports (bake.skin_metrics:
  region against region of the evaluated skin with mathutils.bvhtree, frame by frame,
  written into the action's metrics by the product's own write), for the reference and
  each written motion; peak and p95 (mm);
- fallbacks, NaN, real-time factor (clip duration / solve time), and with --repeat
  whether a second bake is bit-identical;
- the same columns for a causal 2nd-order Butterworth filter (scipy.signal.butter +
  lfilter) of the reference rotations, with the cutoff giving the bake's lag (at least
  one frame: a 2nd-order Butterworth has DC group delay √2/ω_c);
- for a clip `X_noisy.bvh` next to `X.bvh`: the errors of the noisy input, the bake and
  the Butterworth baseline against the clean clip retargeted onto the same rig, and of
  the bake against the clean clip's own bake (its contacts resolved too: denoising alone).

Ends with a markdown summary table, one line per rig and clip.

The calls into the add-on live in `Product` only, so a change of module layout is one edit.
"""
import argparse
import json
import math
import pathlib
import sys
import tempfile
import time

import results

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import devenv  # noqa: E402

TMP = devenv.isolate_user_resources("signsim-quality-")
import bpy  # noqa: E402
import numpy as np  # noqa: E402
from scipy.signal import butter, lfilter  # noqa: E402

ADDON = devenv.enable_from_source(TMP)
DATA = ROOT.parent / "shared" / "data"
RIGS = {"signer": ROOT / "sample_blends" / "signer.blend",
        "basemesh": DATA / "characters" / "godot_male_base_mesh_cc0.glb"}
MOVING_HANDS = ("animdrawings_rokoko_jesse_dance.bvh", "bandai_dataset-1_bye_active_001.bvh",
                "pybvh_bvh_test3_fingers.bvh", "cmu_01_01_cgspeed__fairmotion.bvh")
CONTACT_DILATION = 3  # frames on each side of a contact counted as contact frames


class Product:
    """Every call into the add-on (one place to adapt when its modules move)."""

    def __init__(self):
        sa = ADDON.signsim_addon
        self.cli, self.bake, self.compat = sa.cli, sa.bake.api, sa.compat
        self.skeleton_of, self.analyse = sa.body.rig.skeleton_of, ADDON.solver.retarget.bonemap.analyse
        self.quat = ADDON.solver.core.quat

    def retarget(self, clip, rig_blend, out):
        code = self.cli.main(["retarget", "--clip", str(clip), "--rig", str(rig_blend), "--out", str(out)])
        if code != 0:
            raise RuntimeError(f"retarget of {clip} failed ({code})")

    def prepare(self, armature):
        return self.bake.prepare(bpy.context.scene, armature, preset="default")

    def solve(self, job):
        return self.bake.solve(job)

    def write(self, job, rotations, name):
        """(action, metrics): the keys written and the skin penetration the product
        measured on them and on the reference ({"reference": {...}, "baked": {...}})."""
        solved = self.bake.Solved(rotations, {})
        action = self.bake.write(bpy.context.scene, job, solved)
        action.name = name
        return action, solved.metrics

    def assign(self, armature, action):
        slot = action.slots[0]
        self.compat.assign_action(armature, action, slot)

    def body(self, armature):
        return self.analyse(self.skeleton_of(armature.data))


P = None


def rig_blend(name, tmp):
    """A .blend holding the rig: the bundled signer, or a glTF imported with Blender's importer."""
    path = RIGS.get(name, pathlib.Path(name))
    if path.suffix == ".blend":
        return path
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=str(path))
    out = pathlib.Path(tmp) / (path.stem + ".blend")
    bpy.ops.wm.save_as_mainfile(filepath=str(out))
    return out


# ---------------------------------------------------------------------------------------
# trajectories and filters (numpy)

def tip_tracks(scene, armature, tip_names, frames):
    """World tail positions (F, k, 3) m of the named pose bones, as Blender evaluates them."""
    out = np.empty((len(frames), len(tip_names), 3))
    m = armature.matrix_world
    for f, frame in enumerate(frames):
        scene.frame_set(int(frame))
        for j, n in enumerate(tip_names):
            out[f, j] = m @ armature.pose.bones[n].tail
    return out


def jerk(p):
    """Σ‖Δ³p‖² over frames and points (per-frame units: only ratios are reported)."""
    return float(np.sum(np.diff(p, 3, axis=0) ** 2))


def best_shift(ref, p, max_frames=8):
    """Sub-frame shift s (frames, + = p trails ref) minimising Σ‖p(t + s) − ref(t)‖²."""
    n = len(ref)
    shifts = np.arange(-max_frames, max_frames + 1)
    m = max_frames
    cost = np.array([np.mean((p[m + s:n - m + s] - ref[m:n - m]) ** 2) for s in shifts])
    k = int(np.argmin(cost))
    if 0 < k < len(cost) - 1:
        a, b, c = cost[k - 1], cost[k], cost[k + 1]
        den = a - 2 * b + c
        return float(shifts[k] + (0.5 * (a - c) / den if den > 0 else 0.0))
    return float(shifts[k])


def butterworth(rotations, lag_frames):
    """Causal 2nd-order Butterworth low-pass of (F, n, 4) quaternions (continuous
    hemisphere, renormalised) with DC group delay lag_frames: ω_c = √2 / lag."""
    q = P.quat.make_continuous(rotations)
    wc = math.sqrt(2.0) / max(lag_frames, 1e-9)  # rad/frame
    wn = min(wc / math.pi, 0.99)  # fraction of Nyquist
    b, a = butter(2, wn)
    # Start at rest on the first frame (no transient from zero).
    x = q - q[0]
    y = lfilter(b, a, x, axis=0) + q[0]
    return y / np.linalg.norm(y, axis=-1, keepdims=True)


def angles_deg(a, b):
    return np.degrees(P.quat.angle_between(a, b))


# ---------------------------------------------------------------------------------------

def measure_motion(ctx, rotations, label):
    """Columns of one motion (baked or baseline) against the reference in ctx."""
    job, scene, arm = ctx["job"], ctx["scene"], ctx["arm"]
    action, metrics = P.write(job, rotations, f"quality.{label}")
    P.assign(arm, action)
    tips = tip_tracks(scene, arm, ctx["tip_names"], job.frames)
    P.assign(arm, ctx["ref_action"])
    ang = angles_deg(job.reference.rotations, rotations)  # (F, n)
    ctx["ref_pen"] = skin_by_kind(metrics["reference"])
    return {"rotations": rotations, "tips": tips, "pen": skin_by_kind(metrics["baked"]), "angle": ang}


def skin_by_kind(side):
    """{kind: (F,) m} of one side of the product's skin metrics."""
    return {k: 1e-3 * np.asarray(v) for k, v in side.get("per_frame_skin_penetration_mm_by_kind", {}).items()}


def summarise(ctx, m, contact):
    model = ctx["job"].rig.model
    groups = list(dict.fromkeys(model.groups))
    free = ~contact
    ang = m["angle"]
    per_group = {}
    for g in groups:
        cols = [i for i, x in enumerate(model.groups) if x == g]
        a = ang[:, cols]
        per_group[g] = {"free": float(np.sqrt(np.mean(a[free] ** 2))) if free.any() else float("nan"),
                        "all": float(np.sqrt(np.mean(a ** 2)))}
    f, b = np.unravel_index(np.argmax(ang), ang.shape)
    ref_tips = ctx["ref_tips"]
    jr = jerk(ref_tips)
    out = {"tracking_deg": per_group,
           "worst": {"bone": ctx["job"].rig.bone_names[b], "frame": int(ctx["job"].frames[f]),
                     "deg": float(ang[f, b]), "contact": bool(contact[f])},
           "free_max_deg": float(ang[free].max()) if free.any() else float("nan"),
           "jerk_pct": 100.0 * (jerk(m["tips"]) / jr - 1.0) if jr > 0 else 0.0,
           "lag_frames": best_shift(ref_tips, m["tips"]),
           "penetration_mm": {k: {"peak": 1e3 * float(v.max()), "p95": 1e3 * float(np.percentile(v, 95))}
                              for k, v in m["pen"].items()},
           "nan": bool(not np.all(np.isfinite(m["rotations"])))}
    return out


def run_clip(rig_path, clip, tmp, repeat, clean_cache):
    out = pathlib.Path(tmp) / f"{pathlib.Path(rig_path).stem}_{pathlib.Path(clip).stem}.blend"
    P.retarget(clip, rig_path, out)
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    scene = bpy.context.scene
    arm = next(o for o in bpy.data.objects if o.type == 'ARMATURE')
    ref_action = arm.animation_data.action
    job = P.prepare(arm)
    t = time.perf_counter()
    solved = P.solve(job)
    wall = time.perf_counter() - t
    baked_m = solved.metrics["baked"]
    identical = None
    if repeat:
        again = P.solve(job)
        identical = bool(np.array_equal(again.rotations, solved.rotations))
    tip_names = [job.rig.bone_names[i] for i in job.rig.fingertips]
    ctx = {"job": job, "scene": scene, "arm": arm, "ref_action": ref_action, "tip_names": tip_names}
    ctx["ref_tips"] = tip_tracks(scene, arm, tip_names, job.frames)
    baked = measure_motion(ctx, solved.rotations, "baked")
    ref_pen = ctx["ref_pen"]
    lag = best_shift(ctx["ref_tips"], baked["tips"])
    bw = measure_motion(ctx, butterworth(job.reference.rotations, max(lag, 1.0)), "butterworth")
    solver_contact = (np.asarray(baked_m["per_frame_penetration_mm"]) > 0) | (
        np.asarray(solved.metrics["reference"]["per_frame_penetration_mm"]) > 0)
    mesh_contact = np.zeros(len(job.frames), bool)
    for v in list(ref_pen.values()) + list(baked["pen"].values()):
        mesh_contact |= v > 0
    contact = solver_contact | mesh_contact
    k = CONTACT_DILATION
    contact = np.convolve(contact.astype(float), np.ones(2 * k + 1), "same") > 0
    row = {"rig": pathlib.Path(rig_path).stem, "clip": pathlib.Path(clip).name, "frames": len(job.frames),
           "contact_frames": int(contact.sum()),
           "reference": {"penetration_mm": {kk: {"peak": 1e3 * float(v.max()),
                                                 "p95": 1e3 * float(np.percentile(v, 95))}
                                            for kk, v in ref_pen.items()}},
           "baked": summarise(ctx, baked, contact), "butterworth": summarise(ctx, bw, contact),
           "fallbacks": int(baked_m["fallbacks"]), "realtime_factor": float(baked_m["realtime_factor"]),
           "solve_wall_s": wall, "bit_identical": identical}
    stem = pathlib.Path(clip).stem
    clean_cache[(row["rig"], stem)] = (job.reference.rotations, ctx["ref_tips"], job.rig.bone_names)
    if stem.endswith("_noisy"):
        clean = pathlib.Path(clip).with_name(stem[:-len("_noisy")] + ".bvh")
        key = (row["rig"], clean.stem)
        if key not in clean_cache and clean.exists():
            cout = pathlib.Path(tmp) / f"{row['rig']}_{clean.stem}_clean.blend"
            P.retarget(clean, rig_path, cout)
            bpy.ops.wm.open_mainfile(filepath=str(cout), load_ui=False)
            carm = next(o for o in bpy.data.objects if o.type == 'ARMATURE')
            cjob = P.prepare(carm)
            clean_cache[key] = (cjob.reference.rotations, tip_tracks(bpy.context.scene, carm, tip_names,
                                                                        cjob.frames), cjob.rig.bone_names)
            # The clean clip baked too: its own contacts resolved (fists in the palm), so the
            # bake of the noisy clip can be judged on denoising alone.
            crot_baked = P.solve(cjob).rotations
            P.assign(carm, P.write(cjob, crot_baked, "quality.clean_baked")[0])
            clean_cache[key + ("baked",)] = (crot_baked, tip_tracks(bpy.context.scene, carm, tip_names,
                                                                      cjob.frames))
        if key in clean_cache:
            crot, ctips, _ = clean_cache[key]
            n = min(len(crot), len(job.frames))
            hand = [i for i, g in enumerate(job.rig.model.groups) if g in ("fingers", "thumb", "wrist")]

            def err(rot, tips):
                a = angles_deg(crot[:n, hand], rot[:n, hand])
                return {"tip_rms_mm": 1e3 * float(np.sqrt(np.mean(np.sum((tips[:n] - ctips[:n]) ** 2, -1)))),
                        "angle_rms_deg": float(np.sqrt(np.mean(a ** 2)))}
            row["denoise"] = {"noisy": err(job.reference.rotations, ctx["ref_tips"]),
                              "baked": err(solved.rotations, baked["tips"]),
                              "butterworth": err(bw["rotations"], bw["tips"])}
            if key + ("baked",) in clean_cache:
                crot, ctips = clean_cache[key + ("baked",)]
                row["denoise"]["baked vs clean baked"] = err(solved.rotations, baked["tips"])
    return row


def fmt_row(r):
    lines = []
    for side in ("baked", "butterworth"):
        s = r[side]
        tr = " ".join(f"{g}={v['free']:.2f}/{v['all']:.2f}" for g, v in s["tracking_deg"].items())
        pen = " ".join(f"{k}={v['peak']:.2f}/{v['p95']:.2f}" for k, v in s["penetration_mm"].items())
        w = s["worst"]
        lines.append(f"  {side:11s} track free/all deg: {tr}")
        lines.append(f"  {'':11s} worst {w['bone']}@{w['frame']} {w['deg']:.1f}deg contact={w['contact']}; "
                     f"max off-contact {s['free_max_deg']:.1f}deg; jerk {s['jerk_pct']:+.1f}%; "
                     f"lag {s['lag_frames']:+.2f} fr; NaN={s['nan']}")
        lines.append(f"  {'':11s} pen peak/p95 mm: {pen}")
    ref = " ".join(f"{k}={v['peak']:.2f}/{v['p95']:.2f}" for k, v in r["reference"]["penetration_mm"].items())
    head = (f"{r['rig']} | {r['clip']} | {r['frames']} frames, {r['contact_frames']} contact | "
            f"fallbacks {r['fallbacks']} | RT {r['realtime_factor']:.1f}x | bit-identical {r['bit_identical']}")
    lines.insert(0, head)
    lines.insert(1, f"  {'reference':11s} pen peak/p95 mm: {ref}")
    if "denoise" in r:
        d = r["denoise"]
        lines.append("  denoise vs clean: " + "; ".join(
            f"{k} tip {v['tip_rms_mm']:.2f} mm, angle {v['angle_rms_deg']:.2f} deg" for k, v in d.items()))
    return "\n".join(lines)


def _mm(v):
    return f"{v:.1f}"


KINDS = ("hand–face", "hand–hand", "finger–finger", "hand–torso")


def summary(rows):
    """One markdown line per rig and clip: the Done-when columns of the physics pass."""
    def free(s):
        v = [g["free"] for g in s["tracking_deg"].values() if not math.isnan(g["free"])]
        return f"{max(v):.2f}" if v else "-"

    def pen(p):
        return "/".join(_mm(p[k]["peak"]) if k in p else "-" for k in KINDS)
    out = ["| rig | clip | tracking free (worst group) ° | worst bone ° | off-contact max ° | jerk % (Butterworth) | "
           "lag fr (Butterworth) | peak mm " + "/".join(KINDS) + ": reference -> baked | fallbacks | RT | bit-identical |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b, w = r["baked"], r["butterworth"]
        out.append(f"| {r['rig']} | {r['clip']} | {free(b)} | {b['worst']['bone']} {b['worst']['deg']:.0f} | "
                   f"{b['free_max_deg']:.1f} | {b['jerk_pct']:+.0f} ({w['jerk_pct']:+.0f}) | "
                   f"{b['lag_frames']:+.2f} ({w['lag_frames']:+.2f}) | {pen(r['reference']['penetration_mm'])} -> "
                   f"{pen(b['penetration_mm'])} | {r['fallbacks']} | {r['realtime_factor']:.1f} | {r['bit_identical']} |")
    noisy = [r for r in rows if "denoise" in r]
    if noisy:  # Done when: the bake removes >= 40 % of the noise, tips and angles, and beats the filter
        out += ["", "| rig | clip vs clean | fingertip RMS mm noisy -> baked (Butterworth) | "
                "hand angle RMS ° noisy -> baked (Butterworth) | reduction tips / angles | "
                "baked vs clean baked mm / ° |", "|---|---|---|---|---|---|"]
        for r in noisy:
            d = r["denoise"]
            n, b, w = d["noisy"], d["baked"], d["butterworth"]
            out.append(f"| {r['rig']} | {r['clip']} | {n['tip_rms_mm']:.2f} -> {b['tip_rms_mm']:.2f} "
                       f"({w['tip_rms_mm']:.2f}) | {n['angle_rms_deg']:.2f} -> {b['angle_rms_deg']:.2f} "
                       f"({w['angle_rms_deg']:.2f}) | {100 * (1 - b['tip_rms_mm'] / n['tip_rms_mm']):+.0f} % / "
                       f"{100 * (1 - b['angle_rms_deg'] / n['angle_rms_deg']):+.0f} % | "
                       + (f"{d['baked vs clean baked']['tip_rms_mm']:.2f} / {d['baked vs clean baked']['angle_rms_deg']:.2f} |"
                          if "baked vs clean baked" in d else "- |"))
    return "\n".join(out)


def default_clips():
    clips = sorted((ROOT / "sample_blends").glob("*.bvh")) + sorted((DATA / "generated").glob("*.bvh"))
    return clips + [DATA / "mocap" / c for c in MOVING_HANDS]


def main():
    global P
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rig", action="append", help="signer, basemesh or a .blend/.glb (default: both)")
    ap.add_argument("--clip", action="append", help="mocap clip (default: samples, generated, mocap)")
    ap.add_argument("--json", help="write the rows as JSON here")
    ap.add_argument("--repeat", action="store_true", help="bake twice and compare the keys bit for bit")
    ap.add_argument("--table", nargs="+", metavar="ROWS.json",
                    help="print the summary table of rows saved by --json (several runs in one table)")
    args = ap.parse_args()
    if args.table:
        print(summary([r for f in args.table for r in json.loads(pathlib.Path(f).read_text())]))
        return
    P = Product()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rig in args.rig or ["signer", "basemesh"]:
            path = rig_blend(rig, tmp)
            cache = {}
            for clip in args.clip or default_clips():
                try:
                    row = run_clip(path, clip, tmp, args.repeat, cache)
                except Exception as ex:  # one clip failing must not hide the others
                    print(f"{rig} | {pathlib.Path(clip).name} | FAILED: {ex}", flush=True)
                    continue
                rows.append(row)
                print(fmt_row(row), flush=True)
                if args.json:  # after every clip: a run stopped early keeps its rows
                    pathlib.Path(args.json).write_text(json.dumps(rows, indent=1))
    print(summary(rows))


if __name__ == "__main__":
    results.run(main)

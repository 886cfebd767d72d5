"""The seams of composed actions measured on the output (Blender's evaluated feet and
bones, never the product's arrays): clip paths, compositions of clip lists with every clip
also composed alone, and the foot measures the seam tests share (tests/compose/test_seams.py,
tests/compose/test_seams_chains.py)."""
import pathlib

import bpy
import numpy as np
from compose_measure import open_signer, sample

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SIGNER = ROOT / "sample_blends" / "signer.blend"
DATA = ROOT.parent / "shared" / "data" / "mocap"
BYE = DATA / "bandai_dataset-1_bye_active_001.bvh"
MIXAMO = DATA / "bvhpython_test_freebvh_mixamorig.bvh"
CMU = DATA / "cmu_01_01_cgspeed__fairmotion.bvh"
JESSE = DATA / "animdrawings_rokoko_jesse_dance.bvh"
CHIN = ROOT / "sample_blends" / "chin_cheek.bvh"
FINGERS = ROOT / "sample_blends" / "fingerspelling.bvh"
PYFINGERS = DATA / "pybvh_bvh_test3_fingers.bvh"
GENERATED = ROOT.parent / "shared" / "data" / "generated"
SPELL = GENERATED / "fingerspell_80.bvh"
NOISY = GENERATED / "fingerspell_80_noisy.bvh"
CLAP = GENERATED / "clap_fast.bvh"
LOOP = (1025, 1457)               # the walk loop, in the clip's own frames (120 fps)
FEET = ("foot.L", "foot.R")
STEP_LIMIT = 20.0                 # degrees in one frame
PLANT_BAND = 0.04                 # m above the floor: a foot this low is on the floor
PLANT_SPEED = 0.3                 # m/s: a foot on the floor this slow is planted


def lowest(ob, heads, names):
    """Lowest point (F, 2) z of each foot: its head, the toe's head and tail."""
    out = []
    for side in "LR":
        pts = [heads[:, names.index(f"foot.{side}")], heads[:, names.index(f"toe.{side}")]]
        out.append(np.min([p[:, 2] for p in pts], axis=0))
    return np.stack(out, 1)


def _slide(points):
    """Largest horizontal distance (m) of points (F, 3) from the first."""
    return float(np.linalg.norm(points[:, :2] - points[:1, :2], axis=1).max()) if len(points) else 0.0


def _balls(heads, names):
    """The ball of each foot (F, 2, 3): the toe's head, where a standing foot rests."""
    return np.stack([heads[:, names.index(f"toe.{side}")] for side in "LR"], axis=1)


def planted_seam_slides(result, heads, names, own):
    """For every seam and foot that stays on the floor (lowest point within PLANT_BAND of
    the composition's floor) over the whole window and 2 frames each side in the output:
    (its slide there, the larger slide of the two clips composed alone over the frames the
    window covers, name of the foot, seam index)."""
    first = result["frames"][0]
    low = lowest(None, heads, names)
    floor = float(np.percentile(low, 5))
    balls = _balls(heads, names)
    out = []
    for seam in result["seams"]:
        w, (cut_a, cut_b) = seam["window"], seam["cut"]
        k = int(seam["frame"] - first)
        sl = slice(max(k - 2, 0), k + w + 3)
        a_heads, b_heads = own[seam["index"] - 1][1], own[seam["index"]][1]
        a_end = len(a_heads) - cut_a
        a_balls = _balls(a_heads[max(a_end - w - 2, 0):a_end], names)
        b_balls = _balls(b_heads[cut_b:cut_b + w + 3], names)
        for f, foot in enumerate(FEET):
            if np.all(low[sl, f] <= floor + PLANT_BAND):
                out.append((_slide(balls[sl, f]), max(_slide(a_balls[:, f]), _slide(b_balls[:, f])), foot,
                            f"seam {seam['index']}"))
    return out


SKATE_SPEED = 0.3                 # m/s: a foot on the floor faster than this skates (a swing is off it)


def _skate(low, balls, fps):
    """Horizontal distance (m) the balls (F, 3) move between frames where the foot's
    lowest point low (F,) is on the floor (within PLANT_BAND of `floor`, given as low's
    5th percentile by the caller) and faster than SKATE_SPEED."""
    step = np.linalg.norm(np.diff(balls[:, :2], axis=0), axis=1)
    return float(step[(low[1:] & low[:-1]) & (step * fps > SKATE_SPEED)].sum())


def window_skate(result, heads, names, own, seam, f, fps):
    """(skate of foot f inside the seam's window on the output, the larger skate of the two
    clips composed alone over the frames the window blends), m (`_skate`)."""
    first = result["frames"][0]
    low = lowest(None, heads, names)
    floor = float(np.percentile(low, 5))
    w, (cut_a, cut_b) = seam["window"], seam["cut"]
    k = int(seam["frame"] - first)
    a_heads, b_heads = own[seam["index"] - 1][1], own[seam["index"]][1]
    a_end = len(a_heads) - cut_a
    here = _skate(low[k:k + w + 1, f] <= floor + PLANT_BAND, _balls(heads, names)[k:k + w + 1, f], fps)
    clips = []
    for h, lo in ((a_heads, a_end - w), (b_heads, cut_b)):
        lw = lowest(None, h, names)
        part = slice(max(lo, 0), max(lo, 0) + w + 1)
        clips.append(_skate(lw[part, f] <= float(np.percentile(lw, 5)) + PLANT_BAND, _balls(h, names)[part, f], fps))
    return here, max(clips)


def passing_window_skates(pairs):
    """Over composed `pairs` ({name: (result, (rotations, heads, names), own)}): inside the
    window of every seam the product passes, each foot's skate beyond the clips alone
    (window_skate), as (beyond m, skate m, "name seam k foot") sorted worst first; and how
    many feet of flagged seams skate more than 1 cm beyond the clips."""
    fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    worst, flagged = [], 0
    for name, (result, (_rot, heads, names), own) in pairs.items():
        for seam in result["seams"]:
            for f in range(2):
                here, clips = window_skate(result, heads, names, own, seam, f, fps)
                if seam["flagged"]:
                    flagged += here - clips > 0.01
                else:
                    worst.append((here - clips, here, f"{name} seam {seam['index']} {FEET[f]}"))
    return sorted(worst, reverse=True), flagged


def seam_lifts(result, heads, names, own):
    """Per seam (seam dict, m, m): how high the lower foot (its lowest point) is above the
    composition's floor at most, over the seam's window and the frames its steps may
    take after it (half a window more and 1 s), and the most the clips composed alone
    lift both feet there (above each one's own floor: A over the frames the window
    blends, B from its first kept frame over as many frames)."""
    fps = result["fps"]
    low = lowest(None, heads, names)
    floor = float(np.percentile(low, 5))
    first = result["frames"][0]
    out = []
    for seam in result["seams"]:
        w, (cut_a, cut_b) = seam["window"], seam["cut"]
        k, n = int(seam["frame"] - first), w + 1 + int(np.ceil(0.5 * w)) + int(round(fps))
        here = float(low[k:k + n].min(axis=1).max() - floor)
        clips = []
        for h, lo, m in ((own[seam["index"] - 1][1], len(own[seam["index"] - 1][1]) - cut_a - w, w + 1),
                         (own[seam["index"]][1], cut_b, n)):
            o = lowest(None, h, names)
            part = o[max(lo, 0):max(lo, 0) + m]
            clips.append(float(part.min(axis=1).max() - np.percentile(o, 5)) if len(part) else 0.0)
        out.append((seam, here, max(clips)))
    return out


def plant_run_slides(result, heads, names, own):
    """Every plant the test finds on the output (Blender's evaluated feet) after the first
    seam, each cut at the seams: per seam, from 2 frames before its window to 2 before the
    next seam's, the runs of 4 frames or more where a foot's lowest point is within
    PLANT_BAND of the composition's floor and its ball moves slower than PLANT_SPEED.
    Returns (slide of the ball over the run, the larger slide of the two clips composed
    alone over the frames the run shows of each, foot, seam dict) per run."""
    fps = result["fps"]
    first = result["frames"][0]
    low = lowest(None, heads, names)
    floor = float(np.percentile(low, 5))
    balls = _balls(heads, names)
    seams = result["seams"]
    out = []
    for i, seam in enumerate(seams):
        w, (cut_a, cut_b) = seam["window"], seam["cut"]
        k = int(seam["frame"] - first)
        lo = max(k - 2, 0)
        hi = int(seams[i + 1]["frame"] - first) - 2 if i + 1 < len(seams) else len(heads)
        a_heads, b_heads = own[seam["index"] - 1][1], own[seam["index"]][1]
        a_end = len(a_heads) - cut_a
        for f, foot in enumerate(FEET):
            speed = np.r_[0.0, np.linalg.norm(np.diff(balls[:, f, :2], axis=0), axis=1) * fps]
            for r0, r1 in runs((low[:, f] <= floor + PLANT_BAND) & (speed < PLANT_SPEED)):
                r0, r1 = max(r0, lo), min(r1, hi)
                if r1 - r0 < 4:
                    continue
                # the output holds A before the window's end and B from the window's start
                ia = np.arange(r0, min(r1, k + w)) - k + a_end - w
                ib = np.arange(max(r0, k), r1) - k + cut_b
                ia, ib = ia[(ia >= 0) & (ia < len(a_heads))], ib[(ib >= 0) & (ib < len(b_heads))]
                clips = max(_slide(_balls(a_heads[ia], names)[:, f]), _slide(_balls(b_heads[ib], names)[:, f]))
                out.append((_slide(balls[r0:r1, f]), clips, foot, seam))
    return out


def runs(mask):
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(int), [0]])))
    return list(zip(edges[::2], edges[1::2]))


_ALONE = {}      # (clip, trim in, trim out) -> sample of the clip composed alone (read only)


def compose_cases(cm, cases):
    """{name: (result, sample of the output, [sample of each clip composed alone])} for
    {name: [clip path or (path, trim in, trim out), ...]} on the bundled signer, each clip
    composed alone once per process (the samples are arrays nobody writes to)."""
    ob = open_signer()
    out, alone = {}, _ALONE
    for name, clips in cases.items():
        specs = [cm.ClipSpec(str(c[0]), c[1], c[2]) if isinstance(c, tuple) else cm.ClipSpec(str(c)) for c in clips]
        result = cm.compose(ob, specs)
        for s in specs:
            key = (s.clip, s.trim_in, s.trim_out)
            if key not in alone:
                alone[key] = sample(ob, bpy.data.actions[cm.compose(ob, [s])["action"]])
        out[name] = (result, sample(ob, bpy.data.actions[result["action"]]),
                     [alone[(s.clip, s.trim_in, s.trim_out)] for s in specs])
    return out


def compose_walk(cm):
    """The walk loop chained ten times, with and without the foot hold, and once alone,
    sampled: {"held" | "free" | "single": (result, sample)}."""
    ob = open_signer()
    specs = [cm.ClipSpec(str(CMU), *LOOP) for _ in range(10)]
    held = cm.compose(ob, specs)
    free = cm.compose(ob, specs, foot_lock=False)
    single = cm.compose(ob, [specs[0]])
    return {k: (r, sample(ob, bpy.data.actions[r["action"]])) for k, r in
            (("held", held), ("free", free), ("single", single))}

"""Clip cleaning checks of the motion library (numpy only, no bpy).

Quaternions are w-first arrays (..., 4); the rotation algebra itself (products, Euler
angles in Blender's convention, hemisphere continuity) is solver/core/quat.py.
"""
import numpy as np

from ..core import quat


def step_angles(q):
    """Geodesic angle (radians) between consecutive frames: (frames-1, ...)."""
    q = np.asarray(q, dtype=np.float64)
    return quat.angle_between(q[:-1], q[1:])


def find_spikes(q, min_angle=np.radians(25.0), ratio=4.0):
    """Single-frame spikes: frame t far from both neighbours, which agree with each other.

    q: (frames, bones, 4). Returns a list of (frame_index, [bone indices]) sorted by frame.
    A frame is a spike on a bone when both steps into and out of it exceed
    max(min_angle, ratio × the bone's median step) and the neighbours are closer to each
    other than a quarter of the smaller of those two steps.
    """
    q = np.asarray(q, dtype=np.float64)
    if len(q) < 3:
        return []
    steps = step_angles(q)                      # (F-1, B)
    typical = np.median(steps, axis=0)          # (B,)
    limit = np.maximum(min_angle, ratio * typical)
    into, out = steps[:-1], steps[1:]           # for frames 1..F-2
    across = quat.angle_between(q[:-2], q[2:])
    spike = (into > limit) & (out > limit) & (across < 0.25 * np.minimum(into, out))
    frames, bones = np.nonzero(spike)
    result = {}
    for f, b in zip(frames.tolist(), bones.tolist()):
        result.setdefault(f + 1, []).append(b)
    return sorted(result.items())


def pose_steps(q, loc=None, loc_scale=1.0):
    """Per-frame pose change (frames-1,): the largest bone rotation step in radians, plus
    the root translation step divided by `loc_scale` (a length counted like one radian)."""
    d = step_angles(q).max(axis=1) if q.shape[1] else np.zeros(len(q) - 1)
    if loc is not None and len(loc) == len(q):
        d = d + np.linalg.norm(np.diff(loc, axis=0), axis=-1) / max(loc_scale, 1e-9)
    return d


def calibration_frames(q, loc=None, loc_scale=1.0, max_lead=3,
                       min_jump=np.radians(30.0), ratio=8.0):
    """How many leading frames form a calibration pose followed by a jump (0 when none).

    q: (frames, bones, 4) local rotations; loc: optional (frames, 3) root positions.
    The jump must happen within the first `max_lead` steps, exceed `min_jump` and be
    `ratio` times larger than the clip's typical (median) frame-to-frame change.
    """
    if len(q) < 6:
        return 0
    d = pose_steps(q, loc, loc_scale)
    typical = float(np.median(d))
    for k in range(min(max_lead, len(d) - 1)):
        if d[k] > max(min_jump, ratio * typical) and d[k] > ratio * float(np.median(d[k + 1:k + 30])):
            return k + 1
    return 0

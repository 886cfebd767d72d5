"""Quality metrics, computed from arrays for the reference and
the physics-pass result alike (before = reference, after = result).

Units: angles in degrees where the name says _deg, lag in ms, jerk cost in m²/s⁵,
penetration in mm, velocity jumps in rad/s. Motions are sampled uniformly in time.
"""

import numpy as np

from ..core import quat
from ..core.body_volumes import BodyField
from .contact_depths import contact_depths
from .integrator import face_samples
from ..core.kinematics import capsule_segments, forward_kinematics
from .joint_limits import limit_excess


def _uniform_step(times):
    times = np.asarray(times, dtype=float)
    dt = np.diff(times)
    if times.ndim != 1 or len(times) < 2 or np.any(dt <= 0) or np.ptp(dt) > 1e-6 * dt.mean():
        raise ValueError("metrics need uniformly increasing times")
    return float(dt.mean())


def tracking_error_deg(model, reference_rotations, rotations):
    """RMS geodesic angle (deg) between rotations and reference_rotations (n, n_bones, 4), per group.

    Returns {group label: RMS over frames and the group's bones}.
    """
    if np.shape(reference_rotations) != np.shape(rotations):
        raise ValueError("rotation arrays must have the same shape")
    angle = np.degrees(quat.angle_between(reference_rotations, rotations))
    return {g: float(np.sqrt(np.mean(angle[:, model.bones_in_group(g)] ** 2)))
            for g in dict.fromkeys(model.groups)}


def fingertips(model):
    """Default fingertip bones: leaves labelled "fingers", else all leaves."""
    leaves = np.flatnonzero(model.children_count == 0)
    fingers = [b for b in leaves if model.groups[b] == "fingers"]
    return np.array(fingers if fingers else leaves, dtype=np.intp)


def tip_positions(model, rotations, base_positions, base_rotations, tips=None):
    """World positions (n, k, 3) m of the tails of `tips` (default fingertips(model)).

    rotations (n, n_bones, 4); base_positions (n, 3) m; base_rotations (n, 4).
    """
    tips = fingertips(model) if tips is None else np.asarray(tips, dtype=np.intp)
    kin = forward_kinematics(model, rotations, quat.to_matrix(base_rotations), base_positions)
    return capsule_segments(model, kin)[:, tips, 1]


def lag_ms(times, reference_positions, positions, max_lag=0.25):
    """Lag (ms, positive = positions trail the reference) maximising the cross-correlation
    of fingertip speed; positions (n, k, 3) m. Sub-sample by a parabola through the peak.
    """
    dt = _uniform_step(times)
    speed_ref = np.linalg.norm(np.diff(reference_positions, axis=0), axis=-1) / dt
    speed = np.linalg.norm(np.diff(positions, axis=0), axis=-1) / dt
    speed_ref = speed_ref - speed_ref.mean(axis=0)
    speed = speed - speed.mean(axis=0)
    n = len(speed)
    m = min(int(round(max_lag / dt)), n - 2)
    shifts = np.arange(-m, m + 1)
    corr = np.array([np.sum(speed_ref[max(0, -s):n - max(0, s)] * speed[max(0, s):n - max(0, -s)])
                     for s in shifts])
    k = int(np.argmax(corr))
    offset = 0.0
    if 0 < k < len(corr) - 1:
        a, b, c = corr[k - 1], corr[k], corr[k + 1]
        denom = a - 2 * b + c
        offset = 0.5 * (a - c) / denom if denom < 0 else 0.0
    return 1e3 * (shifts[k] + offset) * dt


def jerk_cost(times, positions):
    """∫‖d³p/dt³‖² dt (m²/s⁵) summed over points; positions (n, k, 3) m, third differences."""
    dt = _uniform_step(times)
    if len(positions) < 4:
        raise ValueError("jerk needs at least 4 frames")
    jerk = np.diff(positions, 3, axis=0) / dt ** 3
    return float(np.sum(jerk ** 2) * dt)


def motion_penetration_mm(model, rotations, base_positions, base_rotations, face_grid=None, fields=(),
                          pair_kinds=None, intended=()):
    """Deepest penetration per frame (n,) mm over all contacts (body.contact_depths): capsule
    pairs, with face_grid (sdf.DistanceGrid) the hand–face samples of
    integrator.face_samples, and the body fields (body.BodyField); intended: the
    contacts made on purpose, which do not count (body.contact_depths)."""
    if face_grid is not None:
        face = face_samples(model, face_grid)
        fields = (*fields, BodyField(None, face_grid, face.bones, face.local, face.radius,
                                     ("hand–face",) * len(face.bones)))
    depth = contact_depths(model, rotations, base_positions, base_rotations, fields, pair_kinds, intended)
    return 1e3 * np.max(np.stack(list(depth.values())), axis=0, initial=0.0)


def penetration_stats(penetration_mm, threshold_mm=0.5):
    """{"max_mm", "p95_mm", "frames_above"} of per-frame penetration (mm)."""
    p = np.asarray(penetration_mm, dtype=float)
    return {"max_mm": float(p.max()), "p95_mm": float(np.percentile(p, 95)),
            "frames_above": int(np.count_nonzero(p > threshold_mm))}


def limit_excess_stats(model, rotations, tolerance_deg=1e-6):
    """{"max_deg", "frames_violating"}: largest joint-limit excess and the frames with an
    excess above tolerance_deg (the default only ignores round-off of the projection)."""
    excess = np.degrees(limit_excess(model, rotations))
    per_frame = excess.max(axis=-1)
    return {"max_deg": float(per_frame.max()),
            "frames_violating": int(np.count_nonzero(per_frame > tolerance_deg))}


def splice_velocity_jump(times, rotations, seams):
    """D = ‖v_A(t_end) − v_B(t_start)‖ (rad/s) at each seam frame index.

    v_A is the one-sided angular velocity of all bones over the frame before the seam,
    v_B over the frame after it (body-frame rotation vectors per second, stacked).
    """
    dt = _uniform_step(times)
    seams = np.asarray(seams, dtype=np.intp)
    if np.any(seams < 1) or np.any(seams > len(rotations) - 2):
        raise ValueError("seams must have a frame on each side")

    def velocity(a, b):
        return quat.log(quat.mul(quat.conj(rotations[a]), rotations[b])).reshape(len(seams), -1) / dt
    return np.linalg.norm(velocity(seams - 1, seams) - velocity(seams, seams + 1), axis=-1)


def motion_metrics(model, times, rotations, base_positions, base_rotations, face_grid=None, tips=None,
                   seams=(), fields=(), pair_kinds=None, intended=()):
    """Metrics of one motion: {"jerk_cost", "penetration" (penetration_stats),
    "joint_limits" (limit_excess_stats), "splice_velocity_jump" (list, rad/s, per seam)}."""
    pos = tip_positions(model, rotations, base_positions, base_rotations, tips)
    return {"jerk_cost": jerk_cost(times, pos),
            "penetration": penetration_stats(motion_penetration_mm(model, rotations, base_positions,
                                                                   base_rotations, face_grid, fields, pair_kinds,
                                                                   intended)),
            "joint_limits": limit_excess_stats(model, rotations),
            "splice_velocity_jump": splice_velocity_jump(times, rotations, seams).tolist() if len(seams) else []}


def compare(model, reference, result, face_grid=None, tips=None, seams=(), bake_seconds=None, fields=(),
            pair_kinds=None, intended=()):
    """Before/after metrics of a physics pass (JSON-able dict).

    reference: reference.Reference; result: simulate.SimResult; face_grid: the
    sdf.DistanceGrid used, if any; fields, pair_kinds: the body volumes and capsule-pair
    kinds and the contacts made on purpose (motion_penetration_mm); tips: fingertip bones (default fingertips(model));
    seams: splice frame indices; bake_seconds: wall time of the bake, if measured.
    Keys: "reference" and "result" (motion_metrics), "tracking_error_deg" (per group),
    "lag_ms", "jerk_change_percent", "effort" (substeps mean/max, fallback counts per
    level 1–3, and with bake_seconds the bake time and real-time factor).
    """
    before = motion_metrics(model, reference.times, reference.rotations, reference.base_positions,
                            reference.base_rotations, face_grid, tips, seams, fields, pair_kinds, intended)
    after = motion_metrics(model, reference.times, result.rotations, reference.base_positions,
                           reference.base_rotations, face_grid, tips, seams, fields, pair_kinds, intended)
    tips_ref = tip_positions(model, reference.rotations, reference.base_positions, reference.base_rotations, tips)
    tips_res = tip_positions(model, result.rotations, reference.base_positions, reference.base_rotations, tips)
    effort = {"substeps_mean": float(result.substeps[1:].mean()), "substeps_max": int(result.substeps.max()),
              "fallbacks": result.fallback_counts.tolist()}
    if bake_seconds is not None:
        effort["bake_seconds"] = float(bake_seconds)
        effort["realtime_factor"] = float((reference.times[-1] - reference.times[0]) / bake_seconds)
    return {
        "reference": before, "result": after,
        "tracking_error_deg": tracking_error_deg(model, reference.rotations, result.rotations),
        "lag_ms": lag_ms(reference.times, tips_ref, tips_res),
        "jerk_change_percent": 100.0 * (after["jerk_cost"] / before["jerk_cost"] - 1.0)
        if before["jerk_cost"] > 0 else 0.0,
        "effort": effort,
    }

"""What a bake reports beside its keys: the metrics record (metrics_record), the held
overlaps and contact pairs it measured, and the warnings a user reads (the bake's outcome,
diverged bones, world-orientation error, bones far from the reference without a contact).
Arrays and plain records only; a `rig` argument needs .model and .bone_names (the bake's
signsim_addon body.rig.RigModel, or any object with those)."""

import numpy as np

from .guard import CONTACT_MAX_DEG, DIVERGED_DEG, near_contact
from .held_overlap import HOLD_S


TRACKING_WARN_DEG = 10.0  # RMS over every simulated bone and frame: the bake no longer shows the keys
# the metrics' keys counting frames with some bone beyond DIVERGED_DEG / CONTACT_MAX_DEG
ABOVE_DIVERGED = f"frames_world_error_above_{DIVERGED_DEG:.0f}_deg"
ABOVE_CONTACT_MAX = f"frames_world_error_above_{CONTACT_MAX_DEG:.0f}_deg"


def outcome_warnings(record):
    """Warnings (list of str) when the bake as a whole is worse than its reference where it
    exists to be better: fingertip jerk above the reference's, or an RMS tracking error
    above TRACKING_WARN_DEG (record: metrics_record's, deg and %)."""
    out = []
    jerk = record["baked"]["jerk_change_percent"]
    if jerk > 0:
        out.append(f"the bake raised fingertip jerk by {jerk:.0f} % over the reference: it is not smoother than the keys")
    tracking = record["baked"]["tracking_rms_deg"]
    if tracking > TRACKING_WARN_DEG:
        out.append(f"the bake is {tracking:.1f}° RMS from the reference: check it before using it")
    return out


def verdict(record):
    """'failed', 'check' or 'ok' for a bake's metrics record (metrics_record's, with
    world_error_record's keys and "warnings"): 'failed' when the result is not usable as
    it is — some bone ends more than CONTACT_MAX_DEG from what it tracked on a frame, or
    the RMS tracking error is above TRACKING_WARN_DEG (the bake no longer shows the keys);
    'check' when any warning says a threshold the bake reports is not met; else 'ok'."""
    baked = record["baked"]
    if baked.get(ABOVE_CONTACT_MAX, 0) > 0 \
            or baked["tracking_rms_deg"] > TRACKING_WARN_DEG:
        return "failed"
    return "check" if record.get("warnings") else "ok"


def held_overlap_record(model, pair_kinds, pairs):
    """({contact kind: largest held overlap (mm)} for the kinds that have one, [warnings]).

    solver.physics.held_overlap: the capsules' overlap the reference keeps still, which capsule
    contacts and penetration figures start from. Two capsule axes held closer than half
    the thinner radius are no longer the capsules' excess over the skin but parts inside
    each other: kept as the reference has it, and said. model: the SkeletonModel;
    pair_kinds (n_pairs,); pairs (n_pairs,) m: held_overlaps' output."""
    out, deep = {}, {}
    for kind, d, bound in zip(pair_kinds, pairs, model.pair_radius_sum - 0.5 * model.pair_min_radius):
        if d > 0:
            out[kind] = max(out.get(kind, 0.0), round(1e3 * float(d), 3))
        if d > bound:
            deep[kind] = max(deep.get(kind, 0.0), 1e3 * float(d))
    warnings = [f"the reference keeps parts inside each other for {HOLD_S:.2f} s or longer ("
                + ", ".join(f"{k} {v:.0f} mm" for k, v in sorted(deep.items()))
                + "): kept as in the reference, not resolved"] if deep else []
    return out, warnings


def contact_pairs(rig, pair_kinds, fields):
    """{contact kind: ["bone–bone" or "bone–volume", …]}: every contact the solver tests."""
    names = rig.bone_names
    out = {}
    for (i, j), kind in zip(rig.model.pairs, pair_kinds):
        out.setdefault(kind, []).append(f"{names[i]}–{names[j]}")
    for f in fields:
        for b, kind in sorted(set(zip(f.bones.tolist(), f.kinds))):
            out.setdefault(kind, []).append(f"{names[b]}–{f.mesh.kind}")
    return out


DEVIATION_DEG = 10.0
CONTACT_RECOVERY_S = 0.25  # after a contact lets go, the PD needs a few of its periods to catch up


SHOWN_BONES = 5  # diverged bones named in the warning, worst first


def divergence_warnings(rig, diverged):
    """[str]: the bones solver.physics.guard found far from the reference (empty when none): the
    ones that strayed beyond DIVERGED_DEG without a contact (kept as simulated) and the
    ones of those beyond CONTACT_MAX_DEG (passed through), each named by the first bone of each
    chain (whose parent was not off on that frame): how many frames, and the worst
    world-orientation error of the chain."""
    out = []
    strayed = diverged.strayed & ~diverged.diverged
    if np.count_nonzero(strayed):
        out.append(f"the simulation strayed from the reference: {_chains(rig, strayed, diverged.error_deg)} "
                   f"ended more than {DIVERGED_DEG:.0f}° from it without a contact there "
                   f"({int(np.count_nonzero(strayed.any(axis=0)))} bones in all): kept as simulated, check them")
    d = diverged.diverged
    if np.count_nonzero(d):
        out.append(f"the simulation diverged: {_chains(rig, d, diverged.error_deg)} ended more than "
                   f"{CONTACT_MAX_DEG:.0f}° from the reference without a contact there "
                   f"({int(np.count_nonzero(d.any(axis=0)))} bones in "
                   f"all); those bones and the ones they carry follow the reference on {len(diverged.frames)} of "
                   f"{len(d)} frames (kinematic pass-through, counted in fallbacks)")
    return out


def world_error_record(error_deg):
    """{"world_error_max_deg", "frames_world_error_above_30_deg", "frames_world_error_above_90_deg"}
    of the baked bones' world-orientation error (F, n) deg against the reference, on every
    frame, contacts included (DIVERGED_DEG and CONTACT_MAX_DEG are 30° and 90°)."""
    worst = error_deg.max(axis=1, initial=0.0)
    return {"world_error_max_deg": float(worst.max(initial=0.0)),
            ABOVE_DIVERGED: int(np.count_nonzero(worst > DIVERGED_DEG)),
            ABOVE_CONTACT_MAX: int(np.count_nonzero(worst > CONTACT_MAX_DEG))}


def world_error_warnings(rig, error_deg, frames, tracked="the reference"):
    """[str]: how many frames the bake leaves some bone more than DIVERGED_DEG (and more
    than CONTACT_MAX_DEG) from the world orientation of what it tracked (`tracked`: the
    reference or the target), contacts included, and the worst bone and scene frame;
    error_deg (F, n) deg of the final keys; frames (F,)."""
    worst = error_deg.max(axis=1, initial=0.0)
    far = int(np.count_nonzero(worst > DIVERGED_DEG))
    if not far:
        return []
    f, b = np.unravel_index(np.argmax(error_deg), error_deg.shape)
    return [f"in world orientation the bake is more than {DIVERGED_DEG:.0f}° from {tracked} on {far} of "
            f"{len(worst)} frames ({int(np.count_nonzero(worst > CONTACT_MAX_DEG))} frames more than "
            f"{CONTACT_MAX_DEG:.0f}°), contacts included: worst '{rig.bone_names[b]}' {error_deg[f, b]:.0f}° at "
            f"frame {frames[f]:.0f}"]


def _chains(rig, off, error_deg):
    """'bone' on k frames (worst x°), … for the first bone of each chain that is `off`
    (F, n) bool, worst first (SHOWN_BONES of them); error_deg (F, n)."""
    parents = np.asarray(rig.model.parents)
    parent_off = np.where(parents >= 0, off[:, np.maximum(parents, 0)], False)
    first = off & ~parent_off  # (F, n): where a chain starts to be off
    chain_worst = np.array([np.where(first[:, b], np.max(np.where(rig.model.ancestors[:, b] > 0,
                                                                     error_deg, 0.0), axis=1), 0.0).max()
                            for b in range(off.shape[1])])
    roots = [b for b in np.argsort(-chain_worst, kind="stable") if first[:, b].any()]
    named = ", ".join(f"'{rig.bone_names[b]}' on {int(np.count_nonzero(first[:, b]))} frames "
                      f"(worst {chain_worst[b]:.0f}°)" for b in roots[:SHOWN_BONES])
    return named + (f" and {len(roots) - SHOWN_BONES} more" if len(roots) > SHOWN_BONES else "")


def deviation_warnings(rig, result, err, touching, frame_time, frames, tracked="the reference"):
    """Warnings (list of str) about the solve: frames that fell back down the ladder, and
    bones that end more than DEVIATION_DEG from what they tracked (`tracked`: the
    reference or the target) on frames where neither they
    nor any bone they carry touch anything, or did within CONTACT_RECOVERY_S before
    (err (F, n) deg, touching (F, n) bool, frame_time s); the worst is named by its scene
    frame (frames (F,)), as every message names frames."""
    out = []
    counts = np.asarray(result.fallback_counts)
    if counts.sum():
        out.append(f"{int(counts.sum())} frames fell back ({int(counts[0])} to smaller steps, {int(counts[1])} "
                   f"to softer contacts, {int(counts[2])} passed through unsimulated)")
    off = (err > DEVIATION_DEG) & ~near_contact(rig.model, touching, frame_time, CONTACT_RECOVERY_S, before=False)
    if np.count_nonzero(off):
        off_frames, bones = np.nonzero(off)
        worst = np.unravel_index(np.argmax(np.where(off, err, -1.0)), err.shape)
        out.append(f"{len(set(bones.tolist()))} bones end more than {DEVIATION_DEG:.0f}° from {tracked} on "
                   f"{len(set(off_frames.tolist()))} frames without a contact (worst '{rig.bone_names[worst[1]]}' "
                   f"{err[worst]:.1f}° at frame {frames[worst[0]]:.0f})")
    return out


def metrics_record(cmp, result, reference, seconds, tracking_rms_deg) -> dict:
    """The bake's metrics JSON: {"reference": {...}, "baked": {...}} with the keys of the
    `signsim bake --json` output (units in the key names; tracking and lag are 0 for the reference).

    tracking_rms_deg: RMS geodesic angle over every simulated bone and frame (deg); the
    per-group values come from solver.physics.metrics.compare.
    """
    duration = float(reference.times[-1] - reference.times[0])

    def side(m, tracking, lag, effort):
        return {"tracking_rms_deg": tracking, "lag_ms": lag, "jerk_cost": m["jerk_cost"],
                "penetration_max_mm": m["penetration"]["max_mm"],
                "penetration_p95_mm": m["penetration"]["p95_mm"],
                "frames_penetrating": m["penetration"]["frames_above"],
                "joint_limit_excess_deg": m["joint_limits"]["max_deg"], **effort}

    per_group = cmp["tracking_error_deg"]
    none = {"substeps_mean": 0.0, "fallbacks": 0, "bake_seconds": 0.0, "realtime_factor": 0.0}
    effort = {"substeps_mean": cmp["effort"]["substeps_mean"],
              "fallbacks": int(sum(cmp["effort"]["fallbacks"])), "bake_seconds": seconds,
              "realtime_factor": duration / seconds if seconds > 0 else 0.0}
    baked = side(cmp["result"], tracking_rms_deg, cmp["lag_ms"], effort)
    baked["tracking_rms_deg_per_group"] = per_group
    baked["jerk_change_percent"] = cmp["jerk_change_percent"]
    return {"reference": side(cmp["reference"], 0.0, 0.0, none), "baked": baked}

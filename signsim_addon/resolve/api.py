"""Self-collision resolution in pose space: what the Resolve operator, `signsim resolve`,
the benchmark and the tests call.

- resolve_action(scene, ob, action, frame_range, margin, …) -> {"action", "summary", "results"}:
  the nearest poses without a body part inside another (solver.core.nearest_pose) for the frames
  of an action, written to a NEW action `<action>.resolved` (the original is never
  modified); a pose-library asset (an action keyed on one frame) gives a new asset;
- resolve_file(ResolveFileRequest, report) -> summary + {"action", "out", "warnings"}.
The rig and the sampled poses are the bake's (bake.api.prepare), its body volumes the
character's (body.fields.body_fields, body.fields.neck_fields); penetration after the
solve is measured on the evaluated skin (body.skin.SkinTest) when the armature has one.
"""
import os
import time
from dataclasses import dataclass, replace

import bpy
import numpy as np
from threadpoolctl import threadpool_limits

from ...solver.core import quat, sdf
from ...solver.core.body_volumes import TORSO, BodyField, BodyMesh
from ...solver.core.nearest_pose import (ResolveSettings, resolve_pose, resolve_sequence, smooth_corrections,
                                            warm_up)
from .. import compat, files, keys
from ..bake import api as bake_api
from ..body import geometry
from ..body.fields import body_fields, neck_fields
from ..errors import INFO, WARNING, BadOption, SignSimError, from_solver, silent
from ..progress import Stages, as_stages
from ..body.skin import TORSO as TORSO_SKIN, SkinTest, skin_penetration  # noqa: F401 (skin_penetration: benches)

SUFFIX = ".resolved"
SKIN_TOLERANCE = 0.001  # m: deeper skin penetration after a solve is solved again, then reported
SKIN_ROUNDS = 3  # solves again with the margin grown by the skin's depth
POSED_TORSO_REACH = 0.04  # m: the posed torso skin a solve again sees around each part inside it


@dataclass(frozen=True, kw_only=True)
class ResolveFileRequest(files.FileRequest):
    """Resolve one armature's action in the .blend `rig` (files.FileRequest) into `out`.

    action: the action (None: the armature's assigned one); frames: (first, last) scene
    frames or None for the whole action; margin_mm: clearance every body-part pair keeps.
    """
    action: str = None
    frames: tuple = None
    margin_mm: float = 2.0


def _single_key_frame(action):
    """The frame of an action keyed on exactly one frame (a pose asset), else None."""
    frames = {kp.co[0] for bag in compat.all_channelbags(action) for fc in bag.fcurves for kp in fc.keyframe_points}
    return next(iter(frames)) if len(frames) == 1 else None


STAGES = ("reading", "compile", "body", "poses", "writing", "skin_check")  # a resolve's, in order (progress.Stages)


def resolve_action(scene, ob, action=None, frame_range=None, margin=0.002, sequence=True, method="SLSQP",
                   measure_skin=True, assign=True, only_frames=None, report=silent, progress=None) -> dict:
    """Resolve the self-collisions of `ob`'s `action` (default: the assigned one).

    frame_range: (first, last) scene frames to solve (None: all keyed frames); the other
    frames keep their poses. margin m ≥ 0. sequence: solve frames in order with the
    temporal term and smooth each run of changed frames as a trajectory
    (solver.core.nearest_pose.smooth_corrections; False: each pose alone, as for unrelated
    poses). method: "SLSQP" or
    "penalty" (the baseline). measure_skin: measure the remaining penetration on the
    evaluated skin. assign: make the new action the armature's action (the original
    keeps a fake user so it is never lost). only_frames: optional scene frames, the only
    ones solved (within frame_range). progress: None, a progress(stage, k, n, fraction)
    callable (signsim_addon/progress.py) over STAGES ('poses' ticks after each pose; raise
    from it to abort) or a progress.Stages over them.
    Returns {"action": the new Action, "summary": JSON-able (resolve_summary), "results":
    [solver.core.nearest_pose.PoseResult per solved frame], "frames": the solved scene frames}.
    Raises SignSimError: not an armature, no action, a rig without fingers; BadOption: a margin
    outside 0–50 mm.
    """
    if not (np.isfinite(margin) and 0 <= margin < 0.05):
        raise BadOption(f"--margin must be between 0 and 50 mm, got {margin * 1e3:g} mm")
    if ob is None or ob.type != 'ARMATURE':
        raise SignSimError(f"'{getattr(ob, 'name', ob)}' is not an armature")
    action = action or bake_api.reference_of(ob)
    if action is None:
        raise SignSimError(f"armature '{ob.name}' has no action to resolve")
    new = action.copy()
    new.name = action.name + SUFFIX
    new.use_fake_user = False
    try:
        stages = as_stages(progress, STAGES)
        out = _resolve_into(scene, ob, action, new, frame_range, margin, sequence, method, measure_skin, only_frames,
                            report, stages)
    except Exception:
        bpy.data.actions.remove(new)
        raise
    if action.asset_data is not None:  # a pose asset gives a pose asset in the same catalog
        new.asset_mark()
        new.asset_data.catalog_id = action.asset_data.catalog_id
        for tag in action.asset_data.tags:
            new.asset_data.tags.new(tag.name, skip_if_exists=True)
    if assign:
        action.use_fake_user = True
        previous = compat.assigned_action(ob)
        compat.assign_action(ob, new, new.slots[out["slot"]])
        compat.keep_unused(previous)
    return out


def _resolve_into(scene, ob, action, new, frame_range, margin, sequence, method, measure_skin, only_frames, report,
                  stages):
    pose_frame = _single_key_frame(new)
    if pose_frame is not None:
        # A pose asset has one keyed frame; the bake's sampling needs two: a copy of every
        # key one frame later, dropped again when the result is written.
        for bag in compat.all_channelbags(new):
            for fc in bag.fcurves:
                fc.keyframe_points.insert(pose_frame + 1.0, fc.keyframe_points[0].co[1], options={'FAST'})
        frame_range = (pose_frame, pose_frame)
    with stages("reading"):
        job = bake_api.prepare(scene, ob, new, report=report)
    if frame_range is not None and not (job.frames[0] <= frame_range[1] and job.frames[-1] >= frame_range[0]):
        raise SignSimError(f"frames {frame_range[0]:g}–{frame_range[1]:g} are outside the keyed range "
                           f"{job.frames[0]:g}–{job.frames[-1]:g} of '{action.name}'")
    solve = np.ones(len(job.frames), bool) if frame_range is None else (
        (job.frames >= frame_range[0]) & (job.frames <= frame_range[1]))
    if only_frames is not None:
        solve &= np.isin(job.frames, np.asarray(only_frames, dtype=float))
    rig, ref = job.rig, job.reference
    with stages("compile"):  # compiles on the first resolve after install, then loads (as the bake's)
        warm_up()
    with stages("body") as tick:
        fields = body_fields(rig, job.settings.sdf_spacing, job.settings.sdf_margin, job.grid_cache, tick)
        fields += neck_fields(ob, rig, job.settings.sdf_spacing, job.settings.sdf_margin, job.grid_cache)
    with from_solver("cannot resolve: "):
        settings = ResolveSettings(margin=float(margin))
    idx = np.flatnonzero(solve)
    report(INFO, f"resolving {len(idx)} poses of '{action.name}' on '{ob.name}' "
                 f"({len(rig.bone_names)} bones, margin {margin * 1e3:g} mm)")
    start = time.process_time()
    # one core: BLAS threads only cost on small systems
    with stages("poses") as tick, threadpool_limits(1, user_api="blas"):
        if sequence:
            results = resolve_sequence(rig.model, fields, ref.rotations[idx], ref.base_rotations[idx],
                                       ref.base_positions[idx], settings, method, progress=tick)
        else:
            results = []
            for f in idx:
                results.append(resolve_pose(rig.model, fields, ref.rotations[f], ref.base_rotations[f],
                                            ref.base_positions[f], settings, method=method))
                tick(len(results) / len(idx))
    seconds = time.process_time() - start
    slot = new.slots[job.slot_identifier]

    def write():
        rotations = ref.rotations.copy()
        rotations[idx] = np.stack([r.rotations for r in results])
        changed = np.flatnonzero(np.any(rotations != ref.rotations, axis=(0, 2)))
        rows = idx if pose_frame is not None else np.arange(len(job.frames))
        if len(changed):
            keys.write_rotations(ob, new, slot, job.frames[rows], [rig.bone_names[b] for b in changed],
                                 quat.make_continuous(rotations[rows][:, changed]))

    with stages("writing"):
        write()
        if pose_frame is not None:
            _drop_keys_at(new, pose_frame + 1.0)
    warnings = [w for w in rig.warnings]
    skin = None
    with stages("skin_check") as tick:
        if measure_skin and rig.skinned:
            # The capsules' radii are the skin's median distance from the bone: where the skin
            # bulges further, a frame still penetrating is solved again (from its original pose,
            # warm-started from the last solution) with the clearance of the penetrating bone
            # pairs grown by the skin's depth; only the frames solved again are measured again.
            test = SkinTest(ob, rig)
            extra = [{} for _ in idx]
            patches = [{} for _ in idx]  # posed_torso's grids of each frame
            todo = np.arange(len(idx))
            skin, pairs, best = {}, {}, {}
            for round_ in range(SKIN_ROUNDS + 1):
                tick(round_ / (SKIN_ROUNDS + 1))
                posed = {}
                measured = skin_penetration(scene, ob, new, slot, rig, job.frames[idx[todo]], posed, pairs=pairs,
                                            test=test)
                worse = False
                for k in todo:  # a solve again that leaves the skin deeper is undone
                    frame = float(job.frames[idx[k]])
                    if k in best and best[k][0] <= measured[frame]:
                        skin[frame], results[k] = best[k]
                        worse = True
                    else:
                        skin[frame] = measured[frame]
                        best[k] = (measured[frame], results[k])
                if worse:
                    write()
                todo = [k for k in todo if skin[float(job.frames[idx[k]])] > SKIN_TOLERANCE]
                if round_ == SKIN_ROUNDS or not todo:
                    break
                start = time.process_time()
                with threadpool_limits(1, user_api="blas"):
                    for k in todo:
                        f = idx[k]
                        frame = float(job.frames[f])
                        for (a, b), depth in pairs[frame].items():
                            if depth > SKIN_TOLERANCE:
                                for pair in _skin_neighbour_pairs(rig.model.parents, a, b):
                                    extra[k][pair] = extra[k].get(pair, 0.0) + depth + SKIN_TOLERANCE
                        results[k] = resolve_pose(rig.model, posed_torso(fields, test, posed[frame], pairs[frame],
                                                                         ref.base_rotations[f], ref.base_positions[f],
                                                                         job.settings.sdf_spacing, patches[k]),
                                                  ref.rotations[f], ref.base_rotations[f],
                                                  ref.base_positions[f], settings,
                                                  results[k].correction if results[k].changed else None, method,
                                                  extra_margin=extra[k])
                    if sequence:  # the frames solved again, smoothed into their neighbours' corrections
                        results = smooth_corrections(rig.model, fields, ref.rotations[idx], ref.base_rotations[idx],
                                                     ref.base_positions[idx], results, settings, extra)
                        todo = [k for k in range(len(idx)) if results[k].changed]
                    # resolved means clear by the margin asked for, not by the grown one
                    results = [replace(r, resolved=r.gap_after >= margin - settings.tolerance) if extra[k] else r
                               for k, r in enumerate(results)]
                seconds += time.process_time() - start
                write()
            deep = [k for k in range(len(idx)) if skin[float(job.frames[idx[k]])] > SKIN_TOLERANCE]
            if deep:
                # a pose the solves left no shallower on the skin than the input is no
                # correction (the robot's palm in its head turned every joint 50–170°): it stays
                # as it was, and every pose still inside the skin counts as failed
                before = skin_penetration(scene, ob, action, action.slots[job.slot_identifier], rig,
                                          job.frames[idx[deep]], test=test)
                kept = [k for k in deep if skin[float(job.frames[idx[k]])] >= before[float(job.frames[idx[k]])] - 1e-4]
                for k in kept:
                    f = idx[k]
                    skin[float(job.frames[f])] = before[float(job.frames[f])]
                    r = results[k]
                    results[k] = replace(r, rotations=ref.rotations[f], changed=False, gap_after=r.gap_before,
                                         change=np.zeros_like(r.change), correction=np.zeros_like(r.correction))
                if kept:
                    write()
                    warnings.append(f"{len(kept)} poses kept as they were (frames "
                                    f"{_frame_list([int(job.frames[idx[k]]) for k in kept])}): no solve left the skin "
                                    "shallower than in the input")
                results = [replace(r, resolved=False) if k in deep else r for k, r in enumerate(results)]
    summary = resolve_summary(results, seconds)
    failed = [int(job.frames[f]) for f, r in zip(idx, results) if not r.resolved]
    if failed:
        warnings.append(f"{len(failed)} of {len(results)} poses keep body parts closer than the margin or "
                        f"inside the skin (frames {_frame_list(failed)}): no pose within the joint limits "
                        "clears them")
    summary["remaining_body_model_penetration_mm"] = summary["remaining_penetration_mm"]
    if skin is not None:
        summary["remaining_penetration_mm"] = round(max(skin.values(), default=0.0) * 1e3, 3)
        summary["measured_on"] = "skin"
        deep = [int(f) for f, d in skin.items() if d > SKIN_TOLERANCE]
        if deep:
            warnings.append(f"the skin still penetrates by more than {SKIN_TOLERANCE * 1e3:g} mm on {len(deep)} "
                            f"frames ({_frame_list(deep)}) after {SKIN_ROUNDS} solves with a margin grown by the "
                            "depth measured on the skin")
    else:
        summary["measured_on"] = "body model"
        if measure_skin:
            warnings.append(f"armature '{ob.name}' has no skinned mesh: penetration is measured on the body "
                            "model (capsules and volumes) only")
    for w in warnings[len(rig.warnings):]:
        report(WARNING, w)
    summary["warnings"] = warnings
    return {"action": new, "summary": summary, "results": results, "frames": job.frames[idx],
            "slot": job.slot_identifier, "rig": rig, "fields": fields, "reference": ref, "solved": idx}


def posed_torso(fields, test, vertices, pairs, base_rotation, base_position, spacing, built=None):
    """`fields` with the torso volume replaced by the frame's posed torso skin where the
    skin shows a part inside the torso deeper than SKIN_TOLERANCE, else `fields` itself.

    The rig's torso volume is the hips' and spine's skin held rigid in the chest's rest
    frame: it has no thighs, and a bent spine moves the hips' skin away from it, so a
    hand inside a thigh or a bent hip is clear on the body model and deep in the skin.
    The posed volumes are the skin test's torso region (every vertex no solved bone
    dominates: hips, spine, legs) as the frame shows it, one patch within
    POSED_TORSO_REACH m of each part inside it (patches that overlap merged), in the
    kinematic base's frame, signed by winding number (sdf.build_distance_grid), sampled
    by the rig torso volume's own spheres. The rest of the torso is then not tested on
    the body model: the skin test of the next round sees it.
    test: SkinTest; vertices (V, 3) m: the frame's evaluated skin (world); pairs {(region
    a, region b): depth m} of the frame (skin_penetration); base_rotation (4,),
    base_position (3,) m: the frame's kinematic base; spacing m: the bake's sdf spacing;
    built: a dict of this frame's earlier answers, reused for the same parts inside (the
    torso's skin hardly moves with the solved bones, and a grid costs tens of ms).
    """
    inside = [b for (a, b), d in pairs.items() if a == TORSO_SKIN and d > SKIN_TOLERANCE]
    rigid = [k for k, fl in enumerate(fields) if fl.mesh.kind == TORSO and fl.mesh.bone < 0]
    if not inside or not rigid:
        return fields
    key = tuple(sorted(inside))
    if built is not None and key in built:
        return built[key]
    used, tri = test.region_mesh(TORSO_SKIN)
    v, tri = vertices[used], np.asarray(tri)
    # one box per part inside, boxes that overlap merged: a grid over two far-apart
    # hands would be mostly empty nodes, each costing a winding number
    boxes = []
    for r in inside:
        own = vertices[test.region == r]
        box = [own.min(axis=0) - POSED_TORSO_REACH, own.max(axis=0) + POSED_TORSO_REACH]
        apart = []
        for other in boxes:
            if np.all(other[0] <= box[1]) and np.all(box[0] <= other[1]):
                box = [np.minimum(box[0], other[0]), np.maximum(box[1], other[1])]
            else:
                apart.append(other)
        boxes = apart + [box]
    old = fields[rigid[0]]
    reach = float(old.radius.max())
    h = max(spacing * geometry.TORSO_SPACING_FACTOR, 0.5 * float(old.radius.min()))
    base_r = quat.to_matrix(np.asarray(base_rotation, dtype=float))
    posed = []
    for lo, hi in boxes:
        near = np.all((v >= lo) & (v <= hi), axis=1)
        patch = tri[near[tri].any(axis=1)]
        if len(patch) < 4:
            continue
        keep, local = np.unique(patch, return_inverse=True)
        mesh = BodyMesh(TORSO, -1, None, (v[keep] - base_position) @ base_r, local.reshape(-1, 3))
        grid = sdf.build_distance_grid(mesh.vertices, mesh.triangles, -1, h, reach + h, reach=reach)
        posed.append(BodyField(mesh, grid, old.bones, old.local, old.radius, old.kinds))
    out = fields[:rigid[0]] + tuple(posed) + fields[rigid[0] + 1:] if posed else fields
    if built is not None:
        built[key] = out
    return out


def _skin_neighbour_pairs(parents, a, b):
    """The bone pairs whose clearance grows where the skin regions of bones a and b
    (−1: the torso) penetrate: each of them against the other and the other's parent
    and children. A region's skin reaches beyond its own body part to where it meets
    its neighbours' (a fingertip pressed into the palm's skin at a finger's root)."""
    def around(r):
        return {r, int(parents[r]) if r >= 0 else -1} | {int(c) for c in np.flatnonzero(parents == r)}
    return {(a, c) for c in around(b)} | {(c, b) for c in around(a)}


def _frame_list(frames, limit=8):
    text = ", ".join(str(f) for f in frames[:limit])
    return text + (", …" if len(frames) > limit else "")


def _drop_keys_at(action, frame):
    for bag in compat.all_channelbags(action):
        for fc in bag.fcurves:
            for kp in [kp for kp in fc.keyframe_points if abs(kp.co[0] - frame) < 1e-6]:
                fc.keyframe_points.remove(kp, fast=True)
            fc.update()


def resolve_summary(results, seconds):
    """{"poses", "resolved", "failed", "mean_change_deg", "max_change_deg", "ms_per_pose",
    "remaining_penetration_mm"} of PoseResults: poses solved, those clear of every part
    (by margin − tolerance; where the skin is measured, also inside it by at most
    SKIN_TOLERANCE), the mean and largest bone rotation change of the poses that
    changed (each pose's largest bone change, degrees), CPU ms per pose that needed a
    solve, and the deepest penetration left on the body model (mm)."""
    changed = [r for r in results if r.changed]
    per_pose = np.array([np.degrees(r.change.max()) for r in changed])
    collided = [r for r in results if r.gap_before < 0.0 or r.changed]
    deepest = max((max(0.0, -r.gap_after) for r in results), default=0.0)
    ok = sum(r.resolved for r in results)
    return {"poses": len(results), "resolved": ok, "failed": len(results) - ok,
            "changed": len(changed),
            "mean_change_deg": round(float(per_pose.mean()), 3) if len(per_pose) else 0.0,
            "max_change_deg": round(float(per_pose.max()), 3) if len(per_pose) else 0.0,
            "ms_per_pose": round(1e3 * seconds / max(len(collided), 1), 2),
            "remaining_penetration_mm": round(deepest * 1e3, 3)}


def resolve_file(request: ResolveFileRequest, report=silent, progress=None, startup=None) -> dict:
    """Resolve request.armature's action in request.rig and save the file to request.out.

    progress: None or a progress(stage, k, n, fraction) callable over STAGES
    (signsim_addon/progress.py); startup: as bake.api.bake_file's. Returns resolve_summary's fields plus "action" (the new
    action's name), "out", "warnings" and "stage_seconds" ({stage: wall seconds}). Raises
    SignSimError for bad paths, a missing armature or action, a bad frame range or margin;
    nothing is written then.
    """
    r = request
    stages = Stages(STAGES, progress, None if startup is None else {"startup": startup})
    with stages("reading"):
        files.check_files([r.rig], [r.out])
        if r.frames is not None and r.frames[0] > r.frames[1]:
            raise BadOption(f"--frames {r.frames[0]}:{r.frames[1]} is empty")
        files.open_blend(r.rig)
        ob = files.find_armature(r.armature)
        action = files.find_action(r.action, r.rig)
    res = resolve_action(bpy.context.scene, ob, action, r.frames, r.margin_mm * 1e-3, report=report, progress=stages)
    s = res["summary"]
    report(INFO, f"{s['resolved']} of {s['poses']} poses clear by {r.margin_mm:g} mm ({s['changed']} changed, "
                 f"mean change {s['mean_change_deg']:.2f}°, max {s['max_change_deg']:.2f}°, {s['ms_per_pose']:.1f} ms "
                 f"per pose); deepest penetration left {s['remaining_penetration_mm']:.2f} mm on the {s['measured_on']}")
    with stages("writing"):
        out = files.save_atomically(r.out)
    report(INFO, f"wrote action '{res['action'].name}' to {out}")
    return {**s, "action": res["action"].name, "out": os.path.abspath(out), "stage_seconds": stages.finish(report)}

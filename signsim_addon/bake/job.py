"""The physics bake: reference action on a rig → new action `<reference>.physics` + metrics.

Three phases so one worker serves the operator (modal, with the solve in a thread), the
CLI and the tests:
1. `prepare` (main thread, bpy): read the rig and sample the reference F-curves into
   solver arrays — no scene update per frame;
2. `solve` (no bpy: safe in a worker thread): with settings.project, fit the reference
   and project it onto collision-free poses (the target, solver.physics.project); simulate
   tracking the target, or else the reference (solver.physics.simulate); before/after metrics;
3. `write` (main thread, bpy): a NEW action with the baked keys, written in bulk.
The reference action is never modified; nothing is written unless phase 3 runs.
"""
import json
import time
from dataclasses import dataclass, replace

import numpy as np
from threadpoolctl import threadpool_limits

from .. import compat
from ..keys import CONTACTS_PROP
from ...solver.core import kinematics
from ...solver.core import quat
from ...solver.physics.bake_report import (contact_pairs, deviation_warnings, divergence_warnings,
                                           held_overlap_record, metrics_record, outcome_warnings,
                                           world_error_record, world_error_warnings)
from ...solver.physics.contact_ramps import HOLD_RAMP_S, intended_contacts, smooth_ramps
from ...solver.physics.warm_up import warm_up
from ...solver.core.body_volumes import capsule_pair_kinds
from ...solver.physics.contact_depths import bone_contacts, contact_depths
from ...solver.physics.guard import contact_hold, guard, with_pass_through, world_error_deg
from ...solver.physics.held_overlap import held_overlaps, without_held_overlaps
from ...solver.physics.integrator import FaceSamples
from ...solver.physics.metrics import compare
from ...solver.physics.project import project
from ...solver.physics.reference import Reference, fit_reference
from ...solver.core.settings import PRESETS as SETTINGS_PRESETS, preset_values
from ...solver.physics.simulate import SimSettings, simulate
from .. import keys
from ..body import rig as rig_reader
from ..body.fields import body_fields, grid_cache_dir
from ..errors import SignSimError, from_solver
from ..progress import Stages, overall
from . import skin_metrics

SUFFIX = ".physics"
TRACK_REFERENCE, TRACK_PHYSICS = "SignSim reference", "SignSim physics"
PRESETS = tuple(SETTINGS_PRESETS)  # 'soft', 'default', 'stiff'
# the Physics settings a preset sets (solver.core.settings.preset_values' names)
VALUE_NAMES = tuple(preset_values("default"))


@dataclass(frozen=True)
class BakeJob:
    """Everything the solve needs, as arrays (built by `prepare`)."""
    armature_name: str
    action_name: str
    slot_identifier: str
    frames: np.ndarray          # (F,) scene frames
    rig: rig_reader.RigModel
    reference: Reference
    settings: SimSettings
    settings_record: dict       # JSON-able copy of the settings, stored on the result
    grid_cache: str = None      # folder of cached body distance fields (grid_cache_dir), or None
    contacts: tuple = ()        # the retarget's preserved contacts the bake keeps (preserved_contacts)


@dataclass(frozen=True)
class Solved:
    """Output of `solve`: baked local rotations (F, n, 4), the metrics record and, with the
    projection, the target's local rotations (F, n, 4) the simulation tracked (else None)."""
    rotations: np.ndarray
    metrics: dict
    target: np.ndarray = None


def physics_values(physics) -> dict:
    """{name: value} of an Object.signsim.physics PropertyGroup for VALUE_NAMES."""
    return {k: getattr(physics, k) for k in VALUE_NAMES}


def _as_stored(values):
    """Values as the Physics properties store them (single-precision floats), so a preset
    bakes identically whether applied in the Physics panel or named on the command line."""
    return {k: float(np.float32(v)) if isinstance(v, float) else v for k, v in values.items()}


def sim_settings(physics, multiplier=None, preset=None, n_frames=None, project=None) -> tuple:
    """(SimSettings, JSON-able record) from an Object.signsim.physics PropertyGroup.

    preset: optional 'soft'|'default'|'stiff': the preset's values (solver.core.settings, the
    same as the Physics panel's preset of that name) instead of the stored ones.
    multiplier: (F,) contact stiffness schedule or None. n_frames: when given, the
    settings are validated for that many frames. project: track the projected target
    (None: the Physics property `project`).
    Raises SignSimError for an unknown preset or a setting the solver rejects.
    """
    try:
        values = _as_stored(preset_values(preset)) if preset is not None else physics_values(physics)
        s = SimSettings.from_values(values, multiplier, project=bool(physics.project if project is None else project))
        if n_frames is not None:
            s.validate(n_frames)
    except ValueError as ex:  # the solver's check, reported at the add-on boundary
        raise SignSimError(f"invalid physics setting: {ex}") from None
    record = {"gains": {g: [v.frequency_hz, v.damping_ratio] for g, v in s.group_gains.items()},
              "feedforward": s.feedforward, "contact_stiffness": s.contact_stiffness,
              "contact_damping": s.contact_damping, "schedule": s.schedule,
              "target_depth_mm": float(values["target_depth_mm"]), "max_substeps": s.max_substeps,
              "preset": preset, "project": s.project}
    return s, record


def prepare(scene, armature, action=None, preset=None, frame_range=None, report=None, project=None) -> BakeJob:
    """Read `armature`'s rig and its reference `action` (default: the assigned one).

    frame_range: optional (first, last) scene frames, clipped to the action's keyed range.
    project: track the projected target (None: the armature's Physics property `project`).
    Raises SignSimError: not an armature, no action, an action without keys or with NaN
    keys, fewer than 2 frames to bake, a rig without fingers.
    """
    if armature is None or armature.type != 'ARMATURE':
        raise SignSimError(f"'{getattr(armature, 'name', armature)}' is not an armature")
    action = action or reference_of(armature)
    if action is None:
        raise SignSimError(f"armature '{armature.name}' has no action to bake")
    slot = _slot_for(armature, action)
    first, last = keys.keyed_frame_range(action, slot)
    if frame_range is not None:
        first, last = max(first, frame_range[0]), min(last, frame_range[1])
    frames = np.arange(int(np.floor(first)), int(np.ceil(last)) + 1, dtype=float)
    if len(frames) < 2:
        raise SignSimError(f"action '{action.name}' has fewer than 2 frames to bake")
    physics = armature.signsim.physics
    unit = float(scene.unit_settings.scale_length)
    rig = rig_reader.read_rig(armature, simulate_parts=set(physics.simulate_parts),
                              face_object=physics.face_object, report=report, unit_scale=unit)
    fps = keys.scene_fps(scene)
    pose = keys.sample_pose(armature, action, slot, rig.bone_names, frames)
    rig = rig_reader.fit_to_reference(rig, pose.rotations)
    chain = keys.sample_pose(armature, action, slot, rig.chain_to_base, frames)
    bones = armature.data.bones
    parents = [rig.chain_to_base.index(bones[n].parent.name) if bones[n].parent else -1
               for n in rig.chain_to_base]
    rest = np.array([np.array(bones[n].matrix_local) for n in rig.chain_to_base])
    chest = np.array(armature.matrix_world) @ kinematics.pose_matrices(
        parents, rest, chain.locations, chain.rotations, chain.scales)[:, -1]
    rot = chest[:, :3, :3] / np.cbrt(np.linalg.det(chest[:, :3, :3]))[:, None, None]
    reference = Reference(times=(frames - frames[0]) / fps, rotations=pose.rotations,
                          base_positions=chest[:, :3, 3] * unit, base_rotations=quat.from_matrix(rot))
    multiplier = _schedule(armature, action, slot, frames)
    settings, record = sim_settings(physics, multiplier, preset, len(frames), project)
    return BakeJob(armature.name, action.name, slot.identifier, frames, rig, reference,
                   settings, record, grid_cache_dir(), preserved_contacts(action, rig.bone_names, frames))


def preserved_contacts(action, bone_names, frames):
    """The contacts the retarget kept on `action` (its CONTACTS_PROP JSON list), switched
    on and not skipped, that overlap `frames` (F,) and touch a simulated bone: tuple of
    {"name", "parts", "frames" (first, last scene frame), "bones" (simulated bone names),
    "index" ((k,) int into bone_names), "start", "stop" (frame indices, stop exclusive)}."""
    try:
        items = json.loads(action.get(CONTACTS_PROP, "[]"))
    except (TypeError, ValueError):
        return ()
    out = []
    for it in items:
        if not it.get("enabled", True) or "skipped" in it or len(it.get("frames", ())) != 2:
            continue
        bones = [b for b in it.get("bones", ()) if b in bone_names]
        start = int(np.searchsorted(frames, float(it["frames"][0]) - 1e-6))
        stop = int(np.searchsorted(frames, float(it["frames"][1]) + 1e-6))
        if bones and stop > start:
            out.append({"name": it.get("name", "–".join(it.get("parts", ()))), "parts": list(it.get("parts", ())),
                        "frames": [float(frames[start]), float(frames[stop - 1])], "bones": bones,
                        "index": np.array([bone_names.index(b) for b in bones]), "start": start, "stop": stop})
    return tuple(out)


WRITE_STAGES = ("writing", "skin_check")  # the stages `write` runs, after the solve's


def solve_stages(project):
    """The stages `solve` runs, in order (progress.Stages names): compiling the solver (once
    after an install, then loaded from numba's cache), the body's distance fields, with the
    projection the reference's fit and the projection itself, the simulation, the metrics."""
    return ("compile", "body") + (("fit", "projection") if project else ()) + ("simulation", "metrics")


def bake_stages(project, *extra):
    """The stages of a bake, in order (progress.Stages names): reading the file and the rig,
    the solve's (solve_stages), writing the keys and metric curves (and the file), the
    skin check (WRITE_STAGES); then `extra` (e.g. 'soft_face', 'picture')."""
    return ("reading",) + solve_stages(project) + WRITE_STAGES + tuple(extra)


def operator_stages(job: BakeJob, progress=None):
    """progress.Stages of the bake operator, which has read the rig already (prepare): the
    solve's stages, then the write's — one bar from the solve on to the skin check."""
    return Stages(solve_stages(job.settings.project) + WRITE_STAGES, progress)


def solve(job: BakeJob, stages=None) -> Solved:
    """Run the physics pass and the before/after metrics (no bpy; thread-safe).

    stages: progress.Stages holding solve_stages (None: untimed, unreported): the compile, the
    body, the fit and the projection (with settings.project), the simulation and the metrics
    are timed and reported there; raising from its progress callable aborts the bake.
    Raises SignSimError when the solver rejects the settings or the rig.
    """
    stages = stages or Stages(solve_stages(job.settings.project))
    with stages("compile") as tick:  # its own stage, kept out of bake_seconds
        warm_up(tick)
    start = time.perf_counter()
    ref = job.reference
    frame_time = float(ref.times[1] - ref.times[0])
    with stages("body") as tick:
        fields = body_fields(job.rig, job.settings.sdf_spacing, job.settings.sdf_margin, job.grid_cache, tick)
        kinds = capsule_pair_kinds(job.rig.model, job.rig.parts)
        held = held_overlaps(job.rig.model, ref.rotations, ref.base_positions, ref.base_rotations, frame_time)
        held_record, held_warnings = held_overlap_record(job.rig.model, kinds, held)
        model = without_held_overlaps(job.rig.model, held)
        samples = tuple(FaceSamples(f.grid, f.bones, f.local, f.radius) for f in fields)
        intended = intended_contacts(model, ref, fields, job.contacts, frame_time)
    settings, target = job.settings, None
    invalid = "invalid physics setting: "  # the solver's checks, reported at the add-on boundary
    # The solver's matrices are small (n_dof ≈ 100): BLAS threads only add synchronisation,
    # and batch workers already use one core each.
    with threadpool_limits(1, user_api="blas"):
        if settings.project:
            # Fit, then project: the simulation tracks the fitted reference minus its
            # interpenetration (the target), already fitted, so it is not fitted again.
            with stages("fit"), from_solver(invalid):
                fitted = fit_reference(ref, settings.fit_tolerance_deg, settings.spike_deg) \
                    if settings.smooth_reference else ref
            with stages("projection") as tick, from_solver(invalid):
                target = project(model, fields, fitted, intended, progress=tick)
            track = replace(fitted, rotations=target.rotations)
            settings = replace(settings, smooth_reference=False)
        else:
            track = ref
        with stages("simulation") as tick:
            with from_solver(invalid):
                result = simulate(model, track, settings, fields=samples, intended=intended, progress=tick)
            # Only a tracked pose deeper than the zero level pushes the bake off it.
            track_touching = bone_contacts(model, track.rotations, ref.base_positions, ref.base_rotations, fields,
                                           tolerance=0.0)
            rotations, diverged = guard(model, track.rotations, result.rotations, ref.base_positions,
                                        ref.base_rotations, track_touching, frame_time)
            result = with_pass_through(result, rotations, diverged)
            if job.contacts:
                # A contact the retarget made is the motion's: its chains keep the reference's
                # pose there, at the distance the retarget put the parts (solver.physics.guard.contact_hold).
                hold = contact_hold(model, len(ref.rotations),
                                    [(c["index"], c["start"], c["stop"]) for c in job.contacts], frame_time, HOLD_RAMP_S)
                result = replace(result, rotations=smooth_ramps(model, ref, fields, result.rotations, hold, intended,
                                                                kinds, job.rig.fingertips))
    with stages("metrics"):
        seconds = time.perf_counter() - start
        cmp = compare(model, ref, result, tips=job.rig.fingertips, fields=fields, pair_kinds=kinds, intended=intended)
        err = np.degrees(quat.angle_between(ref.rotations, result.rotations))  # (F, n) deg
        record = metrics_record(cmp, result, ref, seconds, float(np.sqrt(np.mean(err ** 2))))
        for side, rotations in (("reference", ref.rotations), ("baked", result.rotations)):
            depth = contact_depths(model, rotations, ref.base_positions, ref.base_rotations, fields, kinds, intended)
            per_frame = np.max(np.stack(list(depth.values())), axis=0)
            record[side]["per_frame_penetration_mm"] = np.round(1e3 * per_frame, 4).tolist()
            record[side]["penetration_max_mm_by_kind"] = {k: float(1e3 * d.max()) for k, d in depth.items()}
        record["baked"]["per_frame_tracking_deg"] = np.round(np.sqrt(np.mean(err ** 2, axis=1)), 4).tolist()
        record["contact_pairs"] = contact_pairs(job.rig, kinds, fields)
        record["held_overlap_mm"] = held_record
        record["contacts_honoured"] = [{k: c[k] for k in ("name", "parts", "frames", "bones")} for c in job.contacts]
        record["limits_widened"] = list(job.rig.limits_widened)
        record["hinges_freed"] = list(job.rig.hinges_freed)
        touching = bone_contacts(model, result.rotations, ref.base_positions, ref.base_rotations, fields)
        world = world_error_deg(model, ref.rotations, result.rotations, ref.base_positions, ref.base_rotations)
        record["baked"].update(world_error_record(world))
        tracked = "the reference"
        if target is not None:
            # The bake is warned about where it leaves what it tracks, the target.
            tracked = "the target"
            record["target"] = target.record(job.rig.bone_names, job.frames)
            world = world_error_deg(model, track.rotations, result.rotations, ref.base_positions, ref.base_rotations)
            err = np.degrees(quat.angle_between(track.rotations, result.rotations))
        record["warnings"] = (list(job.rig.warnings) + held_warnings + divergence_warnings(job.rig, diverged)
                              + world_error_warnings(job.rig, world, job.frames, tracked)
                              + deviation_warnings(job.rig, result, err, touching, frame_time, job.frames, tracked)
                              + outcome_warnings(record))
        return Solved(result.rotations, record, None if target is None else target.rotations)


def write(scene, job: BakeJob, solved: Solved, output="ASSIGN", key_tolerance_deg=0.0, measure_skin=True, stages=None):
    """Write the baked action and hook it up to the armature; returns the new Action.

    output: 'ASSIGN' (the new action becomes the armature's action) or 'NLA' (reference
    and baked actions stacked as NLA tracks, baked on top). key_tolerance_deg > 0 thins
    the keys while staying within that angle of the every-frame bake (exactly so for
    bones in quaternion mode; Euler curves interpolate their angles instead).
    measure_skin: measure the penetration of the reference and of the written keys on
    the evaluated skin (skin_metrics.measure) into solved.metrics' sides, its warnings
    appended to solved.metrics["warnings"]. stages: progress.Stages holding WRITE_STAGES
    (None: untimed): 'writing' and 'skin_check' are timed and reported there.
    """
    import bpy

    stages = stages or Stages(WRITE_STAGES)
    ob = bpy.data.objects[job.armature_name]
    ref = bpy.data.actions[job.action_name]
    new = ref.copy()
    try:
        with stages("writing"):
            new.name = ref.name + SUFFIX
            if new.asset_data:
                new.asset_clear()
            new.use_fake_user = False
            slot = new.slots[job.slot_identifier]
            bag = keys.channelbag(new, slot)
            simulated = set(job.rig.bone_names)
            for fc in [fc for fc in bag.fcurves if _bone_of(fc.data_path) in simulated
                       and ".rotation_" in fc.data_path]:
                bag.fcurves.remove(fc)
            rotations = quat.make_continuous(solved.rotations)
            keys.write_rotations(ob, new, slot, job.frames, job.rig.bone_names, rotations, key_tolerance_deg)
        if measure_skin:
            with stages("skin_check") as tick:
                skin, warnings = skin_metrics.measure(scene, ob, job, ref, new, job.slot_identifier, tick)
                for side in (skin or {}):
                    solved.metrics.setdefault(side, {}).update(skin[side])
                solved.metrics.setdefault("warnings", []).extend(warnings)
        with stages("writing"):
            new.signsim.reference_action = ref
            new.signsim.bake_metrics = json.dumps(solved.metrics, sort_keys=True)
            new.signsim.bake_settings = json.dumps(job.settings_record, sort_keys=True)
            _write_metric_curves(ob, new, slot, job.frames, solved.metrics)
            _hook_up(ob, ref, new, slot, output)
    except Exception:
        bpy.data.actions.remove(new)
        raise
    return new


# Per-frame metrics as F-curves on custom properties of the armature object, so the
# Graph Editor plots them against the timeline: (property, metrics side, per-frame key).
METRIC_CURVES = (("signsim_penetration_mm", "baked", "per_frame_penetration_mm"),
                 ("signsim_reference_penetration_mm", "reference", "per_frame_penetration_mm"),
                 ("signsim_tracking_deg", "baked", "per_frame_tracking_deg"),
                 ("signsim_skin_penetration_mm", "baked", "per_frame_skin_penetration_mm"),
                 ("signsim_reference_skin_penetration_mm", "reference", "per_frame_skin_penetration_mm"))


def _write_metric_curves(ob, action, slot, frames, metrics):
    curves = []
    for prop, side, key in METRIC_CURVES:
        values = metrics.get(side, {}).get(key)
        if values is None:
            continue
        if prop not in ob:
            ob[prop] = 0.0
        curves.append((f'["{prop}"]', 0, "SignSim metrics", np.asarray(values, dtype=float)))
    keys.write_curves(action, slot, curves, frames)


def _hook_up(ob, ref, new, slot, output):
    previous = compat.assigned_action(ob)
    if output == 'ASSIGN':
        compat.assign_action(ob, new, slot)
        compat.keep_unused(previous)
        return
    ad = ob.animation_data or ob.animation_data_create()
    for name, act in ((TRACK_REFERENCE, ref), (TRACK_PHYSICS, new)):
        track = ad.nla_tracks.get(name) or ad.nla_tracks.new()
        track.name = name
        for strip in list(track.strips):
            track.strips.remove(strip)
        strip = track.strips.new(act.name, int(act.frame_range[0]), act)
        strip.action_slot = act.slots[slot.identifier]
    ad.action = None
    compat.keep_unused(previous)


def _bone_of(data_path):
    if not data_path.startswith('pose.bones["'):
        return None
    return data_path[len('pose.bones["'):].split('"]', 1)[0].replace('\\"', '"').replace("\\\\", "\\")


def reference_of(ob):
    """The action a bake of `ob` tracks: the assigned action, or — when `ob` shows a bake
    (assigned, or on the NLA physics track) — that bake's reference, so re-baking with new
    settings starts again from the original motion. None without animation."""
    ad = ob.animation_data
    if ad is None:
        return None
    track = ad.nla_tracks.get(TRACK_PHYSICS)
    shown = ad.action or (track.strips[0].action if track is not None and len(track.strips) else None)
    if shown is not None and shown.signsim.reference_action is not None:
        return shown.signsim.reference_action
    return shown


def _slot_for(ob, action):
    ad = ob.animation_data
    if ad and ad.action == action and ad.action_slot:
        return ad.action_slot
    if ad and ad.action_slot and ad.action_slot.identifier in action.slots:
        return action.slots[ad.action_slot.identifier]  # a bake's reference shares its slot
    slots = [s for s in action.slots if s.target_id_type in ('OBJECT', 'UNSPECIFIED')]
    if not slots:
        raise SignSimError(f"action '{action.name}' has no object slot")
    return slots[0]


def _schedule(ob, action, slot, frames):
    """The animator's contact-stiffness multiplier per frame (F,), or None when unkeyed."""
    bag = keys.channelbag(action, slot)
    fc = bag.fcurves.find("signsim.physics.contact_multiplier") if bag else None
    if fc is None:
        value = ob.signsim.physics.contact_multiplier
        return None if value == 1.0 else np.full(len(frames), value)
    values = np.array([fc.evaluate(f) for f in frames])
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise SignSimError("the contact stiffness schedule must stay positive")
    return values


def public_metrics(metrics) -> dict:
    """The metrics record without per-frame arrays (what the CLI prints and exports)."""
    return {key: {k: v for k, v in m.items() if not k.startswith("per_frame_")}
            if key in ("reference", "baked") else m for key, m in metrics.items()}


class BakeCancelled(Exception):
    """Raised inside the solve when the user cancels; nothing has been written."""


class BakeWorker:
    """The solve of one BakeJob in a background thread, for the modal operator.

    The solver never touches bpy, so it may run off the main thread; the main thread polls
    `fraction` (of the operator's bar, operator_stages), `stage` (its name) and
    `stage_fraction` (of that stage, 0–1), may call `cancel()`, and calls `write` with
    `stages` itself once `done` is set and `error` is None. A cancelled worker ends with
    error = BakeCancelled and no result.
    """

    def __init__(self, job: BakeJob):
        import threading
        self.job = job
        self.stages = operator_stages(job, self._progress)
        self.fraction = self.stage_fraction = 0.0
        self.stage = ""
        self.result = None
        self.error = None
        self._cancel = threading.Event()
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="signsim-bake", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def cancel(self):
        self._cancel.set()

    def join(self, timeout=None):
        self._thread.join(timeout)

    def _progress(self, stage, k, n, fraction):
        if self._cancel.is_set():
            raise BakeCancelled("bake cancelled")
        self.stage, self.stage_fraction, self.fraction = stage, fraction, overall(k, n, fraction)

    def _run(self):
        try:
            self.result = solve(self.job, self.stages)
        except Exception as ex:  # handed to the main thread, which reports it
            self.error = ex
        finally:
            self.done.set()

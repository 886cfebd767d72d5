"""Compose: splice clips into ONE new action on a rig, with blend windows, root
alignment, additive layers and a quality check of every seam (numerics: solver/compose/composition.py).

Each clip (a library clip name, a mocap file, or an action of the open file that keys the
rig's bones) is brought onto the rig first: library clips and mocap files through
retarget.api.source_clip + retarget.api.transfer_clip (arrays only, no intermediate action), trimmed
to its in/out frames (the clip's own frames). An action of the open file is read as it is.

Arrays given to the solver (target bones in data.bones order, B bones):
  rotations (F, B, 4)  local (basis) quaternions; for root bones (no parent) the rotation
                       in armature space q_L ⊗ q_B, so alignment turns them about Z
  positions (F, P, 3)  root bones: head in armature space L_rot · t_B + head_L (m); other
                       bones with location keys: their basis location
Armature space is the floor frame (the armature object is assumed upright, Z up). After
composing, root channels go back to basis, the layers are applied on basis rotations, and
the keys are written with retarget's bulk writer (every frame, LINEAR, one slot).

Layers: q = q_base ⊗ (q_layer ⊗ q_ref⁻¹)^w on the masked bones (q_ref: the layer's first
frame); w per frame = the layer's weight: a number, or the animatable property
Object.signsim.compose.layers[i].weight read from its F-curve in the rig's current action
(copied into the new action so it keeps playing there), 0 outside the layer's frames.

The new action gets Action.signsim.compose_report (JSON: clips, seams, layers). Sources are
never modified; on any error the source skeletons are removed and no action is left.
"""
import json
import os
from dataclasses import dataclass

import bpy
import numpy as np

from .. import compat, files
from ...solver.compose import composition
from ...solver.core import quat
from ...solver.retarget import bonemap
from ...solver.retarget import transfer_math
from ..library import api as library
from ..retarget import api as retarget_api
from .. import keys as keyio
from ..errors import INFO, WARNING, BadOption, SignSimError, from_solver, silent
from ..progress import Stages, as_stages

CURVES = composition.CURVES  # blend curve names, for the CLI's choices
COMPOSE_STAGES = ("clips", "composing")  # the stages compose() runs (the operator's bar), in order
STAGES = ("reading", *COMPOSE_STAGES, "writing")  # compose_file's, in order (progress.Stages)

WEIGHT_PATH = "signsim.compose.layers[{}].weight"


class ClipSpec:
    """One clip of the sequence and the seam into it: clip (str), trim (in, out) in the
    clip's own frames (None: its start/end), window (frames; None: the suggested one),
    curve ('linear', 'smoothstep', 'smootherstep')."""

    def __init__(self, clip, trim_in=None, trim_out=None, window=None, curve="smoothstep"):
        self.clip, self.trim_in, self.trim_out = clip, trim_in, trim_out
        self.window, self.curve = window, curve


class LayerSpec:
    """An additive layer: clip (str), bones (names the layer may change; empty: all),
    start (frame offset in the composition, 0 = its first frame), weight (number, (F,)
    array, or None: Object.signsim.compose.layers[index].weight and its F-curve)."""

    def __init__(self, clip, bones=(), start=0, weight=None, index=0):
        self.clip, self.bones, self.start, self.weight, self.index = clip, list(bones), int(start), weight, index


# ------------------------------------------------------------------------------ reading

def _bones(target):
    return [b.name for b in target.data.bones]


def _rest_quats(target):
    rest = retarget_api.rest_matrices(target)
    return rest, quat.from_matrix(rest[:, :3, :3])


def _keys_from_action(action, target, frame_range=None):
    """{"rot", "loc"} arrays of an action of the open file that keys target's pose bones,
    evaluated at every frame of frame_range (default: its keyed range) by keys.sample_pose
    (bones it does not key keep their current pose); "loc" only for bones with location
    F-curves."""
    slot = next((s for s in action.slots if s.target_id_type == 'OBJECT'), None)
    bag = keyio.channelbag(action, slot) if slot is not None else None
    paths = {fc.data_path for fc in bag.fcurves} if bag is not None else set()
    names = _bones(target)
    if not any(keyio.bone_path(n, p) in paths for n in names
               for p in ("rotation_quaternion", "rotation_euler", "rotation_axis_angle", "location")):
        raise SignSimError(f"action '{action.name}' keys no bone of '{target.name}'")
    first, last = frame_range or keyio.keyed_frame_range(action, slot)
    frames = np.arange(int(round(first)), int(round(last)) + 1, dtype=float)
    pose = keyio.sample_pose(target, action, slot, names, frames)
    return {"rot": {n: pose.rotations[:, j] for j, n in enumerate(names)},
            "loc": {n: pose.locations[:, j] for j, n in enumerate(names) if keyio.bone_path(n, "location") in paths}}


def _clip_keys(spec, target, library_path, bone_map, maps, report, fps="rig", contacts=False):
    """({"rot", "loc"} arrays of one clip on target (see the module docstring), keyed at the
    scene's rate; its contacts). fps (retarget_api.check_fps; "rig": the scene's rate as it
    is) sets the scene's rate from this clip first (retarget_api.set_scene_rate); an action
    of the rig file is keyed at the scene's rate, which it keeps (another rate asked:
    SignSimError). With contacts, a library clip or mocap file gets retarget's contact pass
    (retarget_api.keep_contacts, its warnings prefixed with the clip's name): the contacts
    in their stored form with "frames" and "influence" counted from the clip's first frame
    (0); otherwise, and for an action of the rig file, no contacts ([])."""
    clip = spec.clip
    if not retarget_api.is_clip_file(clip) and clip in bpy.data.actions:
        action = bpy.data.actions[clip]
        scene = bpy.context.scene
        rate = keyio.scene_fps(scene)
        if fps not in (None, "rig") and abs(fps - rate) > 1e-6 * rate:
            raise SignSimError(f"--fps {fps:g}: the first clip '{clip}' is an action of the rig file, keyed "
                               f"at its {rate:g} fps")
        first, last = action.frame_range
        return _keys_from_action(action, target, _trim(spec, first, last)), []
    with retarget_api.source_clip(clip, library_path, report=report) as src:
        first, last = src.action.frame_range
        skel = src.armature
        missing = [] if bone_map is None else [s for s in bone_map.as_dict().values() if s not in skel.data.bones]
        bm = bone_map if bone_map is not None and not missing else None
        if missing:
            report(WARNING, f"{os.path.basename(clip)}: the bone map names source bone(s) "
                   f"{', '.join(missing[:4])} this clip does not have: the map is not used for it (bones mapped "
                   f"automatically)")
        if bm is None:
            key = tuple(b.name for b in skel.data.bones)
            bm = maps.get(key) or retarget_api.auto_map(skel, target)
            maps[key] = bm
        scene = bpy.context.scene
        retarget_api.set_scene_rate(scene, fps, src.fps, report)
        resample = keyio.scene_fps(scene) / float(src.fps or keyio.scene_fps(scene))
        res = retarget_api.transfer_clip(skel, target, bm, source_fps=src.fps, frame_range=_trim(spec, first, last, resample),
                                report=report)
        if not contacts:
            return res.keys, []
        name = os.path.basename(clip)
        found = retarget_api.keep_contacts(skel, target, res, lambda level, message: report(level, f"{name}: {message}"))
        return res.keys, _shifted(found, -res.frames[0])


def _shifted(contacts, by):
    """contacts (stored form) with their "frames" and "influence" moved by `by` frames."""
    return [{**c, "frames": [f + by for f in c["frames"]], "influence": [f + by for f in c["influence"]]}
            for c in contacts]


def _kept_span(contacts):
    """(first, last) frame index of a clip's kept contacts (the frames its seams leave as
    they are), or None."""
    kept = [c["frames"] for c in contacts if "skipped" not in c]
    return (int(round(min(f[0] for f in kept))), int(round(max(f[1] for f in kept)))) if kept else None


def _trim(spec, first, last, resample=1.0):
    """(in, out) frames of a clip spanning first … last, checked: a trim outside the clip,
    an out not after its in, or a clip shorter than 3 frames once resampled (resample:
    scene fps / the clip's fps) is refused."""
    a = first if not spec.trim_in else float(spec.trim_in)
    b = last if not spec.trim_out else float(spec.trim_out)
    if (spec.trim_in or spec.trim_out) and not a < b:
        raise SignSimError(f"{spec.clip}: trim {a:g}–{b:g}: the out frame must come after the in frame")
    if not (first <= a < b <= last) and (spec.trim_in or spec.trim_out):
        raise SignSimError(f"{spec.clip}: trim {a:g}–{b:g} is not inside the clip's frames {first:g}–{last:g}")
    n = int(np.floor((b - a) * resample + 1e-6)) + 1
    if n < 3:
        at = f" at the scene's rate" if resample != 1.0 else ""
        raise SignSimError(f"{spec.clip}: {'the trim keeps' if spec.trim_in or spec.trim_out else 'the clip has'} "
                           f"{n} frame(s){at}; composing needs at least 3")
    return a, b


def _frames_of(keys):
    return len(next(iter(keys["rot"].values()))) if keys["rot"] else len(next(iter(keys["loc"].values())))


def _basis_rotations(keys, names):
    """(F, B, 4) basis quaternions of keys for bones `names` (identity where not keyed)."""
    rot = np.tile(quat.IDENTITY, (_frames_of(keys), len(names), 1))
    for i, name in enumerate(names):
        if name in keys["rot"]:
            rot[:, i] = keys["rot"][name]
    return rot


def _metres_per_unit(target):
    """Metres in one of target's armature units: its object scale times the scene's unit
    scale (UnitSettings.scale_length). The solver works in metres whatever the rig's
    units, so a centimetre rig gets the same seams, floor and search as a metre rig."""
    m = np.array(target.matrix_world)
    return float(np.linalg.norm(m[:3, 0])) * float(bpy.context.scene.unit_settings.scale_length)


def _to_track(keys, target, channels):
    """solver Track of keys: rotations (F, B, 4), positions (F, P, 3) m for `channels`
    (root bones first, then bones with location keys), roots in armature space."""
    names = _bones(target)
    n = _frames_of(keys)
    rest, q_rest = _rest_quats(target)
    rot = _basis_rotations(keys, names)
    pos = np.zeros((n, len(channels), 3))
    for c, name in enumerate(channels):
        b = names.index(name)
        t = keys["loc"].get(name, np.zeros((n, 3)))
        if target.data.bones[name].parent is None:
            pos[:, c] = t @ rest[b, :3, :3].T + rest[b, :3, 3]
        else:
            pos[:, c] = t
    for b in _root_indices(target):
        rot[:, b] = quat.mul(q_rest[b], rot[:, b])
    return composition.Track(rot, pos * _metres_per_unit(target))


def _from_track(track, target, channels):
    """Basis rotations (F, B, 4) and {bone: (F, 3)} locations of a composed Track."""
    rest, q_rest = _rest_quats(target)
    names = _bones(target)
    rot = track.rotations.copy()
    for b in _root_indices(target):
        rot[:, b] = quat.mul(quat.conj(q_rest[b]), rot[:, b])
    loc = {}
    unit = _metres_per_unit(target)
    for c, name in enumerate(channels):
        b = names.index(name)
        p = track.positions[:, c] / unit
        loc[name] = (p - rest[b, :3, 3]) @ rest[b, :3, :3] if target.data.bones[name].parent is None else p
    return quat.make_continuous(rot), loc


def _root_indices(target):
    return [i for i, b in enumerate(target.data.bones) if b.parent is None]


def _main_root(target):
    roots = _root_indices(target)
    return max(roots, key=lambda i: len(target.data.bones[i].children_recursive))


# ------------------------------------------------------------------------------ layers

def _layer_weight(target, spec, frames):
    """(F,) weight of a layer at the composed frames (see LayerSpec)."""
    if spec.weight is not None:
        return np.broadcast_to(np.asarray(spec.weight, dtype=float), frames.shape).copy()
    layers = target.signsim.compose.layers
    const = layers[spec.index].weight if spec.index < len(layers) else 1.0
    fc = _weight_curve(target, spec.index)
    if fc is None:
        return np.full(frames.shape, const)
    return np.array([fc.evaluate(f) for f in frames])


def _weight_curve(target, index):
    ad = target.animation_data
    if ad is None or ad.action is None:
        return None
    bag = compat.assigned_channelbag(ad)
    return bag.fcurves.find(WEIGHT_PATH.format(index)) if bag is not None else None


def _copy_weight_curves(target, old_action, old_handle, new_action):
    """Layer weight F-curves of the previous action → the new one (object channels)."""
    if old_action is None or old_action == new_action:
        return
    slot = next((s for s in old_action.slots if s.handle == old_handle), None)
    bag = keyio.channelbag(old_action, slot) if slot is not None else None
    if bag is None:
        return
    new_bag = compat.ensure_channelbag(new_action, new_action.slots[0])
    for fc in bag.fcurves:
        if fc.data_path.startswith("signsim.compose.layers["):
            copy = new_bag.fcurves.new(fc.data_path, index=fc.array_index)
            n = len(fc.keyframe_points)
            co = np.empty(2 * n)
            fc.keyframe_points.foreach_get("co", co)
            copy.keyframe_points.add(n)
            copy.keyframe_points.foreach_set("co", co)
            interp = np.empty(n, dtype=np.int32)
            fc.keyframe_points.foreach_get("interpolation", interp)
            copy.keyframe_points.foreach_set("interpolation", interp)
            copy.update()


# ------------------------------------------------------------------------------ skeleton

def _rig(target, channels, keep_height):
    """solver Rig of target: root channels, skeleton (parents, armature-space rest matrices,
    bone lengths) and the legs (thigh, shin, foot, toes) from bonemap.analyse (none: a rig
    without two legs, then no floor or feet). A foot whose bone is not the shin's child
    (an IK foot, like the robot's Foot.L/R parented to the root) still gives the floor,
    plants and the checks of what the feet do; such feet are not held (feet_carried False:
    the leg IK of hold_feet moves the shin, which does not carry them)."""
    names = _bones(target)
    roots = _root_indices(target)
    main = _main_root(target)
    parents = [names.index(b.parent.name) if b.parent else -1 for b in target.data.bones]
    legs = []
    try:
        with from_solver():
            sk = retarget_api.skeleton(target)
            body = bonemap.analyse(sk)
            ik_feet = transfer_math.detached_feet(sk, body, sk.heads)
        for side in bonemap.SIDES:
            parts = [body.limbs.get((side, p), [None])[0] for p in ("thigh", "shin")]
            parts.append(ik_feet[side] if side in ik_feet else body.limbs.get((side, "foot"), [None])[0])
            toes = tuple(body.limbs.get((side, "toe"), [])[:1])
            if None not in parts and parents[parts[1]] == parts[0]:
                legs.append((*parts, toes))
    except SignSimError:
        legs = []
    unit = _metres_per_unit(target)
    rest = retarget_api.rest_matrices(target)
    rest[:, :3, 3] *= unit
    return composition.Rig(root=main, root_position=channels.index(names[main]), floor_bones=roots,
                  floor_positions=list(range(len(roots))), keep_height=keep_height,
                  located={names.index(n): c for c, n in enumerate(channels)}, parents=parents,
                  rest=rest, lengths=[b.length * unit for b in target.data.bones],
                  legs=legs if len(legs) == 2 else (),
                  feet_carried=all(parents[foot] == shin for _thigh, shin, foot, _toes in legs))


MARKER = "SignSim seam "      # timeline markers of flagged seams start with this


def _mark_seams(scene, seams):
    """Timeline markers at the flagged seams (previous SignSim seam markers removed)."""
    for m in [m for m in scene.timeline_markers if m.name.startswith(MARKER)]:
        scene.timeline_markers.remove(m)
    for s in seams:
        if s["flagged"]:
            bone = s["worst"][0]["bone"] if s["worst"] else ""
            scene.timeline_markers.new(f"{MARKER}{s['index']}: {bone}", frame=int(s["frame"]))


# ------------------------------------------------------------------------------ compose

def compose(target, clips, layers=(), *, library_path=None, bone_map=None, threshold=None,
            max_window=None, search=composition.SEARCH_TIME, keep_height=False, foot_lock=True, action_name=None,
            fps="rig", contacts=False, report=None, progress=None):
    """Compose clips (ClipSpec, in order) and layers (LayerSpec) into one new action on
    target (an armature object), assigned with its own slot; flagged seams get timeline
    markers. Returns a JSON-able dict:
    {"armature", "action", "frames": [first, last], "fps", "threshold" (the one given, or
     None), "foot_lock" (whether feet were held: asked for and the rig has two legs),
     "clips": [{"clip", "frames"}], "layers": [{"clip", "bones", "start", "weight" (the
     number used, or {"min", "max"} over the layer's frames for a keyed weight)}],
     "seams": [{"index", "frame" (first frame of the window), "window", "suggested", "found",
                "curve", "cut" [A frames, B frames], "transition" [A's end, B's start: the
                matched frames, in the clips' own frames], "D" (rad/s, at the chosen points),
                "D_ends" (rad/s, at the clips' ends), "match" and "match_ends" (the transition
                search's feature distance there and at the ends; None without a search),
                "flagged", "failures", "worst" [{"bone", "jump", "jump_limit" (rad/s),
                "step_deg", "step_limit_deg", "own_step_deg" (the clips' turn there)}],
                "max_jump" (rad/s), "max_step_deg", "step_excess_deg" (largest one-frame turn
                beyond 20° and the clips' own turn at that frame), "root_step_m", "root_jump" (m/s),
                "heading_deg", "root_offset_m",
                "plants": [{"bone" (foot), "frames": [first, last], "held" (False: out of the
                            hold's reach, see solver.compose.composition.hold_feet), "step" (it steps to
                            where the next clip has it down instead), "slides" (neither: the
                            foot slides there and the seam fails 'plant'), "correction_m"}],
                            "skating": [{"bone", "distance_m", "own_m"}] (a foot the blend drags
                            along the floor in the window beyond the clips' own: 'plant'),
                "airborne": {"height_m", "own_m", "frames"} or None (both feet off the floor
                            higher than the clips there: 'plant'),
                "sinking": [{"bone", "depth_m", "own_m", "slide_m"}] (a foot pushed below the
                            floor more than the clips there: 'plant')}]}.
    The feet are checked on the output whether or not they were held (foot_lock).
    threshold: rad/s for every bone's velocity jump (None: each bone's own, see
    solver/compose/composition.py); max_window caps suggested windows (frames); search: seconds of
    each clip end the transition search may cut (0: blend at the clip ends).
    fps: the scene's frame rate (retarget_api.check_fps): "rig" keeps it (the operator),
    None takes the first clip's own rate (unless it is an action of the rig), a number sets
    it (fps); every clip is keyed at that rate, one of another rate resampled (warned).
    contacts (off by default here, the sidebar's compose; on for compose_files, the
    command's): keep each library clip's and mocap file's contacts on target's skin
    (retarget's contact pass, its warnings reported); no seam cuts or blends a clip's
    frames from its first kept contact to its last (composition.compose's keep); the result
    then has "contacts" (retarget's list: "frames" in scene frames, "parts", "kind",
    "gap_mm", "penetration_mm", "spot_error_mm" or "skipped"), stored on the action as
    retarget stores them, with timeline markers.
    progress: None, a progress(stage, k, n, fraction) callable (signsim_addon/progress.py)
    over COMPOSE_STAGES ('clips' ticks after each clip read and retargeted, 'composing' is
    the seams' search and checks) or a progress.Stages holding them.
    Raises SignSimError for unusable input (nothing is written then).
    """
    report = report or silent
    stages = as_stages(progress, COMPOSE_STAGES)
    if target is None or target.type != 'ARMATURE':
        raise SignSimError("compose needs an armature to write the action on")
    clips = [c if isinstance(c, ClipSpec) else ClipSpec(c) for c in clips]
    if not clips:
        raise SignSimError("no clips to compose")
    for c in clips:
        if c.curve not in composition.CURVES:
            raise SignSimError(f"unknown blend curve '{c.curve}' (choose {', '.join(composition.CURVES)})")
    if threshold is not None and not threshold > 0:
        raise SignSimError(f"the threshold must be a positive velocity jump in rad/s, not {threshold}")
    if search is not None and search < 0:
        raise SignSimError(f"the transition search must be 0 s or more, not {search}")
    names = _bones(target)
    for layer in layers:
        unknown = [b for b in layer.bones if b not in target.data.bones]
        if unknown:
            raise SignSimError(f"layer '{layer.clip}': '{target.name}' has no bone {', '.join(unknown[:4])}")
        if layer.start < 0:
            raise SignSimError(f"layer '{layer.clip}': its start {layer.start} is before the composition's first "
                               f"frame (0 or more, counted from the first frame)")
    scene = bpy.context.scene
    maps = {}
    keys, found, layer_keys = [], [], []
    with stages("clips") as tick:
        for i, c in enumerate(clips):
            k, f = _clip_keys(c, target, library_path, bone_map, maps, report, fps if i == 0 else "rig", contacts)
            keys.append(k)
            found.append(f)
            tick(len(keys) / (len(clips) + len(layers)))
        for layer in layers:
            layer_keys.append(_clip_keys(ClipSpec(layer.clip), target, library_path, bone_map, maps, report)[0])
            tick((len(keys) + len(layer_keys)) / (len(clips) + len(layers)))
    fps = keyio.scene_fps(scene)

    roots = [names[i] for i in _root_indices(target)]
    located = sorted({n for k in keys for n in k["loc"]} - set(roots), key=names.index)
    channels = roots + located
    tracks = [_to_track(k, target, channels) for k in keys]
    short = [(c.clip, len(t)) for c, t in zip(clips, tracks) if len(t) < 3]
    if short:
        raise SignSimError(f"clip '{short[0][0]}' has {short[0][1]} frame(s) after trimming; composing needs "
                           f"at least 3")
    rig = _rig(target, channels, keep_height)
    with stages("composing"):
        try:
            infos = [composition.ClipInfo(t, fps, rig) for t in tracks]
            track, seams, planted = composition.compose(
                tracks, fps, windows=[c.window for c in clips[1:]], kinds=[c.curve for c in clips[1:]], rig=rig,
                threshold=threshold, max_window=max_window, search=search or 0.0, names=names, infos=infos,
                keep=[_kept_span(f) for f in found])
        except ValueError as ex:
            raise SignSimError(str(ex)) from None
        plants = []
        held = bool(foot_lock and rig.has_legs and rig.feet_carried)
        if foot_lock and rig.has_legs and not rig.feet_carried:
            report(WARNING, f"the feet of '{target.name}' are not children of its shins (IK feet): they are not held "
                   f"at seams, only checked")
        if held:
            track, plants = composition.hold_feet(track, rig, fps, seams, planted, infos[0].floor)
        if rig.has_legs:      # what the feet do is checked on the output, the lock on or off
            composition.recheck(track, rig, fps, seams, names, infos[0].floor)
    late = [l for l in layers if l.start >= len(track)]
    if late:
        raise SignSimError(f"layer '{late[0].clip}': its start {late[0].start} is past the composition's last "
                           f"frame (it has {len(track)} frames, 0–{len(track) - 1}): the layer would never play")
    first_frame = float(scene.frame_start)
    frames = first_frame + np.arange(len(track), dtype=float)
    rot, loc = _from_track(track, target, channels)

    weights = []        # per layer: its weight, or the range of a keyed one (for the report)
    for i, layer in enumerate(layers):
        lrot = _basis_rotations(layer_keys[i], names)          # layers act on basis rotations
        n = len(frames)
        full = np.tile(lrot[:1], (n, 1, 1))
        lo, hi = min(layer.start, n), min(layer.start + len(lrot), n)
        full[lo:hi] = lrot[:hi - lo]
        full[hi:] = lrot[min(hi - lo, len(lrot) - 1)]
        weight = _layer_weight(target, layer, frames)
        used = weight[lo:hi] if hi > lo else weight
        weights.append(float(used[0]) if np.ptp(used) == 0 else
                       {"min": float(used.min()), "max": float(used.max())})
        weight[:lo] = 0.0
        weight[hi:] = 0.0
        mask = np.array([(not layer.bones) or n_ in layer.bones for n_ in names])
        rot = composition.apply_layer(rot, full, weight, mask=mask, reference=lrot[0])

    seam_out = []
    keep = ("index", "window", "suggested", "found", "curve", "cut", "transition", "D", "D_ends", "match",
            "match_ends", "flagged", "failures", "worst", "max_jump", "max_step_deg", "step_excess_deg",
            "root_step_m", "root_jump", "heading_deg", "root_offset_m")
    for s in seams:
        out = {k: s[k] for k in keep}
        out["frame"] = float(first_frame + s["start"])
        # a plant is held only where the output keeps the foot still (measured in recheck)
        slid = {k["leg"] for k in s.get("skating", ())} | {k["leg"] for k in s.get("sinking", ())}
        out["plants"] = [{"bone": names[rig.legs[p["leg"]][2]], "frames": [first_frame + f for f in p["frames"]],
                          "held": p["held"] and p["leg"] not in slid, "step": p["step"],
                          "slides": not ((p["held"] and p["leg"] not in slid) or p["step"]),
                          "correction_m": p["correction_m"]}
                         for p in plants if p["seam"] == s["index"]]
        out["skating"] = [{"bone": names[rig.legs[k["leg"]][2]], "distance_m": k["distance_m"], "own_m": k["own_m"]}
                          for k in s.get("skating", ())]
        out["sinking"] = [{"bone": names[rig.legs[k["leg"]][2]], "depth_m": k["depth_m"], "own_m": k["own_m"],
                           "slide_m": k["slide_m"]} for k in s.get("sinking", ())]
        for k in out["sinking"]:
            report(WARNING, f"seam {s['index']}: {k['bone']} sinks {k['depth_m'] * 100:.1f} cm below the floor "
                   f"(the clips there: {k['own_m'] * 100:.1f} cm) and moves {k['slide_m'] * 100:.0f} cm under it")
        for k in out["skating"]:
            report(WARNING, f"seam {s['index']}: {k['bone']} skates {k['distance_m'] * 100:.0f} cm along the floor "
                   f"in the window (the clips there: {k['own_m'] * 100:.0f} cm)")
        air = s.get("airborne")
        out["airborne"] = None if air is None else {
            "height_m": air["height_m"], "own_m": air["own_m"], "frames": [first_frame + f for f in air["frames"]]}
        if air is not None:
            report(WARNING, f"seam {s['index']}: both feet leave the floor at frames {first_frame + air['frames'][0]:g}–"
                   f"{first_frame + air['frames'][1]:g}, up to {air['height_m'] * 100:.1f} cm (the clips there: "
                   f"{air['own_m'] * 100:.1f} cm): the body hops")
        for p in out["plants"]:
            if p["step"]:
                report(INFO, f"seam {s['index']}: {p['bone']} stands {p['correction_m'] * 100:.0f} cm from its "
                       f"spot in the next clip: it steps there")
            elif p["slides"]:
                report(WARNING, f"seam {s['index']}: {p['bone']} planted at frames {p['frames'][0]:g}–"
                       f"{p['frames'][1]:g} slides: holding it would need {p['correction_m'] * 100:.0f} cm, "
                       f"and no step the leg can make lands it where the next clip has it")
        seam_out.append(out)
        if s["flagged"]:
            worst = ", ".join(f"{w['bone']} {w['step_deg']:.0f}°/frame, {w['jump']:.1f} rad/s jump"
                              for w in s["worst"][:2])
            why = "" if s["found"] else " (no window up to half the clips passes)"
            report(WARNING, f"seam {s['index']} at frame {out['frame']:g} fails {'/'.join(s['failures'])} with a "
                   f"{s['window']}-frame window (suggested {s['suggested']}{why}); worst: {worst}")
    result = {
        "armature": target.name, "fps": fps, "threshold": threshold, "foot_lock": held,
        "frames": [float(frames[0]), float(frames[-1])],
        "clips": [{"clip": c.clip, "frames": len(t)} for c, t in zip(clips, tracks)],
        "layers": [{"clip": l.clip, "bones": l.bones, "start": l.start, "weight": w}
                   for l, w in zip(layers, weights)],
        "seams": seam_out,
    }
    old_action = target.animation_data.action if target.animation_data else None
    old_handle = compat.assigned_slot_handle(target)
    name = action_name or f"{target.name} composed"
    keyset = {"rot": {n_: rot[:, i] for i, n_ in enumerate(names)}, "loc": loc}
    action = retarget_api.write_action(target, keyset, frames, name)
    try:
        result["action"] = action.name
        if contacts:
            # clip i's frame 0 lands where its seam's window starts, less the frames it cut
            offsets = [0] + [s["start"] - s["cut"][1] for s in seams]
            retarget_api.store_contacts(action, [c for f, at in zip(found, offsets)
                                                 for c in _shifted(f, first_frame + at)])
            result["contacts"] = retarget_api.contact_summary(action)
        action.signsim.compose_report = json.dumps(result, sort_keys=True)
        _copy_weight_curves(target, old_action, old_handle, action)
    except Exception:
        compat.restore_action(target, old_action, old_handle)
        bpy.data.actions.remove(action)
        raise
    compat.keep_unused(old_action)
    _mark_seams(scene, seam_out)
    if contacts:
        retarget_api.mark_contacts(scene, action)
    report(INFO, f"composed {len(clips)} clips into '{action.name}' ({len(frames)} frames, "
           f"{sum(s['flagged'] for s in seam_out)} of {len(seam_out)} seams flagged)")
    return result


def specs_from_settings(target):
    """(ClipSpecs, LayerSpecs, threshold or None) of Object.signsim.compose (the panel's)."""
    st = target.signsim.compose
    clips = [ClipSpec(c.clip.strip(), c.trim_in or None, c.trim_out or None,
                      None if c.window < 0 else c.window, c.curve) for c in st.clips if c.clip.strip()]
    layers = [LayerSpec(l.clip.strip(), [b.strip() for b in l.bones.split(",") if b.strip()], l.start, None, i)
              for i, l in enumerate(st.layers) if l.clip.strip()]
    return clips, layers, (st.threshold or None)


def store_result(target, result):
    """Per-seam results of a compose onto the panel's clip list (the seam into clip i)."""
    st = target.signsim.compose
    items = [c for c in st.clips if c.clip.strip()]
    for item in items:
        item.suggested_window, item.velocity_jump, item.worst, item.flagged = -1, 0.0, "", False
    for seam in result["seams"]:
        item = items[seam["index"]]
        item.suggested_window = seam["suggested"]
        item.velocity_jump = seam["D"]
        # a hop shows first: both feet in the air is a seam fault no bone's turn names
        item.worst = ", ".join((["both feet in the air"] if seam.get("airborne") else [])
                               + [w["bone"] for w in seam["worst"]])
        item.flagged = seam["flagged"]


def flagged_seams(action):
    """The flagged seams stored on an action by compose (list of seam dicts)."""
    try:
        data = json.loads(action.signsim.compose_report or "{}")
    except ValueError:
        return []
    return [s for s in data.get("seams", []) if s.get("flagged")]


@dataclass(frozen=True, kw_only=True)
class ComposeRequest(files.FileRequest):
    """Compose clips onto the rig of a .blend file, written to a new .blend (the options of
    `signsim compose`; files.FileRequest's rig, out, armature): clips in order (library names, mocap files or actions of rig),
    windows/curves (None, one value, or one per seam), trims ("IN:OUT" per clip), layer
    (clip, comma-separated bones, start frame, weight), fps (retarget_api.check_fps: None,
    the first clip's own rate; "rig", the rig file's; or that rate in fps), contacts (keep
    the clips' contacts, compose's contacts; on by default)."""
    clips: tuple
    windows: tuple = None
    curves: tuple = None
    trims: tuple = None
    library: str = None
    bone_map: str = None
    threshold: float = None
    max_window: int = None
    search: float = composition.SEARCH_TIME
    keep_height: bool = False
    foot_lock: bool = True
    layer: str = None
    layer_bones: str = ""
    layer_start: int = 0
    layer_weight: float = 1.0
    fps: object = None
    contacts: bool = True


def _per_seam(values, n, what):
    if values is None:
        return [None] * n
    if len(values) == 1:
        return list(values) * n
    if len(values) != n:
        raise BadOption(f"--{what}: give one value or one per seam ({n})")
    return list(values)


def _trims(trims, n):
    if trims is None:
        return [(None, None)] * n
    if len(trims) != n:
        raise BadOption(f"--trim: give one IN:OUT per clip ({n})")
    out = []
    for t in trims:
        a, sep, b = t.partition(":")
        try:
            if not sep:
                raise ValueError
            out.append((int(a) if a.strip() else None, int(b) if b.strip() else None))
        except ValueError:
            raise BadOption(f"--trim: '{t}' is not IN:OUT (whole frames, either side may be empty)") from None
    return out


def _absolute(clip):
    return os.path.abspath(clip) if retarget_api.is_clip_file(clip) else clip


def compose_files(args: ComposeRequest, report=silent, progress=None) -> dict:
    """Compose the request's clips on its rig and save args.out; returns compose()'s result
    with "out". progress: None or a progress(stage, k, n, fraction) callable over STAGES
    (signsim_addon/progress.py). Raises SignSimError for bad options or paths (nothing is
    written then)."""
    stages = Stages(STAGES, progress)
    n = len(args.clips)
    if n < 1:
        raise BadOption("--clips: name at least one clip")
    fps = retarget_api.check_fps(args.fps)
    windows = _per_seam(args.windows, n - 1, "window")
    curves = _per_seam(args.curves, n - 1, "curve")
    trims = _trims(args.trims, n)
    if any(w is not None and w < 0 for w in windows):
        raise BadOption("--window: a window cannot be negative")
    if not 0.0 <= args.layer_weight <= 1.0:
        raise BadOption(f"--layer-weight: {args.layer_weight:g} is outside 0–1 (0: no layer, 1: all of it)")
    for clip in list(args.clips) + ([args.layer] if args.layer else []):
        if retarget_api.is_clip_file(clip) and not os.path.isfile(clip):
            raise retarget_api.clip_not_found(clip)
    library_file = library.library_file(args.library) if args.library else None
    if library_file and not os.path.isfile(library_file):
        raise SignSimError(f"no motion library at {library_file}")
    if library_file:
        library.check_not_scene_file(library_file)
    preset = retarget_api.load_preset(args.bone_map) if args.bone_map else None
    clip_files = [c for c in list(args.clips) + [args.layer] if c and retarget_api.is_clip_file(c)]
    files.check_files([args.rig, library_file, args.bone_map, *clip_files], [args.out])
    clips = [_absolute(c) for c in args.clips]
    layer = _absolute(args.layer) if args.layer else None

    with stages("reading"):
        target = retarget_api.open_rig(args.rig, args.armature)
    for clip in clips + ([layer] if layer else []):
        if not retarget_api.is_clip_file(clip) and clip not in bpy.data.actions:
            path = library_file or library.library_file(None)
            if not os.path.isfile(path):
                raise SignSimError(f"clip not found: {clip} (not a file nor an action of the rig, and no "
                                   f"motion library at {path})")
    specs = [ClipSpec(c, t_in, t_out, None if i == 0 else windows[i - 1],
                              "smoothstep" if i == 0 or curves[i - 1] is None else curves[i - 1])
             for i, (c, (t_in, t_out)) in enumerate(zip(clips, trims))]
    layers = []
    if layer:
        layers.append(LayerSpec(layer, [b.strip() for b in args.layer_bones.split(",") if b.strip()],
                                        args.layer_start, args.layer_weight))
    result = compose(target, specs, layers, library_path=library_file, bone_map=preset,
                             threshold=args.threshold, max_window=args.max_window, search=args.search,
                             keep_height=args.keep_height, foot_lock=args.foot_lock, fps=fps,
                             contacts=args.contacts, report=report,
                             progress=stages)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = int(result["frames"][0]), int(result["frames"][1])
    with stages("writing"):
        result["out"] = files.save_atomically(args.out)
    return result

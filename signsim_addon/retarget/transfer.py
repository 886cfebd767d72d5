"""Retargeting on armatures: a source armature's motion onto a target armature, as a new
action. The math (rest/pose matrices in, local rotations out) is solver/retarget/transfer_math.py; this
module reads the armatures, samples the source pose and writes the keys.
"""
import math
import os

import bpy
import numpy as np

from .. import compat
from ...solver.retarget import bonemap
from ...solver.retarget import transfer_math
from ..library import api as library
from .. import keys as key_io  # `keys` names the solved key arrays below
from ..errors import INFO, WARNING, SignSimError, did_you_mean, from_solver, silent


# ---------------------------------------------------------------------------------------
# reading armatures

def skeleton(ob, poses=None, unit=1.0):
    """bonemap.Skeleton of an armature object: names, parents, rest heads and tails in world
    space times unit (metres per scene unit), and posed heads poses (F, N, 3) when given
    (see motion_sample)."""
    bones = ob.data.bones
    index = {b.name: i for i, b in enumerate(bones)}
    heads = np.array([ob.matrix_world @ b.head_local for b in bones]) * unit
    tails = np.array([ob.matrix_world @ b.tail_local for b in bones]) * unit
    return bonemap.Skeleton([b.name for b in bones],
                            [index[b.parent.name] if b.parent else -1 for b in bones], heads,
                            tails, poses)


MOTION_SAMPLES = 12   # frames of a clip the skeleton analysis looks at


def motion_sample(ob, scene=None):
    """Posed world heads (F, N, 3) at MOTION_SAMPLES frames spread over ob's action, or
    None when ob has no action (the current frame is restored)."""
    ad = ob.animation_data
    if ad is None or ad.action is None:
        return None
    scene = scene or bpy.context.scene
    first, last = ad.action.frame_range
    saved = scene.frame_current
    try:
        mats, _tails = sample_pose(ob, np.linspace(first, last, MOTION_SAMPLES), scene)
    finally:
        scene.frame_set(saved)
    return mats[..., :3, 3]


def rest_matrices(ob):
    """Armature-space rest matrices (N, 4, 4) of ob's bones (bone.matrix_local)."""
    out = np.empty(len(ob.data.bones) * 16)
    ob.data.bones.foreach_get("matrix_local", out)
    return out.reshape(-1, 4, 4).transpose(0, 2, 1)


def _world(ob):
    return np.array(ob.matrix_world, dtype=float)


def sample_pose(ob, frames, scene):
    """Posed world matrices (F, N, 4, 4) and tails (F, N, 3) of ob's bones at frames.

    frames: float Blender frames (subframes allowed). Sets scene.frame_current (restored by
    the caller if it matters).
    """
    n = len(ob.pose.bones)
    buf = np.empty(n * 16)
    mats = np.empty((len(frames), n, 4, 4))
    lengths = np.array([b.length for b in ob.data.bones])
    for k, fr in enumerate(frames):
        whole = math.floor(fr)
        scene.frame_set(int(whole), subframe=float(fr - whole))
        ob.pose.bones.foreach_get("matrix", buf)
        mats[k] = _world(ob) @ buf.reshape(n, 4, 4).transpose(0, 2, 1)
    tails = mats[..., :3, 3] + mats[..., :3, 1] * lengths[None, :, None]   # Y axis, object scale in
    return mats, tails


# ---------------------------------------------------------------------------------------
# the transfer

class Result:
    """What `retarget` made: the action, frames and the root path, for callers and tests.

    action: the new bpy Action (None from `transfer`); keys: {"rot", "loc"} arrays (see
    `transfer`); frames: (F,) target frames keyed; source_frames: (F,) source
    frames sampled (floats); source_matrices: (F, N, 4, 4) the source's posed world bone
    matrices there; root_path: (F, 3) target hips head in world space (m);
    scale: k = L_t / L_s; bone_map: the bonemap.BoneMap used.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)


def retarget(source, target, bone_map, *, source_fps=None, frame_range=None, action_name=None,
             shoulder_rhythm=True, plant_feet=True, report=None):
    """Retarget source's current action onto target as a new action assigned to target.

    source, target: armature objects in the same scene. bone_map: bonemap.BoneMap
    (target → source names). source_fps: frame rate of the source action (default: the
    scene's); keys are written at the scene's rate so the clip plays at its real speed.
    frame_range: (first, last) source frames (default: the action's range).
    shoulder_rhythm: where the source's clavicles do not move, raise the target's shoulder
    girdle with the arm (scapulohumeral rhythm; on by default). plant_feet: where a source
    foot is planted, hold the target's on its floor (IK of thigh and shin; on by default).
    The source and its action are not modified; on any error the new action is removed and
    target's previous action is restored. Raises SignSimError for unusable input (no
    action, no mapped bones, missing bones) and for a result that cannot be right (the
    head below the hips where the source's hips → head is over 45° higher on that frame,
    a left limb driven by a right one), before anything is written. The bone map's warnings go to report(WARNING, …).
    Returns a Result.
    """
    report = report or silent
    res = transfer(source, target, bone_map, source_fps=source_fps, frame_range=frame_range,
                   shoulder_rhythm=shoulder_rhythm, plant_feet=plant_feet, report=report)
    src_name = source.animation_data.action.name
    res.action = write_action(target, res.keys, res.frames,
                               action_name or f"{src_name}_{target.name}")
    report(INFO, f"retargeted {len(res.frames)} frames of '{src_name}' onto '{target.name}' "
           f"({len(bone_map.as_dict())} mapped bones)")
    return res


def transfer(source, target, bone_map, *, source_fps=None, frame_range=None,
             shoulder_rhythm=True, plant_feet=True, report=None):
    """The keys `retarget` would write, as arrays, without touching any action: a Result
    with action None and keys = {"rot": {bone: (F, 4) local quaternions, w first,
    hemisphere-continuous}, "loc": {bone: (F, 3) local locations, m}} for target's bones.
    Arguments and errors as for `retarget`.
    """
    report = report or silent
    scene = bpy.context.scene
    ad = source.animation_data
    if ad is None or ad.action is None:
        raise SignSimError(f"'{source.name}' has no action to retarget")
    src_action = ad.action
    channelbag = compat.assigned_channelbag(ad)
    if channelbag is None or not len(channelbag.fcurves) or \
            not any(len(fc.keyframe_points) for fc in channelbag.fcurves):
        raise SignSimError(f"clip '{src_action.name}' has no keys")
    pairs = [(t, s) for t, s in bone_map.as_dict().items()]
    missing = [t for t, _ in pairs if t not in target.data.bones] + \
              [s for _, s in pairs if s not in source.data.bones]
    if missing:
        raise SignSimError(f"bone map names bones that do not exist: {', '.join(missing[:6])}")
    if not pairs:
        raise SignSimError(f"no bone of '{target.name}' is mapped to '{source.name}'")

    fps_t = key_io.scene_fps(scene)
    fps_s = float(source_fps or fps_t)
    first, last = frame_range or tuple(src_action.frame_range)
    n_out = int(math.floor((last - first) * fps_t / fps_s + 1e-6)) + 1
    out_frames = first + np.arange(n_out, dtype=float)
    src_frames = first + np.arange(n_out) * fps_s / fps_t
    if abs(fps_s - fps_t) > 1e-6 * fps_t:
        report(WARNING, f"the clip's {fps_s:g} fps resampled to the scene's {fps_t:g} fps: "
                        f"{int(round(last - first)) + 1} frames became {n_out}")

    saved_frame = scene.frame_current
    try:
        mats, tails = sample_pose(source, src_frames, scene)
    finally:
        scene.frame_set(saved_frame)
    # the target in metres whatever the scene's unit scale (a centimetre scene): the hold,
    # floor and root limits are lengths; the source is as Blender's importer sized it
    unit = float(scene.unit_settings.scale_length)
    to_metres = np.diag([unit, unit, unit, 1.0])
    tails_t = np.array([target.matrix_world @ b.tail_local for b in target.data.bones]) * unit
    for warning in bone_map.warnings:
        report(WARNING, warning)
    heads = mats[..., :3, 3]
    sampled = heads[np.unique(np.linspace(0, len(heads) - 1, MOTION_SAMPLES).astype(int))]
    with from_solver():
        keys = transfer_math.solve(skeleton(source, sampled), _world(source) @ rest_matrices(source),
                                   mats, tails, skeleton(target, unit=unit), to_metres @ _world(target),
                                   rest_matrices(target),
                                   tails_t, pairs, target.name, fps_t, shoulder_rhythm, plant_feet,
                                   int(round(first)))
    for warning in keys["warnings"]:
        report(WARNING, warning)
    for bone in keys["loc"]:
        if target.data.bones[bone].use_connect:
            report(WARNING, f"'{bone}' is connected to its parent, so Blender ignores its "
                   f"location keys: the root motion will not show")
    return Result(action=None, keys=keys, frames=out_frames, source_frames=src_frames, source_matrices=mats,
                  root_path=keys["root_path"], scale=keys["scale"], bone_map=bone_map)


def write_action(target, keys, frames, name):
    """A new action with the keys, assigned to target with its own slot (bulk key writing).

    keys: dict from _solve; frames: (F,) target frames. Every bone gets rotation keys (the
    unmapped ones their rest rotation), the hips and detached IK bones location keys; the
    pose's other location and scale values are reset to rest. On any error the new action is removed and target's
    previous action and slot are restored.
    """
    ad = target.animation_data or target.animation_data_create()
    old_action, old_handle = ad.action, compat.assigned_slot_handle(target)
    action = bpy.data.actions.new(name)
    try:
        slot = action.slots.new(id_type='OBJECT', name=target.name)
        bag = compat.ensure_channelbag(action, slot)
        for bone, q in keys["rot"].items():
            target.pose.bones[bone].rotation_mode = 'QUATERNION'
            for i in range(4):
                key_io.write_curve(bag, key_io.bone_path(bone, "rotation_quaternion"), i, bone, frames, q[:, i])
            if bone in keys["loc"]:
                for i in range(3):
                    key_io.write_curve(bag, key_io.bone_path(bone, "location"), i, bone, frames,
                                       keys["loc"][bone][:, i])
        if not np.all([np.isfinite(v).all() for v in keys["rot"].values()]):
            raise SignSimError(f"retargeting produced non-finite keys for '{target.name}'")
        # channels the new action does not key (location, scale of most bones) would keep
        # the values the previous action left behind: start them from the rest pose
        for pb in target.pose.bones:
            pb.location = (0.0, 0.0, 0.0)
            pb.scale = (1.0, 1.0, 1.0)
        compat.assign_action(target, action, slot)
    except Exception:
        bpy.data.actions.remove(action)
        compat.restore_action(target, old_action, old_handle)
        raise
    return action


# ---------------------------------------------------------------------------------------
# source clips: a library clip by name, or a mocap file through the library's importer

class SourceClip:
    """A source armature with its clip assigned, in the open file until `cleanup()`.

    armature: the skeleton object (linked to the scene); action: the clip's action;
    fps: the clip's true frame rate (frames/s); name: the clip's name (library name, or
    the file's clip name); cleanup(): removes the skeleton, its armature data and the
    action(s) brought in (safe to call twice). Also usable as a context manager.
    """

    def __init__(self, armature, action, fps, name, ids):
        self.armature, self.action, self.fps, self.name = armature, action, fps, name
        self._ids = ids

    def cleanup(self):
        ids, self._ids = self._ids, []
        library.tracking.remove_ids([i for i in ids if _alive(i)])

    def __iter__(self):   # armature, action, fps, cleanup = source_clip(...)
        return iter((self.armature, self.action, self.fps, self.cleanup))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.cleanup()
        return False


def _alive(id_):
    try:
        id_.name
    except ReferenceError:
        return False
    return True


def is_clip_file(clip):
    """True when CLIP names a mocap file (an existing file, or a path with a mocap extension)
    rather than a library clip name."""
    return os.path.isfile(clip) or os.path.splitext(clip)[1].lower() in library.importers.SUPPORTED


def clip_not_found(clip):
    """The SignSimError for a mocap file that does not exist: "clip not found: CLIP", with
    the nearest mocap files of the folder it was looked for in (a misspelt name)."""
    folder = os.path.dirname(os.path.abspath(clip))
    try:
        near = [n for n in os.listdir(folder) if os.path.splitext(n)[1].lower() in library.importers.SUPPORTED]
    except OSError:
        near = []
    return SignSimError(f"clip not found: {clip}{did_you_mean(os.path.basename(clip), near)}")


def source_clip(clip, library_path=None, scene=None, report=None):
    """Bring one clip into the open file as an animated source armature: a SourceClip.

    clip: a mocap file path (BVH, FBX, glTF/GLB: imported with every repair of the motion
    library's importer — upright, metres, quaternions, calibration pose trimmed; a file
    with several clips gives its first) or a library clip name (appended from
    library_path, default: the preferences' library). The skeleton is linked to the
    scene with the clip's action and slot assigned. report(level, message) gets import warnings.
    Raises SignSimError for a missing file or clip, or a file the importer rejects.
    """
    scene = scene or bpy.context.scene
    if is_clip_file(clip):
        path = os.path.abspath(clip)
        if not os.path.isfile(path):
            raise SignSimError(f"clip not found: {clip}")
        clips = library.importers.import_file(path, report)
        ids = [c.action for c in clips] + list({c.skeleton for c in clips}) + \
            list({c.skeleton.data for c in clips})
        first = clips[0]
        arm, action, slot = first.skeleton, first.action, first.meta.get("_slot")
        fps, name = first.meta["fps"], first.name
    else:
        path = library.library_file(library_path)
        if not os.path.isfile(path):
            raise SignSimError(f"clip not found: {clip} (not a file, and no motion library "
                               f"at {path})")
        action, arm = library.load_clip(path, clip)
        ids = [action, arm, arm.data]
        slot, fps, name = None, action.signsim.fps, clip
    try:
        first_frame, last_frame = action.frame_range
        if last_frame <= first_frame:
            raise SignSimError(f"{clip}: the clip has no motion keys (one pose at most)")
        if scene.collection.objects.get(arm.name) is None and arm.name not in scene.objects:
            scene.collection.objects.link(arm)
        slot = slot or (action.slots[0] if len(action.slots) else None)
        compat.assign_action(arm, action, slot)
        bpy.context.view_layer.update()
    except Exception:
        library.tracking.remove_ids(ids)
        raise
    return SourceClip(arm, action, float(fps or key_io.scene_fps(scene)),
                      name, ids)


# ---------------------------------------------------------------------------------------
# the bone map stored on the target armature (ob.signsim.bone_map)

def auto_map(source, target):
    """bonemap.auto_map between two armature objects (rest in world space; the source's
    motion sampled too when it has an action)."""
    with from_solver():
        bone_map = bonemap.auto_map(skeleton(source, motion_sample(source)), skeleton(target))
    bone_map.source_armature = source.name
    return bone_map


def store_map(target, bone_map):
    """Write a BoneMap onto target.signsim: one item per target bone (source empty when not
    driven), plus the source armature's name."""
    settings = target.signsim
    settings.bone_map.clear()
    pairs = bone_map.as_dict()
    conf = bone_map.confidence()
    for bone in target.data.bones:
        item = settings.bone_map.add()
        item.target = bone.name
        item.source = pairs.get(bone.name, "")
        item.confidence = conf.get(bone.name, 0.0)
    settings.bone_map_source = bone_map.source_armature


def stored_map(target):
    """The BoneMap stored on target (pairs with a source bone), or None when there is none."""
    settings = target.signsim
    pairs = [(i.target, i.source, i.confidence) for i in settings.bone_map if i.source]
    if not pairs:
        return None
    unmapped = [i.target for i in settings.bone_map if not i.source]
    return bonemap.BoneMap(pairs, unmapped, settings.bone_map_source)


def set_pair(target, target_bone, source_bone):
    """Drive target_bone by source_bone ('' to clear); a hand-set pair has confidence 1.

    Raises SignSimError when target_bone is not a bone of target.
    """
    if target_bone not in target.data.bones:
        raise SignSimError(f"'{target.name}' has no bone '{target_bone}'")
    items = target.signsim.bone_map
    item = next((i for i in items if i.target == target_bone), None)
    if item is None:
        item = items.add()
        item.target = target_bone
    item.source = source_bone
    item.confidence = 1.0 if source_bone else 0.0


def mirror_map(target, source):
    """Copy the left-side pairs of target's stored map to the right side. Returns the count
    of right-side pairs written. Raises SignSimError when no map is stored."""
    bone_map = stored_map(target)
    if bone_map is None:
        raise SignSimError(f"'{target.name}' has no bone map to mirror")
    names_t = [b.name for b in target.data.bones]
    names_s = [b.name for b in source.data.bones] if source else [s for _t, s, _c in bone_map.pairs]
    before = bone_map.as_dict()
    pairs = bonemap.mirror_pairs(bone_map.pairs, names_t, names_s)
    store_map(target, bonemap.BoneMap(pairs, (), bone_map.source_armature))
    return sum(1 for t, s, _c in pairs if before.get(t) != s)


def export_map(target, filepath):
    """Write target's stored map as a JSON preset. Raises SignSimError when none is stored."""
    bone_map = stored_map(target)
    if bone_map is None:
        raise SignSimError(f"'{target.name}' has no bone map to export")
    with open(filepath, "w", encoding="utf-8") as fh:
        fh.write(bone_map.to_json())


def load_preset(filepath):
    """A BoneMap from a JSON preset file. Raises SignSimError for a missing/malformed file."""
    if not os.path.isfile(filepath):
        raise SignSimError(f"bone map preset not found: {filepath}")
    with open(filepath, encoding="utf-8") as fh:
        text = fh.read()
    with from_solver():
        return bonemap.BoneMap.from_json(text, filepath)

"""Bone animation as arrays: F-curves evaluated directly, keys written in bulk.

Blender 5 actions are slotted: F-curves live in a channelbag per slot (compat.py).
Reading evaluates each F-curve at the requested frames (no scene update per frame);
writing adds all keyframe points of a curve at once with foreach_set, many times
faster than keyframe_points.insert (bpy.types.FCurveKeyframePoints.foreach_set).
"""
from dataclasses import dataclass

import bpy
import numpy as np

from . import compat
from ..solver.core import keyreduce, quat
from .errors import SignSimError

_INTERPOLATION = {"CONSTANT": 0, "LINEAR": 1, "BEZIER": 2}

# custom property on an action: JSON list of the contacts the retarget kept (the bake holds them)
CONTACTS_PROP = "signsim_contacts"


def scene_fps(scene):
    """The scene's frame rate in frames per second: render.fps / render.fps_base (Blender
    keeps a whole rate in fps and the ratio making it exact in fps_base: 29.97 = 30 / 1.001)."""
    return scene.render.fps / scene.render.fps_base


def set_scene_fps(scene, rate):
    """Set the scene's frame rate to `rate` (frames per second, > 0) exactly (see scene_fps)."""
    scene.render.fps = max(1, int(round(rate)))
    scene.render.fps_base = scene.render.fps / rate


@dataclass(frozen=True)
class PoseChannels:
    """Local pose channels of B bones over F frames.

    locations (F, B, 3) in the bone's rest frame (armature units, m after import),
    rotations (F, B, 4) quaternions w-first (Euler and axis-angle bones converted),
    scales (F, B, 3).
    """
    locations: np.ndarray
    rotations: np.ndarray
    scales: np.ndarray


def bone_path(bone_name: str, prop: str) -> str:
    """The F-curve data path of a pose-bone property, with the name escaped."""
    return f'pose.bones["{bpy.utils.escape_identifier(bone_name)}"].{prop}'


def channelbag(action, slot):
    """The channelbag of `slot` in `action`, or None when the slot has no F-curves."""
    return compat.get_channelbag(action, slot)


def keyed_frame_range(action, slot):
    """(first, last) keyed frame of the slot's F-curves. Raises SignSimError without keys."""
    bag = channelbag(action, slot)
    ranges = [fc.range() for fc in (bag.fcurves if bag else ()) if len(fc.keyframe_points)]
    if not ranges:
        raise SignSimError(f"action '{action.name}' has no keyframes for slot '{slot.name_display if slot else '?'}'")
    return min(r[0] for r in ranges), max(r[1] for r in ranges)


def sample_pose(armature, action, slot, bone_names, frames) -> PoseChannels:
    """Evaluate the action's F-curves for `bone_names` at `frames` (F,) (scene frames).

    Channels without an F-curve keep the pose bone's current value. Each bone's rotation
    is read in its own rotation_mode and returned as a quaternion. Raises SignSimError
    when an evaluated value is not finite.
    """
    frames = np.asarray(frames, dtype=float)
    F, B = len(frames), len(bone_names)
    bag = channelbag(action, slot)
    curves = {(fc.data_path, fc.array_index): fc for fc in (bag.fcurves if bag else ())}

    def read(pb, prop, size):
        static = np.array(getattr(pb, prop), dtype=float)
        out = np.empty((F, size))
        for k in range(size):
            fc = curves.get((bone_path(pb.name, prop), k))
            out[:, k] = [fc.evaluate(f) for f in frames] if fc else static[k]
        return out

    loc, rot, scale = np.empty((F, B, 3)), np.empty((F, B, 4)), np.empty((F, B, 3))
    for j, name in enumerate(bone_names):
        pb = armature.pose.bones[name]
        loc[:, j] = read(pb, "location", 3)
        scale[:, j] = read(pb, "scale", 3)
        mode = pb.rotation_mode
        if mode == 'QUATERNION':
            rot[:, j] = read(pb, "rotation_quaternion", 4)
        elif mode == 'AXIS_ANGLE':
            aa = read(pb, "rotation_axis_angle", 4)
            axis = aa[:, 1:] / np.maximum(np.linalg.norm(aa[:, 1:], axis=1, keepdims=True), 1e-12)
            rot[:, j] = quat.exp(axis * aa[:, :1])
        else:
            rot[:, j] = quat.from_euler(read(pb, "rotation_euler", 3), mode)
    if not (np.isfinite(loc).all() and np.isfinite(rot).all() and np.isfinite(scale).all()):
        raise SignSimError(f"action '{action.name}' has NaN or infinite keys on {armature.name}")
    rot = quat.make_continuous(quat.normalize(rot))
    return PoseChannels(loc, rot, scale)


def write_curve(bag, data_path, index, group, frames, values, interpolation="LINEAR"):
    """One whole F-curve (frames (F,), values (F,)) written in bulk into channelbag `bag`.

    An existing F-curve with the same path and index is replaced. Returns the F-curve.
    Source: bpy.types.FCurveKeyframePoints.add + bpy.types.bpy_prop_collection.foreach_set.
    """
    old = bag.fcurves.find(data_path, index=index)
    if old is not None:
        bag.fcurves.remove(old)
    fc = compat.new_fcurve(bag, data_path, index, group or "")
    n = len(frames)
    fc.keyframe_points.add(n)
    co = np.empty(2 * n, dtype=np.float32)  # Blender stores float32: the fast path
    co[0::2] = frames
    co[1::2] = values
    fc.keyframe_points.foreach_set("co", co)
    fc.keyframe_points.foreach_set("interpolation", np.full(n, _INTERPOLATION[interpolation], dtype=np.int32))
    fc.update()
    return fc


def write_curves(action, slot, curves, frames, interpolation="LINEAR"):
    """Write whole F-curves in bulk into `action`'s channelbag for `slot`.

    curves: iterable of (data_path, array_index, group_name, values (F,)); frames (F,).
    """
    bag = compat.ensure_channelbag(action, slot)
    for data_path, index, group, values in curves:
        write_curve(bag, data_path, index, group, frames, values, interpolation)


def write_rotations(ob, action, slot, frames, bone_names, rotations, tolerance_deg=0.0):
    """Key rotations (F, B, 4) (w first) of bone_names (B,) at frames (F,) into action's
    slot, each bone in its own rotation mode (quaternion, axis-angle, or continuous Euler
    via mathutils); with tolerance_deg > 0 only the keys keyreduce keeps."""
    from mathutils import Quaternion
    for j, name in enumerate(bone_names):
        q = rotations[:, j]
        keep = (keyreduce.keep_mask(q, np.radians(tolerance_deg)) if tolerance_deg > 0
                else np.ones(len(frames), bool))
        mode = ob.pose.bones[name].rotation_mode
        if mode == 'QUATERNION':
            curves = [(bone_path(name, "rotation_quaternion"), k, name, q[keep, k]) for k in range(4)]
        elif mode == 'AXIS_ANGLE':
            angle = 2.0 * np.arccos(np.clip(q[:, 0], -1.0, 1.0))
            axis = q[:, 1:] / np.maximum(np.linalg.norm(q[:, 1:], axis=1, keepdims=True), 1e-12)
            aa = np.column_stack([angle, axis])
            curves = [(bone_path(name, "rotation_axis_angle"), k, name, aa[keep, k]) for k in range(4)]
        else:  # Euler: continuous angles via mathutils' compatible conversion
            eul, prev = np.empty((len(q), 3)), None
            for f, qq in enumerate(q):
                e = Quaternion(qq).to_euler(mode, prev) if prev else Quaternion(qq).to_euler(mode)
                eul[f], prev = e, e
            curves = [(bone_path(name, "rotation_euler"), k, name, eul[keep, k]) for k in range(3)]
        write_curves(action, slot, curves, frames[keep])

"""One source bone onto several target bones: the base mesh with its two lower spine
bones and both forearms split in two in line (made here with Blender's Subdivide), so a
three-bone source spine drives a five-bone target spine and a source forearm a forearm of
two bones. Measured on Blender's evaluated poses: the spine's bend and twist are shared
between segments in proportion to their lengths (no joint takes it all, none stays rigid)
and the split forearm takes its share of the hand's twist without bending. Whole clips."""
import pathlib

import bpy
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import retarget_measure as rm
from retarget_rigs import character

DATA = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"
CLIPS = ("mocap/bvhpython_test_freebvh_mixamorig.bvh", "mocap/cmu_01_01_cgspeed__fairmotion.bvh",
         "mocap/animdrawings_rokoko_jesse_dance.bvh", "generated/fingerspell_80.bvh")
SPLIT = ("spine.001", "spine.002", "forearm.L", "forearm.R")


def split_rig():
    """The base mesh with SPLIT subdivided; returns (armature, {original: added half})."""
    ob = character(DATA, "godot")
    before = {b.name for b in ob.data.bones}
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    for eb in ob.data.edit_bones:
        eb.select = eb.select_head = eb.select_tail = eb.name in SPLIT
    bpy.ops.armature.subdivide(number_cuts=1)
    bpy.ops.object.mode_set(mode='OBJECT')
    halves = {b.parent.name: b.name for b in ob.data.bones if b.name not in before}
    return ob, halves


def local_turns(p, rest, bone, parent):
    """A bone's rotation relative to its parent, against the rest pose, in the bone's
    rest frame (F, 3, 3)."""
    i, j = p.names.index(bone), p.names.index(parent)
    rel = np.swapaxes(p.rot[:, j], -1, -2) @ p.rot[:, i]
    return (rest[parent].T @ rest[bone]).T @ rel


def angle(r):
    return np.degrees(np.arccos(np.clip((np.trace(r, axis1=-2, axis2=-1) - 1) / 2, -1.0, 1.0)))


def twist(r, axis):
    """Twist angle (deg, F) of rotations r (F, 3, 3) about a unit axis (3,) (swing–twist)."""
    q = Rotation.from_matrix(r).as_quat()
    return np.degrees(2 * np.arctan2(q[:, :3] @ axis, q[:, 3]))


@pytest.mark.slow
@pytest.mark.parametrize("clip", CLIPS)
def test_rotation_shared_over_split_bones(addon, clip):
    rt = addon.signsim_addon.retarget.api
    target, halves = split_rig()
    source, _action, fps, _cleanup = rt.source_clip(str(DATA / clip))
    first, last = source.animation_data.action.frame_range
    bone_map = rt.auto_map(source, target)
    result = rt.retarget(source, target, bone_map, source_fps=fps,
                         frame_range=(first, last))
    mapped = bone_map.as_dict()
    assert not set(halves.values()) & set(mapped)          # the halves are driven by sharing
    tgt = rm.Poses(target, result.frames)
    src = rm.Poses(source, result.source_frames, from_motion=True)
    assert len(tgt.body.spine) == 5
    mw = np.array(target.matrix_world)[:3, :3]
    rest = {b.name: mw @ np.array(b.matrix_local)[:3, :3] for b in target.data.bones}
    rest = {n: r / np.linalg.norm(r, axis=0) for n, r in rest.items()}
    length = {b.name: b.length for b in target.data.bones}

    spines_moved = 0
    for bone, half in halves.items():
        parent = target.data.bones[bone].parent.name
        first_turn, second_turn = local_turns(tgt, rest, bone, parent), local_turns(tgt, rest, half, bone)
        share = length[bone] / (length[bone] + length[half])
        if bone.startswith("spine"):
            # the source bone's bend and twist (from the first frame on: the rest shapes
            # differ) spread over both halves by length
            a = angle(np.swapaxes(first_turn[:1], -1, -2) @ first_turn)
            b = angle(np.swapaxes(second_turn[:1], -1, -2) @ second_turn)
            moving = (a + b) > 2.0
            if moving.sum() >= 5:
                spines_moved += 1
                ratio = float(a[moving].sum() / (a + b)[moving].sum())
                assert abs(ratio - share) < 0.15, (bone, ratio, share)
        else:
            # the elbow stays where it bends: the lower half only twists about its axis,
            # by its share of the hand's twist relative to the forearm
            hand = next(c.name for c in target.data.bones[half].children)
            axis = np.array([0.0, 1.0, 0.0])
            swing_dir = second_turn @ axis
            assert np.degrees(np.arccos(np.clip(swing_dir @ axis, -1, 1))).max() < 1.0
            hand_twist = twist(local_turns(tgt, rest, hand, bone), rest[hand].T @ rest[bone][:, 1])
            half_twist = twist(second_turn, axis)
            assert np.abs(half_twist - share * hand_twist).mean() < 1.0, (bone, half_twist, hand_twist)
    if "mixamorig" in clip:
        assert spines_moved == 2            # this dance bends the spine
    # the spine still follows the source, and nothing jumps
    cos = rm.chain_cosines(src, tgt)
    assert min(c for (name, _k), c in cos.items() if name in ("spine", "neck")) >= 0.98
    jump = rm.jump_excess(src, tgt, mapped, rm.rhythm_girdles(src, tgt, mapped))
    assert jump["jump_excess_deg"] <= 5.0, jump["jump_worst"]
    js, jt = rm.rotation_jumps(src), rm.rotation_jumps(tgt)
    for bone, half in halves.items():
        # a half carries part of its own bone's and of the next mapped bone's motion
        nxt = next(c.name for c in target.data.bones[half].children if c.name in mapped)
        own = np.maximum(js[:, src.names.index(mapped[bone])], js[:, src.names.index(mapped[nxt])])
        assert (jt[:, tgt.names.index(half)] - own).max() <= 5.0, half

"""Retargeting every shared mocap clip onto three rigs, measured by geometry.

Targets: the bundled signer (sample_blends/signer.blend; until it is merged, a stand-in:
Blender's human metarig, trimmed), the CC0 Godot base mesh (metarig names) and the
three.js robot (4-digit hands, IK pole bones). Clips are cut to
their first 2 s to keep the suite short; keys are written at the scene's 24 fps.
"""
import math

import bpy
import numpy as np
import pytest
from mathutils import Matrix
import retarget_measure as rm
from retarget_rigs import direction_cosines, mapped_pairs, posed_heads, stand_in_signer, target_rig

CLIPS = {  # file → finger chains the clip has (CMU: one thumb + one block of fingers)
    "animdrawings_rokoko_jesse_dance.bvh": ("thumb", "index", "middle", "ring", "pinky"),
    "bandai_dataset-1_bye_active_001.bvh": (),
    "bvhpython_test_freebvh_mixamorig.bvh": ("thumb", "index", "middle", "ring", "pinky"),
    "cmu_01_01_cgspeed__fairmotion.bvh": ("thumb", "middle"),
    "makehuman_face-poseunits.bvh": ("thumb", "index", "middle", "ring", "pinky"),
    "pybvh_bvh_test3_fingers.bvh": ("thumb", "index", "middle", "ring", "pinky"),
}
RIG_FINGERS = {"signer": ("thumb", "index", "middle", "ring", "pinky"),
               "godot": ("thumb", "index", "middle", "ring", "pinky"),
               "robot": ("thumb", "index", "middle", "ring")}
RIG_LEGS = {"signer": ("thigh", "shin", "foot", "toe"), "godot": ("thigh", "shin", "foot", "toe"),
            "robot": ("thigh", "shin")}   # the robot's feet are IK targets outside the leg chain
SECONDS = 2.0


def expected_coverage(rig, clip):
    parts = {"hips", "spine", "neck", "head"}
    for side in ("L", "R"):
        limb = ("shoulder", "upper_arm", "forearm", "hand") + RIG_LEGS[rig]
        fingers = [f for f in RIG_FINGERS[rig] if f in CLIPS[clip]]
        parts |= {f"{p}.{side}" for p in (*limb, *fingers)}
    return sorted(parts)


def retarget_clip(addon, shared_data, rig, clip, seconds=SECONDS):
    """The direction transfer alone: the shoulder rhythm and the foot hold, which move
    clavicles and legs off the source's directions on purpose, are off here (measured with
    them in test_retarget_geometry.py)."""
    rt = addon.signsim_addon.retarget.api
    target = target_rig(shared_data, rig)
    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / clip))
    first, last = source.animation_data.action.frame_range
    bone_map = rt.auto_map(source, target)
    result = rt.retarget(source, target, bone_map, source_fps=fps,
                         frame_range=(first, min(last, first + seconds * fps)),
                         shoulder_rhythm=False, plant_feet=False)
    return source, target, bone_map, result


def _key_checksum(action):
    total = 0.0
    for layer in action.layers:
        for strip in layer.strips:
            for bag in strip.channelbags:
                for fc in bag.fcurves:
                    co = np.empty(2 * len(fc.keyframe_points))
                    fc.keyframe_points.foreach_get("co", co)
                    total += float(np.sum(co * np.arange(1, len(co) + 1)))
    return total


@pytest.mark.slow
@pytest.mark.parametrize("rig", ["signer", "godot", "robot"])
@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_retarget_follows_source_geometry(addon, shared_data, rig, clip):
    source, target, bone_map, result = retarget_clip(addon, shared_data, rig, clip)
    rt = addon.signsim_addon.retarget.api
    bm = addon.solver.retarget.bonemap

    assert bm.coverage(bone_map, rt.skeleton(target)) == expected_coverage(rig, clip)

    chain, branch = mapped_pairs(target, bone_map)
    cos_chain = direction_cosines(source, target, bone_map, result, chain)
    cos_branch = direction_cosines(source, target, bone_map, result, branch)
    assert len(cos_chain) >= 6
    # a foot follows the source's foot up to the one constant rotation by which the two
    # skeletons place their toe joints differently (a foot stays as flat as the source's)
    src, tgt = rm.Poses(source, result.source_frames, from_motion=True), rm.Poses(target, result.frames)
    feet = {tgt.names[i] for (_side, part), bones in tgt.body.limbs.items() if part == "foot" for i in bones}
    for (p, c) in [pc for pc in cos_chain if pc[0] in feet]:
        si, ti = (lambda n: src.names.index(bone_map.as_dict()[n])), tgt.names.index
        ds = src.heads[:, si(c)] - src.heads[:, si(p)]
        dt = tgt.heads[:, ti(c)] - tgt.heads[:, ti(p)]
        unit = (lambda v: v / np.linalg.norm(v, axis=1, keepdims=True))
        cos_chain[(p, c)] = (rm.aligned_cosine(unit(ds), unit(dt)), cos_chain[(p, c)][1])
    low = {pair: round(c[0], 3) for pair, c in cos_chain.items() if c[0] < 0.98}
    assert not low, f"chain directions do not follow the source: {low}"
    # at branching bones (hips, chest, hand) the children sit where each skeleton puts them:
    # the directions follow the source up to that rest-shape offset, constant in the body
    low = {pair: round(c[1], 3) for pair, c in cos_branch.items() if c[1] < 0.98}
    assert not low, f"branch directions do not follow the source: {low}"

    # root path: the hip joints follow the source's, scaled by the standing leg lengths,
    # each skeleton on the floor its feet stand on
    src = rm.Poses(source, result.source_frames, from_motion=True)
    scene = bpy.context.scene
    error = rm.root_error(src, rm.Poses(target, result.frames), scene.render.fps / scene.render.fps_base)
    assert error < 0.01, f"root path off by {error:.3f} m"


def test_new_action_leaves_the_source_untouched(addon, shared_data):
    rt = addon.signsim_addon.retarget.api
    target = stand_in_signer()
    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh"))
    src_action = source.animation_data.action
    before = (_key_checksum(src_action), len(bpy.data.actions))
    result = rt.retarget(source, target, rt.auto_map(source, target), source_fps=fps)
    assert (_key_checksum(src_action), len(bpy.data.actions) - 1) == before
    assert source.animation_data.action == src_action
    ad = target.animation_data
    assert ad.action == result.action and ad.action_slot is not None
    assert ad.action_slot.handle == result.action.slots[0].handle
    # keys at the scene's rate: 69 frames at 30 fps → 2.27 s → 55 frames at 24 fps
    assert len(result.frames) == math.floor(68 * 24 / 30) + 1
    bag = result.action.layers[0].strips[0].channelbag(result.action.slots[0])
    for pb in target.pose.bones:
        curves = [bag.fcurves.find(f'pose.bones["{pb.name}"].rotation_quaternion', index=i)
                  for i in range(4)]
        q = np.empty((4, len(result.frames) * 2))
        for i, fc in enumerate(curves):
            fc.keyframe_points.foreach_get("co", q[i])
        q = q[:, 1::2].T                                       # (F, 4) keyed values
        assert np.all(np.isfinite(q))
        assert np.all(np.sum(q[1:] * q[:-1], axis=1) > 0.0), f"hemisphere flip in {pb.name}"


def test_failed_write_removes_the_new_action(addon, shared_data):
    rt = addon.signsim_addon.retarget.api
    target = stand_in_signer()
    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh"))
    first = rt.retarget(source, target, rt.auto_map(source, target), source_fps=fps)
    names = {a.name for a in bpy.data.actions}
    bad = {"rot": {"hand.L": np.full((3, 4), np.nan)}, "loc": {}}
    with pytest.raises(addon.signsim_addon.errors.SignSimError):
        addon.signsim_addon.retarget.transfer.write_action(target, bad, np.arange(3.0), "broken")
    assert {a.name for a in bpy.data.actions} == names
    assert target.animation_data.action == first.action


def test_rest_pose_and_bone_rolls_do_not_change_the_motion(addon, shared_data):
    """A copy of the rig in an A-pose (arms 45° down) with other bone rolls moves the same."""
    rt = addon.signsim_addon.retarget.api
    tpose = stand_in_signer()
    apose = tpose.copy()
    apose.data = tpose.data.copy()
    apose.name = "Signer A-pose"
    bpy.context.collection.objects.link(apose)
    bpy.ops.object.select_all(action='DESELECT')
    bpy.context.view_layer.objects.active = apose
    bpy.ops.object.mode_set(mode='EDIT')
    bones = apose.data.edit_bones
    for side, angle in (("L", 45.0), ("R", -45.0)):
        upper = bones[f"upper_arm.{side}"]
        pivot = upper.head.copy()
        turn = Matrix.Translation(pivot) @ Matrix.Rotation(math.radians(angle), 4, 'Y') \
            @ Matrix.Translation(-pivot)
        arm = [upper] + list(upper.children_recursive)       # parents before children
        rest = [(b, b.matrix.copy(), b.length) for b in arm]  # before connected heads move
        for b, matrix, length in rest:
            b.matrix = turn @ matrix
            b.length = length
    for k, b in enumerate(bones):
        b.roll += 0.3 + 0.5 * k       # rolls unlike the original's
    bpy.ops.object.mode_set(mode='OBJECT')
    assert (apose.data.bones["hand.L"].head_local - tpose.data.bones["hand.L"].head_local).length > 0.2

    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "animdrawings_rokoko_jesse_dance.bvh"))
    first = source.animation_data.action.frame_range[0]
    runs = []
    for target in (tpose, apose):
        bone_map = rt.auto_map(source, target)
        result = rt.retarget(source, target, bone_map, source_fps=fps, frame_range=(first, first + 150))
        runs.append(posed_heads(target, result.frames))
    (h1, t1), (h2, t2) = runs
    assert np.abs(h1 - h2).max() < 1e-4      # 0.1 mm: float32 rest matrices and keys
    assert np.abs(t1 - t2).max() < 1e-4
    # and the arms really move (the comparison is not between two rest poses)
    assert np.ptp(h1[:, [b.name for b in tpose.data.bones].index("hand.L")], axis=0).max() > 0.05


def test_same_skeleton_reproduces_every_direction(addon, shared_data):
    """Onto a copy of the source's own armature (a bone-axis rest, not a T-pose), every
    parent→child direction, at branches too, is the source's."""
    rt = addon.signsim_addon.retarget.api
    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "animdrawings_rokoko_jesse_dance.bvh"))
    target = source.copy()
    target.data = source.data.copy()
    target.animation_data_clear()
    bpy.context.collection.objects.link(target)
    bone_map = rt.auto_map(source, target)
    assert all(t == s for t, s in bone_map.as_dict().items())
    first = source.animation_data.action.frame_range[0]
    result = rt.retarget(source, target, bone_map, source_fps=fps, frame_range=(first, first + 200),
                         shoulder_rhythm=False, plant_feet=False)
    chain, branch = mapped_pairs(target, bone_map)
    cosines = direction_cosines(source, target, bone_map, result, chain + branch)
    assert len(cosines) > 50
    assert min(c[0] for c in cosines.values()) > 0.9999


def test_robot_ik_targets_and_poles_follow_the_legs(addon, shared_data):
    """The robot's feet are IK target bones hanging from its root, beside the leg chains:
    they (and the knee poles) keep their rest offset to the shins instead of staying put."""
    rt = addon.signsim_addon.retarget.api
    target = target_rig(shared_data, "robot")
    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "animdrawings_rokoko_jesse_dance.bvh"))
    result = rt.retarget(source, target, rt.auto_map(source, target), source_fps=fps,
                         frame_range=(1, 101))
    heads, _tails = posed_heads(target, result.frames)
    names = [b.name for b in target.data.bones]
    mw = target.matrix_world
    for side in ("L", "R"):
        shin = names.index(f"LowerLeg.{side}")
        for ik in (f"Foot.{side}", f"PoleTarget.{side}"):
            rest = (mw @ target.data.bones[ik].head_local - mw @ target.data.bones[shin].head_local).length
            offset = np.linalg.norm(heads[:, names.index(ik)] - heads[:, shin], axis=1)
            assert np.abs(offset - rest).max() < 1e-4
        assert np.ptp(heads[:, names.index(f"Foot.{side}")], axis=0).max() > 0.1   # it moves


@pytest.mark.parametrize("clip", sorted(CLIPS))
def test_clip_import_brings_motion_into_z_up_metres(addon, shared_data, clip):
    """Y-up rests under Z-up motion, cm/dm/inch units: the first frame stands head over hips,
    1.2–2.2 m tall; the file's frame rate is read from its header."""
    rt = addon.signsim_addon.retarget.api
    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / clip))
    heads, tails = posed_heads(source, [source.animation_data.action.frame_range[0]])
    names = [b.name.rsplit(":", 1)[-1] for b in source.data.bones]
    head = heads[0, names.index("Head" if "Head" in names else "head")]
    hips = heads[0, names.index("Hips" if "Hips" in names else "root")]
    assert head[2] - hips[2] > 0.9 * np.linalg.norm(head - hips)
    height = np.ptp(np.concatenate([heads[0, :, 2], tails[0, :, 2]]))
    assert 1.2 <= height <= 2.2
    assert fps == {"animdrawings_rokoko_jesse_dance.bvh": 100, "bandai_dataset-1_bye_active_001.bvh": 30,
                   "bvhpython_test_freebvh_mixamorig.bvh": 30, "cmu_01_01_cgspeed__fairmotion.bvh": 120,
                   "makehuman_face-poseunits.bvh": 24, "pybvh_bvh_test3_fingers.bvh": 120}[clip]


def test_upper_body_rig_without_legs(addon, shared_data):
    """A signer cut at the hips still maps (hips = its root) and moves: directions follow the
    source, the hips path is the source's scaled by the hips → chest lengths."""
    rt = addon.signsim_addon.retarget.api
    target = stand_in_signer()
    bpy.ops.object.mode_set(mode='EDIT')
    bones = target.data.edit_bones
    for name in [b.name for b in bones if b.name.split(".")[0] in ("pelvis", "thigh", "shin", "foot", "toe", "heel")]:
        bones.remove(bones[name])
    bpy.ops.object.mode_set(mode='OBJECT')
    source, _action, fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "animdrawings_rokoko_jesse_dance.bvh"))
    bone_map = rt.auto_map(source, target)
    assert bone_map.as_dict()["spine"] == "Hips" and "f_pinky.03.R" in bone_map.as_dict()
    first = source.animation_data.action.frame_range[0]
    result = rt.retarget(source, target, bone_map, source_fps=fps, frame_range=(first, first + 100))
    chain, _branch = mapped_pairs(target, bone_map)
    assert min(c[0] for c in direction_cosines(source, target, bone_map, result, chain).values()) > 0.98
    hs, _ = posed_heads(source, result.source_frames)
    ht, _ = posed_heads(target, result.frames)
    si = [b.name for b in source.data.bones]
    ti = [b.name for b in target.data.bones]
    k = (np.linalg.norm(ht[0, ti.index("spine.003")] - ht[0, ti.index("spine")])
         / np.linalg.norm(hs[0, si.index("Spine2")] - hs[0, si.index("Hips")]))
    rest_hips = np.array(target.matrix_world @ target.data.bones["spine"].head_local)
    expected = k * (hs[:, si.index("Hips")] - hs[0, si.index("Hips")]) + rest_hips
    assert np.abs(ht[:, ti.index("spine")] - expected).max() < 0.01


def test_source_clip_from_file_and_library_leaves_nothing_behind(addon, shared_data, tmp_path):
    """One way in: a mocap file (library importer, with repairs) or a library clip by name;
    cleanup removes the skeleton, its armature data and the action(s)."""
    rt = addon.signsim_addon.retarget.api
    path = str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh")
    lib = tmp_path / "lib.blend"
    addon.signsim_addon.library.api.import_paths([path], str(lib))
    before = ({o.name for o in bpy.data.objects}, {a.name for a in bpy.data.actions},
              {a.name for a in bpy.data.armatures})
    for clip, library in ((path, None), ("bvhpython_test_freebvh_mixamorig", str(lib))):
        src = rt.source_clip(clip, library)
        assert src.armature.name in bpy.context.scene.objects
        assert src.armature.animation_data.action == src.action and src.fps == 30
        assert src.armature.animation_data.action_slot is not None
        src.cleanup()
        src.cleanup()   # twice is harmless
        assert ({o.name for o in bpy.data.objects}, {a.name for a in bpy.data.actions},
                {a.name for a in bpy.data.armatures}) == before
    with pytest.raises(addon.signsim_addon.errors.SignSimError, match="no clip named 'nope'"):
        rt.source_clip("nope", str(lib))
    with pytest.raises(addon.signsim_addon.errors.SignSimError, match="clip not found"):
        rt.source_clip(str(tmp_path / "missing.bvh"))

"""Each import repair, reproduced with a small input written by the test."""
import math

import bpy
import numpy as np
import pytest
from bpy_extras import anim_utils

import library_samples as S


@pytest.fixture
def lib(addon):
    return addon.signsim_addon.library.api


def import_one(lib, path, tmp_path, **kw):
    result = lib.import_paths([str(path)], str(tmp_path / "lib.blend"), **kw)
    assert not result["failed"], result["failed"]
    return result["imported"]


def load_clip(library_file, name):
    """Append one clip (and its skeleton) from the library into the open file."""
    with bpy.data.libraries.load(str(library_file), link=False) as (src, dst):
        dst.actions = [name]
    action = dst.actions[0]
    skel = action.signsim.skeleton
    bpy.context.scene.collection.objects.link(skel)
    ad = skel.animation_data_create()
    ad.action = action
    ad.action_slot = action.slots[0]
    return action, skel


def quats(action):
    """{bone: (frames, 4)} of the clip's quaternion keys."""
    bag = anim_utils.action_get_channelbag_for_slot(action, action.slots[0])
    out = {}
    for fc in bag.fcurves:
        if fc.data_path.endswith("rotation_quaternion"):
            bone = fc.data_path.split('"')[1]
            co = np.empty(2 * len(fc.keyframe_points))
            fc.keyframe_points.foreach_get("co", co)
            out.setdefault(bone, {})[fc.array_index] = co[1::2]
    return {b: np.stack([d[i] for i in range(4)], axis=1) for b, d in out.items()}


def bone_heads(skel, frame):
    bpy.context.scene.frame_set(frame)
    mw = np.array(skel.matrix_world)
    return {pb.name: (mw @ np.append(np.array(pb.head), 1))[:3] for pb in skel.pose.bones}


def max_step_deg(q):
    d = np.abs(np.sum(q[1:] * q[:-1], axis=1))
    return math.degrees(2 * np.arccos(np.clip(d, 0, 1)).max())


def test_true_fps_and_duration_and_scene_not_retimed(lib, tmp_path):
    scene = bpy.context.scene
    before = (scene.render.fps, scene.render.fps_base, scene.frame_start, scene.frame_end)
    f = S.write(tmp_path / "fast.bvh", S.bvh_text(S.still_rows(50), frame_time=0.01))
    (rec,) = import_one(lib, f, tmp_path)
    assert rec["fps"] == pytest.approx(100.0)
    assert rec["frames"] == 50
    assert rec["duration_s"] == pytest.approx(0.5)
    assert "fps:100" in rec["tags"] and "duration:short" in rec["tags"]
    assert (scene.render.fps, scene.render.fps_base, scene.frame_start, scene.frame_end) == before
    action, _ = load_clip(tmp_path / "lib.blend", rec["name"])
    assert tuple(action.frame_range) == (1.0, 50.0)


def test_header_frame_count_mismatch_is_a_warning_and_keeps_every_row(lib, tmp_path):
    f = S.write(tmp_path / "miscount.bvh", S.bvh_text(S.still_rows(50), header_frames=40))
    (rec,) = import_one(lib, f, tmp_path)
    assert rec["frames"] == 50
    assert rec["duration_s"] == pytest.approx(50 / 30, abs=1e-3)
    assert any("header says 40 frames" in w and "50" in w for w in rec["warnings"])


def test_euler_wraparound_gives_no_flip(lib, tmp_path):
    # The hips turn steadily through 180°: the file's Y angle wraps from 180 to -180.
    rows = S.still_rows(41, Hips=lambda t: (0, ((160 + t + 180) % 360) - 180, 0))
    f = S.write(tmp_path / "wrap.bvh", S.bvh_text(rows))
    (rec,) = import_one(lib, f, tmp_path)
    action, _ = load_clip(tmp_path / "lib.blend", rec["name"])
    for bone, q in quats(action).items():
        assert np.all(np.sum(q[1:] * q[:-1], axis=1) >= 0), bone      # one hemisphere
        assert max_step_deg(q) < 3.0, bone                            # 1°/frame motion


def test_near_gimbal_euler_gives_no_flip(lib, tmp_path):
    from scipy.spatial.transform import Rotation
    # Spine (channels Z Y X) pitches smoothly from 80° to 100° about Y with a small roll;
    # written the usual way (middle angle in ±90°), the Z and X angles jump by 180°.
    eulers = []
    for t in range(41):
        r = Rotation.from_euler("YX", [80.25 + t / 2, 3 * math.sin(t / 4)], degrees=True)
        z, y, x = r.as_euler("ZYX", degrees=True)
        eulers.append((x, y, z))
    jumps = np.abs(np.diff(np.array(eulers)[:, 2]))
    assert jumps.max() > 150  # the input really flips
    rows = S.still_rows(41, Spine=lambda t: eulers[t])
    f = S.write(tmp_path / "gimbal.bvh", S.bvh_text(rows))
    (rec,) = import_one(lib, f, tmp_path)
    action, _ = load_clip(tmp_path / "lib.blend", rec["name"])
    q = quats(action)["Spine"]
    assert np.all(np.sum(q[1:] * q[:-1], axis=1) >= 0)
    assert max_step_deg(q) < 3.0
    # …and the rotation is still the one in the file: 20° of pitch over the clip.
    total = math.degrees(2 * np.arccos(min(1.0, abs(float(np.dot(q[0], q[-1]))))))
    assert total == pytest.approx(20, abs=2.5)


def test_calibration_pose_at_start_is_trimmed(lib, tmp_path):
    rows = S.still_rows(60)
    rows[0] = {}  # all joints at zero: a calibration T-pose, then a jump to -60°
    f = S.write(tmp_path / "calib.bvh", S.bvh_text(rows))
    (rec,) = import_one(lib, f, tmp_path)
    assert rec["frames"] == 59
    assert any("calibration pose" in w for w in rec["warnings"])
    action, _ = load_clip(tmp_path / "lib.blend", rec["name"])
    assert max_step_deg(quats(action)["LeftArm"]) < 10
    # a clip without one keeps every frame
    g = S.write(tmp_path / "nocalib.bvh", S.bvh_text(S.still_rows(60)))
    (rec2,) = import_one(lib, g, tmp_path)
    # (a BVH file has no unit: the centimetres it is read in are reported, nothing else)
    assert rec2["frames"] == 60 and rec2["warnings"] == [
        "units taken as centimetres (the skeleton is 150 units tall): scaled by 0.01 to metres"]


def test_single_frame_spike_is_reported(lib, tmp_path):
    rows = S.still_rows(60)
    rows[30] = dict(rows[30], RightArm=(0, 0, 120))
    f = S.write(tmp_path / "spike.bvh", S.bvh_text(rows))
    (rec,) = import_one(lib, f, tmp_path)
    spikes = [w for w in rec["warnings"] if "spike" in w]
    assert spikes and "31" in spikes[0] and "RightArm" in spikes[0]
    assert rec["frames"] == 60


@pytest.mark.parametrize("up,unit", [("Y", 1.0), ("Z", 1.0), ("Y", 0.1), ("Z", 0.01 / 0.0254)])
def test_up_axis_and_units_normalised(lib, tmp_path, up, unit):
    # unit: file units per cm (1 = centimetres, 0.1 = decimetres, 1/2.54 = inches)
    f = S.write(tmp_path / "axes.bvh", S.bvh_text(S.still_rows(20), up=up, unit=unit))
    (rec,) = import_one(lib, f, tmp_path)
    _action, skel = load_clip(tmp_path / "lib.blend", rec["name"])
    heads = bone_heads(skel, 1)
    assert heads["Head"][2] > heads["Hips"][2] + 0.3
    top = heads["Head"][2] + 0.15
    bottom = min(heads["LeftFoot"][2], heads["RightFoot"][2])
    assert top - bottom == pytest.approx(S.HEIGHT_CM / 100 - 0.0, abs=0.1)


# ---------------------------------------------------------------------------- FBX

def _fbx_armature(scale_length=1.0, unit=1.0, actions=("walk",), light=False, lying=False):
    """An armature in the open file: hips → head (head on the hips' tail, so the FBX
    importer connects them), keyed hips/head location, one action per name."""
    bpy.ops.wm.read_homefile(use_empty=True)
    sc = bpy.context.scene
    sc.unit_settings.scale_length = scale_length
    arm = bpy.data.armatures.new("Rig")
    ob = bpy.data.objects.new("Rig", arm)
    sc.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    h = arm.edit_bones.new("hips")
    h.head, h.tail = (0, 0, 1.0 * unit), (0, 0, 1.1 * unit)
    c = arm.edit_bones.new("head")
    c.head, c.tail = (0, 0, 1.1 * unit), (0, 0, 1.7 * unit)
    c.parent = h
    if lying:  # the whole skeleton along -Y, as if exported lying on its back
        for eb in (h, c):
            eb.head = (eb.head[0], -eb.head[2], 0.1)
            eb.tail = (eb.tail[0], -eb.tail[2], 0.1)
    bpy.ops.object.mode_set(mode='OBJECT')
    ob.animation_data_create()
    for k, name in enumerate(actions):
        act = bpy.data.actions.new(name)
        act.use_fake_user = True
        ob.animation_data.action = act
        for f in range(1, 11):
            # bones point up (+Z): bone-space Y is world Z, bone-space X is world X
            ob.pose.bones["hips"].location = (0, 0.5 * unit * (f - 1) / 9 * (k + 1), 0)
            ob.pose.bones["hips"].keyframe_insert("location", frame=f)
            ob.pose.bones["head"].location = (0.2 * unit * (f - 1) / 9, 0, 0)
            ob.pose.bones["head"].keyframe_insert("location", frame=f)
    if light:
        lamp = bpy.data.lights.new("Lamp", 'POINT')
        sc.collection.objects.link(bpy.data.objects.new("Lamp", lamp))
    return ob


def _export_fbx(path, **kw):
    bpy.ops.export_scene.fbx(filepath=str(path), bake_anim_use_all_actions=True, **kw)
    bpy.ops.wm.read_homefile(use_empty=True)


def _plain_fbx(path, **kw):
    """Blender's FBX importer alone (to show the fault the library repairs)."""
    bpy.ops.import_scene.fbx(filepath=str(path), **kw)
    arm = next(o for o in bpy.data.objects if o.type == 'ARMATURE')
    return arm


def test_fbx_root_motion_kept_on_connected_bones(lib, tmp_path):
    _fbx_armature()
    bpy.context.scene.render.fps = 50  # the FBX says 50 fps; the user's scene is 30
    _export_fbx(tmp_path / "rm.fbx", add_leaf_bones=False)
    plain = _plain_fbx(tmp_path / "rm.fbx")
    assert plain.data.bones["head"].use_connect  # the fault: location keys ignored
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.context.scene.render.fps = 30
    (rec,) = import_one(lib, tmp_path / "rm.fbx", tmp_path)
    assert bpy.context.scene.render.fps == 30
    assert rec["fps"] == 50 and rec["duration_s"] == pytest.approx(10 / 50)
    _action, skel = load_clip(tmp_path / "lib.blend", rec["name"])
    assert not any(b.use_connect for b in skel.data.bones)
    a, b = bone_heads(skel, 1), bone_heads(skel, 10)
    # hips rise 0.5 m, the head bone also slides 0.2 m in its own space
    assert b["hips"][2] - a["hips"][2] == pytest.approx(0.5, abs=0.02)
    moved = np.linalg.norm((b["head"] - a["head"]) - (b["hips"] - a["hips"]))
    assert moved == pytest.approx(0.2, abs=0.02)
    assert "has_root_motion" in rec["tags"]


def test_fbx_centimetre_scale_baked_without_object_scale_keys(lib, tmp_path):
    _fbx_armature(scale_length=0.01, unit=100.0)
    _export_fbx(tmp_path / "cm.fbx", add_leaf_bones=False, apply_unit_scale=True)
    plain = _plain_fbx(tmp_path / "cm.fbx")
    bag = anim_utils.action_get_channelbag_for_slot(plain.animation_data.action,
                                                    plain.animation_data.action_slot)
    assert plain.scale[0] == pytest.approx(0.01)        # the fault: a keyed object scale
    assert [fc for fc in bag.fcurves if fc.data_path == "scale"]
    bpy.ops.wm.read_homefile(use_empty=True)
    (rec,) = import_one(lib, tmp_path / "cm.fbx", tmp_path)
    action, skel = load_clip(tmp_path / "lib.blend", rec["name"])
    assert tuple(skel.scale) == pytest.approx((1, 1, 1))
    bag = anim_utils.action_get_channelbag_for_slot(action, action.slots[0])
    assert not [fc for fc in bag.fcurves if fc.data_path == "scale"]
    a, b = bone_heads(skel, 1), bone_heads(skel, 10)
    assert a["hips"][2] == pytest.approx(1.0, abs=0.01)
    assert b["hips"][2] - a["hips"][2] == pytest.approx(0.5, abs=0.02)
    assert any("scale" in w for w in rec["warnings"])


def test_fbx_leaf_bones_dropped(lib, tmp_path):
    _fbx_armature()
    _export_fbx(tmp_path / "leaf.fbx", add_leaf_bones=True)
    assert "head_end" in _plain_fbx(tmp_path / "leaf.fbx").data.bones   # the fault
    bpy.ops.wm.read_homefile(use_empty=True)
    # …and the importer's own ignore_leaf_bones would drop the real leaf "head" when a
    # file has no added leaves (that is why the library drops `*_end` bones by name)
    _fbx_armature()
    _export_fbx(tmp_path / "noleaf.fbx", add_leaf_bones=False)
    assert "head" not in _plain_fbx(tmp_path / "noleaf.fbx", ignore_leaf_bones=True).data.bones
    bpy.ops.wm.read_homefile(use_empty=True)
    (rec,) = import_one(lib, tmp_path / "leaf.fbx", tmp_path)
    _action, skel = load_clip(tmp_path / "lib.blend", rec["name"])
    assert sorted(b.name for b in skel.data.bones) == ["head", "hips"]
    assert rec["bones"] == 2


def test_fbx_every_stack_becomes_a_clip(lib, tmp_path):
    _fbx_armature(actions=("walk", "jump"))
    _export_fbx(tmp_path / "stacks.fbx", add_leaf_bones=False)
    recs = import_one(lib, tmp_path / "stacks.fbx", tmp_path)
    assert sorted(r["name"] for r in recs) == ["stacks jump", "stacks walk"]
    # one skeleton shared by both clips; re-import updates both, no duplicates
    again = import_one(lib, tmp_path / "stacks.fbx", tmp_path)
    assert all(r["updated"] for r in again)
    names = [c["name"] for c in lib.list_clips(str(tmp_path / "lib.blend"))]
    assert sorted(names) == ["stacks jump", "stacks walk"]
    objs = {c["skeleton_object"] for c in lib.list_clips(str(tmp_path / "lib.blend"))}
    assert len(objs) == 1


def test_gltf_clips_keep_only_actions_and_skeleton(lib, tmp_path, shared_data):
    robot = shared_data / "characters" / "threejs_RobotExpressive.glb"
    bpy.context.scene.render.fps = 30   # the clips are sampled at 24 fps, not the scene's
    recs = import_one(lib, robot, tmp_path)
    assert bpy.context.scene.render.fps == 30
    import json, struct
    raw = robot.read_bytes()
    (length,) = struct.unpack_from("<I", raw, 12)
    animations = [a["name"] for a in json.loads(raw[20:20 + length])["animations"]]
    assert sorted(r["name"] for r in recs) == sorted(f"{robot.stem} {a}" for a in animations)
    assert all(r["fps"] == 24 and r["frames"] > 1 for r in recs)
    with bpy.data.libraries.load(str(tmp_path / "lib.blend")) as (src, dst):
        assert not src.meshes and not src.materials and not src.images
        assert len(src.objects) == 1 and len(src.actions) == len(animations)


def test_gltf_clip_poses_the_skeleton_as_blenders_importer(lib, tmp_path, shared_data):
    """Parent node, object rotation and scale 100 are baked into the skeleton: the bones
    still land where Blender's plain glTF import puts them."""
    robot = shared_data / "characters" / "threejs_RobotExpressive.glb"
    import_one(lib, robot, tmp_path)
    for anim in ("Dance", "Idle", "Wave"):
        bpy.ops.wm.read_homefile(use_empty=True)
        bpy.ops.import_scene.gltf(filepath=str(robot))
        plain = next(o for o in bpy.data.objects if o.type == 'ARMATURE')
        plain.animation_data.action = bpy.data.actions[anim]
        action, skel = load_clip(tmp_path / "lib.blend", f"{robot.stem} {anim}")
        assert tuple(skel.scale) == pytest.approx((1, 1, 1))
        start, end = action.frame_range
        for frame in (int(start), int((start + end) / 2), int(end)):
            a, b = bone_heads(plain, frame), bone_heads(skel, frame)
            worst = max(np.linalg.norm(a[k] - b[k]) for k in a)
            bad = sorted(((float(np.linalg.norm(a[k] - b[k])), k) for k in a), reverse=True)[:4]
            assert worst < 2e-3, (anim, frame, bad)


def test_keyed_quaternion_sign_flips_made_continuous(addon, lib, tmp_path):
    # Blender's FBX and glTF importers hand over quaternion keys; keys that flip sign
    # (q and -q: same rotation, but interpolating between them spins the long way round)
    # must come out continuous, with the same rotation at every key.
    ob = _fbx_armature()
    act = ob.animation_data.action
    bag = anim_utils.action_get_channelbag_for_slot(act, ob.animation_data.action_slot)
    ob.pose.bones["head"].rotation_mode = 'QUATERNION'
    angles = np.radians(np.arange(0, 360, 10))
    q = np.stack([np.cos(angles / 2), np.zeros_like(angles), np.sin(angles / 2),
                  np.zeros_like(angles)], axis=1)
    q[1::3] *= -1                                           # injected sign flips
    importers = addon.signsim_addon.library.importers
    for i in range(4):
        importers.write_curve(bag, 'pose.bones["head"].rotation_quaternion', i, "head",
                              np.arange(1, len(q) + 1), q[:, i])
    assert (np.sum(quats(act)["head"][1:] * quats(act)["head"][:-1], axis=1) < 0).any()
    importers._repair_keyed_action(ob, act, ob.animation_data.action_slot, [])
    fixed = quats(act)["head"]
    assert np.all(np.sum(fixed[1:] * fixed[:-1], axis=1) >= 0)
    assert max_step_deg(fixed) < 11
    assert np.allclose(np.abs(np.sum(fixed * q, axis=1)), 1, atol=1e-5)  # same rotations


def test_fbx_lying_skeleton_turned_upright(lib, tmp_path):
    _fbx_armature(lying=True)
    _export_fbx(tmp_path / "lying.fbx", add_leaf_bones=False)
    plain = _plain_fbx(tmp_path / "lying.fbx")
    bpy.context.scene.frame_set(1)
    assert (plain.matrix_world @ plain.pose.bones["head"].head).z < 0.5   # lying down
    bpy.ops.wm.read_homefile(use_empty=True)
    (rec,) = import_one(lib, tmp_path / "lying.fbx", tmp_path)
    assert any("turned upright" in w for w in rec["warnings"])
    _action, skel = load_clip(tmp_path / "lib.blend", rec["name"])
    a, b = bone_heads(skel, 1), bone_heads(skel, 10)
    assert a["head"][2] - a["hips"][2] == pytest.approx(0.1, abs=0.01)
    # the hips' motion (0.5 m along the bone) now goes up, as the head direction does
    assert b["hips"][2] - a["hips"][2] == pytest.approx(0.5, abs=0.02)


def test_file_with_more_keys_than_one_clip_becomes_consecutive_parts(addon, lib, tmp_path, monkeypatch):
    """A BVH with more keys than MAX_CLIP_KEYS (made small here) becomes clips 'x part 01',
    … of equal length, each added to the library as soon as it is made; together their
    keys are exactly the whole file's keys, frame for frame. A part file holds at most
    MAX_CLIP_KEYS keys, so each clip here has a part file of its own."""
    importers = addon.signsim_addon.library.importers
    rows = S.still_rows(100, Head=lambda t: (20 * math.sin(t / 3), 5 * math.cos(t / 4), 0),
                        pos=lambda t: (0.5 * t, S.HIP_HEIGHT, 0))
    whole_dir, split_dir = tmp_path / "whole", tmp_path / "split"
    whole_dir.mkdir()
    split_dir.mkdir()
    f = S.write(tmp_path / "take.bvh", S.bvh_text(rows))
    (whole,) = import_one(lib, f, whole_dir)
    curves = 4 * len(S.JOINTS) + 3
    monkeypatch.setattr(importers, "MAX_CLIP_KEYS", curves * 40)   # 100 frames → 3 parts of 34
    parts = import_one(lib, f, split_dir)
    assert [p["name"] for p in parts] == ["take part 01", "take part 02", "take part 03"]
    assert [p["frames"] for p in parts] == [34, 34, 32]
    assert all(f"part {k + 1} of 3" in " ".join(p["warnings"]) for k, p in enumerate(parts))
    full, _skel = load_clip(whole_dir / "lib.blend", "take")
    q_full = quats(full)
    start = 0
    for p in parts:
        action, _ = lib.load_clip(str(split_dir / "lib.blend"), p["name"])   # from its part file
        q = quats(action)
        assert q.keys() == q_full.keys()
        for bone in q:   # the same keys (up to one hemisphere per part)
            a, b = q[bone], q_full[bone][start:start + p["frames"]]
            sign = np.sign(np.sum(a[0] * b[0]))
            np.testing.assert_allclose(a * sign, b, atol=1e-6)
        start += p["frames"]
    assert start == whole["frames"] == 100
    assert sorted(p.name for p in (split_dir / "lib.blend.parts").iterdir()) == [
        "part-0001.blend", "part-0002.blend"]
    # re-importing updates the three parts (same file, same part keys)
    again = import_one(lib, f, split_dir)
    assert [p["updated"] for p in again] == [True] * 3
    assert len(lib.list_clips(str(split_dir / "lib.blend"))) == 3

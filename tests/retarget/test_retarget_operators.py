"""Bone map editing from the sidebar's operators, stored on the target armature."""

import bpy
import numpy as np
import pytest

from retarget_rigs import stand_in_signer


@pytest.fixture
def pair(addon, shared_data):
    """(target, source): the stand-in signer active, a Mixamo clip chosen as its source."""
    rt = addon.signsim_addon.retarget.api
    source, _action, _fps, _cleanup = rt.source_clip(str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh"))
    target = stand_in_signer()
    bpy.context.view_layer.objects.active = target
    target.signsim.bone_map_source = source.name
    return target, source


def _stored(target):
    return {i.target: i.source for i in target.signsim.bone_map if i.source}


def test_auto_set_mirror_and_presets(pair, tmp_path):
    target, source = pair
    assert bpy.ops.signsim.bonemap_auto() == {'FINISHED'}
    stored = _stored(target)
    assert stored["f_pinky.02.L"] == "mixamorig:LeftHandPinky2"
    assert len(target.signsim.bone_map) == len(target.data.bones)   # unmapped rows too

    assert bpy.ops.signsim.bonemap_set(target_bone="hand.L", source_bone="mixamorig:LeftForeArm") == {'FINISHED'}
    assert bpy.ops.signsim.bonemap_mirror() == {'FINISHED'}
    assert _stored(target)["hand.R"] == "mixamorig:RightForeArm"
    with pytest.raises(RuntimeError, match="has no bone 'nope'"):
        bpy.ops.signsim.bonemap_set(target_bone="hand.L", source_bone="nope")

    preset = tmp_path / "signer.json"
    assert bpy.ops.signsim.bonemap_export(filepath=str(preset)) == {'FINISHED'}
    edited = _stored(target)
    assert bpy.ops.signsim.bonemap_set(target_bone="hand.L", source_bone="") == {'FINISHED'}
    assert "hand.L" not in _stored(target)
    assert bpy.ops.signsim.bonemap_import(filepath=str(preset)) == {'FINISHED'}
    assert _stored(target) == edited


def test_retarget_operator_makes_a_new_action(pair):
    target, source = pair
    src_action = source.animation_data.action
    assert bpy.ops.signsim.retarget() == {'FINISHED'}
    action = target.animation_data.action
    assert action is not None and action != src_action
    assert target.animation_data.action_slot is not None
    assert _stored(target)["hand.L"] == "mixamorig:LeftHand"     # the automatic map was stored
    assert source.animation_data.action == src_action


def test_retarget_panel_and_operators_are_registered():
    assert hasattr(bpy.types, "SIGNSIM_PT_retarget") and hasattr(bpy.types, "SIGNSIM_UL_bone_map")
    assert bpy.types.SIGNSIM_PT_retarget.bl_category == "SignSim"
    for op in ("bonemap_auto", "bonemap_set", "bonemap_mirror", "bonemap_export",
               "bonemap_import", "retarget"):
        assert hasattr(bpy.ops.signsim, op)


@pytest.mark.compat
def test_retarget_operator_takes_a_previewed_library_clip(addon, shared_data, tmp_path):
    """The sidebar's path: a library clip previewed (its skeleton plays it from an NLA strip,
    no action assigned) and chosen as the source retargets as the CLI does from the library
    by name — the same keys — and the preview is left as it was (was refused: 'has no
    action to retarget')."""
    api = addon.signsim_addon
    lib = tmp_path / "lib.blend"
    clip = shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh"
    api.library.api.import_paths([str(clip)], str(lib))
    rt = api.retarget.api
    target = stand_in_signer()
    with rt.source_clip("bvhpython_test_freebvh_mixamorig", str(lib)) as src:
        expected = rt.transfer.transfer(src.armature, target, rt.auto_map(src.armature, target),
                                        source_fps=src.fps).keys["rot"]
    s = bpy.context.scene.signsim
    s.library_path = str(lib)
    assert bpy.ops.signsim.library_refresh() == {'FINISHED'}
    s.clip_index = 0
    assert bpy.ops.signsim.clip_preview() == {'FINISHED'}
    preview = next(o for o in bpy.data.objects if o.signsim.is_preview)
    bpy.context.view_layer.objects.active = target
    target.signsim.bone_map_source = preview.name
    assert bpy.ops.signsim.retarget() == {'FINISHED'}
    assert preview.animation_data.action is None
    assert not any(t.mute for t in preview.animation_data.nla_tracks)
    curves = {(c.data_path, c.array_index): c
              for c in api.compat.assigned_channelbag(target.animation_data).fcurves}
    worst = 0.0
    for bone, q in expected.items():
        path = f'pose.bones["{bone}"].rotation_quaternion'
        values = np.array([[kp.co[1] for kp in curves[(path, j)].keyframe_points] for j in range(4)]).T
        worst = max(worst, float(np.abs(values - q).max()))
    print(f"\nlargest key difference from the library clip's retarget: {worst:.2e}")
    assert worst < 1e-5

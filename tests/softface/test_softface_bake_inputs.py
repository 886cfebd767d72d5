"""Soft face through the bake on inputs a user brings: a mesh with its own shape-key
animation, a rig in centimetres, a clip no fingertip touches the face in, a face mesh
split from the head."""

import bpy
import numpy as np
import pytest
from softface_clips import SAMPLES, bake_json, window


@pytest.mark.slow
def test_soft_face_keeps_the_meshs_own_animation_and_works_in_centimetres(addon, chin, tmp_path):
    """Found by a fresh user: the mesh's own shape-key action was replaced (and lost on
    save), 0 modes silently became 20, a centimetre scene found no fingertip near the
    face, and a clip that never touches the face failed the whole bake."""
    cli = addon.signsim_addon.cli
    bpy.ops.wm.open_mainfile(filepath=str(chin))
    body = bpy.data.objects["SignerBody"]
    body.shape_key_add(name="Basis", from_mix=False)
    smile = body.shape_key_add(name="Smile", from_mix=False)
    for frame, value in ((1, 0.0), (30, 1.0)):
        smile.value = value
        smile.keyframe_insert("value", frame=frame)
    body.data.shape_keys.animation_data.action.name = "LipSync"
    own = tmp_path / "own.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(own))
    code, _, err = bake_json(cli, own, tmp_path / "zero.blend", "--soft-face", "--face-modes", "0")
    assert code == 1 and "at least 1 mode" in err
    code, res, err = bake_json(cli, own, tmp_path / "m.blend", "--soft-face", "--face-modes", "6")
    assert code == 0, err
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "m.blend"))
    ad = bpy.data.objects["SignerBody"].data.shape_keys.animation_data
    assert ad.action.name == "LipSync"
    (strip,) = ad.nla_tracks["SignSim soft face"].strips
    assert strip.action.name == bpy.data.objects["SignerBody"].data.name + ".soft_face"
    peak_m = res["soft_face"]["peak_displacement_mm"]
    assert peak_m > 0
    # the same character in a centimetre scene: the same dent, in millimetres
    bpy.ops.wm.open_mainfile(filepath=str(own))
    bpy.context.scene.unit_settings.scale_length = 0.01
    bpy.data.objects["Signer"].scale = (100.0, 100.0, 100.0)
    cm = tmp_path / "cm.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(cm))
    code, res, err = bake_json(cli, cm, tmp_path / "cm_out.blend", "--soft-face", "--face-modes", "6")
    assert code == 0, err
    assert res["soft_face"]["peak_displacement_mm"] == pytest.approx(peak_m, rel=0.02)
    # a clip that never comes near the face (fingerspelling's first second): the bake
    # stands, the soft face says why
    window(SAMPLES / "fingerspelling.bvh", tmp_path / "spelled.bvh", 0, 30)
    spelled = tmp_path / "spelled.blend"
    assert cli.main(["retarget", "--clip", str(tmp_path / "spelled.bvh"), "--rig", str(SAMPLES / "signer.blend"),
                     "--out", str(spelled)]) == 0
    code, res, err = bake_json(cli, spelled, tmp_path / "spelled_out.blend", "--soft-face")
    assert code == 0, err
    assert "soft_face" not in res and any("no fingertip comes near the face" in w for w in res["warnings"])


@pytest.mark.slow
def test_a_face_split_from_the_head_is_the_mesh_that_dents(addon, chin, tmp_path):
    """Characters often ship the face as its own skinned mesh: the dent goes on the mesh
    the fingertips touch, not on the one with the most head skin (a fresh user got 20
    shape keys on the back of the head that never moved)."""
    cli = addon.signsim_addon.cli
    bpy.ops.wm.open_mainfile(filepath=str(chin))
    body = bpy.data.objects["SignerBody"]
    head = body.vertex_groups["head"].index
    on_head = {v.index: v.co.y for v in body.data.vertices
               if v.groups and max(v.groups, key=lambda g: g.weight).group == head}
    front_y = float(np.percentile(list(on_head.values()), 45))  # the signer looks along −Y: the face, fewer vertices
    for o in bpy.data.objects:
        o.select_set(o == body)
    bpy.context.view_layer.objects.active = body
    for v in body.data.vertices:
        v.select = bool(v.index in on_head and v.co.y < front_y)
    with bpy.context.temp_override(active_object=body, object=body, selected_objects=[body]):
        bpy.ops.object.mode_set(mode='EDIT')
        bpy.ops.mesh.separate(type='SELECTED')
        bpy.ops.object.mode_set(mode='OBJECT')
    (face,) = [o.name for o in bpy.data.objects if o.type == 'MESH' and o.name.startswith("SignerBody.")]
    split = tmp_path / "split.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(split))
    code, res, err = bake_json(cli, split, tmp_path / "out.blend", "--soft-face", "--face-modes", "6")
    assert code == 0, err
    assert res["soft_face"]["peak_displacement_mm"] > 1.0
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend"))
    assert bpy.data.objects[face].data.shape_keys is not None
    assert [kb.name for kb in bpy.data.objects[face].data.shape_keys.key_blocks][1:] == \
        [f"SoftFace.{j:02d}" for j in range(6)]
    assert bpy.data.objects["SignerBody"].data.shape_keys is None

"""Soft face through the bake: `signsim bake --soft-face` writes the shape keys and the
`soft_face` entry of the bake's JSON."""
import contextlib
import io
import json
import pathlib

import bpy
import numpy as np
import pytest

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_blends"


@pytest.mark.slow
def test_bake_with_soft_face(addon, tmp_path):
    rig = tmp_path / "chin_cheek_on_signer.blend"
    cli = addon.signsim_addon.cli
    assert cli.main(["retarget", "--clip", str(SAMPLES / "chin_cheek.bvh"), "--rig", str(SAMPLES / "signer.blend"),
                     "--out", str(rig)]) == 0
    out = tmp_path / "baked.blend"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli.main(["bake", "--blend", str(rig), "--armature", "Signer", "--out", str(out),
                         "--soft-face", "--face-modes", "8", "--json"])
    assert code == 0
    res = json.loads(buf.getvalue().strip().splitlines()[-1])
    soft = res["soft_face"]
    assert sorted(soft) == ["build_seconds", "far_field_ratio", "modes", "peak_displacement_mm"]
    assert soft["modes"] == 8 and soft["peak_displacement_mm"] > 0 and 0 <= soft["far_field_ratio"] < 1
    assert soft["build_seconds"] > 0
    bpy.ops.wm.open_mainfile(filepath=str(out))
    body = bpy.data.objects["SignerBody"]
    names = [kb.name for kb in body.data.shape_keys.key_blocks]
    assert names == ["Basis"] + [f"SoftFace.{j:02d}" for j in range(8)]
    ad = body.data.shape_keys.animation_data
    assert ad.action.name == body.data.name + ".soft_face"
    # the baked action drives the fingertips: the keys follow it, the reference is untouched
    signer = bpy.data.objects["Signer"]
    assert signer.animation_data.action.name == res["action"]
    values = np.array([fc.keyframe_points[k].co[1] for fc in ad.action.layers[0].strips[0].channelbags[0].fcurves
                       for k in range(len(fc.keyframe_points))])
    assert np.abs(values).max() == pytest.approx(1.0)


@pytest.mark.slow
def test_bake_button_with_the_physics_panels_soft_face(addon, tmp_path):
    rig = tmp_path / "chin_cheek_on_signer.blend"
    assert addon.signsim_addon.cli.main(["retarget", "--clip", str(SAMPLES / "chin_cheek.bvh"),
                                         "--rig", str(SAMPLES / "signer.blend"), "--out", str(rig)]) == 0
    bpy.ops.wm.open_mainfile(filepath=str(rig))
    signer = bpy.data.objects["Signer"]
    signer.signsim.physics.soft_face = True
    signer.signsim.physics.face_modes = 5
    with bpy.context.temp_override(active_object=signer, object=signer):
        assert bpy.ops.signsim.bake('EXEC_DEFAULT', frame_start=20, frame_end=70) == {'FINISHED'}
    key = bpy.data.objects["SignerBody"].data.shape_keys
    assert [kb.name for kb in key.key_blocks][1:] == [f"SoftFace.{j:02d}" for j in range(5)]
    fcurves = key.animation_data.action.layers[0].strips[0].channelbags[0].fcurves
    assert {fc.range()[:] for fc in fcurves} == {(20.0, 70.0)}

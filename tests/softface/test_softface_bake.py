"""Soft face through the bake: `signsim bake --soft-face` writes the shape keys and the
`soft_face` entry of the bake's JSON."""
import contextlib
import io
import json

import bpy
import numpy as np
import pytest
from softface_clips import bake_json

@pytest.fixture(scope="module")
def soft_baked(addon, chin, tmp_path_factory):
    """`chin` baked with --soft-face --face-modes 8: (exit code, JSON result, out .blend,
    metrics .json); tests open the output and never save over it."""
    tmp = tmp_path_factory.mktemp("soft_baked")
    out = tmp / "baked.blend"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = addon.signsim_addon.cli.main(["bake", "--blend", str(chin), "--armature", "Signer", "--out", str(out),
                                             "--soft-face", "--face-modes", "8", "--json",
                                             "--metrics", str(tmp / "m.json")])
    lines = buf.getvalue().strip().splitlines()
    return code, (json.loads(lines[-1]) if lines else None), out, tmp / "m.json"


@pytest.mark.slow
def test_bake_with_soft_face(soft_baked):
    code, res, out, metrics = soft_baked
    assert code == 0
    soft = res["soft_face"]
    assert sorted(soft) == ["build_seconds", "far_field_ratio", "max_penetration_mm", "modes", "peak_displacement_mm"]
    assert soft["modes"] == 8 and soft["peak_displacement_mm"] > 0 and 0 <= soft["far_field_ratio"] < 1
    assert soft["build_seconds"] > 0 and 0 <= soft["max_penetration_mm"] <= 0.5
    assert json.loads(metrics.read_text())["soft_face"] == soft
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
def test_bake_button_with_the_physics_panels_soft_face(chin):
    bpy.ops.wm.open_mainfile(filepath=str(chin))
    signer = bpy.data.objects["Signer"]
    signer.signsim.physics.soft_face = True
    signer.signsim.physics.face_modes = 5
    with bpy.context.temp_override(active_object=signer, object=signer):
        assert bpy.ops.signsim.bake('EXEC_DEFAULT', frame_start=8, frame_end=16) == {'FINISHED'}
    key = bpy.data.objects["SignerBody"].data.shape_keys
    assert [kb.name for kb in key.key_blocks][1:] == [f"SoftFace.{j:02d}" for j in range(5)]
    fcurves = key.animation_data.action.layers[0].strips[0].channelbags[0].fcurves
    assert {fc.range()[:] for fc in fcurves} == {(8.0, 16.0)}


@pytest.mark.slow
def test_a_bake_without_the_soft_face_removes_an_earlier_dent(addon, chin, soft_baked, tmp_path):
    """Re-baking a soft-faced file without the soft face kept the old dent, now out of
    step with the new fingers; --face-modes without the soft face was silently ignored; a
    rig with no skin on its head refused the whole bake."""
    cli = addon.signsim_addon.cli
    rig = chin
    bpy.ops.wm.open_mainfile(filepath=str(rig))
    reference = bpy.data.objects["Signer"].animation_data.action.name
    code, _, soft, _ = soft_baked  # the soft-faced bake of `chin` (8 modes)
    assert code == 0
    code, res, err = bake_json(cli, soft, tmp_path / "again.blend", "--action", reference,
                           "--face-modes", "3")
    assert code == 0, err
    assert "soft_face" not in res
    assert any("removed the soft face an earlier bake left on 'SignerBody'" in w for w in res["warnings"])
    assert any("3 face modes asked but the soft face is off" in w for w in res["warnings"])
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "again.blend"))
    key = bpy.data.objects["SignerBody"].data.shape_keys
    assert [kb.name for kb in key.key_blocks] == ["Basis"]
    assert not any(a.name.endswith(".soft_face") for a in bpy.data.actions)
    # no skin on the head: the bake stands, the soft face says why
    bpy.ops.wm.open_mainfile(filepath=str(rig))
    body = bpy.data.objects["SignerBody"]
    body.vertex_groups.remove(body.vertex_groups["head"])
    headless = tmp_path / "headless.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(headless))
    code, res, err = bake_json(cli, headless, tmp_path / "headless_out.blend", "--soft-face")
    assert code == 0, err
    assert "soft_face" not in res and any("weighted to its head bone" in w for w in res["warnings"])

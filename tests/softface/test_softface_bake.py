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
# chin_cheek's index-on-the-right-cheek press (its BVH rows 45..74, the press about frames
# 6..18 of the 30): the soft face simulates every frame, so the tests bake this window, not
# the 91-frame clip (tests/softface/test_softface_api.py dents the signer over the whole clip)
CHEEK = (45, 75)


def _window(src, dst, first, last):
    """A copy of BVH `src` keeping its data rows first..last-1."""
    text = src.read_text().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("Frame Time:")) + 1
    out = [f"Frames: {last - first}" if line.startswith("Frames:") else line for line in text[:start]]
    dst.write_text("\n".join(out + text[start + first:start + last]) + "\n")


@pytest.fixture(scope="module")
def chin(addon, tmp_path_factory):
    """The cheek press of chin_cheek.bvh retargeted onto the bundled signer (read only)."""
    tmp = tmp_path_factory.mktemp("softface_bake")
    _window(SAMPLES / "chin_cheek.bvh", tmp / "cheek.bvh", *CHEEK)
    rig = tmp / "chin.blend"
    assert addon.signsim_addon.cli.main(["retarget", "--clip", str(tmp / "cheek.bvh"),
                                         "--rig", str(SAMPLES / "signer.blend"), "--out", str(rig)]) == 0
    return rig


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


def _bake(cli, rig, out, *extra):
    buf, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
        code = cli.main(["bake", "--blend", str(rig), "--armature", "Signer", "--out", str(out), "--json", *extra])
    lines = buf.getvalue().strip().splitlines()
    return code, (json.loads(lines[-1]) if lines else None), err.getvalue()


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
    code, _, err = _bake(cli, own, tmp_path / "zero.blend", "--soft-face", "--face-modes", "0")
    assert code == 1 and "at least 1 mode" in err
    code, res, err = _bake(cli, own, tmp_path / "m.blend", "--soft-face", "--face-modes", "6")
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
    code, res, err = _bake(cli, cm, tmp_path / "cm_out.blend", "--soft-face", "--face-modes", "6")
    assert code == 0, err
    assert res["soft_face"]["peak_displacement_mm"] == pytest.approx(peak_m, rel=0.02)
    # a clip that never comes near the face (fingerspelling's first second): the bake
    # stands, the soft face says why
    _window(SAMPLES / "fingerspelling.bvh", tmp_path / "spelled.bvh", 0, 30)
    spelled = tmp_path / "spelled.blend"
    assert cli.main(["retarget", "--clip", str(tmp_path / "spelled.bvh"), "--rig", str(SAMPLES / "signer.blend"),
                     "--out", str(spelled)]) == 0
    code, res, err = _bake(cli, spelled, tmp_path / "spelled_out.blend", "--soft-face")
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
    code, res, err = _bake(cli, split, tmp_path / "out.blend", "--soft-face", "--face-modes", "6")
    assert code == 0, err
    assert res["soft_face"]["peak_displacement_mm"] > 1.0
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "out.blend"))
    assert bpy.data.objects[face].data.shape_keys is not None
    assert [kb.name for kb in bpy.data.objects[face].data.shape_keys.key_blocks][1:] == \
        [f"SoftFace.{j:02d}" for j in range(6)]
    assert bpy.data.objects["SignerBody"].data.shape_keys is None


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
    code, res, err = _bake(cli, soft, tmp_path / "again.blend", "--action", reference,
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
    code, res, err = _bake(cli, headless, tmp_path / "headless_out.blend", "--soft-face")
    assert code == 0, err
    assert "soft_face" not in res and any("weighted to its head bone" in w for w in res["warnings"])

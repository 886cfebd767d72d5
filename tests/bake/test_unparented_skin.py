"""A skinned mesh need not be parented to its armature: one whose Armature modifier points
at the rig but which hangs elsewhere in the outliner deforms the same in Blender, so the
bake must read the same body volumes from it (a fresh user got "no torso", default palm
boxes and a refused soft face)."""
import contextlib
import io
import json
import pathlib

import bpy
import pytest

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_blends"
TIMING = {"bake_seconds", "realtime_factor"}


def _bake(cli, rig, out):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = cli.main(["bake", "--blend", str(rig), "--armature", "Signer", "--out", str(out), "--json"])
    assert code == 0
    return json.loads(buf.getvalue().strip().splitlines()[-1])


@pytest.mark.slow
def test_an_unparented_skin_bakes_like_a_parented_one(addon, tmp_path):
    cli = addon.signsim_addon.cli
    rig = tmp_path / "chin.blend"
    assert cli.main(["retarget", "--clip", str(SAMPLES / "chin_cheek.bvh"), "--rig", str(SAMPLES / "signer.blend"),
                     "--out", str(rig), "--no-contacts"]) == 0
    parented = _bake(cli, rig, tmp_path / "a.blend")
    bpy.ops.wm.open_mainfile(filepath=str(rig))
    body = bpy.data.objects["SignerBody"]
    world = body.matrix_world.copy()
    body.parent = None
    body.matrix_world = world
    assert any(m.type == 'ARMATURE' and m.object.name == "Signer" for m in body.modifiers)
    loose = tmp_path / "loose.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(loose))
    unparented = _bake(cli, loose, tmp_path / "b.blend")
    assert not any("no torso" in w or "no skin on hand" in w for w in unparented["warnings"]), unparented["warnings"]
    assert unparented["warnings"] == parented["warnings"]
    for side in ("reference", "baked"):
        assert {k: v for k, v in unparented["metrics"][side].items() if k not in TIMING} == \
               {k: v for k, v in parented["metrics"][side].items() if k not in TIMING}

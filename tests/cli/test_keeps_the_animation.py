"""The character's own animation survives in every file SignSim writes: retarget, bake,
resolve and compose assign a new action, and the one assigned before (with no other user, so Blender
would drop it on save) is kept in OUT with a fake user — a fresh user lost it that way."""
import pathlib

import bpy
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_blends"


def _actions_in(path):
    with bpy.data.libraries.load(str(path)) as (src, _dst):
        return set(src.actions)


def _rig_with_idle(path):
    """signer.blend with a two-key action 'MyIdle' of its own, assigned, without fake user."""
    bpy.ops.wm.open_mainfile(filepath=str(SAMPLES / "signer.blend"))
    ob = bpy.data.objects["Signer"]
    ob.animation_data_create()
    ob.animation_data.action = None
    pb = ob.pose.bones["head"]
    pb.rotation_mode = 'QUATERNION'
    for frame, w in ((1, 1.0), (12, 0.98)):
        pb.rotation_quaternion = (w, (1 - w * w) ** 0.5, 0.0, 0.0)
        pb.keyframe_insert("rotation_quaternion", frame=frame)
    ob.animation_data.action.name = "MyIdle"
    assert ob.animation_data.action.users == 1 and not ob.animation_data.action.use_fake_user
    bpy.ops.wm.save_as_mainfile(filepath=str(path))


@pytest.mark.compat
@pytest.mark.slow
def test_retarget_bake_and_resolve_keep_the_assigned_action(addon, tmp_path):
    cli = addon.signsim_addon.cli.main
    rig = tmp_path / "rig.blend"
    _rig_with_idle(rig)
    retargeted = tmp_path / "rt.blend"
    assert cli(["retarget", "--clip", str(SAMPLES / "chin_cheek.bvh"), "--rig", str(rig),
                "--out", str(retargeted), "--no-contacts"]) == 0
    assert {"MyIdle", "chin_cheek_Signer"} <= _actions_in(retargeted)
    # bake and resolve another action than the assigned one: the assigned clip stays too
    baked = tmp_path / "bk.blend"
    assert cli(["bake", "--blend", str(retargeted), "--armature", "Signer", "--action", "MyIdle",
                "--out", str(baked)]) == 0
    assert {"MyIdle", "chin_cheek_Signer"} <= _actions_in(baked)
    resolved = tmp_path / "rs.blend"
    assert cli(["resolve", "--blend", str(retargeted), "--armature", "Signer", "--action", "MyIdle",
                "--frames", "1:2", "--out", str(resolved)]) == 0
    assert {"MyIdle", "chin_cheek_Signer"} <= _actions_in(resolved)


@pytest.mark.slow
def test_compose_keeps_the_assigned_action(addon, tmp_path):
    rig = tmp_path / "rig.blend"
    _rig_with_idle(rig)
    out = tmp_path / "composed.blend"
    assert addon.signsim_addon.cli.main(
        ["compose", "--clips", str(SAMPLES / "chin_cheek.bvh"), str(SAMPLES / "fingerspelling.bvh"),
         "--rig", str(rig), "--out", str(out)]) == 0
    assert "MyIdle" in _actions_in(out)

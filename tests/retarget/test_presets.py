"""A bone map preset naming bones the target lacks: one clear error, CLI and operator alike."""
import pathlib

import bpy
import pytest

from retarget_rigs import stand_in_signer

SAMPLES = pathlib.Path(__file__).resolve().parents[2] / "sample_blends"


def test_preset_naming_missing_bones_is_the_same_error_in_cli_and_operator(addon, tmp_path, capsys):
    bm = addon.solver.retarget.bonemap
    preset = tmp_path / "map.json"
    preset.write_text(bm.BoneMap([("spine", "Hips", 1.0), ("no_such_bone", "Spine", 1.0)]).to_json())
    target = stand_in_signer()
    rig = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(rig), copy=True)
    out = tmp_path / "out.blend"
    code = addon.signsim_addon.cli.main(["retarget", "--clip", str(SAMPLES / "chin_cheek.bvh"), "--rig", str(rig),
                                         "--armature", target.name, "--map", str(preset), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and not out.exists()
    cli_message = err.removeprefix("signsim: error: ")
    assert "bones not in" in cli_message and "no_such_bone" in cli_message

    bpy.ops.wm.read_homefile(use_empty=True)
    target = stand_in_signer()
    bpy.context.view_layer.objects.active = target
    assert bpy.ops.signsim.bonemap_set(target_bone="spine", source_bone="pelvis") == {'FINISHED'}
    stored = [(i.target, i.source) for i in target.signsim.bone_map]
    with pytest.raises(RuntimeError) as info:
        bpy.ops.signsim.bonemap_import(filepath=str(preset))
    assert str(info.value).strip() == f"Error: {cli_message}"
    assert [(i.target, i.source) for i in target.signsim.bone_map] == stored


def test_one_preset_import_and_its_docstring_says_it_refuses_unknown_bones(addon, tmp_path):
    """The preset import the operator and CLI use is the only one in the retarget package,
    and its documentation matches its behaviour (refuse, never drop)."""
    api, transfer = addon.signsim_addon.retarget.api, addon.signsim_addon.retarget.transfer
    assert not hasattr(transfer, "import_map")          # no second import that drops pairs
    assert "dropped" not in api.import_map.__doc__ and "lacks" in api.import_map.__doc__
    bm = addon.solver.retarget.bonemap
    target = stand_in_signer()
    preset = tmp_path / "map.json"
    preset.write_text(bm.BoneMap([("spine", "Hips", 1.0), ("no_such_bone", "Spine", 1.0)]).to_json())
    with pytest.raises(addon.signsim_addon.errors.SignSimError, match="no_such_bone"):
        api.import_map(target, str(preset))
    assert not [i for i in target.signsim.bone_map if i.source]
    preset.write_text(bm.BoneMap([("spine", "Hips", 1.0), ("spine.001", "Spine", 1.0)]).to_json())
    assert api.import_map(target, str(preset)) == 2
    assert {i.target: i.source for i in target.signsim.bone_map if i.source} == {"spine": "Hips", "spine.001": "Spine"}

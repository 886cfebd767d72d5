"""Issue 36 defects, each on an input the test builds: a fingerless rig given a clap, a
bowing source, a source whose clavicle stays still while the arm rises, Mixamo thumbs.
Driven through `signsim retarget` (the CLI), measured on Blender's evaluated bones."""
import json
import pathlib

import bpy
import pytest

SAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends"

FINGER_PREFIXES = ("thumb", "f_", "palm")


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main


def _last_json(capsys):
    captured = capsys.readouterr()
    return json.loads(captured.out.strip().splitlines()[-1]), captured.err


def _fingerless_signer(path):
    """The bundled signer (armature and skin) with every finger and thumb bone deleted,
    saved to path."""
    bpy.ops.wm.open_mainfile(filepath=str(SAMPLES / "signer.blend"))
    ob = bpy.data.objects["Signer"]
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    bones = ob.data.edit_bones
    for name in [b.name for b in bones if b.name.startswith(FINGER_PREFIXES)]:
        bones.remove(bones[name])
    bpy.ops.object.mode_set(mode='OBJECT')
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    return path


@pytest.mark.slow
def test_clap_onto_fingerless_rig(cli, shared_data, tmp_path, capsys):
    """A clap onto a rig without finger bones: no crash; palm–palm contacts are tried on
    the rig (kept, or skipped with the measured reason, never for a missing palm frame);
    any contact that needs a finger is skipped with a warning."""
    rig = _fingerless_signer(tmp_path / "fingerless.blend")
    code = cli(["retarget", "--clip", str(shared_data / "generated" / "clap_fast.bvh"),
                "--rig", str(rig), "--out", str(tmp_path / "out.blend"), "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    contacts = result["contacts"]
    palms = [k for k in contacts if sorted(k["parts"]) == ["palm_L", "palm_R"]]
    assert palms, contacts
    for k in palms:
        assert "gap_mm" in k or "no skin or chain" not in k["skipped"], k
        if "skipped" in k:                               # measured on the rig, and said
            assert any("palm_L-palm_R" in w and k["skipped"] in w for w in result["warnings"]), k
    for k in contacts:
        if any(not p.startswith(("palm", "face")) and p not in ("chin", "cheek_L", "cheek_R")
               for p in k["parts"]) and "gap_mm" not in k:
            assert any("-".join(k["parts"]) in w for w in result["warnings"]), k

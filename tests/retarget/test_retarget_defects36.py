"""Issue 36 defects, each on an input the test builds: a fingerless rig given a clap, a
bowing source, a source whose clavicle stays still while the arm rises, Mixamo thumbs.
Driven through `signsim retarget` (the CLI), measured on Blender's evaluated bones."""
import json
import pathlib

import bpy
import pytest

import library_samples

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


BOW = 87.0   # degrees the hips pitch forward (legs kept vertical): the head 3.1 cm above the hips


def _bowing_clip(path):
    """A 12-joint BVH (library_samples) that stands upright, then bows: the hips pitch
    forward to BOW degrees over frames 24–32 and holds it (the legs turned back so they stay vertical),
    holding the head (60 cm above the hips when upright) 60·cos(87°) = 3.1 cm above them."""
    rows = []
    for t in range(48):
        a = BOW * min(1.0, max(0.0, (t - 24) / 8))
        rows.append({"Hips": (a, 0, 0), "LeftUpLeg": (-a, 0, 0), "RightUpLeg": (-a, 0, 0),
                     "LeftArm": (0, 0, -60), "RightArm": (0, 0, 60)})
    path.write_text(library_samples.bvh_text(rows))
    return path


@pytest.mark.slow
def test_bow_is_not_an_inversion(cli, shared_data, tmp_path, capsys):
    """A source bowing with its head 3 cm above its hips retargets (exit 0) onto the signer,
    whose head dips just below its own hips (before: refused as "head below hips where the
    source stands upright"); a map that truly hangs the target's head below its hips (the
    spine driven by a leg) is still refused with one line, nothing written."""
    clip = _bowing_clip(tmp_path / "bow.bvh")
    code = cli(["retarget", "--clip", str(clip), "--rig", str(SAMPLES / "signer.blend"),
                "--out", str(tmp_path / "bow.blend"), "--no-contacts", "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    assert not any("head is not above its hips" in w for w in result["warnings"]), result["warnings"]
    # a Mixamo clip with the signer's spine mapped down the left leg
    mixamo = str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh")
    code = cli(["retarget", "--clip", mixamo, "--rig", str(SAMPLES / "signer.blend"),
                "--out", str(tmp_path / "mixamo.blend"), "--no-contacts", "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    down = dict(result["bone_map"], **{"spine.001": "mixamorig:LeftUpLeg", "spine.002": "mixamorig:LeftLeg",
                                        "spine.003": "mixamorig:LeftFoot"})
    preset = tmp_path / "down.json"
    preset.write_text(json.dumps(down))
    out = tmp_path / "down.blend"
    code = cli(["retarget", "--clip", mixamo, "--rig", str(SAMPLES / "signer.blend"),
                "--map", str(preset), "--out", str(out), "--no-contacts"])
    err = capsys.readouterr().err
    assert code != 0 and "head below its hips" in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()

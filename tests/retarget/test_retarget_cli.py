"""`signsim retarget`: JSON result, the written .blend, presets, and one-line errors."""
import json
import re

import bpy
import numpy as np
import pytest

from action_keys import all_keys
from batch_library import short_clip
from retarget_rigs import stand_in_signer

MIXAMO = "bvhpython_test_freebvh_mixamorig.bvh"
PYBVH = "pybvh_bvh_test3_fingers.bvh"
TWO_JOINTS = """HIERARCHY
ROOT Hips
{
  OFFSET 0 90 0
  CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation
  JOINT Spine
  {
    OFFSET 0 10 0
    CHANNELS 3 Zrotation Xrotation Yrotation
    End Site
    {
      OFFSET 0 10 0
    }
  }
}
MOTION
"""


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main


@pytest.fixture
def rig(tmp_path):
    stand_in_signer()
    path = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    return path


def _last_json(capsys):
    captured = capsys.readouterr()
    return json.loads(captured.out.strip().splitlines()[-1]), captured.err


@pytest.mark.compat
@pytest.mark.slow
def test_two_clips_one_call(cli, rig, shared_data, tmp_path, capsys):
    out = tmp_path / "out.blend"
    code = cli(["retarget", "--clip", str(shared_data / "mocap" / MIXAMO),
                "--clip", str(shared_data / "mocap" / PYBVH),
                "--rig", str(rig), "--out", str(out), "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    assert result["armature"] == "Signer"
    assert result["actions"][0] == result["action"] and len(result["actions"]) == 2
    assert result["bone_map"]["hand.L"] == "mixamorig:LeftHand"
    assert result["bone_map"]["f_index.03.R"] == "mixamorig:RightHandIndex3"
    assert {"index.L", "pinky.R", "thumb.L", "head", "neck", "spine", "hips"} <= set(result["coverage"])
    assert "heel.02.L" in result["unmapped_target"]
    assert 0 < min(result["confidence"].values()) <= max(result["confidence"].values()) == 1.0
    assert not list(tmp_path.glob("*.partial.blend"))
    # one entry per clip, each with its own skeleton's map, frames and warnings
    first, second = result["clips"]
    assert [first["clip"], second["clip"]] == [str(shared_data / "mocap" / MIXAMO), str(shared_data / "mocap" / PYBVH)]
    assert [first["action"], second["action"]] == result["actions"]
    assert first["bone_map"] == result["bone_map"] and first["frames"] == result["frames"]
    assert first["coverage"] == result["coverage"]
    assert "mixamorig:LeftHand" not in second["bone_map"].values() and second["bone_map"]
    assert set(second["bone_map"].values()).isdisjoint(first["bone_map"].values())
    assert sum(len(c["warnings"]) for c in result["clips"]) == len(result["warnings"])

    bpy.ops.wm.open_mainfile(filepath=str(out))
    armatures = [o for o in bpy.data.objects if o.type == 'ARMATURE']
    assert [o.name for o in armatures] == ["Signer"]       # the clips' armatures are not kept
    for c in result["clips"]:                              # each clip's frames are its action's
        assert list(bpy.data.actions[c["action"]].frame_range) == c["frames"]
    signer = armatures[0]
    assert signer.animation_data.action.name == result["action"]
    # the file opens on the assigned clip's frames (was the rig file's 1-250)
    scene = bpy.context.scene
    assert [scene.frame_start, scene.frame_end] == [int(f) for f in result["frames"]]
    assert set(result["actions"]) <= {a.name for a in bpy.data.actions}
    stored = {i.target: i.source for i in signer.signsim.bone_map if i.source}
    assert stored == result["bone_map"]


def test_preset_map_is_used_for_the_clip(cli, rig, shared_data, tmp_path, capsys, addon):
    bm = addon.solver.retarget.bonemap
    preset = tmp_path / "map.json"
    preset.write_text(bm.BoneMap([("spine", "mixamorig:Hips", 1.0), ("spine.001", "mixamorig:Spine", 1.0),
                                  ("thigh.L", "mixamorig:LeftUpLeg", 1.0),
                                  ("thigh.R", "mixamorig:RightUpLeg", 1.0)]).to_json())
    out = tmp_path / "out.blend"
    code = cli(["retarget", "--clip", str(shared_data / "mocap" / MIXAMO), "--rig", str(rig),
                "--map", str(preset), "--out", str(out), "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    assert result["bone_map"] == {"spine": "mixamorig:Hips", "spine.001": "mixamorig:Spine",
                                  "thigh.L": "mixamorig:LeftUpLeg", "thigh.R": "mixamorig:RightUpLeg"}
    assert out.exists()


def _bvh(tmp_path, name, frames):
    path = tmp_path / name
    rows = "".join(f"0 90 0 0 {10 * k} 0 0 0 0\n" for k in range(frames))
    path.write_text(TWO_JOINTS + f"Frames: {frames}\nFrame Time: 0.033333\n" + rows)
    return path


@pytest.mark.parametrize("case,message", [
    ("missing rig", "file not found"),
    ("unknown armature", "rig.blend (armatures: Signer)"),
    ("clip without keys", "has no motion keys"),
    ("no hips", "no hips found"),
    ("library missing", "no motion library at"),
    ("clip not in library", "no clip named 'wave_hello'"),
    ("missing preset", "bone map preset not found"),
    ("missing clip", "clip not found"),
    ("rig not a blend", "cannot open"),
    ("rig a BVH", "holds motion, not a character"),
    ("rig a damaged glb", "not a readable glTF file"),
])
def test_bad_input_is_one_line_and_writes_nothing(cli, rig, addon, shared_data, tmp_path, capsys, case,
                                                  message):
    out = tmp_path / "out.blend"
    clip = str(shared_data / "mocap" / MIXAMO)
    args = {"missing rig": lambda: ["--rig", str(tmp_path / "nope.blend")],
            "unknown armature": lambda: ["--armature", "Nope"],
            "clip without keys": lambda: ["--clip", str(_bvh(tmp_path, "still.bvh", 1))],
            "no hips": lambda: ["--clip", str(_bvh(tmp_path, "stick.bvh", 3))],
            "library missing": lambda: ["--clip", "wave_hello", "--library", str(tmp_path / "lib.blend")],
            "clip not in library": lambda: ["--clip", "wave_hello",
                                            "--library", str(_library(addon, shared_data, tmp_path))],
            "missing preset": lambda: ["--map", str(tmp_path / "nope.json")],
            "missing clip": lambda: ["--clip", "wave_hello"],
            "rig not a blend": lambda: ["--rig", str(_bvh(tmp_path, "text.blend", 3))],
            "rig a BVH": lambda: ["--rig", clip],
            "rig a damaged glb": lambda: ["--rig", str(_bvh(tmp_path, "text.glb", 3))]}[case]()
    argv = ["retarget", "--rig", str(rig), "--out", str(out), "--json"]
    if "--clip" not in args:
        argv += ["--clip", clip]
    code = cli(argv + args)
    result, err = _last_json(capsys)
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert message in result["error"]
    assert not out.exists() and not list(tmp_path.glob("*.partial.blend"))


def test_a_misspelt_clip_file_gets_the_nearest_names(cli, rig, shared_data, tmp_path, capsys):
    """--clip fingerspeling.bvh next to fingerspelling.bvh: one line naming the file beside it."""
    (tmp_path / "fingerspelling.bvh").write_text((shared_data / "mocap" / MIXAMO).read_text())
    out = tmp_path / "out.blend"
    code = cli(["retarget", "--clip", str(tmp_path / "fingerspeling.bvh"), "--rig", str(rig), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and not out.exists()
    assert err == [f"signsim: error: clip not found: {tmp_path / 'fingerspeling.bvh'}; did you mean "
                   "'fingerspelling.bvh'?"]


@pytest.mark.slow
@pytest.mark.parametrize("character", ["godot_male_base_mesh_cc0.glb", "threejs_RobotExpressive.glb", "signer.fbx"])
def test_a_character_file_is_a_rig(cli, rig, shared_data, tmp_path, capsys, character):
    """--rig CHARACTER.glb/.fbx: the character read by Blender's importer, no intermediate
    file; the same keys as through a .blend saved from that import, and none of the file's
    own animations in the output. The FBX is the signer stand-in exported by Blender."""
    if character.endswith(".fbx"):
        path = tmp_path / character
        bpy.ops.export_scene.fbx(filepath=str(path), add_leaf_bones=False)
        assert path.is_file()
    else:
        path = shared_data / "characters" / character
    clip = str(shared_data / "mocap" / MIXAMO)
    direct = tmp_path / "direct.blend"
    assert cli(["retarget", "--clip", clip, "--rig", str(path), "--out", str(direct), "--json"]) == 0
    result, _ = _last_json(capsys)
    # the clip's frames at the clip's rate (69 at 30 fps), whatever rate the character file had
    assert result["fps"] == pytest.approx(30.0, abs=1e-3) and result["frames"] == [1, 69]
    baked = tmp_path / "baked.blend"
    code = cli(["bake", "--blend", str(direct), "--out", str(baked), "--json"])
    bake = _last_json(capsys)[0]
    assert bake["action"].endswith(".physics") and baked.is_file()
    assert code == (3 if bake["verdict"] == "failed" else 0), bake["verdict"]
    bpy.ops.wm.read_homefile(use_empty=True)
    if character.endswith(".fbx"):
        bpy.ops.import_scene.fbx(filepath=str(path), use_anim=False, ignore_leaf_bones=False,
                                 automatic_bone_orientation=False, use_custom_props=False)
    else:
        bpy.ops.import_scene.gltf(filepath=str(path))
    for ob in bpy.data.objects:
        ob.animation_data_clear()
    for action in list(bpy.data.actions):
        bpy.data.actions.remove(action)
    saved = tmp_path / "saved.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(saved))
    via = tmp_path / "via.blend"
    assert cli(["retarget", "--clip", clip, "--rig", str(saved), "--out", str(via), "--json"]) == 0
    keys = []
    for path in (direct, via):
        bpy.ops.wm.open_mainfile(filepath=str(path))
        assert [a.name for a in bpy.data.actions] == [result["clips"][0]["action"]]
        keys.append(all_keys(bpy.data.actions[0]))
    assert keys[0] and keys[0].keys() == keys[1].keys()
    assert all(np.array_equal(keys[0][k], keys[1][k]) for k in keys[0])


def _library(addon, shared_data, tmp_path):
    """A motion library .blend holding the Mixamo clip, under the name of its file."""
    lib = tmp_path / "lib.blend"
    result = addon.signsim_addon.library.api.import_paths([str(shared_data / "mocap" / MIXAMO)], str(lib))
    assert [r["name"] for r in result["imported"]] == [MIXAMO[:-4]]
    bpy.ops.wm.read_homefile(use_empty=True)
    return lib


def test_library_clip_by_name(cli, rig, addon, shared_data, tmp_path, capsys):
    """--clip NAME --library FILE: the library's clip (imported with its repairs) onto the rig."""
    lib = _library(addon, shared_data, tmp_path)
    out = tmp_path / "out.blend"
    code = cli(["retarget", "--clip", MIXAMO[:-4], "--library", str(lib), "--rig", str(rig),
                "--out", str(out), "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    assert result["action"] == f"{MIXAMO[:-4]}_Signer"
    assert result["bone_map"]["hand.L"] == "mixamorig:LeftHand"
    bpy.ops.wm.open_mainfile(filepath=str(out))
    assert [o.name for o in bpy.data.objects] == ["Signer"]       # the clip's skeleton is gone
    assert [a.name for a in bpy.data.actions] == [result["action"]]


@pytest.mark.slow
def test_gltf_clip_robot_dance_onto_the_signer(cli, rig, shared_data, tmp_path, capsys):
    """A glTF character's first animation as the clip: the robot's 4-digit hands drive the
    signer's thumb, index, middle and ring; the robot's meshes do not come along."""
    out = tmp_path / "out.blend"
    code = cli(["retarget", "--clip", str(shared_data / "characters" / "threejs_RobotExpressive.glb"),
                "--rig", str(rig), "--out", str(out), "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    assert result["action"] == "threejs_RobotExpressive_Signer"
    assert {"thumb.L", "index.L", "middle.L", "ring.L"} <= set(result["coverage"])
    assert "pinky.L" not in result["coverage"]
    bpy.ops.wm.open_mainfile(filepath=str(out))
    assert [o.name for o in bpy.data.objects] == ["Signer"]
    assert [a.name for a in bpy.data.actions] == [result["action"]]


@pytest.mark.slow
def test_planted_foot_warnings_name_scene_frames(cli, shared_data, tmp_path, capsys):
    """A planted-foot warning names scene frames, as the action and the JSON's integer
    `frames` do: 7.5 s of CMU's walk onto the robot, whose right foot misses its floor
    spot in the run the clip starts with (at scene frame 1, not frame index 0)."""
    clip = tmp_path / "walk.bvh"
    short_clip(shared_data / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh", clip, 900)
    assert cli(["retarget", "--clip", str(clip), "--rig", str(shared_data / "characters" / "threejs_RobotExpressive.glb"),
                "--out", str(tmp_path / "r.blend"), "--json"]) == 0
    result, _ = _last_json(capsys)
    first, last = result["frames"]
    assert all(type(f) is int for f in result["frames"] + result["clips"][0]["frames"]), result["frames"]
    runs = [tuple(map(int, m)) for w in result["warnings"] if w.startswith("planted ")
            for m in re.findall(r"(\d+)–(\d+)", w.split("frames ", 1)[1])]
    assert runs and all(first <= a <= b <= last for a, b in runs), (result["frames"], result["warnings"])
    assert min(a for a, _ in runs) == first, runs

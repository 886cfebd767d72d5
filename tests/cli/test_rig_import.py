"""`signsim rig import CHARACTER --out RIG.blend` (issue 37): a character from an FBX or
glTF file saved as a rig file (library.open_character), which retarget then takes as
--rig; a BVH file is refused with one line."""
import json

import bpy
import pytest
from batch_library import SAMPLES, short_clip
from cli_capture import run_cli


@pytest.mark.slow
def test_rig_import_saves_the_character_as_a_rig_file(cli, capsys, shared_data, tmp_path):
    rig = tmp_path / "robot.blend"
    code, out, err = run_cli(cli, capsys, ["rig", "import", str(shared_data / "characters" /
                                                               "threejs_RobotExpressive.glb"), "--out", str(rig),
                                           "--json"])
    assert code == 0, err
    result = json.loads(out.splitlines()[-1])
    assert result["armatures"] == ["RobotArmature"] and result["meshes"] and result["out"] == str(rig)
    bpy.ops.wm.open_mainfile(filepath=str(rig), load_ui=False)
    assert [o.name for o in bpy.data.objects if o.type == 'ARMATURE'] == ["RobotArmature"]
    assert len(bpy.data.actions) == 0   # the character's own clips are not part of the rig
    short_clip(SAMPLES / "chin_cheek.bvh", tmp_path / "chin_cheek.bvh", 12)
    code, out, err = run_cli(cli, capsys, ["retarget", "--clip", str(tmp_path / "chin_cheek.bvh"), "--rig", str(rig),
                                           "--out", str(tmp_path / "r.blend")])
    assert code == 0, err


def test_rig_import_refuses_a_bvh_file_in_one_line(cli, capsys, tmp_path):
    code, out, err = run_cli(cli, capsys, ["rig", "import", str(SAMPLES / "chin_cheek.bvh"),
                                           "--out", str(tmp_path / "rig.blend")])
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "chin_cheek.bvh: a BVH file holds motion, not a character" in line
    assert not (tmp_path / "rig.blend").exists()

"""bake and resolve default --armature to the only armature in the file, as retarget,
compose and batch do (files.find_armature); with several armatures and no --armature
they refuse with one line naming them (issue 37)."""
import bpy
import pytest
from cli_capture import run_cli


def _blend(path, names):
    bpy.ops.wm.read_homefile(use_empty=True)
    for name in names:
        ob = bpy.data.objects.new(name, bpy.data.armatures.new(name))
        bpy.context.scene.collection.objects.link(ob)
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    return str(path)


@pytest.mark.parametrize("command", ["bake", "resolve"])
def test_the_only_armature_is_the_default(cli, capsys, tmp_path, command):
    blend = _blend(tmp_path / "one.blend", ["Signer"])
    code, out, err = run_cli(cli, capsys, [command, "--blend", blend, "--out", str(tmp_path / "o.blend")])
    assert code == 1, err                   # not a usage error: the armature was found ...
    assert "Signer" in err and "action" in err, err   # ... and it has no action
    assert "--armature" not in err


@pytest.mark.parametrize("command", ["bake", "resolve"])
def test_several_armatures_need_armature_in_one_line(cli, capsys, tmp_path, command):
    blend = _blend(tmp_path / "two.blend", ["Signer", "Robot"])
    code, out, err = run_cli(cli, capsys, [command, "--blend", blend, "--out", str(tmp_path / "o.blend")])
    assert code == 1
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "2 armatures (Robot, Signer)" in lines[0] and "--armature" in lines[0]
    assert not (tmp_path / "o.blend").exists()

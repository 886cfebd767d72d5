"""Paths on the command line: no output may be an input (every subcommand, batch's per-clip
files), scene files are not libraries, catalogs stay inside the library, clear OS errors."""
import json
import pathlib
import shutil

import bpy
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample_blends"
MIXAMO = "bvhpython_test_freebvh_mixamorig.bvh"


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main


def _library(addon, src, lib):
    result = addon.signsim_addon.library.api.import_paths([str(src)], str(lib))
    assert result["imported"], result
    return lib


def _one_error_line(capsys):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", ["retarget", "compose"])
@pytest.mark.parametrize("overwritten", ["library", "rig", "map", "clip"])
def test_output_equal_to_any_input_is_refused_before_work(cli, addon, shared_data, tmp_path, capsys,
                                                          command, overwritten):
    rig = tmp_path / "rig.blend"
    shutil.copy(SAMPLES / "signer.blend", rig)
    clip_file = tmp_path / "clip.bvh"
    shutil.copy(shared_data / "mocap" / MIXAMO, clip_file)
    lib = _library(addon, clip_file, tmp_path / "lib.blend")
    preset = tmp_path / "map.json"
    preset.write_text(addon.solver.retarget.bonemap.BoneMap([("spine", "mixamorig:Hips", 1.0)]).to_json())
    target = {"library": lib, "rig": rig, "map": preset, "clip": clip_file}[overwritten]
    before = {p: p.read_bytes() for p in (rig, lib, preset, clip_file)}
    clip_args = (["--clip", "clip", "--clip", str(clip_file)] if command == "retarget"
                 else ["--clips", "clip", str(clip_file)])
    code = cli([command, *clip_args, "--library", str(lib), "--rig", str(rig), "--map", str(preset),
                "--out", str(target)])
    line = _one_error_line(capsys)
    assert code == 1 and f"would overwrite the input {target}" in line, line
    assert {p: p.read_bytes() for p in before} == before


def test_batch_refuses_clip_files_that_are_the_rig_or_the_library(cli, addon, shared_data, tmp_path, capsys):
    rig = tmp_path / "rigx.blend"
    shutil.copy(SAMPLES / "signer.blend", rig)
    clip_file = tmp_path / "src" / "rigx.bvh"          # its clip is named 'rigx'
    clip_file.parent.mkdir()
    shutil.copy(SAMPLES / "fingerspelling.bvh", clip_file)
    lib = _library(addon, clip_file, tmp_path / "lib9.blend")
    before = rig.read_bytes(), lib.read_bytes()
    code = cli(["batch", "--library", str(lib), "--rig", str(rig), "--out", str(tmp_path), "--workers", "1"])
    line = _one_error_line(capsys)
    assert code == 1 and f"clip 'rigx''s output {rig} would overwrite the input {rig}" in line, line
    assert (rig.read_bytes(), lib.read_bytes()) == before

    # a clip named like the library, then two clips whose file names collide
    other = tmp_path / "src" / "lib9.bvh"
    shutil.copy(SAMPLES / "chin_cheek.bvh", other)
    _library(addon, other, lib)
    rig2 = tmp_path / "rig2.blend"
    shutil.copy(SAMPLES / "signer.blend", rig2)
    before = lib.read_bytes()
    code = cli(["batch", "--library", str(lib), "--rig", str(rig2), "--out", str(tmp_path), "--workers", "1"])
    line = _one_error_line(capsys)
    assert code == 1 and f"clip 'lib9''s output {lib} would overwrite the input {lib}" in line, line
    assert lib.read_bytes() == before


def test_batch_refuses_two_clips_writing_one_file(addon, tmp_path):
    batch = addon.signsim_addon.bake.batch
    outs = [batch.clip_outputs(c, str(tmp_path)) for c in ("a b", "a_b")]
    assert outs[0] == outs[1]                     # both clips map to a_b.*
    with pytest.raises(addon.signsim_addon.errors.SignSimError, match="clip 'a_b''s output .* is also written "
                       "by clip 'a b'"):
        addon.signsim_addon.files.check_distinct([], [p for o in outs for p in o],
                                                 [f"clip '{c}'" for c in ("a b", "a_b") for _ in range(3)])


@pytest.mark.parametrize("command", ["retarget", "compose"])
@pytest.mark.parametrize("same_as_rig", [False, True])
def test_scene_file_as_library_is_refused_like_import_does(cli, tmp_path, capsys, command, same_as_rig):
    rig = tmp_path / "rig.blend"
    shutil.copy(SAMPLES / "signer.blend", rig)
    scene = rig if same_as_rig else tmp_path / "scene.blend"
    if not same_as_rig:
        shutil.copy(SAMPLES / "signer.blend", scene)
    clip_args = ["--clip", "wave"] if command == "retarget" else ["--clips", "wave", str(SAMPLES / "chin_cheek.bvh")]
    out = tmp_path / "out.blend"
    code = cli([command, *clip_args, "--library", str(scene), "--rig", str(rig), "--out", str(out)])
    line = _one_error_line(capsys)
    assert code == 1 and f"{scene} is a scene file, not a SignSim motion library" in line, line
    assert not out.exists()
    # the same words as import and list
    assert cli(["list", "--library", str(scene)]) == 1
    assert "is a scene file, not a SignSim motion library" in _one_error_line(capsys)


def test_output_folder_errors_name_the_path_and_reason(cli, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("keep me")
    for out, reason in ((afile, "it is a file"), (pathlib.Path("/sys/demo"), "operation not permitted"),
                        (afile / "sub", "not a directory")):
        assert cli(["demo", "--out", str(out)]) == 1
        line = _one_error_line(capsys)
        assert str(out) in line and reason in line and "Errno" not in line, line
    assert afile.read_text() == "keep me"


@pytest.mark.parametrize("catalog", ["../../etc", "signs/../x", "/etc/signs", "signs//greetings", "./signs",
                                     "signs/"])
def test_catalog_paths_stay_inside_the_library(cli, tmp_path, capsys, catalog):
    library = tmp_path / "lib.blend"
    code = cli(["import", str(SAMPLES / "chin_cheek.bvh"), "--library", str(library), "--catalog", catalog])
    line = _one_error_line(capsys)
    assert code == 1 and "catalog path" in line and catalog in line, line
    assert not library.exists() and not (tmp_path / "blender_assets.cats.txt").exists()


def test_a_good_catalog_path_is_kept(cli, tmp_path, capsys):
    library = tmp_path / "lib.blend"
    assert cli(["import", str(SAMPLES / "chin_cheek.bvh"), "--library", str(library),
                "--catalog", " signs / greetings ", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["imported"][0]["catalog"] == \
        "signs/greetings"
    cats = (tmp_path / "blender_assets.cats.txt").read_text()
    assert ":signs/greetings:" in cats and ".." not in cats

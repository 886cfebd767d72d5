"""Typos caught (issue 37): a tag, catalog or clip name that matches nothing gets a
warning (or, for a clip name, an error) naming the nearest existing names."""
import json
import pathlib

import pytest

import library_samples as S
from cli_capture import run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_blends"


@pytest.fixture
def lib(cli, tmp_path):
    lib = tmp_path / "lib.blend"
    a = S.write(tmp_path / "fingerspelling.bvh", S.bvh_text(S.still_rows(10)))
    b = S.write(tmp_path / "chin_cheek.bvh", S.bvh_text(S.still_rows(12)))  # other content
    assert cli(["import", str(a), "--library", str(lib), "--tags", "has_fingers,reviewed",
                "--catalog", "signs/fingerspelling"]) == 0
    assert cli(["import", str(b), "--library", str(lib), "--catalog", "signs/face"]) == 0
    return lib


def test_list_a_tag_no_clip_has_suggests_the_nearest(cli, capsys, lib):
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--tags", "has_finger"])
    assert code == 0 and "0 clip(s)" in out
    assert "warning: no clip has the tag 'has_finger'; did you mean 'has_fingers'?" in out
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--tags", "has_finger", "--json"])
    result = json.loads(out.strip().splitlines()[-1])
    assert result["clips"] == []
    assert result["warnings"] == ["no clip has the tag 'has_finger'; did you mean 'has_fingers'?"]
    # a tag clips have: no warning
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--tags", "has_fingers", "--json"])
    assert json.loads(out.strip().splitlines()[-1])["warnings"] == [] and "warning" not in err


def test_list_a_catalog_with_no_clip_suggests_the_nearest(cli, capsys, lib):
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--catalog", "signs/fingerspeling", "--json"])
    assert code == 0
    result = json.loads(out.strip().splitlines()[-1])
    assert result["clips"] == []
    assert result["warnings"] == ["no clip is in the catalog 'signs/fingerspeling'; "
                                  "did you mean 'signs/fingerspelling'?"]
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--catalog", "signs", "--json"])
    assert len(json.loads(out.strip().splitlines()[-1])["clips"]) == 2 and "warning" not in err


def test_batch_a_tag_no_clip_has_suggests_the_nearest(cli, capsys, lib, tmp_path):
    code, out, err = run_cli(cli, capsys, ["batch", "--library", str(lib), "--rig", str(SAMPLES / "signer.blend"),
                                        "--out", str(tmp_path / "baked"), "--tags", "reviewd"])
    assert code == 1 and "no clips to bake" in err
    assert "warning: no clip has the tag 'reviewd'; did you mean 'reviewed'?" in out
    assert not (tmp_path / "baked").exists()
    code, out, err = run_cli(cli, capsys, ["batch", "--library", str(lib), "--rig", str(SAMPLES / "signer.blend"),
                                        "--out", str(tmp_path / "baked"), "--tags", "reviewd", "--json"])
    assert "did you mean 'reviewed'?" in json.loads(out.strip().splitlines()[-1])["error"]


@pytest.mark.parametrize("command", ["retarget", "compose"])
def test_a_misspelt_clip_name_suggests_the_nearest(cli, capsys, lib, tmp_path, command):
    clips = ["--clip", "fingerspeling"] if command == "retarget" else ["--clips", "fingerspeling", "chin_cheek"]
    code, out, err = run_cli(cli, capsys, [command, *clips, "--library", str(lib),
                                        "--rig", str(SAMPLES / "signer.blend"), "--out", str(tmp_path / "o.blend")])
    assert code == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "no clip named 'fingerspeling'" in lines[0] and "did you mean 'fingerspelling'?" in lines[0]


@pytest.mark.parametrize("command", ["retarget", "bake", "resolve"])
def test_a_misspelt_armature_suggests_the_nearest(cli, capsys, lib, tmp_path, command):
    blend = ["--clip", "fingerspelling", "--library", str(lib), "--rig"] if command == "retarget" else ["--blend"]
    code, out, err = run_cli(cli, capsys, [command, *blend, str(SAMPLES / "signer.blend"), "--armature", "Signr",
                                        "--out", str(tmp_path / "o.blend")])
    assert code == 1
    # named by the file the option gave (bake's --blend, not a "rig file")
    assert err.strip().splitlines() == [f"signsim: error: no armature named 'Signr' in {SAMPLES / 'signer.blend'}; "
                                        "did you mean 'Signer'? (armatures: Signer)"], err
    assert not (tmp_path / "o.blend").exists()


def test_a_text_filter_says_which_fields_it_matches(cli, capsys, lib, tmp_path):
    fields = "name, catalog, source file name or tags"
    code, out, err = run_cli(cli, capsys, ["list", "--help"])
    assert code == 0 and fields in " ".join(out.split())
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--text", "fingerspell reviewd", "--json"])
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and result["clips"] == []
    # the word no clip has gets the nearest words of the clips' fields
    assert result["warnings"] == [f"no clip's {fields} contain 'reviewd'; did you mean 'reviewed'?",
                                  f"no clip matches: --text 'fingerspell reviewd' looks for every word in a clip's "
                                  f"{fields} (any case)"]
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--text", "fingrspell", "--json"])
    assert json.loads(out.strip().splitlines()[-1])["warnings"][0] == \
        f"no clip's {fields} contain 'fingrspell'; did you mean 'fingerspelling' or 'fingers'?"
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), "--text", "fingerspell reviewed", "--json"])
    assert len(json.loads(out.strip().splitlines()[-1])["clips"]) == 1 and "warning" not in err
    code, out, err = run_cli(cli, capsys, ["batch", "--help"])
    assert fields in " ".join(out.split())
    code, out, err = run_cli(cli, capsys, ["batch", "--library", str(lib), "--rig", str(SAMPLES / "signer.blend"),
                                        "--out", str(tmp_path / "baked"), "--text", "fingerspell reviewd"])
    assert code == 1 and err.strip().splitlines() == [
        f"signsim: error: no clips to bake in {lib} (--text 'fingerspell reviewd' looks for every word in a clip's "
        f"{fields} (any case)): no clip's {fields} contain 'reviewd'; did you mean 'reviewed'?"], err


def test_an_empty_listing_names_the_filter_that_emptied_it(cli, capsys, lib, tmp_path):
    """--text matching a clip, --tags none of them: the warning and batch's error blame --tags."""
    filters = ["--text", "fingerspell reviewed", "--tags", "nosuchtag"]
    code, out, err = run_cli(cli, capsys, ["list", "--library", str(lib), *filters, "--json"])
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and result["clips"] == []
    assert result["warnings"][-1] == "no clip matches: --tags left none of the clips --text matches", result
    code, out, err = run_cli(cli, capsys, ["batch", "--library", str(lib), "--rig", str(SAMPLES / "signer.blend"),
                                        "--out", str(tmp_path / "baked"), *filters])
    assert code == 1 and f"no clips to bake in {lib} (--tags left none of the clips --text matches)" in err, err

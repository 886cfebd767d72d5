"""The CLI contract where a fresh user found it unclear: import's exit status when only
some files fail, the demo never replacing files silently, and `batch --text` doing what
its help says."""
import json
import pathlib

import pytest

import library_samples as S

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_blends"


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main


def _run(cli, capsys, argv):
    capsys.readouterr()
    code = cli(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_import_exit_status_tells_all_some_or_none(cli, capsys, tmp_path):
    """0: every file imported; 3: some clips imported and some files failed (the result is
    still printed whole, stderr names the failed file); 1: no clip imported."""
    good = S.write(tmp_path / "good.bvh", S.bvh_text(S.still_rows(12)))
    bad = S.write(tmp_path / "bad.bvh", S.bvh_text(S.still_rows(12)).replace("Frame Time:", "Frame Time: 0 #"))
    lib = tmp_path / "lib.blend"
    code, out, err = _run(cli, capsys, ["import", str(good), "--library", str(lib), "--json"])
    assert code == 0 and err == ""
    code, out, err = _run(cli, capsys, ["import", str(good), str(bad), "--library", str(lib), "--json"])
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 3
    assert [r["name"] for r in result["imported"]] == ["good"] and result["imported"][0]["updated"]
    assert [pathlib.Path(f["path"]).name for f in result["failed"]] == ["bad.bvh"]
    (line,) = err.strip().splitlines()
    assert line.startswith("signsim: 1 clip(s) imported, 1 file(s) failed: bad.bvh: ")
    code, out, err = _run(cli, capsys, ["import", str(bad), "--library", str(lib)])
    assert code == 1 and "0 clip(s) imported, 1 file(s) failed: bad.bvh" in err
    code, out, _ = _run(cli, capsys, ["import", "--help"])
    assert "3 some clips imported and some files failed" in " ".join(out.split())


def test_demo_never_replaces_files_silently(cli, capsys, tmp_path):
    """Files of the demo's names already in --out: refused before any work, unless --force."""
    out = tmp_path / "demo"
    out.mkdir()
    mine = out / "fingerspelling_metrics.json"
    mine.write_text("mine\n")
    (out / "blender_assets.cats.txt").write_text("my catalogs\n")
    code, stdout, err = _run(cli, capsys, ["demo", "--out", str(out)])
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "already holds fingerspelling_metrics.json, blender_assets.cats.txt" in line and "--force" in line
    assert mine.read_text() == "mine\n"
    assert sorted(p.name for p in out.iterdir()) == ["blender_assets.cats.txt", "fingerspelling_metrics.json"]
    code, stdout, _ = _run(cli, capsys, ["demo", "--help"])
    assert "--force" in stdout


def test_batch_text_selects_clips_with_every_word_as_its_help_says(cli, capsys, tmp_path):
    lib = tmp_path / "lib.blend"
    assert cli(["import", str(SAMPLES / "chin_cheek.bvh"), str(SAMPLES / "fingerspelling.bvh"),
                "--library", str(lib)]) == 0
    code, out, _ = _run(cli, capsys, ["batch", "--help"])
    assert "contain every one of these words" in " ".join(out.split())
    code, out, _ = _run(cli, capsys, ["list", "--help"])
    assert "contain every one of these words" in " ".join(out.split())
    code, out, _ = _run(cli, capsys, ["list", "--library", str(lib), "--text", "chin cheek", "--json"])
    assert [c["name"] for c in json.loads(out.strip().splitlines()[-1])["clips"]] == ["chin_cheek"]
    code, out, _ = _run(cli, capsys, ["list", "--library", str(lib), "--text", "chin fingerspelling", "--json"])
    assert json.loads(out.strip().splitlines()[-1])["clips"] == []
    # batch selects with the same words before starting any worker: none has both words
    code, out, err = _run(cli, capsys, ["batch", "--library", str(lib), "--rig", str(SAMPLES / "signer.blend"),
                                        "--out", str(tmp_path / "baked"), "--text", "chin fingerspelling"])
    assert code == 1 and "no clips to bake" in err
    assert not (tmp_path / "baked").exists()

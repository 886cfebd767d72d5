"""The CLI contract: every warning in --json, failures on stderr, Blender's log lines off
stdout, outputs written together or not at all, unwritable outputs refused before any
work, facet tags replaced, tags removed, the frame-rate change of a retarget reported,
and `make build` packing only the extension's own files; where a fresh user found it
unclear: import's exit status when only some files fail, the demo never replacing files
silently, and `batch --text` doing what its help says."""
import importlib
import json
import pathlib
import subprocess
import time

import bpy
import pytest

import library_samples as S
from cli_capture import run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_blends"


def test_every_warning_printed_is_in_json(cli, capsys, tmp_path):
    clip = S.write(tmp_path / "short.bvh", S.bvh_text(S.still_rows(20), header_frames=25))
    code, human, _ = run_cli(cli, capsys, ["import", str(clip), "--library", str(tmp_path / "a.blend")])
    assert code == 0
    printed = [ln.split("warning: ", 1)[1] for ln in human.splitlines() if "warning: " in ln]
    assert any("header says 25 frames" in w for w in printed)
    code, out, _ = run_cli(cli, capsys, ["import", str(clip), "--library", str(tmp_path / "b.blend"), "--json"])
    result = json.loads(out.strip().splitlines()[-1])
    assert result["warnings"] == printed
    assert len(out.strip().splitlines()) == 1          # --json: nothing but the object


def test_retarget_reports_the_frame_rate_change(cli, capsys, tmp_path):
    text = (SAMPLES / "fingerspelling.bvh").read_text().replace("Frame Time: 0.033333",
                                                                 "Frame Time: 0.0083333333")
    clip = S.write(tmp_path / "fast.bvh", text)     # the same keys at 120 fps
    code, out, err = run_cli(cli, capsys, ["retarget", "--clip", str(clip), "--rig", str(SAMPLES / "signer.blend"),
                                        "--out", str(tmp_path / "o.blend"), "--fps", "rig", "--json"])
    assert code == 0, err   # --fps rig: resampled to the rig file's rate, as before issue 37
    result = json.loads(out.strip().splitlines()[-1])
    scene_fps = bpy.context.scene.render.fps / bpy.context.scene.render.fps_base
    (w,) = [w for w in result["warnings"] if "resampled" in w]
    assert f"120 fps resampled to the scene's {scene_fps:g} fps" in w
    frames = int(result["frames"][1] - result["frames"][0]) + 1
    assert f"135 frames became {frames}" in w and frames == int((135 - 1) * scene_fps / 120 + 1e-6) + 1


def test_import_tags_replace_a_facet_value_and_tag_removes(cli, capsys, tmp_path):
    lib = tmp_path / "lib.blend"
    clip = S.write(tmp_path / "sign.bvh", S.bvh_text(S.still_rows(10)))
    assert cli(["import", str(clip), "--library", str(lib), "--tags", "style:casual,mine"]) == 0
    assert cli(["import", str(clip), "--library", str(lib), "--tags", "style:formal"]) == 0
    code, out, _ = run_cli(cli, capsys, ["list", "--library", str(lib), "--json"])
    (rec,) = json.loads(out.strip().splitlines()[-1])["clips"]
    assert "style:formal" in rec["tags"] and "style:casual" not in rec["tags"] and "mine" in rec["tags"]
    code, out, _ = run_cli(cli, capsys, ["tag", "sign", "--library", str(lib), "--remove", "mine",
                                      "--add", "handedness:left", "--json"])
    assert code == 0
    tags = json.loads(out.strip().splitlines()[-1])["clips"][0]["tags"]
    assert "mine" not in tags and "handedness:left" in tags and "style:formal" in tags
    stamp = lib.read_bytes()
    code, out, err = run_cli(cli, capsys, ["tag", "sign", "--library", str(lib), "--remove", "mine"])
    assert code == 1 and "has no tag 'mine'" in err and len(err.strip().splitlines()) == 1
    assert lib.read_bytes() == stamp
    # removing a facet's value and adding another one in the same call: judged on the stored tags
    code, out, _ = run_cli(cli, capsys, ["tag", "sign", "--library", str(lib), "--remove", "style:formal",
                                      "--add", "style:casual", "--json"])
    tags = json.loads(out.strip().splitlines()[-1])["clips"][0]["tags"]
    assert code == 0 and "style:casual" in tags and "style:formal" not in tags
    stamp = lib.read_bytes()
    code, out, err = run_cli(cli, capsys, ["tag", "sign", "--library", str(lib), "--add", "style:"])
    assert code == 1 and "has no value" in err and lib.read_bytes() == stamp


def test_tag_takes_several_clips_and_checks_them_all_first(cli, capsys, tmp_path):
    lib = tmp_path / "lib.blend"
    for n, rows in (("one", 10), ("two", 11), ("three", 12)):
        S.write(tmp_path / f"{n}.bvh", S.bvh_text(S.still_rows(rows)))
    assert cli(["import", *(str(tmp_path / f"{n}.bvh") for n in ("one", "two", "three")), "--library", str(lib),
                "--tags", "mine"]) == 0
    code, out, _ = run_cli(cli, capsys, ["tag", "one", "three", "--library", str(lib), "--add", "reviewed", "--json"])
    assert code == 0
    assert [(r["name"], "reviewed" in r["tags"]) for r in json.loads(out.strip().splitlines()[-1])["clips"]] == \
        [("one", True), ("three", True)]
    code, out, _ = run_cli(cli, capsys, ["list", "--library", str(lib), "--tags", "reviewed", "--json"])
    assert sorted(c["name"] for c in json.loads(out.strip().splitlines()[-1])["clips"]) == ["one", "three"]
    # a misspelt name among them: one line with the nearest name, nothing written
    stamp = lib.read_bytes()
    code, out, err = run_cli(cli, capsys, ["tag", "two", "thre", "--library", str(lib), "--add", "x"])
    assert code == 1 and len(err.strip().splitlines()) == 1 and "'thre'" in err and "did you mean 'three'" in err
    assert lib.read_bytes() == stamp
    # a tag to remove that one of them lacks: nothing written either
    code, out, err = run_cli(cli, capsys, ["tag", "one", "two", "--library", str(lib), "--remove", "reviewed"])
    assert code == 1 and "clip 'two' has no tag 'reviewed'" in err and lib.read_bytes() == stamp


def test_unwritable_outputs_are_refused_before_any_work(cli, capsys, tmp_path):
    """/proc refuses new files even for root (permission bits would not tell)."""
    clip = S.write(tmp_path / "sign.bvh", S.bvh_text(S.still_rows(10)))
    for argv in (["import", str(clip), "--library", "/proc/lib.blend"],
                 ["retarget", "--clip", str(clip), "--rig", str(SAMPLES / "signer.blend"), "--out", "/proc/o.blend"],
                 ["bake", "--blend", str(SAMPLES / "signer.blend"), "--armature", "Signer",
                  "--out", str(tmp_path / "o.blend"),
                  "--metrics", "/proc/m.json"]):
        t = time.perf_counter()
        code, out, err = run_cli(cli, capsys, argv)
        assert code == 1
        assert err.strip().splitlines() == [err.strip()] and "cannot write in the folder /proc" in err, err
        assert "internal error" not in err
        assert time.perf_counter() - t < 5.0       # refused up front, not after the work
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sign.bvh"]


def test_an_output_path_that_is_a_folder_is_refused_before_any_work(cli, capsys, tmp_path):
    """A folder where the metrics file would go passes every permission test, and its
    rename would fail only after the .blend was in place: refused up front."""
    (tmp_path / "m.json").mkdir()
    t = time.perf_counter()
    code, out, err = run_cli(cli, capsys, ["bake", "--blend", str(SAMPLES / "signer.blend"), "--armature", "Signer",
                                        "--out", str(tmp_path / "o.blend"), "--metrics", str(tmp_path / "m.json")])
    assert code == 1 and err.strip().splitlines() == [
        f"signsim: error: output is a folder, not a file: {tmp_path / 'm.json'}"], err
    assert time.perf_counter() - t < 5.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_outputs_written_together_or_not_at_all(addon, tmp_path):
    files = addon.signsim_addon.files
    out = tmp_path / "o.blend"
    with pytest.raises(addon.signsim_addon.errors.SignSimError, match="cannot write"):
        files.save_atomically(str(out), texts={str(tmp_path / "gone" / "m.json"): "{}"})
    assert list(tmp_path.iterdir()) == []
    files.save_atomically(str(out), texts={str(tmp_path / "m.json"): '{"a": 1}'})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "o.blend"]
    assert json.loads((tmp_path / "m.json").read_text()) == {"a": 1}


@pytest.mark.slow
def test_blenders_log_lines_stay_off_stdout(tmp_path):
    """Through the launcher (real file descriptors): opening the rig, importing the clip
    and saving print nothing but the one JSON object."""
    proc = subprocess.run([str(ROOT / "signsim"), "retarget", "--clip", str(SAMPLES / "fingerspelling.bvh"),
                           "--rig", str(SAMPLES / "signer.blend"), "--out", str(tmp_path / "o.blend"), "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.strip().splitlines()
    assert json.loads(line)["out"] == str(tmp_path / "o.blend")
    assert proc.stderr.strip() == ""
    human = subprocess.run([str(ROOT / "signsim"), "retarget", "--clip", str(SAMPLES / "fingerspelling.bvh"),
                            "--rig", str(SAMPLES / "signer.blend"), "--out", str(tmp_path / "p.blend")],
                           capture_output=True, text=True, timeout=300)
    assert human.returncode == 0
    for noise in ("Read blend", "Saved copy as", "partial.blend", "Info:"):
        assert noise not in human.stdout and noise not in human.stderr


def test_build_packs_only_the_allow_list(tmp_path):
    import build
    files = build.package_files(ROOT)
    assert "blender_manifest.toml" in files and "signsim_addon/cli.py" in files
    assert "solver/mocap/bvh_file.py" in files and "sample_blends/signer.blend" in files
    top = {f.split("/")[0] for f in files}
    assert top <= {"blender_manifest.toml", "__init__.py", "LICENSE", "README.md", "docs", "signsim_addon",
                   "solver", "operators", "panels", "presets", "sample_blends"}
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)
    # a tree with what `make demo`, tests and editors leave behind packs the same files
    fake = tmp_path / "repo"
    for rel in files + ["signsim-demo/fingerspelling_baked.blend", "dist/old.zip", "tests/test_x.py",
                        "notes.txt", "signsim_addon/__pycache__/x.pyc", "sample_blends/make_samples.py"]:
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_bytes(b"")
    assert build.package_files(fake) == files


def test_import_exit_status_tells_all_some_or_none(cli, capsys, tmp_path):
    """0: every file imported; 3: some clips imported and some files failed (the result is
    still printed whole, stderr names the failed file); 1: no clip imported."""
    good = S.write(tmp_path / "good.bvh", S.bvh_text(S.still_rows(12)))
    bad = S.write(tmp_path / "bad.bvh", S.bvh_text(S.still_rows(12)).replace("Frame Time:", "Frame Time: 0 #"))
    lib = tmp_path / "lib.blend"
    code, out, err = run_cli(cli, capsys, ["import", str(good), "--library", str(lib), "--json"])
    assert code == 0 and err == ""
    code, out, err = run_cli(cli, capsys, ["import", str(good), str(bad), "--library", str(lib), "--json"])
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 3
    assert [r["name"] for r in result["imported"]] == ["good"] and result["imported"][0]["updated"]
    assert [pathlib.Path(f["path"]).name for f in result["failed"]] == ["bad.bvh"]
    (line,) = err.strip().splitlines()
    assert line.startswith("signsim: 1 clip(s) imported, 1 file(s) failed: bad.bvh: ")
    code, out, err = run_cli(cli, capsys, ["import", str(bad), "--library", str(lib)])
    assert code == 1 and "0 clip(s) imported, 1 file(s) failed: bad.bvh" in err
    code, out, _ = run_cli(cli, capsys, ["import", "--help"])
    assert "3 some clips imported and some files failed" in " ".join(out.split())


def test_demo_never_replaces_files_silently(cli, capsys, tmp_path):
    """Files of the demo's names already in --out: refused before any work, unless --force."""
    out = tmp_path / "demo"
    out.mkdir()
    mine = out / "fingerspelling_metrics.json"
    mine.write_text("mine\n")
    (out / "blender_assets.cats.txt").write_text("my catalogs\n")
    code, stdout, err = run_cli(cli, capsys, ["demo", "--out", str(out)])
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "already holds fingerspelling_metrics.json, blender_assets.cats.txt" in line and "--force" in line
    assert mine.read_text() == "mine\n"
    assert sorted(p.name for p in out.iterdir()) == ["blender_assets.cats.txt", "fingerspelling_metrics.json"]
    code, stdout, _ = run_cli(cli, capsys, ["demo", "--help"])
    assert "--force" in stdout


def test_batch_text_selects_clips_with_every_word_as_its_help_says(cli, capsys, tmp_path):
    lib = tmp_path / "lib.blend"
    assert cli(["import", str(SAMPLES / "chin_cheek.bvh"), str(SAMPLES / "fingerspelling.bvh"),
                "--library", str(lib)]) == 0
    code, out, _ = run_cli(cli, capsys, ["batch", "--help"])
    assert "contain every one of these words" in " ".join(out.split())
    code, out, _ = run_cli(cli, capsys, ["list", "--help"])
    assert "contain every one of these words" in " ".join(out.split())
    code, out, _ = run_cli(cli, capsys, ["list", "--library", str(lib), "--text", "chin cheek", "--json"])
    assert [c["name"] for c in json.loads(out.strip().splitlines()[-1])["clips"]] == ["chin_cheek"]
    code, out, _ = run_cli(cli, capsys, ["list", "--library", str(lib), "--text", "chin fingerspelling", "--json"])
    assert json.loads(out.strip().splitlines()[-1])["clips"] == []
    # batch selects with the same words before starting any worker: none has both words
    code, out, err = run_cli(cli, capsys, ["batch", "--library", str(lib), "--rig", str(SAMPLES / "signer.blend"),
                                        "--out", str(tmp_path / "baked"), "--text", "chin fingerspelling"])
    assert code == 1 and "no clips to bake" in err
    assert not (tmp_path / "baked").exists()


@pytest.mark.parametrize("interrupt, code, line", [
    (True, 130, "signsim: interrupted"),
    (False, 1, "signsim: internal error: SystemError: a bug")])
def test_ctrl_c_inside_compiled_code_is_an_interrupt(addon, cli, capsys, monkeypatch, interrupt, code, line):
    """Ctrl-C that lands while a numba kernel runs reaches Python as SystemError "returned a
    result with an exception set" caused by the KeyboardInterrupt (CPython chains it as the
    cause): the CLI reports an interrupt (exit 130, one line), a SystemError of its own
    stays an internal error (exit 1)."""
    def run(args, say):
        if not interrupt:
            raise SystemError("a bug")
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as ki:
            raise SystemError("CPUDispatcher(<function implicit_step>) returned a result with an "
                              "exception set") from ki
    bake_cli = importlib.import_module(addon.signsim_addon.__name__ + ".bake.cli")
    monkeypatch.setattr(bake_cli, "run", run)
    assert cli(["bake", "--blend", "x.blend", "--out", "y.blend"]) == code
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [line] and captured.out == ""

"""The CLI contract: --help, one JSON object last with --json, one stderr line on errors."""
import json
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SUBCOMMANDS = ("demo", "import", "list", "tag", "rig", "retarget", "bake", "batch", "compose", "resolve")


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main


def test_help_lists_every_subcommand(cli, capsys):
    assert cli(["--help"]) == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert f"    {name} " in out


def test_each_subcommand_has_its_own_help(cli, capsys):
    for name in SUBCOMMANDS:
        assert cli([name, "--help"]) == 0
        assert "--json" in capsys.readouterr().out


def test_usage_error_is_one_stderr_line_and_exit_2(cli, capsys):
    assert cli(["no-such-command"]) == 2
    captured = capsys.readouterr()
    assert len(captured.err.strip().splitlines()) == 1
    assert "invalid choice" in captured.err


@pytest.mark.compat
@pytest.mark.slow
def test_demo_runs_the_main_job_and_json_is_the_last_stdout_line(addon, cli, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(addon.signsim_addon.progress, "AFTER_S", 0.0)   # every step's progress
    assert cli(["demo", "--out", str(tmp_path), "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    # each step's progress on stderr: the import's file, the retarget's and the bake's stages
    done = {line.split("] ", 1)[1].split(" done in ")[0] for line in captured.err.splitlines()
            if line.startswith("[demo ") and " done in " in line}
    assert {"fingerspelling.bvh", "reading", "fingerspelling", "simulation", "skin_check"} <= done, captured.err
    assert result["action"] == "fingerspelling_Signer.physics"
    for path in result["paths"].values():
        assert pathlib.Path(path).is_file() and pathlib.Path(path).parent == tmp_path
    assert json.loads(pathlib.Path(result["paths"]["metrics"]).read_text()) == result["metrics"]
    assert result["metrics"]["baked"]["fallbacks"] == 0


@pytest.mark.slow
def test_launcher_runs_the_same_handler_and_fails_with_one_line():
    proc = subprocess.run([str(ROOT / "signsim"), "no-such-command", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "error" in json.loads(proc.stdout.strip().splitlines()[-1])
    help_proc = subprocess.run([str(ROOT / "signsim"), "--help"], capture_output=True, text=True, timeout=120)
    assert help_proc.returncode == 0
    assert all(name in help_proc.stdout for name in SUBCOMMANDS)

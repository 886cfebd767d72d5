"""Progress on every long step (issue 37): `[command k/n] stage 43 % eta 12 s` lines, on
stderr with --json so the last stdout line stays the JSON; the bake's summary lists each
stage's time, and the stage times add up to its wall time (with the process's startup
when it runs as its own process)."""
import json
import re
import subprocess
import time

import pytest
from batch_library import SAMPLES, short_clip
from cli_capture import run_cli

LINE = re.compile(r"\[(\w+) (\d+)/(\d+)\] (\S+(?: \(\d+\))?) (?:(\d+) %(?: eta (?:\d+ min )?\d+ s)?|done in \d+ s)")


@pytest.fixture
def every_tick(addon, monkeypatch):
    """Progress lines from the first second on, every tick (the CLI's thresholds are seconds)."""
    monkeypatch.setattr(addon.signsim_addon.progress, "AFTER_S", 0.0)
    monkeypatch.setattr(addon.signsim_addon.progress, "EVERY_S", 0.0)


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    """Two short clips in a folder of their own."""
    folder = tmp_path_factory.mktemp("progress") / "clips"
    folder.mkdir()
    short_clip(SAMPLES / "chin_cheek.bvh", folder / "chin_cheek_short.bvh", 16)
    short_clip(SAMPLES / "fingerspelling.bvh", folder / "fingerspelling_short.bvh", 16)
    return folder


@pytest.fixture(scope="module")
def retargeted(addon, clips):
    out = clips.parent / "retargeted.blend"
    assert addon.signsim_addon.cli.main(["retarget", "--clip", str(clips / "chin_cheek_short.bvh"),
                                         "--rig", str(SAMPLES / "signer.blend"), "--out", str(out)]) == 0
    return out


def _progress(text):
    return [m.groups() for m in map(LINE.fullmatch, text.splitlines()) if m]


@pytest.mark.slow
@pytest.mark.parametrize("project", ["--project", "--no-project"])
def test_bake_progress_on_stderr_and_stage_times_add_up(cli, capsys, tmp_path, retargeted, every_tick, project):
    start = time.perf_counter()
    code, out, err = run_cli(cli, capsys, ["bake", "--blend", str(retargeted), "--out", str(tmp_path / "b.blend"),
                                           project, "--json"])
    wall = time.perf_counter() - start
    assert code in (0, 3), err
    result = json.loads(out.splitlines()[-1])           # stdout: the JSON alone
    assert not _progress(out)
    lines = _progress(err)
    stages = result["stage_seconds"]
    expected = ["reading", "compile", "body"] + (["fit", "projection"] if project == "--project" else []) + \
        ["simulation", "metrics", "writing", "skin_check"]
    assert set(stages) == set(expected), stages  # (the JSON sorts its keys)
    # every stage has its lines, numbered k/n in the bake's order, and ends with "done"
    assert {name for _, _, _, name, _ in lines} == set(expected)
    assert {(name, int(k), int(n)) for task, k, n, name, _ in lines} == \
        {(name, i + 1, len(expected)) for i, name in enumerate(expected)}
    assert all(task == "bake" for task, *_ in lines)
    for stage in ("body", "simulation", "skin_check"):  # per body volume, per frame
        ticks = [int(p) for _, _, _, name, p in lines if name == stage and p is not None]
        assert len(ticks) > 3 and ticks == sorted(ticks), (stage, ticks)
    # nothing unaccounted: the stages together are the bake's wall time (the CLI's own
    # parsing and printing outside them take well under a second)
    assert sum(stages.values()) <= wall and wall - sum(stages.values()) <= max(0.1 * wall, 0.5), (stages, wall)


@pytest.mark.slow
def test_bake_summary_lists_each_stage_time(cli, capsys, tmp_path, retargeted, addon, monkeypatch):
    # a stage that runs long on a loaded machine (the first compile, uncached grids) would print
    monkeypatch.setattr(addon.signsim_addon.progress, "AFTER_S", 1e9)
    code, out, err = run_cli(cli, capsys, ["bake", "--blend", str(retargeted), "--out", str(tmp_path / "b.blend")])
    assert code in (0, 3), err
    summary = [ln for ln in out.splitlines() if ln.strip().startswith("stages:")]
    assert len(summary) == 1, out
    assert re.fullmatch(r"stages: reading [\d.]+ s, compile [\d.]+ s, body [\d.]+ s, simulation [\d.]+ s, metrics [\d.]+ s, "
                        r"writing [\d.]+ s, skin_check [\d.]+ s, total [\d.]+ s", summary[0].strip()), summary
    # below the threshold no stage prints progress
    assert not _progress(out) and not _progress(err)


@pytest.mark.slow
@pytest.mark.parametrize("command", ["bake", "resolve"])
def test_stage_times_add_up_to_the_process_wall_time(tmp_path, retargeted, command):
    """`./signsim bake|resolve --json` as its own process: its stages, 'startup' (Python,
    Blender, the extension) first, add up to the time from starting it to its JSON line
    within 10 % (the interpreter's exit after the JSON is not the command's)."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(SAMPLES.parent / "signsim"), command, "--blend", str(retargeted),
                             "--out", str(tmp_path / "out.blend"), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        wall, last = time.perf_counter() - start, line
    err = proc.stderr.read()
    assert proc.wait() in (0, 3), err
    stages = json.loads(last)["stage_seconds"]
    assert "startup" in stages, stages
    assert stages["startup"] > 0.1, stages     # at least Blender's loading
    assert abs(sum(stages.values()) - wall) <= 0.1 * wall, (stages, wall)


def _json_and_stages(cli, capsys, argv):
    """Run argv with --json: (its JSON, [(stage, k, n)] of its progress lines, in order)."""
    code, out, err = run_cli(cli, capsys, argv + ["--json"])
    assert code == 0, err
    assert not _progress(out)
    lines = _progress(err)
    assert {task for task, *_ in lines} == {argv[0]}, err
    # every stage (one may run twice: the keys, then the file) ends with its "done" line
    last = {(s, k, n): p for _, k, n, s, p in lines}
    assert all(p is None for p in last.values()), err
    return json.loads(out.splitlines()[-1]), [(s, int(k), int(n)) for s, k, n in last]


@pytest.mark.slow
def test_files_of_one_name_in_two_folders_are_two_stages(cli, capsys, tmp_path, every_tick):
    for folder, sample in (("a", "chin_cheek.bvh"), ("b", "fingerspelling.bvh")):
        (tmp_path / folder).mkdir()
        short_clip(SAMPLES / sample, tmp_path / folder / "take.bvh", 8)
    result, stages = _json_and_stages(cli, capsys, ["import", str(tmp_path / "a" / "take.bvh"),
                                                    str(tmp_path / "b" / "take.bvh"), "--library",
                                                    str(tmp_path / "lib.blend")])
    assert len(result["imported"]) == 2
    assert stages == [("take.bvh", 1, 2), ("take.bvh (2)", 2, 2)]


def test_stage_names_repeating_are_refused(addon):
    progress = addon.signsim_addon.progress
    assert progress.unique(["take", "take (2)", "take", "x"]) == ("take", "take (2)", "take (3)", "x")
    with pytest.raises(ValueError):
        progress.Stages(["take", "take"])


@pytest.mark.slow
def test_import_retarget_compose_resolve_print_progress_on_stderr(cli, capsys, tmp_path, clips, retargeted,
                                                                  every_tick):
    a, b = (str(clips / n) for n in ("chin_cheek_short.bvh", "fingerspelling_short.bvh"))
    result, stages = _json_and_stages(cli, capsys, ["import", str(clips), "--library", str(tmp_path / "lib.blend")])
    assert len(result["imported"]) == 2
    assert stages == [("chin_cheek_short.bvh", 1, 2), ("fingerspelling_short.bvh", 2, 2)]
    result, stages = _json_and_stages(cli, capsys, ["retarget", "--clip", a, "--clip", b, "--rig",
                                                    str(SAMPLES / "signer.blend"), "--out", str(tmp_path / "r.blend")])
    assert stages == [("reading", 1, 4), ("chin_cheek_short", 2, 4), ("fingerspelling_short", 3, 4),
                      ("writing", 4, 4)]
    result, stages = _json_and_stages(cli, capsys, ["compose", "--clips", a, b, "--rig", str(SAMPLES / "signer.blend"),
                                                    "--out", str(tmp_path / "c.blend")])
    assert stages == [("reading", 1, 4), ("clips", 2, 4), ("composing", 3, 4), ("writing", 4, 4)]
    result, stages = _json_and_stages(cli, capsys, ["resolve", "--blend", str(retargeted), "--frames", "1:3",
                                                    "--out", str(tmp_path / "s.blend")])
    assert [s for s, _k, _n in stages] == ["reading", "compile", "body", "poses", "writing", "skin_check"]
    assert set(result["stage_seconds"]) == {"reading", "compile", "body", "poses", "skin_check", "writing"}


def test_lines_are_throttled_and_quiet_for_short_stages(addon):
    """At most one line a second per stage (plus its end), and nothing for a stage shorter
    than the threshold: the CLI's defaults."""
    progress = addon.signsim_addon.progress
    said = []
    lines = progress.Lines("bake", said.append, after=0.0)     # EVERY_S: one a second
    stages = progress.Stages(("reading", "simulation"), lines)
    with stages("simulation") as tick:
        for i in range(200):                                   # far less than a second
            tick(i / 200)
    assert len(said) == 2 and said[0] == "[bake 2/2] simulation 0 %", said
    assert re.fullmatch(r"\[bake 2/2\] simulation done in 0 s", said[1])
    said.clear()
    quiet = progress.Stages(("reading",), progress.Lines("bake", said.append))   # AFTER_S: 2 s
    with quiet("reading") as tick:
        tick(0.5)
    assert said == [] and set(quiet.seconds) == {"reading"}

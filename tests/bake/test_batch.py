"""`signsim batch` on Dask: many library clips retargeted and baked on a cluster = the serial
result, bit for bit, also when a worker dies mid-clip or the cluster is a separate
scheduler with its own workers (interrupts: test_batch_interrupt.py)."""
import json
import re
import os
import shutil
import subprocess
import sys
import threading
import time

import psutil
import pytest

import bpy
import numpy as np

from action_keys import all_keys
from batch_library import LAUNCHER, RIG, SAMPLES, make_library, only_finished_outputs, short_clip

TIMING = {"bake_seconds", "realtime_factor"}


def _baked_keys(path):
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    act = bpy.data.objects["Signer"].animation_data.action
    return act.name, all_keys(act)


def _batch(cli, capsys, lib, out, *extra):
    code = cli(["batch", "--library", str(lib), "--rig", RIG, "--out", str(out), "--json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    # stdout is the JSON alone; the progress, a line per finished clip, goes to stderr
    assert len(captured.out.strip().splitlines()) == 1
    progress = [line for line in captured.err.splitlines() if line.startswith("[")]
    assert sorted(line.split("] ")[0] for line in progress) == [f"[{k}/{len(result['clips'])}"
                                                                for k in range(1, len(result["clips"]) + 1)]
    assert result["failed"] == 0
    return result["clips"]


def _assert_equal_runs(runs, serial):
    """Every record of `runs` has no error and the serial run's metrics and keys exactly."""
    assert [r["clip"] for r in runs] == [r["clip"] for r in serial]
    for p, s in zip(runs, serial):
        assert "error" not in p and "error" not in s, (p.get("error"), s.get("error"))
        for side in ("reference", "baked"):
            assert {k: v for k, v in p["metrics"][side].items() if k not in TIMING} == \
                   {k: v for k, v in s["metrics"][side].items() if k not in TIMING}
        name_p, keys_p = _baked_keys(p["out"])
        name_s, keys_s = _baked_keys(s["out"])
        assert name_p == name_s and keys_p.keys() == keys_s.keys()
        assert all(np.array_equal(keys_p[k], keys_s[k]) for k in keys_p)


@pytest.fixture(scope="module")
def library(addon, tmp_path_factory):
    """A library of two short, distinct clips (one per worker of a two-worker cluster: each
    clip is two Blender child processes, the run's cost; a killed worker's retried clip
    still runs as the surviving worker's second task)."""
    return make_library(addon, tmp_path_factory.mktemp("batch"), (("fingerspelling", 18), ("chin_cheek", 12)))


@pytest.fixture(scope="module")
def serial(addon, library, tmp_path_factory):
    """The library's clips baked one after the other by the plain `retarget` and `bake`
    subcommands (no Dask; in this process, not a Blender started per step): the reference
    every cluster run must equal."""
    out = tmp_path_factory.mktemp("serial")
    clips = [c["name"] for c in addon.signsim_addon.library.api.list_clips(str(library))]
    records = []
    for clip in clips:
        retargeted, baked, metrics = (out / f"{clip}{ext}" for ext in (".rt.blend", ".blend", ".json"))
        for step in (["retarget", "--clip", clip, "--library", str(library), "--rig", RIG, "--out", str(retargeted)],
                     ["bake", "--blend", str(retargeted), "--armature", "Signer", "--out", str(baked),
                      "--metrics", str(metrics)]):
            assert addon.signsim_addon.cli.main(step) == 0, step
        records.append({"clip": clip, "out": str(baked), "metrics": json.loads(metrics.read_text())})
    return records


@pytest.fixture
def cli(addon, monkeypatch):
    monkeypatch.setenv("SIGNSIM_CLI", json.dumps(LAUNCHER))
    return addon.signsim_addon.cli.main


@pytest.mark.compat
@pytest.mark.slow
def test_local_cluster_batch_equals_serial_bake(cli, library, serial, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli(["batch", "--library", str(library), "--rig", RIG, "--out", str(out), "--workers", "2"])
    human = capsys.readouterr().out
    assert code == 0
    # the clips it will run are listed before the first one finishes
    (listing,) = [line for line in human.splitlines() if line.startswith("baking ")]
    assert human.index(listing) < human.index("[1/") and \
        sorted(listing.split(": ", 1)[1].split(", ")) == sorted(r["clip"] for r in serial)
    # then what it is doing until the first clip finishes: the workers starting, then running
    assert human.index(listing) < human.index("starting 2 local worker(s)…") < human.index("started: 2 clip(s) at a time") \
        < human.index("[1/"), human
    # progress: one line per finished clip, counted, with the time left while clips remain
    progress = [line for line in human.splitlines() if line.startswith("[")]
    assert sorted(line.split("] ")[0] for line in progress) == [f"[{k}/{len(serial)}" for k in range(1, len(serial) + 1)]
    assert all(re.search(r", eta (\d+ min )?\d+ s$", line) for line in progress[:-1]) and "eta" not in progress[-1], progress
    assert only_finished_outputs(out) == {r["clip"] for r in serial}
    runs = [{"clip": r["clip"], "out": str(out / f"{r['clip']}.blend"),
             "metrics": json.loads((out / f"{r['clip']}.json").read_text())} for r in serial]
    _assert_equal_runs(runs, serial)


def test_eta_is_the_finished_clips_own_times_not_the_time_since_the_start(addon):
    """The first clip's line includes the cluster's start; the time left counts the clips'
    own times: the mean one for each round of clips running at once."""
    clips_eta = addon.signsim_addon.bake.batch.clips_eta
    assert clips_eta([], 3, 2) is None
    assert clips_eta([4.0], 2, 2) == 4.0             # [1/3] with 2 workers: one more round
    assert clips_eta([4.0, 6.0], 3, 2) == 10.0       # two rounds of the mean 5 s
    assert clips_eta([4.0, 6.0], 1, 1) == 5.0


@pytest.mark.slow
def test_a_failing_clip_is_reported_and_the_others_complete(cli, library, serial, tmp_path, capsys):
    # two of the library's clips and, between them in library order, one the retarget
    # refuses (a single pose): imported from the same files, the good ones equal the serial run
    clips = tmp_path / "clips"
    clips.mkdir()
    good = sorted(r["clip"] for r in serial)[:2]
    for name in good:
        shutil.copy(library.parent / "clips" / f"{name}.bvh", clips)
    bad = f"{good[0]}_pose"
    short_clip(SAMPLES / "chin_cheek.bvh", clips / f"{bad}.bvh", 1)
    lib = tmp_path / "library.blend"
    assert cli(["import", str(clips), "--library", str(lib)]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    code = cli(["batch", "--library", str(lib), "--rig", RIG, "--out", str(out), "--workers", "2", "--json"])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    records = json.loads(captured.out.strip().splitlines()[-1])["clips"]
    assert [r["clip"] for r in records] == [good[0], bad, good[1]]
    assert "no motion keys" in records[1]["error"], records[1]
    assert "out" not in records[1] and "metrics" not in records[1]
    assert captured.err.strip().splitlines()[-1] == "signsim: 2 clip(s) baked, 1 failed", captured.err
    # the others finished as if alone; the failed clip left no file (nor its intermediate)
    _assert_equal_runs([records[0], records[2]], [next(r for r in serial if r["clip"] == c) for c in good])
    assert only_finished_outputs(out) == set(good)


def _kill_worker_of_first_bake(killed):
    """Wait for a `bake` child of a Dask worker, then SIGKILL that worker process; records
    the clip's --blend, the worker's and the child's pids in `killed`."""
    me = psutil.Process()
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not killed:
        for p in me.children(recursive=True):
            try:
                cmd = p.cmdline()
                if "bake" in cmd and "--blend" in cmd:
                    worker = p.parent()
                    killed.update(blend=cmd[cmd.index("--blend") + 1], worker=worker.pid, child=p.pid)
                    worker.kill()
                    return
            except psutil.Error:
                continue
        time.sleep(0.05)


@pytest.mark.slow
def test_killed_worker_has_its_clip_retried_and_the_batch_completes(cli, library, serial, tmp_path, capsys):
    killed = {}
    killer = threading.Thread(target=_kill_worker_of_first_bake, args=(killed,), daemon=True)
    killer.start()
    runs = _batch(cli, capsys, library, tmp_path / "out", "--workers", "2")
    killer.join()
    assert killed, "no worker was killed"
    assert not psutil.pid_exists(killed["worker"])
    # the dead worker's bake child did not live on (it would write outputs no task owns)
    time.sleep(1)
    assert not psutil.pid_exists(killed["child"]) or \
        psutil.Process(killed["child"]).status() == psutil.STATUS_ZOMBIE
    _assert_equal_runs(runs, serial)
    assert only_finished_outputs(tmp_path / "out") == {r["clip"] for r in serial}


@pytest.fixture
def scheduler(tmp_path):
    """A Dask scheduler on 127.0.0.1 and two single-threaded workers, each its own process
    started by the `dask` command line, as on a farm; yields the scheduler's address."""
    info = tmp_path / "scheduler.json"
    dask = [sys.executable, "-m", "distributed.cli.dask_scheduler"]
    procs = [subprocess.Popen(dask + ["--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                      "--scheduler-file", str(info)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.monotonic() + 120
        while not info.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        # the workers find the CLI by their own SIGNSIM_CLI, as a farm machine would
        env = dict(os.environ, SIGNSIM_CLI=json.dumps(LAUNCHER))
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                                       "--nworkers", "2", "--nthreads", "1", "--no-dashboard"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield address
    finally:
        for p in reversed(procs):
            p.terminate()
            p.wait(timeout=60)


@pytest.mark.slow
def test_scheduler_address_runs_the_batch_on_that_cluster(cli, library, serial, scheduler, tmp_path, capsys,
                                                         monkeypatch):
    # the client's own command is not what the workers run: theirs comes from their SIGNSIM_CLI
    monkeypatch.setenv("SIGNSIM_CLI", json.dumps([sys.executable, "-c", "raise SystemExit(3)"]))
    runs = _batch(cli, capsys, library, tmp_path / "out", "--scheduler", scheduler)
    _assert_equal_runs(runs, serial)


@pytest.mark.slow
def test_unreachable_scheduler_is_one_clear_error(cli, library, tmp_path, capsys):
    code = cli(["batch", "--library", str(library), "--rig", RIG, "--out", str(tmp_path / "out"),
                "--scheduler", "tcp://127.0.0.1:9"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1
    assert err[0].startswith("signsim: error: cannot reach the Dask scheduler at tcp://127.0.0.1:9"), err


@pytest.mark.slow
def test_fps_is_passed_to_every_retarget(cli, library, tmp_path, capsys):
    """batch --fps N: each clip retargeted at N fps (retarget --fps), resampled and said so."""
    (run,) = _batch(cli, capsys, library, tmp_path / "out", "--fps", "15", "--workers", "1",
                    "--text", "chin_cheek")
    assert "error" not in run, run.get("error")
    assert any("the clip's 30 fps resampled to the scene's 15 fps: 12 frames became 6" in w
               for w in run["warnings"]), run["warnings"]
    bpy.ops.wm.open_mainfile(filepath=run["out"], load_ui=False)
    scene = bpy.context.scene
    assert scene.render.fps / scene.render.fps_base == 15


@pytest.mark.parametrize("value", ["abc", "0"])
def test_a_malformed_fps_is_a_usage_error_before_any_work(cli, library, tmp_path, capsys, value):
    out = tmp_path / "out"
    code = cli(["batch", "--library", str(library), "--rig", RIG, "--out", str(out), "--fps", value])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "--fps" in err[0] and "frame rate" in err[0], err
    assert not out.exists()

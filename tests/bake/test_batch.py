"""`signsim batch`: many library clips retargeted and baked in parallel = the serial result."""
import json
import pathlib
import sys

import pytest

import bpy
import numpy as np

from action_keys import all_keys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample_blends"


def _short_clip(src, dst, frames):
    """A copy of BVH `src` keeping its first `frames` data rows (a distinct, quick clip)."""
    text = src.read_text().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("Frame Time:")) + 1
    out = [f"Frames: {frames}" if line.startswith("Frames:") else line for line in text[:start]]
    dst.write_text("\n".join(out + text[start:start + frames]) + "\n")


def _baked_keys(path):
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    act = bpy.data.objects["Signer"].animation_data.action
    return act.name, all_keys(act)


@pytest.mark.slow
def test_batch_of_four_clips_on_two_workers_equals_serial(addon, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SIGNSIM_CLI", json.dumps([sys.executable, str(ROOT / "tools" / "launch.py")]))
    clips = tmp_path / "clips"
    clips.mkdir()
    for i, (name, n) in enumerate((("fingerspelling", 14), ("fingerspelling", 20),
                                   ("chin_cheek", 14), ("chin_cheek", 20))):
        _short_clip(SAMPLES / f"{name}.bvh", clips / f"{name}_{i}.bvh", n)
    lib = tmp_path / "library.blend"
    cli = addon.signsim_addon.cli.main
    assert cli(["import", str(clips), "--library", str(lib)]) == 0
    results = {}
    for workers in (2, 1):
        out = tmp_path / f"out{workers}"
        assert cli(["batch", "--library", str(lib), "--rig", str(SAMPLES / "signer.blend"),
                    "--out", str(out), "--workers", str(workers), "--json"]) == 0
        results[workers] = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    parallel, serial = results[2]["clips"], results[1]["clips"]
    assert len(parallel) == 4 and [r["clip"] for r in parallel] == [r["clip"] for r in serial]
    for p, s in zip(parallel, serial):
        assert "error" not in p and "error" not in s
        timing = {"bake_seconds", "realtime_factor"}
        for side in ("reference", "baked"):
            assert {k: v for k, v in p["metrics"][side].items() if k not in timing} == \
                   {k: v for k, v in s["metrics"][side].items() if k not in timing}
        name_p, keys_p = _baked_keys(p["out"])
        name_s, keys_s = _baked_keys(s["out"])
        assert name_p == name_s and keys_p.keys() == keys_s.keys()
        assert all(np.array_equal(keys_p[k], keys_s[k]) for k in keys_p)

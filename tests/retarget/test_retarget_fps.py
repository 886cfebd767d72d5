"""`signsim retarget --fps` (issue 37): the clip's own frame rate is kept by default,
`--fps N` resamples to N, `--fps rig` keeps the rig file's rate (the old behaviour), and a
malformed rate is a usage error.

The clip: the bundled chin_cheek.bvh (91 frames) declared at 120 fps; the rig: the bundled
signer, whose file keeps its own rate.
"""
import json
import pathlib

import bpy
import numpy as np
import pytest

from action_keys import all_keys

SAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends"
SIGNER = SAMPLES / "signer.blend"
FRAMES = 91


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main


@pytest.fixture
def clip_120(tmp_path):
    """chin_cheek.bvh with Frame Time 1/120 s: 91 frames at 120 fps."""
    text = (SAMPLES / "chin_cheek.bvh").read_text()
    assert "Frame Time: 0.033333" in text and f"Frames: {FRAMES}" in text
    path = tmp_path / "chin_cheek_120.bvh"
    path.write_text(text.replace("Frame Time: 0.033333", "Frame Time: 0.0083333"))
    return path


def _run(cli, capsys, clip, out, *extra):
    code = cli(["retarget", "--clip", str(clip), "--rig", str(SIGNER), "--out", str(out),
                "--no-contacts", "--json", *extra])
    captured = capsys.readouterr()
    return code, json.loads(captured.out.strip().splitlines()[-1]), captured.err


def _open(out):
    """(scene fps, the assigned action's keyed frames, its keys) of the written file."""
    bpy.ops.wm.open_mainfile(filepath=str(out))
    scene = bpy.context.scene
    action = bpy.data.objects["Signer"].animation_data.action
    keys = all_keys(action)
    frames = np.unique(np.concatenate([co[0::2] for co in keys.values()]))
    return scene.render.fps / scene.render.fps_base, frames, keys


def _rig_fps():
    bpy.ops.wm.open_mainfile(filepath=str(SIGNER))
    return bpy.context.scene.render.fps / bpy.context.scene.render.fps_base


def _resampled(frames, fps_from, fps_to):
    return int(np.floor((frames - 1) * fps_to / fps_from + 1e-6)) + 1


@pytest.mark.slow
def test_the_clips_own_rate_is_kept_by_default(cli, clip_120, tmp_path, capsys):
    rig_fps = _rig_fps()
    assert rig_fps != 120
    out = tmp_path / "out.blend"
    code, result, err = _run(cli, capsys, clip_120, out)
    assert code == 0, err
    assert result["fps"] == 120
    assert result["frames"] == [1.0, float(FRAMES)]
    assert not [w for w in result["warnings"] if "resampled" in w], result["warnings"]
    fps, frames, _ = _open(out)
    assert fps == 120
    assert len(frames) == FRAMES
    # without --json the scene's new rate is said
    code = cli(["retarget", "--clip", str(clip_120), "--rig", str(SIGNER), "--no-contacts",
                "--out", str(tmp_path / "said.blend")])
    said = capsys.readouterr().out
    assert code == 0
    assert f"the scene takes the clip's 120 fps (the rig file had {rig_fps:g})" in said, said


@pytest.mark.slow
def test_fps_n_resamples_and_says_so(cli, clip_120, tmp_path, capsys):
    out = tmp_path / "out.blend"
    code, result, err = _run(cli, capsys, clip_120, out, "--fps", "30")
    assert code == 0, err
    n = _resampled(FRAMES, 120, 30)
    assert n == 23
    assert result["fps"] == 30
    assert result["frames"] == [1.0, float(n)]
    assert f"the clip's 120 fps resampled to the scene's 30 fps: {FRAMES} frames became {n}" \
        in result["warnings"]
    fps, frames, _ = _open(out)
    assert fps == 30 and len(frames) == n


@pytest.mark.slow
def test_fps_rig_keeps_the_rig_files_rate(cli, clip_120, tmp_path, capsys):
    """--fps rig is the old behaviour: the rig file's rate, the clip resampled to it; the
    same keys, bit for bit, as naming that rate."""
    rig_fps = _rig_fps()
    out_rig, out_n = tmp_path / "rig.blend", tmp_path / "n.blend"
    code, result, err = _run(cli, capsys, clip_120, out_rig, "--fps", "rig")
    assert code == 0, err
    n = _resampled(FRAMES, 120, rig_fps)
    assert result["fps"] == rig_fps and result["frames"] == [1.0, float(n)]
    assert f"the clip's 120 fps resampled to the scene's {rig_fps:g} fps: {FRAMES} frames became {n}" \
        in result["warnings"]
    code, result_n, err = _run(cli, capsys, clip_120, out_n, "--fps", f"{rig_fps:g}")
    assert code == 0, err
    fps_rig, frames_rig, keys_rig = _open(out_rig)
    fps_n, frames_n, keys_n = _open(out_n)
    assert fps_rig == fps_n == rig_fps and len(frames_rig) == n
    assert keys_rig.keys() == keys_n.keys()
    for k in keys_rig:
        assert np.array_equal(keys_rig[k], keys_n[k]), k


@pytest.mark.parametrize("value", ["0", "abc", "-30", "nan"])
def test_a_malformed_fps_is_a_usage_error(cli, clip_120, tmp_path, capsys, value):
    out = tmp_path / "out.blend"
    code, result, err = _run(cli, capsys, clip_120, out, "--fps", value)
    assert code == 2, err
    assert "--fps" in result["error"] and "frame rate" in result["error"]
    assert not out.exists()

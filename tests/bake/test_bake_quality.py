"""What the physics pass does to real motion: noise removed without lag, no added jerk.

Real files through the product (retarget, then the bake's prepare/solve); the clean
generated clip is the truth its noisy copy is measured against.
"""
import pathlib

import bpy
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_blends"
SHARED_DATA = ROOT.parent / "shared" / "data"


def _prepared(addon, tmp_path, clip):
    out = tmp_path / f"{clip.stem}.blend"
    assert addon.signsim_addon.cli.main(["retarget", "--clip", str(clip), "--rig", str(SAMPLES / "signer.blend"),
                                         "--out", str(out)]) == 0
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    return addon.signsim_addon.bake.api.prepare(bpy.context.scene, bpy.data.objects["Signer"], preset="default")


def _upright_copy(clip, tmp):
    """A copy of a generated clip whose head bone (Blender's metarig calls it spine.006)
    is named "head", so that the import's up-axis guess cannot turn it upside down: what
    is measured here is the physics pass, not that guess."""
    out = tmp / clip.name
    out.write_text(clip.read_text().replace("JOINT spine.006\n", "JOINT head\n"))
    return out


@pytest.fixture(scope="module")
def noisy_pair(tmp_path_factory, addon):
    data = SHARED_DATA / "generated"
    if not data.is_dir():
        pytest.skip(f"third-party test data not found at {data}")
    tmp = tmp_path_factory.mktemp("quality")
    return tuple(_prepared(addon, tmp, _upright_copy(data / name, tmp))
                 for name in ("fingerspell_80_noisy.bvh", "fingerspell_80.bvh"))


def test_reference_fit_removes_the_capture_noise(noisy_pair, addon):
    """σ = 1.5° jitter and single-frame 25° spikes on the hand: the fitted reference is
    ≥ 40 % closer to the clean clip than the noisy keys, both in fingertip position and
    in hand joint angle, and not shifted in time (measured 44 % and 46 %)."""
    solver = addon.solver
    noisy, clean = noisy_pair
    model, tips = noisy.rig.model, noisy.rig.fingertips
    ref, truth = noisy.reference, clean.reference
    hand = [i for i, g in enumerate(model.groups) if g in ("fingers", "thumb", "wrist")]
    fitted = solver.reference.fit_reference(ref).rotations

    def tip_positions(rotations):
        return solver.metrics.tip_positions(model, rotations, truth.base_positions, truth.base_rotations, tips)
    goal = tip_positions(truth.rotations)

    def errors(rotations):
        pos = np.sqrt(np.mean(np.sum((tip_positions(rotations) - goal) ** 2, axis=-1)))
        angle = np.degrees(solver.quat.angle_between(truth.rotations[:, hand], rotations[:, hand]))
        return pos, np.sqrt(np.mean(angle ** 2))
    pos_noisy, angle_noisy = errors(ref.rotations)
    pos_fit, angle_fit = errors(fitted)
    assert pos_fit <= 0.6 * pos_noisy and angle_fit <= 0.6 * angle_noisy
    lag = solver.metrics.lag_ms(truth.times, goal, tip_positions(fitted))
    assert abs(lag) <= 0.1 * 1e3 * (truth.times[1] - truth.times[0])


def test_bake_of_the_noisy_clip_is_smoother_without_lag(noisy_pair, addon):
    """The bake of the noisy clip: fingertip jerk below the input's (measured −90 %),
    lag within one frame, no fallback."""
    noisy, _ = noisy_pair
    m = addon.signsim_addon.bake.api.solve(noisy).metrics["baked"]
    frame_ms = 1e3 * (noisy.reference.times[1] - noisy.reference.times[0])
    assert m["jerk_change_percent"] <= -50.0
    assert abs(m["lag_ms"]) <= frame_ms
    assert m["fallbacks"] == 0


def test_bake_of_the_sample_clip_adds_no_jerk_or_lag(tmp_path, addon):
    """The bundled fingerspelling sample (clean keys): jerk not above the reference's
    (measured −22 %), lag within a frame, no fallback, finite keys."""
    job = _prepared(addon, tmp_path, SAMPLES / "fingerspelling.bvh")
    solved = addon.signsim_addon.bake.api.solve(job)
    m = solved.metrics["baked"]
    assert m["jerk_change_percent"] <= 0.0
    assert abs(m["lag_ms"]) <= 1e3 * (job.reference.times[1] - job.reference.times[0])
    assert m["fallbacks"] == 0 and np.all(np.isfinite(solved.rotations))

"""Metrics against signals with known answers."""

import json

import numpy as np
import pytest

from solver.core import quat
from solver.physics import metrics
from solver.physics.simulate import simulate


def test_lag_recovers_a_sub_frame_shift():
    fps = 120
    t = np.arange(600) / fps
    shift = 0.0125  # 1.5 frames

    def path(time):
        return np.stack([0.1 * np.sin(2 * np.pi * 2 * time) + 0.02 * np.sin(2 * np.pi * 5.3 * time),
                         0.05 * np.cos(2 * np.pi * 3.1 * time), 0 * time], -1)[:, None]
    assert metrics.lag_ms(t, path(t), path(t - shift)) == pytest.approx(12.5, abs=1.0)
    assert metrics.lag_ms(t, path(t), path(t + shift)) == pytest.approx(-12.5, abs=1.0)


def test_jerk_cost_of_a_sinusoid():
    """p = A sin(ωt): ∫‖p'''‖² dt over whole periods = A² ω⁶ T / 2."""
    fps, A, w = 240, 0.05, 2 * np.pi * 2
    t = np.arange(4 * fps + 1) / fps
    p = np.stack([A * np.sin(w * t), 0 * t, 0 * t], -1)[:, None]
    expected = A ** 2 * w ** 6 * (t[-1] - t[0]) / 2
    assert metrics.jerk_cost(t, p) == pytest.approx(expected, rel=0.02)


def test_tracking_error_of_a_constant_offset(rigs):
    model = rigs.branched_model()
    rot = np.tile(quat.IDENTITY, (10, model.n_bones, 1))
    off = quat.mul(rot, quat.exp(np.array([0.0, np.radians(3.0), 0.0])))
    assert metrics.tracking_error_deg(model, rot, off)["a"] == pytest.approx(3.0)


def test_limit_excess(rigs):
    model = rigs.hand()
    curl = np.zeros((5, 3))
    curl[2, 1] = 1.9 + np.radians(10.0)
    stats = metrics.limit_excess_stats(model, rigs.fist_rotations(model, curl))
    assert stats["max_deg"] == pytest.approx(10.0)
    assert stats["frames_violating"] == 1


def test_splice_velocity_jump():
    fps = 30
    t = np.arange(21) / fps
    rate = np.where(t < 10 / fps, 1.0, 3.0)  # rad/s about Z, changing at frame 10
    angle = np.concatenate([[0.0], np.cumsum(rate[:-1] / fps)])
    rot = quat.exp(np.stack([0 * t, 0 * t, angle], -1))[:, None]
    np.testing.assert_allclose(metrics.splice_velocity_jump(t, rot, [10, 5]), [2.0, 0.0], atol=1e-9)
    with pytest.raises(ValueError):
        metrics.splice_velocity_jump(t, rot, [0])


def test_compare_reports_before_and_after(rigs):
    model = rigs.hand()
    t = np.arange(31) / 30
    curl = np.outer(0.5 * (1 - np.cos(2 * np.pi * 2 * t)), [1.6, 1.8, 1.6])
    ref = rigs.motion_reference(rigs.fist_rotations(model, curl), 30)
    report = metrics.compare(model, ref, simulate(model, ref), seams=[10, 20], bake_seconds=0.5)
    json.dumps(report)
    assert report["effort"]["realtime_factor"] == pytest.approx(2.0)
    assert len(report["result"]["splice_velocity_jump"]) == 2
    assert report["reference"]["penetration"]["max_mm"] > 2.0
    assert report["result"]["penetration"]["max_mm"] < 0.35
    assert set(report["tracking_error_deg"]) == {"wrist", "fingers"}
    assert report["effort"]["fallbacks"] == [0, 0, 0]
    with pytest.raises(ValueError):
        metrics.jerk_cost(np.array([0.0, 0.1, 0.3, 0.4]), np.zeros((4, 1, 3)))

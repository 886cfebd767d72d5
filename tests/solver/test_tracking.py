"""Feedforward lets the PD gains drop without lag."""

import numpy as np

from solver.physics import metrics
from solver.physics.simulate import GroupGains, SimSettings, simulate

FREQUENCIES_HZ = (1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 11.0, 16.0, 24.0)


def test_feedforward_tracks_3hz_with_half_the_gains(rigs):
    """A hanging limb follows a 3 Hz, ±20° swing. For each gain level (natural frequency,
    critically damped) measure RMS error and fingertip-speed lag; the lowest level that
    reaches ≤ 1° and ≤ 8 ms with feedforward must be at most half the lowest that does
    without it, so Kd (∝ ω) drops ≥ 50 % and Kp (∝ ω²) ≥ 75 %."""
    model = rigs.pendulum(length=0.5, radius=0.03)
    fps = 60
    t = np.arange(2 * fps + 1) / fps
    ref = rigs.hinge_reference(np.radians(20.0) * np.sin(2 * np.pi * 3.0 * t), fps)
    tips_ref = metrics.tip_positions(model, ref.rotations, ref.base_positions, ref.base_rotations)

    def quality(freq, feedforward):
        gains = {"p": GroupGains(freq, 1.0)}
        res = simulate(model, ref, SimSettings(group_gains=gains, feedforward=feedforward))
        rms = metrics.tracking_error_deg(model, ref.rotations, res.rotations)["p"]
        tips = metrics.tip_positions(model, res.rotations, ref.base_positions, ref.base_rotations)
        return rms, abs(metrics.lag_ms(t, tips_ref, tips))

    def lowest_passing(feedforward):
        for f in FREQUENCIES_HZ:
            rms, lag = quality(f, feedforward)
            if rms <= 1.0 and lag <= 8.0:
                return f, rms, lag
        raise AssertionError("no gain level tracks the reference")

    f_ff, rms_ff, lag_ff = lowest_passing(True)
    f_pd, _, _ = lowest_passing(False)
    assert rms_ff <= 1.0 and lag_ff <= 8.0
    assert f_ff <= 0.5 * f_pd  # Kd ratio ≤ 0.5
    assert (f_ff / f_pd) ** 2 <= 0.5  # Kp ratio
    # At the feedforward gains, plain PD lags and misses: the feedforward does the work.
    rms_pd, lag_pd = quality(f_ff, False)
    assert rms_pd > 1.0 and lag_pd > 8.0

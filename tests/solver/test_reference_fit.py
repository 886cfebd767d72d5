"""Zero-phase reference fit: smoothing spline, noise level, spike rejection, no lag."""

import numpy as np
from scipy.interpolate import make_smoothing_spline

from solver.core import quat
from solver.physics.reference import Reference, fit_reference, noise_scale, smoothing_spline, spike_frames
from solver.physics.simulate import GroupGains, SimSettings, simulate

FPS = 30


def _swing(n=481, fps=FPS):
    """Clean 3-bone motion (n, 3, 4): smooth swings of 40–60° at 0.7–2 Hz about mixed axes."""
    t = np.arange(n) / fps
    rv = np.stack([np.stack([0.8 * np.sin(2 * np.pi * 0.7 * t + b), 0.3 * np.cos(2 * np.pi * 1.3 * t),
                             0.5 * np.sin(2 * np.pi * 2.0 * t + 2 * b)], -1) for b in range(3)], 1)
    return t, quat.exp(rv)


def _noisy(q, sigma_deg, rng, spikes=()):
    noise = rng.normal(0.0, np.radians(sigma_deg), q.shape[:-1] + (3,))
    for frame, bone, deg in spikes:
        noise[frame, bone] += np.radians(deg) * np.array([1.0, 0.0, 0.0])
    return quat.mul(q, quat.exp(noise))


def _reference(t, q):
    n = len(t)
    return Reference(t, q, np.zeros((n, 3)), np.tile(quat.IDENTITY, (n, 1)))


def test_smoothing_spline_is_scipys_smoothing_spline(rng):
    """For the λ scipy's make_smoothing_spline is given, asking for that fit's RMS residual
    gives the same curve (Reinsch's banded form, solved independently)."""
    t = np.sort(rng.uniform(0.0, 2.0, 80))
    y = np.sin(3.0 * t)[:, None] + rng.normal(0.0, 0.1, (80, 1))
    for lam in (1e-5, 1e-3):
        expected = make_smoothing_spline(t, y[:, 0], lam=lam)(t)
        rms = np.sqrt(np.mean((expected - y[:, 0]) ** 2))
        np.testing.assert_allclose(smoothing_spline(t, y, np.array([rms]))[:, 0], expected, atol=1e-7)


def test_noise_scale_recovers_sigma_and_ignores_fast_clean_motion(rng):
    t = np.arange(2000) / 60.0
    clean = np.sin(2 * np.pi * 6.0 * t)[:, None] * np.array([[0.5, 1.0]])  # 6 Hz at 60 fps
    assert np.all(noise_scale(clean) < np.radians(0.01))
    sigma = noise_scale(clean + rng.normal(0.0, 0.02, clean.shape))
    np.testing.assert_allclose(sigma, 0.02, rtol=0.1)


def test_spikes_are_found_but_fast_real_motion_is_not(rng):
    t, q = _swing()
    r = quat.log(q)
    assert not spike_frames(r, np.radians(8.0)).any()
    noisy = quat.log(_noisy(q, 1.5, rng, spikes=[(100, 1, 25.0), (300, 2, -25.0)]))
    found = spike_frames(noisy, np.radians(8.0))
    assert {tuple(x) for x in np.argwhere(found)} == {(100, 1), (300, 2)}
    # A fast real movement (accelerating to 40° per frame and stopping) is not a spike.
    speed = np.radians(np.concatenate([np.zeros(20), [10, 25, 40, 40, 40, 25, 10], np.zeros(20)]))
    ramp = np.zeros((len(speed), 1, 3))
    ramp[:, 0, 0] = np.cumsum(speed)
    assert not spike_frames(ramp, np.radians(8.0)).any()


def test_fit_removes_noise_and_spikes_without_lag(rng):
    """σ = 1.5° noise and two 25° single-frame spikes: the fit is ≥ 40 % closer to the
    clean motion than the noisy keys (RMS angle), the spike frames are within 3° of the
    truth, and the best time alignment with the clean motion is within 0.05 frames."""
    t, clean = _swing()
    noisy = _noisy(clean, 1.5, rng, spikes=[(100, 1, 25.0), (300, 2, -25.0)])
    fitted = fit_reference(_reference(t, noisy)).rotations
    err_noisy = np.degrees(quat.angle_between(clean, noisy))
    err_fit = np.degrees(quat.angle_between(clean, fitted))
    assert np.sqrt(np.mean(err_fit ** 2)) <= 0.6 * np.sqrt(np.mean(err_noisy ** 2))
    assert err_fit[100, 1] < 3.0 and err_fit[300, 2] < 3.0
    # Sub-frame shift minimising the squared difference to the clean rotation vectors.
    a, b = quat.log(clean)[20:-20], quat.log(fitted)
    cost = [np.mean((b[20 + s:len(b) - 20 + s] - a) ** 2) for s in (-1, 0, 1)]
    shift = 0.5 * (cost[0] - cost[2]) / (cost[0] - 2 * cost[1] + cost[2])
    assert abs(shift) < 0.05


def test_clean_keys_are_kept():
    t, q = _swing()
    fitted = fit_reference(_reference(t, q)).rotations
    assert np.degrees(quat.angle_between(q, fitted)).max() < 1e-6


def test_tolerance_caps_the_fit():
    """With noise far above the tolerance the residual per bone is held at the tolerance."""
    rng = np.random.default_rng(7)
    t, clean = _swing()
    noisy = _noisy(clean, 6.0, rng)
    fitted = fit_reference(_reference(t, noisy), tolerance_deg=1.0).rotations
    residual = quat.log(quat.conj_mul(fitted, noisy))
    assert np.sqrt(np.mean(residual ** 2)) <= np.radians(1.0) * (1 + 1e-6)


def test_finger_on_a_swinging_base_keeps_its_pose(rigs):
    """The hand's base whips through ±60° at 2.5 Hz while every finger is keyed still
    (curled 0.6 rad): with the computed-torque feedforward the fingers stay within 0.5°
    of their keys at 6 Hz gains; plain PD at the same gains is flung ≥ 5° off."""
    model = rigs.hand(limits=False)
    fps = 60
    t = np.arange(fps + 1) / fps
    curl = np.full((len(t), 3), 0.6)
    rot = rigs.fist_rotations(model, curl)
    rot[:, 0] = quat.IDENTITY
    swing = np.radians(60.0) * np.sin(2 * np.pi * 2.5 * t)
    base = quat.exp(np.stack([swing, 0 * swing, 0.5 * swing], -1))
    ref = Reference(t, rot, np.zeros((len(t), 3)), base)
    gains = {"fingers": GroupGains(6.0), "wrist": GroupGains(6.0)}
    fingers = np.array(model.groups) == "fingers"

    def worst(feedforward):
        res = simulate(model, ref, SimSettings(group_gains=gains, feedforward=feedforward))
        return np.degrees(quat.angle_between(ref.rotations[:, fingers], res.rotations[:, fingers])).max()
    assert worst(True) <= 0.5
    assert worst(False) >= 5.0

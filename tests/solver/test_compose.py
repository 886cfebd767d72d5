"""Composition numerics (solver/compose.py): weights, slerp splices, alignment, layers, QC."""

import numpy as np
import pytest

from solver import compose, quat
from solver.metrics import splice_velocity_jump

FPS = 24.0


def wave(n, bones=5, freq=0.5, phase=0.0, amp=0.6, seed=0):
    """Smooth local rotations (n, bones, 4): each bone swings about its own axis."""
    rng = np.random.default_rng(seed)
    axes = rng.normal(size=(bones, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    t = np.arange(n)[:, None] / FPS
    angle = amp * np.sin(2 * np.pi * freq * t + phase + rng.uniform(0, 2 * np.pi, bones))
    return quat.exp(angle[..., None] * axes)


def track(n, seed=0, freq=0.5, phase=0.0, heading=0.0, start=(0.0, 0.0, 1.0), velocity=(0.2, 0.0, 0.0),
          amp=0.6):
    rot = wave(n, seed=seed, freq=freq, phase=phase, amp=amp)
    rot[:, 0] = quat.mul(np.array([np.cos(heading / 2), 0, 0, np.sin(heading / 2)]), rot[:, 0])
    pos = np.array(start) + np.arange(n)[:, None] / FPS * np.array(velocity)
    return compose.Track(rot, pos[:, None, :])


def test_smoothstep_values_and_c1_endpoints():
    s = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(compose.curve(s, "smoothstep"), [0, 0.15625, 0.5, 0.84375, 1], atol=1e-15)
    np.testing.assert_allclose(compose.curve(s, "smootherstep"), [0, 0.103515625, 0.5, 0.896484375, 1],
                               atol=1e-15)
    np.testing.assert_allclose(compose.curve(s, "linear"), s)
    h = 1e-6
    for kind in ("smoothstep", "smootherstep"):
        for end in (0.0, 1.0 - h):       # one-sided slopes at both ends vanish (C¹ joins)
            assert abs((compose.curve(end + h, kind) - compose.curve(end, kind)) / h) < 1e-5
    # smootherstep is C² too: second differences vanish at the ends
    for kind, second in (("smoothstep", 6.0), ("smootherstep", 0.0)):
        f = lambda x: compose.curve(x, kind)   # noqa: E731
        assert abs((f(2e-4) - 2 * f(1e-4) + f(0.0)) / 1e-8 - second) < 0.05
    np.testing.assert_allclose(compose.blend_weights(3), compose.curve([0.25, 0.5, 0.75]))
    assert len(compose.blend_weights(0)) == 0
    with pytest.raises(ValueError, match="unknown blend curve"):
        compose.curve(0.5, "cubic")


def test_splice_keeps_unit_norm_and_continuous_hemispheres():
    a, b = track(40, seed=1), track(50, seed=2, heading=2.5)
    b.rotations[::3] *= -1.0                       # sign flips in the input
    out, seams = compose.compose([a, b, track(30, seed=3)], FPS, windows=[12, 7])
    assert len(out) == 40 + 50 + 30 - 12 - 7
    np.testing.assert_allclose(np.linalg.norm(out.rotations, axis=-1), 1.0, atol=1e-12)
    assert np.all(np.sum(out.rotations[1:] * out.rotations[:-1], axis=-1) > 0.0)
    assert [s["index"] for s in seams] == [1, 2] and [s["window"] for s in seams] == [12, 7]
    # outside the windows the clips are untouched (up to sign and the heading of the root)
    np.testing.assert_allclose(np.abs(np.sum(out.rotations[:28, 1:] * a.rotations[:28, 1:], -1)), 1.0, atol=1e-12)


def test_root_alignment_starts_b_where_a_is_with_its_heading():
    a = track(30, heading=0.4, velocity=(0.3, 0.1, 0.0))
    b = track(30, seed=5, heading=-1.2, start=(5.0, -3.0, 0.9))
    for window in (0, 6):
        out, info = compose.splice(a, b, window)
        s = info["start"]
        anchor = a.positions[s, 0] if window else 2 * a.positions[-1, 0] - a.positions[-2, 0]
        # B′'s first frame is the window's first frame: A there, extrapolated for a hard cut
        b2, psi, _off = compose.align(b, anchor, a.rotations[min(s, 29), 0], compose.Rig())
        np.testing.assert_allclose(b2.positions[0, 0], anchor, atol=1e-12)
        tw = lambda q: 2 * np.arctan2(q[3], q[0])   # noqa: E731
        assert abs(np.angle(np.exp(1j * (tw(b2.rotations[0, 0]) - tw(a.rotations[min(s, 29), 0]))))) < 1e-9
        steps = np.linalg.norm(np.diff(out.positions[:, 0], axis=0), axis=-1)
        own = max(np.linalg.norm(np.diff(a.positions[:, 0], axis=0), axis=-1).max(),
                  np.linalg.norm(np.diff(b.positions[:, 0], axis=0), axis=-1).max())
        assert steps.max() < own + 1e-3            # root continuous within 1 mm


def test_additive_layer_identity_delta_and_mask():
    rng = np.random.default_rng(4)
    base = quat.normalize(rng.normal(size=(20, 6, 4)))
    layer = quat.normalize(rng.normal(size=(20, 6, 4)))
    ref = quat.normalize(rng.normal(size=(6, 4)))
    same = compose.apply_layer(base, layer, 0.0, reference=ref)
    np.testing.assert_allclose(np.abs(np.sum(same * base, -1)), 1.0, atol=1e-12)
    full = compose.apply_layer(base, layer, 1.0, reference=ref)
    delta = quat.mul(layer, quat.conj(ref))
    got = quat.mul(quat.conj(base), full)
    np.testing.assert_allclose(np.abs(np.sum(got * delta, -1)), 1.0, atol=1e-12)
    half = compose.apply_layer(base, layer, np.full(20, 0.5), reference=ref)
    np.testing.assert_allclose(quat.angle_between(base, half), 0.5 * quat.angle_between(base, full), atol=1e-9)
    mask = np.array([False, True, False, False, True, False])
    masked = compose.apply_layer(base, layer, 1.0, mask=mask, reference=ref)
    assert np.array_equal(masked[:, ~mask], base[:, ~mask])          # bit-identical
    np.testing.assert_allclose(np.abs(np.sum(masked[:, mask] * full[:, mask], -1)), 1.0, atol=1e-12)


def brute_force_window(a, b, threshold, kind):
    for w in range(0, min(len(a), len(b)) + 1):
        out, info = compose.splice(a, b, w, kind)
        lo, hi = max(info["start"] - 1, 1), min(info["start"] + max(w, 1), len(out) - 2)
        d = splice_velocity_jump(np.arange(len(out)) / FPS, out.rotations, np.arange(lo, hi + 1)).max()
        if d <= threshold:
            return w
    return None


@pytest.mark.parametrize("kind", compose.CURVES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_suggest_window_is_the_minimal_window(kind, seed):
    a = track(60, seed=seed, freq=0.8, phase=0.3)
    b = track(60, seed=seed + 10, freq=0.3, phase=2.0, heading=1.0)
    eps = compose.default_threshold([a, b], FPS)
    w, d, found = compose.suggest_window(a, b, FPS, eps, kind)
    assert found and d <= eps
    assert w == brute_force_window(a, b, eps, kind)
    assert w > 1                               # a hard cut is not good enough here
    out, seams = compose.compose([a, b], FPS, kinds=kind, threshold=eps)
    assert seams[0]["window"] == w and not seams[0]["flagged"]
    assert seams[0]["velocity_jump"] == pytest.approx(d)
    _out, cut = compose.compose([a, b], FPS, windows=[0], kinds=kind, threshold=eps)
    assert cut[0]["flagged"] and cut[0]["velocity_jump"] > eps


def test_windows_may_not_overlap_and_threshold_needs_frames():
    a, b, c = track(20), track(10, seed=1), track(20, seed=2)
    with pytest.raises(ValueError, match="reaches into the previous seam"):
        compose.compose([a, b, c], FPS, windows=[6, 5])
    with pytest.raises(ValueError, match="one window and curve per seam"):
        compose.compose([a, b, c], FPS, windows=[3])
    with pytest.raises(ValueError, match="at least 3 frames"):
        compose.default_threshold([track(2)], FPS)


def test_limit_excess_and_foot_lock():
    q = quat.exp(np.array([[[0.5, 0.0, 0.0]], [[1.5, 0.0, 0.0]]]))
    ex = compose.limit_excess(q, np.full((1, 3), -1.0), np.full((1, 3), 1.0))
    np.testing.assert_allclose(ex, [0.0, 0.5], atol=1e-12)
    n = 20
    pos = np.zeros((n, 1, 3))
    feet = np.zeros((n, 2, 3))
    feet[:, 0, 0] = np.linspace(0, 0.19, n)     # the planted foot slides 1 cm a frame from frame 5
    feet[:5, 0, 0] = 0.0
    feet[5:, 0, 0] = 0.01 * np.arange(1, n - 4)
    feet[:, 1, 2] = 0.3                          # the other foot is lifted
    locked, k = compose.lock_feet(pos, feet, 4, 10)
    assert k == 0
    fixed = feet[:, 0, 0] - (pos[:, 0, 0] - locked[:, 0, 0])
    np.testing.assert_allclose(fixed[4:14], 0.0, atol=1e-12)     # still through the window
    assert np.all(np.diff(locked[14:, 0, 0]) == 0)               # the offset is kept after it


def test_default_threshold_is_per_seam_from_the_two_clips():
    calm, lively, calm2 = track(40, amp=0.05), track(40, seed=1, freq=2.0), track(40, seed=2, amp=0.05)
    _out, seams = compose.compose([calm, lively, calm2, track(40, seed=3, amp=0.05)], FPS)
    own = [np.percentile(compose.velocity_changes(t.rotations, FPS), 99) for t in (calm, lively, calm2)]
    assert seams[0]["threshold"] == pytest.approx(max(own[0], own[1]))
    assert seams[1]["threshold"] == pytest.approx(max(own[1], own[2]))
    assert seams[2]["threshold"] < 0.2 * seams[0]["threshold"]       # two calm clips: a strict seam

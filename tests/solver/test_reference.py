"""The C² reference spline and its analytic derivatives."""

import numpy as np
import pytest

from solver.core import quat
from solver.physics.reference import Reference, ReferenceSpline

FPS = 60


def make(rotations, base_p=None, base_r=None):
    n = len(rotations)
    base_p = np.zeros((n, 3)) if base_p is None else base_p
    base_r = np.tile(quat.IDENTITY, (n, 1)) if base_r is None else base_r
    return Reference(np.arange(n) / FPS, rotations, base_p, base_r)


def test_spline_passes_through_the_keys(rng):
    rot = quat.normalize(np.cumsum(rng.normal(size=(30, 3, 4)) * 0.05, axis=0) + [1, 0, 0, 0])
    ref = make(rot)
    s = ReferenceSpline(ref).sample(ref.times)
    np.testing.assert_allclose(np.abs(np.sum(s.rotations * ref.rotations, axis=-1)), 1.0, atol=1e-12)


def test_uniform_rotation_has_constant_body_rate():
    axis = np.array([0.3, -0.4, 0.866])
    axis /= np.linalg.norm(axis)
    t = np.arange(61) / FPS
    rate = 2.0  # rad/s
    rest = quat.exp(np.array([0.2, 0.1, -0.3]))
    rot = quat.mul(rest, quat.exp(np.outer(rate * t, axis)))[:, None]
    s = ReferenceSpline(make(rot)).sample(np.linspace(0.1, 0.9, 50))
    np.testing.assert_allclose(s.omega[:, 0], np.tile(rate * axis, (50, 1)), atol=2e-5)
    np.testing.assert_allclose(s.omega_dot[:, 0], 0.0, atol=5e-3)


def test_sinusoidal_hinge_derivatives():
    t = np.arange(121) / FPS
    amp, w = 0.5, 2 * np.pi * 1.5
    rot = quat.exp(np.stack([amp * np.sin(w * t), 0 * t, 0 * t], -1))[:, None]
    ts = np.linspace(0.2, 1.8, 40)
    s = ReferenceSpline(make(rot)).sample(ts)
    np.testing.assert_allclose(s.omega[:, 0, 0], amp * w * np.cos(w * ts), atol=2e-3 * amp * w)
    np.testing.assert_allclose(s.omega_dot[:, 0, 0], -amp * w * w * np.sin(w * ts), atol=1e-2 * amp * w * w)


def test_base_motion_derivatives():
    t = np.arange(61) / FPS
    p = np.stack([0.3 * t ** 2, -t, 0 * t + 1.2], -1)
    yaw = 0.8 * t
    r = quat.exp(np.stack([0 * t, 0 * t, yaw], -1))
    s = ReferenceSpline(make(np.tile(quat.IDENTITY, (61, 1, 1)), p, r)).sample(np.array([0.5]))
    np.testing.assert_allclose(s.base_velocity[0], [0.3, -1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(s.base_acceleration[0], [0.6, 0.0, 0.0], atol=1e-10)
    np.testing.assert_allclose(s.base_omega[0], [0.0, 0.0, 0.8], atol=1e-6)
    np.testing.assert_allclose(s.base_rotation[0], quat.to_matrix(quat.exp(np.array([0, 0, 0.4]))), atol=1e-9)


def test_hemisphere_flips_in_the_keys_do_not_matter():
    t = np.arange(31) / FPS
    rot = quat.exp(np.stack([0 * t, 2.0 * t, 0 * t], -1))[:, None]
    flipped = rot * np.where(np.arange(31) % 3 == 0, -1.0, 1.0)[:, None, None]
    a = ReferenceSpline(make(rot)).sample(np.linspace(0, 0.5, 11))
    b = ReferenceSpline(make(flipped)).sample(np.linspace(0, 0.5, 11))
    np.testing.assert_allclose(a.omega, b.omega, atol=1e-12)


@pytest.mark.parametrize("bad", [
    dict(times=[0.0, 0.0, 0.1]),
    dict(rotations=np.full((3, 2, 4), np.nan)),
    dict(base_positions=np.zeros((2, 3))),
    dict(rotations=np.zeros((3, 2, 3))),
    dict(face_vertices=np.zeros((3, 3))),
])
def test_reference_rejects_bad_input(bad):
    ok = dict(times=[0.0, 0.1, 0.2], rotations=np.tile(quat.IDENTITY, (3, 2, 1)), base_positions=np.zeros((3, 3)),
              base_rotations=np.tile(quat.IDENTITY, (3, 1)))
    with pytest.raises(ValueError):
        Reference(**{**ok, **bad})

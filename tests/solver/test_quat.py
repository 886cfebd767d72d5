import numpy as np
import pytest

from solver.core import quat

rng = np.random.default_rng(3)


def random_quats(n):
    return quat.normalize(rng.normal(size=(n, 4)))


def test_product_matches_matrix_composition():
    a, b = random_quats(50), random_quats(50)
    np.testing.assert_allclose(quat.to_matrix(quat.mul(a, b)), quat.to_matrix(a) @ quat.to_matrix(b), atol=1e-12)


def test_rotation_matrix_is_orthonormal_and_rotates_like_the_quaternion():
    q = random_quats(50)
    R = quat.to_matrix(q)
    np.testing.assert_allclose(R @ np.swapaxes(R, 1, 2), np.broadcast_to(np.eye(3), R.shape), atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(R), 1.0, atol=1e-12)
    v = rng.normal(size=(50, 3))
    np.testing.assert_allclose((R @ v[..., None])[..., 0], quat.rotate(q, v), atol=1e-12)


def test_from_matrix_inverts_to_matrix_including_half_turns():
    q = np.concatenate([random_quats(50), [[0.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.6, 0.8]]])
    back = quat.from_matrix(quat.to_matrix(q))
    np.testing.assert_allclose(np.abs(np.sum(back * q, axis=-1)), 1.0, atol=1e-12)


def test_exp_log_round_trip_and_small_angles():
    r = rng.normal(size=(50, 3))
    r *= (rng.uniform(0, np.pi - 1e-3, 50) / np.linalg.norm(r, axis=-1))[:, None]
    np.testing.assert_allclose(quat.log(quat.exp(r)), r, atol=1e-12)
    tiny = np.array([[1e-12, -2e-12, 3e-12]])
    np.testing.assert_allclose(quat.log(quat.exp(tiny)), tiny, rtol=1e-9)
    # log takes the short way round: q and −q give the same rotation vector.
    q = random_quats(10)
    np.testing.assert_allclose(quat.log(q), quat.log(-q), atol=1e-12)


def test_angle_between_is_the_geodesic_angle():
    a = random_quats(20)
    angle = rng.uniform(0, np.pi, 20)
    axis = rng.normal(size=(20, 3))
    axis /= np.linalg.norm(axis, axis=-1, keepdims=True)
    b = quat.mul(a, quat.exp(axis * angle[:, None]))
    np.testing.assert_allclose(quat.angle_between(a, b), angle, atol=1e-7)
    np.testing.assert_allclose(quat.angle_between(a, -b), angle, atol=1e-7)


def test_slerp_moves_at_constant_angular_rate():
    a, b = random_quats(1)[0], random_quats(1)[0]
    total = quat.angle_between(a, b)
    for t in (0.0, 0.25, 0.5, 1.0):
        q = quat.slerp(a, b, t)
        assert quat.angle_between(a, q) == pytest.approx(t * total, abs=1e-9)
    np.testing.assert_allclose(np.abs(np.dot(quat.slerp(a, a, 0.3), a)), 1.0, atol=1e-12)


def test_make_continuous_removes_sign_flips():
    q = quat.exp(np.linspace(0, 3, 40)[:, None] * np.array([0.0, 0.0, 1.0]))
    flipped = q * np.where(rng.uniform(size=40) < 0.5, -1.0, 1.0)[:, None]
    fixed = quat.make_continuous(flipped, reference=q[0])
    np.testing.assert_allclose(fixed, q, atol=1e-15)


def test_zero_quaternion_is_rejected():
    with pytest.raises(ValueError):
        quat.normalize(np.zeros(4))

"""CRBA, RNEA, gravity stiffness and Jacobians against analytic answers and each other."""

import numpy as np
import pytest

from solver.core import quat
from solver.physics import dynamics
from solver.core.kinematics import capsule_segments, forward_kinematics, normal_jacobian
from solver.core.model import TISSUE_DENSITY, capsule_mass_properties

BASE_R = quat.to_matrix(quat.normalize(np.array([0.9, 0.1, -0.3, 0.2])))
BASE_P = np.array([0.1, -0.2, 1.3])


def dynamics_at(model, q, base_r=BASE_R, base_p=BASE_P):
    kin = forward_kinematics(model, q, base_r, base_p)
    com, inertia = dynamics.body_inertia_world(model, kin)
    spatial = dynamics.spatial_inertias(model, com, inertia)
    composite = dynamics.composite_inertias(model, spatial)
    return kin, com, spatial, composite, dynamics.mass_matrix(model, kin, composite)


def perturb(model, q, dof, eps):
    """q ⊕ eps along one DOF (body-frame rotation increment)."""
    w = np.zeros(model.n_bones * 3)
    w[model.dof_flat[dof]] = eps
    return quat.mul(q, quat.exp(w.reshape(-1, 3)))


def test_mass_matrix_symmetric_positive_definite(rng, rigs):
    model = rigs.branched_model()
    for _ in range(20):
        *_, M = dynamics_at(model, rigs.random_pose(model, rng))
        np.testing.assert_allclose(M, M.T, atol=1e-15)
        assert np.linalg.eigvalsh(M).min() > 0


def test_rnea_of_forward_dynamics_reproduces_tau(rng, rigs):
    model = rigs.branched_model()
    for _ in range(20):
        q = rigs.random_pose(model, rng)
        kin, com, spatial, composite, M = dynamics_at(model, q)
        qd, tau = rng.normal(size=model.n_dof), rng.normal(size=model.n_dof)
        bv, ba = dynamics.base_motion(BASE_P, *rng.normal(size=(4, 3)))
        c, _ = dynamics.rnea(model, kin, spatial, qd, np.zeros(model.n_dof), bv, ba)
        qdd = np.linalg.solve(M, tau - c)
        back, _ = dynamics.rnea(model, kin, spatial, qd, qdd, bv, ba)
        np.testing.assert_allclose(back, tau, atol=1e-10)


def test_rnea_batch_matches_single_evaluations(rng, rigs):
    model = rigs.branched_model()
    q = np.stack([rigs.random_pose(model, rng) for _ in range(3)])
    qd, qdd = rng.normal(size=(2, 3, model.n_dof))
    bv, ba = rng.normal(size=(2, 3, 6))
    kin = forward_kinematics(model, q, np.broadcast_to(BASE_R, (3, 3, 3)), np.broadcast_to(BASE_P, (3, 3)))
    spatial = dynamics.spatial_inertias(model, *dynamics.body_inertia_world(model, kin))
    batch, _ = dynamics.rnea(model, kin, spatial, qd, qdd, bv, ba)
    for k in range(3):
        kin_k, _, sp_k, _, _ = dynamics_at(model, q[k])
        np.testing.assert_allclose(batch[k], dynamics.rnea(model, kin_k, sp_k, qd[k], qdd[k], bv[k], ba[k])[0],
                                   atol=1e-12)


def test_free_motion_conserves_energy(rng, rigs):
    """Independent of RNEA/CRBA agreement: a fine RK4 solution of M q̈ = −c keeps E constant,
    which fails if the Coriolis/centrifugal terms or M are wrong."""
    model = rigs.branched_model()
    bv, ba = np.zeros(6), np.zeros(6)

    def accel(q, v):
        kin, com, spatial, _, M = dynamics_at(model, q)
        c, V = dynamics.rnea(model, kin, spatial, v, np.zeros(model.n_dof), bv, ba)
        return np.linalg.solve(M, -c), dynamics.energy(model, com, spatial, V)

    def rate(q, v):
        w = np.zeros(model.n_bones * 3)
        w[model.dof_flat] = v
        return 0.5 * quat.mul(q, np.concatenate([np.zeros((model.n_bones, 1)), w.reshape(-1, 3)], 1))

    q, v = rigs.random_pose(model, rng), 3.0 * rng.normal(size=model.n_dof)
    e0 = accel(q, v)[1]
    h = 2e-4
    for _ in range(250):
        k1q, k1v = rate(q, v), accel(q, v)[0]
        k2q, k2v = rate(q + 0.5 * h * k1q, v + 0.5 * h * k1v), accel(quat.normalize(q + 0.5 * h * k1q), v + 0.5 * h * k1v)[0]
        k3q, k3v = rate(q + 0.5 * h * k2q, v + 0.5 * h * k2v), accel(quat.normalize(q + 0.5 * h * k2q), v + 0.5 * h * k2v)[0]
        k4q, k4v = rate(q + h * k3q, v + h * k3v), accel(quat.normalize(q + h * k3q), v + h * k3v)[0]
        q = quat.normalize(q + h / 6 * (k1q + 2 * k2q + 2 * k3q + k4q))
        v = v + h / 6 * (k1v + 2 * k2v + 2 * k3v + k4v)
    kinetic = 0.5 * e0  # scale for the relative tolerance below
    assert abs(accel(q, v)[1] - e0) < 1e-7 * max(abs(e0), kinetic, 1.0)


def test_base_acceleration_is_equivalent_to_gravity(rng, rigs):
    """Equivalence principle: an upward base acceleration a acts like gravity g + a."""
    model = rigs.branched_model()
    q = rigs.random_pose(model, rng)
    kin, _, spatial, _, _ = dynamics_at(model, q)
    zero = np.zeros(model.n_dof)
    bv, ba = dynamics.base_motion(BASE_P, np.zeros(3), np.zeros(3), np.array([0.0, 0.0, 2.5]), np.zeros(3))
    lifted, _ = dynamics.rnea(model, kin, spatial, zero, zero, bv, ba, gravity=9.81)
    heavier, _ = dynamics.rnea(model, kin, spatial, zero, zero, np.zeros(6), np.zeros(6), gravity=12.31)
    np.testing.assert_allclose(lifted, heavier, atol=1e-12)


def test_gravity_stiffness_matches_finite_differences(rng, rigs):
    model = rigs.branched_model()
    q = rigs.random_pose(model, rng)
    kin, _, _, composite, _ = dynamics_at(model, q)
    zero = np.zeros(model.n_dof)

    def G(qq):
        k, _, sp, _, _ = dynamics_at(model, qq)
        return -dynamics.rnea(model, k, sp, zero, zero, np.zeros(6), np.zeros(6))[0]
    eps = 1e-6
    fd = np.stack([(G(perturb(model, q, d, eps)) - G(perturb(model, q, d, -eps))) / (2 * eps)
                   for d in range(model.n_dof)], axis=1)
    np.testing.assert_allclose(dynamics.gravity_stiffness(model, kin, composite), -0.5 * (fd + fd.T), atol=1e-7)
    assert np.abs(fd).max() > 0.1  # a real, configuration-dependent stiffness


def test_normal_jacobian_matches_finite_differences(rng, rigs):
    model = rigs.branched_model()
    q = rigs.random_pose(model, rng)
    kin = forward_kinematics(model, q, BASE_R, BASE_P)
    bone, other = 4, 7
    local = np.array([0.01, 0.05, -0.02])
    point = kin.positions[bone] + kin.rotations[bone] @ local
    normal = quat.normalize(rng.normal(size=4))[1:]
    rows = normal_jacobian(model, kin, np.array([bone]), point[None], normal[None], np.array([other]))[0]
    eps = 1e-7

    def gap(qq):  # motion of the bone's material point relative to the other bone's frame
        k = forward_kinematics(model, qq, BASE_R, BASE_P)
        p = k.positions[bone] + k.rotations[bone] @ local
        rel = k.rotations[other].T @ (p - k.positions[other])
        return normal @ (kin.rotations[other] @ rel)
    fd = np.array([(gap(perturb(model, q, d, eps)) - gap(perturb(model, q, d, -eps))) / (2 * eps)
                   for d in range(model.n_dof)])
    np.testing.assert_allclose(rows, fd, atol=1e-7)


def test_capsule_mass_properties_limits():
    m, com, inertia = capsule_mass_properties(np.array([0.05]), np.array([0.0]))
    sphere = TISSUE_DENSITY * 4 / 3 * np.pi * 0.05 ** 3
    assert m[0] == pytest.approx(sphere)
    np.testing.assert_allclose(inertia[0], 0.4 * sphere * 0.05 ** 2 * np.eye(3), rtol=1e-12)
    m, com, inertia = capsule_mass_properties(np.array([1e-4]), np.array([1.0]))
    assert com[0, 1] == pytest.approx(0.5)
    assert inertia[0, 0, 0] == pytest.approx(m[0] / 12, rel=1e-3)


def test_pendulum_mass_matrix_is_inertia_about_pivot(rigs):
    model = rigs.pendulum(length=0.6, radius=0.03)
    *_, M = dynamics_at(model, HANG_POSE, np.eye(3), np.zeros(3))
    expected = model.inertia_local[0, 0, 0] + model.mass[0] * 0.3 ** 2
    assert M[0, 0] == pytest.approx(expected, rel=1e-12)


HANG_POSE = np.array([[1.0, 0.0, 0.0, 0.0]])


def test_model_rejects_bad_input():
    ok = dict(parents=[-1, 0], rest_offsets=np.zeros((2, 3)), rest_rotations=np.tile(quat.IDENTITY, (2, 1)),
              joint_types=["ball", "hinge"], capsule_radius=[0.01, 0.01], capsule_length=[0.1, 0.1],
              groups=["a", "a"])
    from solver.core.model import SkeletonModel
    SkeletonModel(**ok)
    for bad in ({"parents": [0, -1]}, {"rest_offsets": np.zeros((3, 3))}, {"joint_types": ["ball", "slider"]},
                {"capsule_radius": [0.01, np.nan]}, {"capsule_radius": [0.0, 0.01]},
                {"limit_lower": np.ones((2, 3)), "limit_upper": np.zeros((2, 3))}):
        with pytest.raises(ValueError):
            SkeletonModel(**{**ok, **bad})


def test_capsule_segments_follow_the_bone_axis(rigs):
    model = rigs.pendulum(length=0.5)
    kin = forward_kinematics(model, HANG_POSE, np.eye(3), np.array([0.0, 0.0, 1.0]))
    np.testing.assert_allclose(capsule_segments(model, kin)[0], [[0, 0, 1.0], [0, 0, 0.5]], atol=1e-15)

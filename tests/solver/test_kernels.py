"""Compiled kernels of the step against dense linear algebra computed another way."""

from dataclasses import replace

import numpy as np
import pytest

from solver.core import kernels, quat
from solver.physics import dynamics
from solver.physics.integrator import Physics, Target, evaluate, implicit_step, make_state


def _implicit_matrix(rigs, rng):
    """A = M + h²K + positive diagonal of the branched tree at a random pose (h = 1/240 s)."""
    model = rigs.branched_model(seed=3)
    q = rigs.random_pose(model, rng)
    _, _, _, M, _, _, _, K = dynamics.rigid_body_terms(model, q, np.eye(3), np.zeros(3), np.zeros(model.n_dof),
                                                       np.zeros(6), np.zeros(6))
    h = 1.0 / 240
    return model, M + h * h * K + np.diag(h * rng.uniform(0.1, 1.0, model.n_dof) * M.diagonal())


def test_tree_factorisation_solves_like_a_dense_solve(rigs, rng):
    model, A = _implicit_matrix(rigs, rng)
    # Nonzero only between a DOF and its tree ancestors: what the factorisation relies on.
    anc = np.eye(model.n_dof, dtype=bool)
    for d in range(model.n_dof):
        p = model.dof_parent[d]
        while p >= 0:
            anc[d, p] = anc[p, d] = True
            p = model.dof_parent[p]
    assert np.all(A[~anc] == 0.0) and np.count_nonzero(~anc) > 0
    b = rng.normal(size=model.n_dof)
    L = A.copy()
    assert kernels._ltl_factor(L, model.dof_parent)
    x = np.empty(model.n_dof)
    kernels._ltl_solve(L, model.dof_parent, b, x)
    np.testing.assert_allclose(x, np.linalg.solve(A, b), rtol=1e-10, atol=1e-12 * np.abs(x).max())
    lower = np.tril(L)
    np.testing.assert_allclose(lower.T @ lower, A, atol=1e-12 * np.abs(A).max())  # A = Lᵀ L
    indefinite = A.copy()
    indefinite[2, 2] = -1.0
    assert not kernels._ltl_factor(indefinite, model.dof_parent)


def test_step_with_contacts_matches_the_dense_implicit_solve(rigs, rng):
    """The Woodbury solve of the active contacts gives the v⁺ of a dense solve of
    (A + w GᵀG) v = rhs, with A and rhs the step's own (no PD, no gravity, so A = M)."""
    model = rigs.branched_model(seed=3)
    q = rigs.random_pose(model, rng)
    v = rng.normal(size=model.n_dof)
    physics = Physics(np.zeros(model.n_dof), np.zeros(model.n_dof), 1.0, 0.0, gravity=0.0)
    target = Target(q, np.zeros(model.n_dof), np.eye(3), np.zeros(3), np.zeros(6), np.zeros(6))
    ev = evaluate(model, physics, make_state(model, q, v), target)
    G = rng.normal(size=(3, model.n_dof))
    depth = np.array([0.01, 0.02, 0.005])  # all penetrating and approaching: all stay active
    ev = replace(ev, rows=G, depth=depth, normal_velocity=G @ v)
    h, k, c = 1.0 / 240, 2e4, 5.0
    state = implicit_step(model, physics, ev, None, target, target, h, k, c)
    w = h * c + h * h * k
    rhs = -h * ev.bias + h * ((k * depth - (c + h * k) * (G @ v)) @ G)
    expected = v + np.linalg.solve(ev.mass_matrix + w * G.T @ G, rhs)
    u = G @ expected
    assert np.all(k * (depth - h * u) - c * u > 0.0)  # the active set the dense solve assumes
    np.testing.assert_allclose(state.velocity, expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


def test_a_contact_is_damped_only_once_it_touches(rigs):
    """One hinge (no PD, no gravity) swinging at v towards a surface, one contact row
    g = 5 cm. From 1 mm outside, the step it touches in is the spring's alone, so no
    damper brakes the swing before it gets there: (I + h² k g²) Δv = h g k (d − h g v).
    From 1 mm inside, the damper joins: (I + (h c + h² k) g²) Δv = h g (k d − (c + h k) g v)."""
    model = rigs.pendulum(length=0.1)
    physics = Physics(np.zeros(1), np.zeros(1), 1.0, 0.0, gravity=0.0)
    rest = np.array([quat.IDENTITY])
    target = Target(rest, np.zeros(1), np.eye(3), np.zeros(3), np.zeros(6), np.zeros(6))
    h, k, c, g, v = 1.0 / 30, 3e4, 20.0, 0.05, -1.0
    for d, damper in ((-1e-3, 0.0), (1e-3, c)):
        ev = evaluate(model, physics, make_state(model, rest, np.array([v])), target)
        ev = replace(ev, rows=np.array([[g]]), depth=np.array([d]), normal_velocity=np.array([g * v]))
        inertia = ev.mass_matrix[0, 0]
        expected = v + h * g * (k * d - (damper + h * k) * g * v) / (inertia + (h * damper + h * h * k) * g * g)
        state = implicit_step(model, physics, ev, None, target, target, h, k, c)
        assert state.velocity[0] == pytest.approx(expected, rel=1e-12)
        assert d - h * g * expected > 0.0  # it ends touching: the row was active


def test_warm_up_ticks_after_each_group_of_kernels(monkeypatch):
    """The bake's 'compile' stage shows progress while the first bake after an install
    compiles: warm_up ticks its fraction done after each group of kernels, ending at 1."""
    from solver.physics import warm_up
    monkeypatch.setattr(warm_up, "_first", None)  # as in a fresh process (the kernels stay loaded)
    ticks = []
    seconds, compiled = warm_up.warm_up(ticks.append)
    assert len(ticks) >= 5 and ticks == sorted(ticks) and ticks[-1] == 1.0, ticks
    n = len(ticks)
    assert warm_up.warm_up(ticks.append) == (seconds, compiled) and len(ticks) == n  # once per process

"""The implicit step: analytic numerical dissipation, stiffness stability, limits,
fallback ladder and determinism."""

import numpy as np
import pytest

from solver.core import quat
from solver.physics import integrator
from solver.physics.integrator import Physics, Target, evaluate, implicit_step, make_state
from solver.physics.joint_limits import limit_excess
from solver.physics.simulate import GroupGains, SimSettings, simulate

FREE = GroupGains(0.0, 0.0)


def test_pendulum_energy_decays_as_backward_euler_predicts(rigs):
    """Small-angle pendulum, no damping: the linearised backward-Euler step maps
    (θ, v) by a scaled rotation in the energy norm, so E_{n+1} = E_n / (1 + h²ω²)
    with ω² = m g l / I_pivot. Over 10 s at h = 1/120 s the measured decay exponent
    must match N·ln(1 + h²ω²) within 10 %."""
    model = rigs.pendulum(length=1.0)
    fps, seconds, theta0 = 120, 10, 0.05
    ref = rigs.hinge_reference(np.full(fps * seconds + 1, theta0), fps)
    settings = SimSettings(group_gains={"p": FREE}, default_gains=FREE, feedforward=False,
                           max_substeps=1, max_tunnel_substeps=1)
    res = simulate(model, ref, settings)
    m, lc = model.mass[0], 0.5
    inertia = model.inertia_local[0, 0, 0] + m * lc ** 2
    h, steps = 1.0 / fps, fps * seconds
    omega2 = m * 9.81 * lc / inertia
    e = res.energy + m * 9.81 * lc  # energy above the resting pendulum
    assert np.all(res.substeps[1:] == 1)
    measured = np.log(e[-1] / e[0])
    predicted = -steps * np.log1p(h * h * omega2)
    assert measured == pytest.approx(predicted, rel=0.1)
    assert 1 - e[-1] / e[0] == pytest.approx(1 - np.exp(predicted), rel=0.1)  # the energy lost
    assert measured < -1.0  # real dissipation (a symplectic step would keep E)


def _spring(rigs, hz):
    model = rigs.pendulum()
    physics = Physics(np.array([2 * np.pi * hz]), np.zeros(1), 2 * np.pi * 30, 1.0, gravity=0.0)
    target = Target(np.array([quat.IDENTITY]), np.zeros(1), np.eye(3), np.zeros(3), np.zeros(6), np.zeros(6))
    return model, physics, target


def _angle(state):
    return quat.log(state.rotations)[0, 0]


def test_stiff_spring_is_stable_implicitly_and_explodes_explicitly(rigs):
    """A 200 Hz undamped spring at h = 1/30 s (hω ≈ 42): backward Euler contracts, explicit
    Euler multiplies the spring energy by exactly 1 + (hω)² on its first step and blows up."""
    model, physics, target = _spring(rigs, 200.0)
    h = 1.0 / 30
    inertia = None
    state = make_state(model, quat.exp(np.array([[0.01, 0.0, 0.0]])), np.zeros(1))
    angles = []
    for _ in range(300):
        ev = evaluate(model, physics, state, target)
        inertia = ev.mass_matrix[0, 0]
        state = implicit_step(model, physics, ev, None, target, target, h, 1e4, 0.0)
        angles.append(_angle(state))
    assert np.max(np.abs(angles)) <= 0.01 / (1 + (h * physics.omega[0]) ** 2) ** 0.5 + 1e-15
    assert abs(angles[-1]) < 1e-12

    def spring_energy(s):
        return 0.5 * inertia * (s.velocity[0] ** 2 + (physics.omega[0] * _angle(s)) ** 2)
    state = make_state(model, quat.exp(np.array([[0.001, 0.0, 0.0]])), np.zeros(1))
    energies = [spring_energy(state)]
    for _ in range(6):  # explicit Euler on the same force: f = Kp (θ_ref − θ) − c, Kp = I ω²
        ev = evaluate(model, physics, state, target)
        kp = ev.mass_matrix.diagonal() * physics.omega ** 2
        f = kp * quat.log(quat.conj_mul(state.rotations, target.rotations))[:, 0] - ev.bias
        v_new = state.velocity + h * np.linalg.solve(ev.mass_matrix, f)
        turn = quat.exp(np.array([[h * state.velocity[0], 0.0, 0.0]]))
        state = make_state(model, quat.mul(state.rotations, turn), v_new)
        energies.append(spring_energy(state))
    assert energies[1] / energies[0] == pytest.approx(1 + (h * physics.omega[0]) ** 2, rel=1e-6)
    assert energies[-1] > 1e9 * energies[0]


def test_stiff_tracking_through_simulate_stays_bounded(rigs):
    model = rigs.pendulum()
    fps = 30
    t = np.arange(61) / fps
    ref = rigs.hinge_reference(0.3 * np.sin(2 * np.pi * t), fps)
    res = simulate(model, ref, SimSettings(group_gains={"p": GroupGains(200.0, 0.0)}, max_substeps=1))
    angle = quat.log(res.rotations)[:, 0, 0]
    assert np.all(np.isfinite(res.rotations))
    assert np.max(np.abs(angle)) < 0.32


def _fist_reference(rigs, model, curl_max, hz=6.0, seconds=1.0, fps=60):
    t = np.arange(int(seconds * fps) + 1) / fps
    s = 0.5 * (1 - np.cos(2 * np.pi * hz * t))
    return rigs.motion_reference(rigs.fist_rotations(model, np.outer(s, curl_max)), fps), t, s


def test_joint_limits_never_exceeded(rigs):
    model = rigs.hand()
    t = np.arange(61) / 60
    curl = np.outer(2.6 * np.sin(np.pi * t) ** 2, [1.0, 1.0, 1.0]) - 0.5 * np.cos(np.pi * t)[:, None] ** 2
    ref = rigs.motion_reference(rigs.fist_rotations(model, curl), 60)
    assert np.degrees(limit_excess(model, ref.rotations).max()) > 20  # the reference violates them
    res = simulate(model, ref, SimSettings())
    assert np.degrees(limit_excess(model, res.rotations).max()) <= 0.5


def test_same_input_gives_bit_identical_output(rigs):
    model = rigs.hand()
    ref, _, _ = _fist_reference(rigs, model, [1.6, 1.8, 1.6], seconds=0.5)
    a = simulate(model, ref)
    b = simulate(model, ref)
    for name in ("rotations", "velocities", "penetration_mm", "substeps", "energy", "contact_stiffness"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()


def test_failed_factorisation_walks_the_ladder_to_kinematic(rigs, monkeypatch):
    model = rigs.hand(limits=False)
    ref, _, _ = _fist_reference(rigs, model, [1.0, 1.0, 1.0], seconds=0.2)
    real = integrator.kernels.implicit_step
    # Every factorisation fails: the compiled step's status 1 (not positive definite).
    monkeypatch.setattr(integrator.kernels, "implicit_step", lambda *a: real(*a)[:3] + (1,))
    res = simulate(model, ref)
    assert res.fallback_counts.tolist() == [0, 0, len(ref.times) - 1]
    assert np.all(res.fallback_level[1:] == 3)
    np.testing.assert_allclose(np.abs(np.sum(res.rotations * ref.rotations, axis=-1)), 1.0, atol=1e-12)


def test_transient_failures_use_the_first_rung_that_works(rigs, monkeypatch):
    model = rigs.hand(limits=False)
    ref, _, _ = _fist_reference(rigs, model, [1.0, 1.0, 1.0], seconds=0.2)
    real = integrator.kernels.implicit_step
    calls = {"n": 0}

    def flaky(*args):  # the first step ends non-finite: the compiled step's status 2
        calls["n"] += 1
        rotations, velocity, limit_x, status = real(*args)
        return (rotations, velocity * np.nan, limit_x, 2) if calls["n"] == 1 else (rotations, velocity, limit_x, status)
    monkeypatch.setattr(integrator.kernels, "implicit_step", flaky)
    res = simulate(model, ref, SimSettings(lead_in_s=0.0))  # the first solve is frame 1's
    assert res.fallback_level[1] == 1 and np.all(res.fallback_level[2:] == 0)
    assert res.fallback_counts.tolist() == [1, 0, 0]
    assert np.all(np.isfinite(res.rotations)) and np.all(np.isfinite(res.energy))

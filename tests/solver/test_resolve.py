"""Pose-space self-collision resolution on a small skeleton built from arrays: two arms
hanging from the base and a ball (a distance grid of an icosphere) attached to it."""
from types import SimpleNamespace

import numpy as np
import pytest

from solver.core import quat, sdf
from solver.core.body_volumes import axis_samples
from solver.core.model import SkeletonModel
from solver.core.nearest_pose import (ResolveSettings, resolve_pose, resolve_sequence, smooth_corrections,
                                         subtree_weights)
from solver.core.selfdist import Pose, all_parts, full_coordinates, right_jacobian, separations

R = 0.02  # capsule radius, m


@pytest.fixture(scope="module")
def body():
    # Bones 0-1-2 (upper arm, forearm, hinge finger) and 3-4 (a second arm) hang from the
    # base, 0.12 m apart along X; a ball of radius 5 cm sits in front of them (+Z).
    model = SkeletonModel(
        parents=[-1, 0, 1, -1, 3], rest_offsets=[[0, 0, 0], [0, 0.25, 0], [0, 0.2, 0], [0.12, 0, 0], [0, 0.25, 0]],
        rest_rotations=np.tile([1.0, 0, 0, 0], (5, 1)), joint_types=["ball", "ball", "hinge", "ball", "ball"],
        capsule_radius=[R] * 5, capsule_length=[0.25, 0.2, 0.1, 0.25, 0.2], groups=["arm"] * 5,
        limit_lower=np.full((5, 3), -2.5), limit_upper=np.full((5, 3), 2.5))
    v, t = sdf.icosphere(3, 0.05)
    grid = sdf.build_distance_grid(v + [0.06, 0.3, 0.12], t, -1, spacing=0.004, margin=0.04)
    bones = np.concatenate([np.full(6, b) for b in (1, 2, 4)])
    local = np.concatenate([axis_samples(R, L)[np.linspace(0, len(axis_samples(R, L)) - 1, 6).astype(int)]
                            for L in (0.2, 0.1, 0.2)])
    field = SimpleNamespace(grid=grid, bones=bones, local=local, radius=np.full(len(bones), R))
    return model, (field,)


BASE_R, BASE_P = quat.IDENTITY, np.zeros(3)


def _pose(model, rotvecs):
    return quat.exp(np.asarray(rotvecs, dtype=float))


def _gaps(model, fields, q):
    pose = Pose(model, quat.log(q), quat.to_matrix(BASE_R), BASE_P)
    return separations(model, fields, pose, all_parts(model, fields), gradient=False)[0]


def test_the_pairs_are_the_non_adjacent_ones(body):
    model, _ = body
    pairs = {tuple(p) for p in model.pairs.tolist()}
    assert (0, 1) not in pairs and (1, 2) not in pairs and (3, 4) not in pairs  # parent/child
    assert {(0, 3), (1, 4), (2, 4), (0, 4), (1, 3), (2, 3)} <= pairs


def test_right_jacobian_maps_coordinate_rates_to_body_angular_velocity():
    rng = np.random.default_rng(1)
    for r in [rng.normal(size=3), np.array([1e-6, 0, 0]), np.array([0.0, 2.9, 0.3])]:
        h = 1e-6
        J = right_jacobian(r)
        for k in range(3):
            dr = np.zeros(3)
            dr[k] = h
            # q(r)⁻¹ q(r + h e_k) ≈ exp(h J_r e_k)
            omega = quat.log(quat.conj_mul(quat.exp(r - dr), quat.exp(r + dr))) / (2 * h)
            assert np.allclose(omega, J[:, k], atol=1e-7)


def test_gradients_of_every_distance_match_finite_differences(body):
    model, fields = body
    rng = np.random.default_rng(3)
    parts = all_parts(model, fields)
    for _ in range(5):
        fixed = rng.normal(0.0, 0.6, (model.n_bones, 3))
        x = fixed.reshape(-1)[model.dof_flat]
        base = quat.to_matrix(quat.exp(rng.normal(0, 0.3, 3)))
        g, rows = separations(model, fields, Pose(model, fixed, base, BASE_P), parts)
        num = np.empty_like(rows)
        h = 1e-6
        for d in range(model.n_dof):
            e = np.zeros(model.n_dof)
            e[d] = h
            gp = separations(model, fields, Pose(model, full_coordinates(model, x + e, fixed), base, BASE_P), parts,
                             False)[0]
            gm = separations(model, fields, Pose(model, full_coordinates(model, x - e, fixed), base, BASE_P), parts,
                             False)[0]
            num[:, d] = (gp - gm) / (2 * h)
        assert np.abs(rows).max() > 0.05  # m/rad: the arm's lever, the test is not vacuous
        assert np.allclose(rows, num, atol=1e-7), np.abs(rows - num).max()


def test_a_pose_without_collisions_is_returned_unchanged(body):
    model, fields = body
    q = _pose(model, [[0, 0, 0.1], [0.2, 0, 0], [0.3, 0, 0], [0, 0, -0.1], [-0.2, 0.1, 0]])
    assert _gaps(model, fields, q).min() > 0.003
    r = resolve_pose(model, fields, q, BASE_R, BASE_P, ResolveSettings(margin=0.002))
    assert not r.changed and r.resolved
    assert np.array_equal(r.rotations, q)
    assert r.change.max() == 0.0


def _colliding(model):
    # Forearm bent forward into the ball, second arm swung into the first.
    return _pose(model, [[0.3, 0, 0], [0.4, 0, 0], [0.4, 0, 0], [0, 0, 0.85], [0, 0, 0]])


def test_a_colliding_pose_is_resolved_to_the_margin_with_a_small_weighted_change(body):
    model, fields = body
    q = _colliding(model)
    before = _gaps(model, fields, q)
    assert before.min() < -0.005
    margin = 0.003
    r = resolve_pose(model, fields, q, BASE_R, BASE_P, ResolveSettings(margin=margin))
    after = _gaps(model, fields, r.rotations)
    assert r.resolved and r.changed
    assert after.min() >= margin - 1e-4
    # The constraint is active at the optimum (a nearest pose touches the margin) ...
    assert after.min() <= margin + 1e-3
    # ... and it beats the penalty baseline on the weighted change it minimises.
    base = resolve_pose(model, fields, q, BASE_R, BASE_P, ResolveSettings(margin=margin), method="penalty")
    w = subtree_weights(model)

    def cost(res):
        e = quat.log(quat.conj_mul(q, res.rotations))
        return float(np.sum(w * np.sum(e * e, axis=1)))
    assert cost(r) <= cost(base) + 1e-9 or not base.resolved


def test_subtree_weights_count_descendants(body):
    model, _ = body
    assert subtree_weights(model).tolist() == [3, 2, 1, 2, 1]


def _swing(model, frames=41):
    """The forearm swinging into the ball and out again: rotations (F, n, 4), base
    rotations (F, 4), base positions (F, 3)."""
    bend = 0.3 * np.sin(np.pi * np.linspace(0.0, 1.0, frames))
    rot = np.stack([_pose(model, [[b, 0, 0], [1.7 * b, 0, 0], [0.4, 0, 0], [0, 0, -0.1], [0, 0, 0]])
                    for b in bend])
    return rot, np.tile(BASE_R, (frames, 1)), np.zeros((frames, 3))


def test_a_sequence_keeps_clear_frames_and_changes_the_correction_smoothly(body):
    model, fields = body
    rot, base_r, base_p = _swing(model)
    results = resolve_sequence(model, fields, rot, base_r, base_p, ResolveSettings(margin=0.002))
    clear = np.array([_gaps(model, fields, q).min() >= 0.002 for q in rot])
    assert clear.any() and (~clear).any()
    out = np.stack([r.rotations for r in results])
    assert all(r.resolved for r in results)
    assert np.array_equal(out[clear], rot[clear])
    # No jitter: the resolved forearm's frame-to-frame steps change no faster than the input's.
    step_in = quat.angle_between(rot[1:, 1], rot[:-1, 1])
    step_out = quat.angle_between(out[1:, 1], out[:-1, 1])
    assert np.abs(np.diff(step_out)).max() <= np.abs(np.diff(step_in)).max() + np.radians(1.0)


def test_smoothing_a_sequence_lowers_the_jerk_of_its_correction_and_keeps_it_feasible(body):
    model, fields = body
    rot, base_r, base_p = _swing(model)
    settings = ResolveSettings(margin=0.002)
    per_frame, previous = [], None
    for q in rot:  # what resolve_sequence does before smoothing
        r = resolve_pose(model, fields, q, BASE_R, BASE_P, settings, previous)
        per_frame.append(r)
        previous = r.correction if r.changed else None
    smooth = smooth_corrections(model, fields, rot, base_r, base_p, per_frame, settings)

    def jerk(results):
        d = np.stack([r.correction for r in results])
        return float(np.sum(np.diff(d, 3, axis=0) ** 2))
    assert jerk(per_frame) > 0
    assert jerk(smooth) < 0.8 * jerk(per_frame), (jerk(smooth), jerk(per_frame))
    # every frame still keeps the margin, measured on all parts, and clear frames are the input's
    for q, r0, r in zip(rot, per_frame, smooth):
        assert _gaps(model, fields, r.rotations).min() >= 0.002 - 1e-4
        if not r0.changed:
            assert not r.changed and np.array_equal(r.rotations, q)


def test_long_runs_are_smoothed_in_windows():
    # SLSQP over a whole 60-frame run took minutes: runs are cut into windows that tile them
    from solver.core.nearest_pose import SMOOTH_WINDOW, _windows
    assert _windows([(0, 29), (40, 41)], 12) == [(0, 11), (12, 23), (24, 29), (40, 41)]
    assert all(b - a + 1 <= SMOOTH_WINDOW for a, b in _windows([(3, 200)]))
    assert sum(b - a + 1 for a, b in _windows([(3, 200)])) == 198


def _swing_reference(model, frames=41):
    from solver.physics.reference import Reference
    rot, base_r, base_p = _swing(model, frames)
    return Reference(times=np.arange(frames) / 30.0, rotations=rot, base_positions=base_p, base_rotations=base_r)


def test_the_projection_clears_every_frame_keeps_clear_frames_and_is_deterministic(body):
    from solver.physics.project import project
    model, fields = body
    ref = _swing_reference(model)
    target = project(model, fields, ref)
    margin = 0.001
    clear = np.array([_gaps(model, fields, q).min() >= margin for q in ref.rotations])
    assert clear.any() and (~clear).any()
    for q in target.rotations:
        assert _gaps(model, fields, q).min() >= margin - 1e-4
    assert np.array_equal(target.rotations[clear], ref.rotations[clear])
    assert np.array_equal(target.changed, ~clear) and target.colliding == np.count_nonzero(~clear)
    assert np.all(target.change_deg[clear] == 0.0) and target.change_deg[~clear].max() > 0.0
    record = target.record([f"b{i}" for i in range(model.n_bones)], np.arange(41) + 1.0)
    assert record["projected_frames"] == np.count_nonzero(~clear)
    assert 0.0 < record["mean_change_deg"] <= record["largest_change_deg"] <= 15.0
    assert np.array_equal(project(model, fields, ref).rotations, target.rotations)


def test_the_projection_keeps_an_intended_contact_down_to_its_level(body):
    from solver.physics.project import project
    model, fields = body
    ref = _swing_reference(model)
    depth = -min(_gaps(model, fields, q).min() for q in ref.rotations)
    assert depth > 0.001
    # every part that touches the ball (the field hangs from the base, −1) is an intended
    # contact over the whole clip, as deep as the reference goes: nothing is pushed out
    intended = [(b, -1, 0, 41, depth) for b in (1, 2, 4)]
    target = project(model, fields, ref, intended)
    assert not target.changed.any() and np.array_equal(target.rotations, ref.rotations)
    # a shallower level lets the pair in only that far
    intended = [(b, -1, 0, 41, 0.5 * depth) for b in (1, 2, 4)]
    target = project(model, fields, ref, intended)
    assert target.changed.any()
    for q in target.rotations:
        assert _gaps(model, fields, q).min() >= -0.5 * depth - 1e-4


def test_the_projection_reports_its_progress_and_can_be_aborted(body):
    from solver.physics.project import project
    model, fields = body
    ref = _swing_reference(model, 21)
    seen = []
    project(model, fields, ref, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) == 21

    def stop(fraction):
        if fraction > 0.5:
            raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        project(model, fields, ref, progress=stop)

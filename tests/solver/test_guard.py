"""The deviation guard and the held-overlap zero level, on small analytic chains."""

import numpy as np

from solver.core import quat
from solver.physics.guard import (CONTACT_MAX_DEG, DIVERGED_DEG, RAMP_S, contact_hold, guard, towards_reference,
                                  world_error_deg)
from solver.physics.held_overlap import held_depth, held_overlaps, without_held_overlaps
from solver.core.model import SkeletonModel

FPS = 30.0


def chain(n=3, radius=0.02):
    """n ball bones in a straight line along +Y, 0.1 m each."""
    return SkeletonModel(parents=list(range(-1, n - 1)), rest_offsets=[[0, 0, 0]] + [[0, 0.1, 0]] * (n - 1),
                         rest_rotations=[quat.IDENTITY] * n, joint_types=["ball"] * n,
                         capsule_radius=[radius] * n, capsule_length=[0.1] * n, groups=["a"] * n)


def base(frames):
    return np.zeros((frames, 3)), np.tile(quat.IDENTITY, (frames, 1))


def test_world_error_of_a_parent_turn_is_felt_by_its_children():
    model = chain()
    ref = np.tile(quat.IDENTITY, (4, 3, 1))
    baked = ref.copy()
    baked[:, 1] = quat.exp(np.array([0.0, 0.0, np.radians(40.0)]))
    err = world_error_deg(model, ref, baked, *base(4))
    np.testing.assert_allclose(err, [[0.0, 40.0, 40.0]] * 4, atol=1e-9)


def test_a_diverged_bone_and_its_children_follow_the_reference_with_a_ramp():
    frames = 40
    model = chain()
    ref = np.tile(quat.IDENTITY, (frames, 3, 1))
    baked = ref.copy()
    bad = slice(15, 20)
    baked[bad, 1] = quat.exp(np.array([np.radians(120.0), 0.0, 0.0]))
    baked[:, 0] = quat.exp(np.array([0.0, 0.0, np.radians(5.0)]))  # tracking error, kept
    out, d = guard(model, ref, baked, *base(frames), np.zeros((frames, 3), bool), 1 / FPS)
    assert d.diverged[bad, 1].all() and not d.diverged[:, 0].any()
    np.testing.assert_array_equal(d.passed[bad, 1:], 1.0)  # bone 2 hangs from bone 1
    ramp = int(round(RAMP_S * FPS))
    assert list(d.frames) == list(range(15 - ramp, 20 + ramp))
    err = world_error_deg(model, ref, out, *base(frames))
    assert err[bad, 1:].max() < 5.0 + 1e-9  # only the parent's 5° remain
    np.testing.assert_array_equal(out[:, 0], baked[:, 0])
    # the ramp is monotone: no frame jumps more than the blend step
    step = np.degrees(quat.angle_between(out[1:, 1], out[:-1, 1]))
    assert step.max() < 120.0 / (ramp + 1) + 1e-6


def test_a_deviation_next_to_a_reference_contact_is_kept_and_one_without_is_passed_beyond_the_cap():
    frames = 20
    model = chain()
    ref = np.tile(quat.IDENTITY, (frames, 3, 1))
    touching = np.zeros((frames, 3), bool)
    touching[8:12, 2] = True  # the tip touches: it and the bones carrying it may deviate
    for angle, contact, passed in ((DIVERGED_DEG + 10.0, True, False), (CONTACT_MAX_DEG + 10.0, True, False),
                                   (CONTACT_MAX_DEG + 10.0, False, True)):
        baked = ref.copy()
        baked[8:12, 1] = quat.exp(np.array([np.radians(angle), 0.0, 0.0]))
        out, d = guard(model, ref, baked, *base(frames), touching if contact else ~touching & False, 1 / FPS)
        assert d.diverged.any() == passed and d.strayed.any() == (not contact)
        assert np.array_equal(out, baked) != passed


def test_held_depth_is_the_deepest_overlap_kept_for_the_window():
    d = np.array([0, 1, 5, 5, 5, 5, 2, 0, 9, 0.0])[:, None]
    assert held_depth(d, 3)[0] == 5.0  # the 9 lasts one frame: a collision
    assert held_depth(d, 5)[0] == 2.0
    assert held_depth(-np.ones((6, 2)), 2).tolist() == [0.0, 0.0]


def test_a_held_capsule_overlap_becomes_the_pairs_zero_level():
    # Two parallel bones 0.1 m apart with 20 mm radii; bone 0 leans towards bone 1 so that
    # its tip is 30 mm from bone 1's axis (10 mm overlap), and 20 mm for 5 frames.
    model = SkeletonModel(parents=[-1, -1], rest_offsets=[[0, 0, 0], [0.1, 0, 0]],
                          rest_rotations=[quat.IDENTITY] * 2, joint_types=["ball"] * 2,
                          capsule_radius=[0.02, 0.02], capsule_length=[0.1, 0.1], groups=["a"] * 2)
    assert len(model.pairs) == 1  # apart at rest
    frames = 30
    ref = np.tile(quat.IDENTITY, (frames, 2, 1))
    ref[:, 0] = quat.exp(np.array([0.0, 0.0, -np.arcsin(0.7)]))
    ref[25:, 0] = quat.exp(np.array([0.0, 0.0, -np.arcsin(0.8)]))  # shorter than HOLD_S: a collision
    pairs = held_overlaps(model, ref, *base(frames), 1 / FPS)
    np.testing.assert_allclose(pairs, [0.010], atol=1e-9)
    reduced = without_held_overlaps(model, pairs)
    np.testing.assert_allclose(reduced.pair_radius_sum, [0.03])
    assert model.pair_radius_sum[0] == 0.04  # the input is untouched


def test_a_fingertip_contact_does_not_explain_the_arm_far_above_it():
    frames = 12
    model = chain(n=5)
    ref = np.tile(quat.IDENTITY, (frames, 5, 1))
    touching = np.zeros((frames, 5), bool)
    touching[:, 4] = True
    baked = ref.copy()
    baked[:, 0] = quat.exp(np.array([np.radians(50.0), 0.0, 0.0]))  # 4 bones above the contact
    out, d = guard(model, ref, baked, *base(frames), touching, 1 / FPS)
    assert d.strayed[:, 0].all() and not d.diverged.any()  # strayed: reported, kept as simulated
    np.testing.assert_array_equal(out, baked)


def test_a_bone_off_without_a_contact_is_reported_and_kept_below_the_cap():
    frames = 20
    model = chain()
    ref = np.tile(quat.IDENTITY, (frames, 3, 1))
    baked = ref.copy()
    baked[8:12, 1] = quat.exp(np.array([np.radians(DIVERGED_DEG + 10.0), 0.0, 0.0]))
    out, d = guard(model, ref, baked, *base(frames), np.zeros((frames, 3), bool), 1 / FPS)
    assert d.strayed[8:12, 1].all() and d.strayed[8:12, 2].all() and not d.strayed[:, 0].any()
    assert not d.diverged.any() and len(d.frames) == 0
    np.testing.assert_array_equal(out, baked)


def test_a_preserved_contact_holds_its_chains_on_the_reference_with_a_ramp():
    frames = 40
    model = SkeletonModel(parents=[-1, 0, 1, 0], rest_offsets=[[0, 0, 0], [0, 0.1, 0], [0, 0.1, 0], [0.1, 0, 0]],
                          rest_rotations=[quat.IDENTITY] * 4, joint_types=["ball"] * 4,
                          capsule_radius=[0.02] * 4, capsule_length=[0.1] * 4, groups=["a"] * 4)
    angles = np.radians(np.arange(frames, dtype=float))  # the reference keeps turning
    ref = quat.exp(np.stack([angles, 0 * angles, 0 * angles], -1))[:, None].repeat(4, axis=1)
    hold = contact_hold(model, frames, [(np.array([2]), 15, 25)], 1 / FPS)
    np.testing.assert_array_equal(hold[15:25, :3], 1.0)  # the tip and the bones carrying it
    assert not hold[:, 3].any()                           # a sibling branch keeps the simulation
    ramp = int(round(RAMP_S * FPS))
    assert np.all(hold[15 - ramp - 1] == 0.0) and np.all(hold[25 + ramp] == 0.0)
    assert np.all(np.diff(hold[: 16, 2]) >= 0.0) and np.all(np.diff(hold[24:, 2]) <= 0.0)
    baked = quat.mul(ref, quat.exp(np.array([0.0, 0.0, 0.2])))
    out = towards_reference(baked, ref, hold)
    np.testing.assert_allclose(quat.angle_between(out[15:25, :3], ref[15:25, :3]), 0.0, atol=1e-9)
    np.testing.assert_allclose(quat.angle_between(out[:, 3], baked[:, 3]), 0.0, atol=1e-12)
    np.testing.assert_allclose(quat.angle_between(out[15 - ramp - 1], baked[15 - ramp - 1]), 0.0, atol=1e-12)

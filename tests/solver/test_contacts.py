"""Capsule and hand–face penalty contacts: geometry, schedule, anti-tunnelling."""

import numpy as np

from solver.core import quat, sdf
from solver.physics import integrator, metrics
from solver.core.capsule_pairs import segment_closest_points
from solver.physics.capsule_contacts import capsule_contacts
from solver.core.kinematics import capsule_segments, forward_kinematics
from solver.core.model import SkeletonModel
from solver.physics.simulate import GroupGains, SimSettings, simulate


def test_segment_closest_points_match_brute_force(rng):
    p1, q1, p2, q2 = rng.normal(size=(4, 100, 3))
    q2[:20] = p2[:20] + (q1[:20] - p1[:20]) * 0.7  # parallel segments
    q1[20:30] = p1[20:30]  # a point against a segment
    c1, c2 = segment_closest_points(p1, q1, p2, q2)
    s = np.linspace(0, 1, 201)
    a = p1[:, None] + s[None, :, None] * (q1 - p1)[:, None]
    b = p2[:, None] + s[None, :, None] * (q2 - p2)[:, None]
    brute = np.linalg.norm(a[:, :, None] - b[:, None, :], axis=-1).min(axis=(1, 2))
    dist = np.linalg.norm(c1 - c2, axis=-1)
    assert np.all(dist <= brute + 1e-12)
    assert np.all(brute - dist < 2e-2 * np.linalg.norm(q1 - p1, axis=-1).max())


def test_rest_overlaps_and_parent_child_pairs_are_filtered(rigs):
    model = rigs.hand()
    pairs = {tuple(p) for p in model.pairs}
    assert (0, 1) not in pairs and (1, 2) not in pairs  # parent/child
    assert (0, 3) in pairs and (3, 6) in pairs  # palm–fingertip, neighbouring fingertips
    touching = SkeletonModel(parents=[-1, -1], rest_offsets=[[0, 0, 0], [0.01, 0, 0]],
                             rest_rotations=np.tile(quat.IDENTITY, (2, 1)), joint_types=["ball", "ball"],
                             capsule_radius=[0.008, 0.008], capsule_length=[0.05, 0.05], groups=["a", "a"])
    assert len(touching.pairs) == 0


def _fist(rigs, seconds, hz=6.0, fps=60):
    model = rigs.hand()
    t = np.arange(int(seconds * fps) + 1) / fps
    s = 0.5 * (1 - np.cos(2 * np.pi * hz * t))
    ref = rigs.motion_reference(rigs.fist_rotations(model, np.outer(s, [1.6, 1.8, 1.6])), fps)
    return model, ref


FIST_GAINS = {"fingers": GroupGains(15.0), "wrist": GroupGains(10.0)}


def test_fast_fist_keeps_penetration_below_0_35_mm(rigs):
    """6 Hz fist: the reference drives the fingertips 3+ mm into the palm every cycle."""
    model, ref = _fist(rigs, 1.0)
    reference_depth = metrics.motion_penetration_mm(model, ref.rotations, ref.base_positions, ref.base_rotations)
    assert reference_depth.max() > 3.0
    res = simulate(model, ref, SimSettings(group_gains=FIST_GAINS))
    assert res.penetration_mm.max() <= 0.35
    # The fingertips do reach the palm: at the closed frames the deepest pair is within
    # 0.5 mm of touching (the predictive contacts stop them at the surface).
    kin = forward_kinematics(model, res.rotations, np.broadcast_to(np.eye(3), (len(res.rotations), 3, 3)),
                             np.zeros((len(res.rotations), 3)))
    closest = np.array([capsule_contacts(model, s).depth.max(initial=-1.0) for s in capsule_segments(model, kin)])
    assert np.all(closest[5::10] > -0.5e-3)


def test_stiffness_schedule_adapts_from_a_soft_start(rigs):
    """From kp = 300 N/m the schedule (d_target 0.2 mm, η 0.1) stiffens the contacts until
    the per-cycle peak is ≤ 0.35 mm; with the schedule off it stays above 0.5 mm (with
    the computed-torque feedforward the PD spring alone pushes the fingers into the palm,
    so even the soft start stays below a millimetre)."""
    model, ref = _fist(rigs, 3.0)
    soft = dict(group_gains=FIST_GAINS, contact_stiffness=300.0, contact_damping=1.0, k_min=100.0)
    on = simulate(model, ref, SimSettings(**soft))
    off = simulate(model, ref, SimSettings(schedule=False, **soft))
    cycles = on.penetration_mm[1:].reshape(-1, 10).max(axis=1)
    assert cycles[0] > 0.5 and cycles[-1] <= 0.35
    assert np.all(np.diff(cycles[:8]) < 0)
    assert off.penetration_mm.max() > 0.5
    assert on.contact_stiffness.max() > 5 * off.contact_stiffness.max()


def _tip_depth(model, rotations, bone, tip_local, radius, face_vertices, face_triangles):
    """Capsule-surface depth (F,) m of a fingertip (tip_local on `bone`) in a face mesh
    attached to bone 0, by the exact mesh distance; rotations (F, n_bones, 4), fixed base."""
    kin = forward_kinematics(model, rotations, np.broadcast_to(np.eye(3), (len(rotations), 3, 3)),
                             np.zeros((len(rotations), 3)))
    tip = kin.positions[:, bone] + (kin.rotations[:, bone] @ tip_local)
    local = np.einsum("nji,nj->ni", kin.rotations[:, 0], tip - kin.positions[:, 0])
    return radius - sdf.mesh_signed_distance(face_vertices, face_triangles, local)


def test_fingertip_driven_into_the_face_stays_within_half_a_millimetre(rigs):
    """A finger swings until the reference puts its tip capsule 2 cm inside a face (a
    6 cm sphere mesh on a heavy head bone); the result penetrates ≤ 0.5 mm, checked with
    the exact mesh distance of the final pose, not only the solver's grid."""
    finger_rest = rigs.HANG
    model = SkeletonModel(parents=[-1, -1], rest_offsets=[[0, 0, 0], [0, 0, 0]],
                          rest_rotations=[quat.IDENTITY, finger_rest], joint_types=["ball", "hinge"],
                          capsule_radius=[0.08, 0.008], capsule_length=[0.12, 0.2], groups=["head", "fingers"],
                          collide=[False, True])
    v, f = sdf.icosphere(3, 0.06)
    face = v + np.array([0.0, 0.09, -0.2])
    tip_local = np.array([0.0, 0.2, 0.0])

    def tip_depth(rotations):
        return _tip_depth(model, rotations, 1, tip_local, 0.008, face, f)

    angles = np.linspace(0, 0.5, 501)
    depth = tip_depth(quat.exp(np.stack([angles, 0 * angles, 0 * angles], -1))[:, None]
                      * np.array([[0.0, 0, 0, 0], [1.0, 1, 1, 1]])[None] + np.array([[1.0, 0, 0, 0], [0, 0, 0, 0]]))
    deep = angles[np.argmax(depth >= 0.02)]
    fps, n = 60, 91
    a = deep * np.clip(np.arange(n) / 30, 0, 1)
    rot = np.zeros((n, 2, 4))
    rot[:, 0] = quat.IDENTITY
    rot[:, 1] = quat.exp(np.stack([a, 0 * a, 0 * a], -1))
    ref = rigs.motion_reference(rot, fps, face_vertices=face, face_triangles=f, face_bone=0)
    assert tip_depth(ref.rotations[-1:])[0] >= 0.02
    res = simulate(model, ref, SimSettings(group_gains={"head": GroupGains(20.0), "fingers": GroupGains(8.0)}))
    assert res.penetration_mm.max() <= 0.5
    assert tip_depth(res.rotations).max() <= 0.5e-3
    assert np.degrees(quat.angle_between(res.rotations[:, 0], quat.IDENTITY)).max() < 1.0  # the face held still
    assert tip_depth(res.rotations[-1:])[0] > -0.5e-3  # and the finger is pressed against it


def _bar_and_finger(rigs):
    """A thin bar (r 3 mm) along X below the origin and a finger hinge that sweeps across it."""
    bar = quat.exp(np.array([0.0, 0.0, -np.pi / 2]))  # bone +Y → world +X
    finger = quat.mul(rigs.HANG, quat.exp(np.array([-0.5, 0.0, 0.0])))
    return SkeletonModel(parents=[-1, -1], rest_offsets=[[-0.05, 0.0, -0.08], [0, 0, 0]],
                         rest_rotations=[bar, finger], joint_types=["ball", "hinge"],
                         capsule_radius=[0.003, 0.008], capsule_length=[0.1, 0.1], groups=["bar", "fingers"])


def _side(model, rotations):
    """Y component of (finger axis − bar axis) at their closest points: its sign tells the side."""
    n = len(rotations)
    seg = capsule_segments(model, forward_kinematics(model, rotations, np.broadcast_to(np.eye(3), (n, 3, 3)),
                                                     np.zeros((n, 3))))
    c1, c2 = segment_closest_points(seg[:, 1, 0], seg[:, 1, 1], seg[:, 0, 0], seg[:, 0, 1])
    return (c1 - c2)[:, 1]


def test_finger_crossing_a_thin_capsule_within_one_frame_does_not_pass_through(rigs):
    model = _bar_and_finger(rigs)
    fps, n = 30, 31
    angle = np.where(np.arange(n) < 10, 0.0, 1.0)  # a 57° jump between two frames
    rot = np.zeros((n, 2, 4))
    rot[:, 0] = quat.IDENTITY
    rot[:, 1] = quat.exp(np.stack([angle, 0 * angle, 0 * angle], -1))
    ref = rigs.motion_reference(rot, fps)
    assert _side(model, ref.rotations[:1]) < 0 < _side(model, ref.rotations[-1:])
    gains = {"bar": GroupGains(30.0), "fingers": GroupGains(10.0)}
    res = simulate(model, ref, SimSettings(group_gains=gains))
    assert np.all(_side(model, res.rotations) < 0)
    assert res.substeps.max() > 8  # the crossing frames were subdivided
    # Without subdivision the same finger tunnels straight through the bar.
    single = simulate(model, ref, SimSettings(group_gains=gains, max_substeps=1, max_tunnel_substeps=1))
    assert _side(model, single.rotations[-1:]) > 0


def test_contact_against_a_joint_limit_resolves_through_the_free_parent(rigs, monkeypatch):
    """A light finger hinge held within ±0.05 rad by its limit rides on a heavy palm
    (ball joint) whose reference lowers the fingertip 1 cm into a face sphere. Lifting
    the finger past its limit is not allowed, so the contact must move the palm.
    Solved with the contacts (limits.limit_rows) the tip stays within 0.5 mm of the
    skin (exact mesh distance) and the limit holds; with the limit only projected after
    the step, the finger's share of the push is undone every step and the tip stays in."""
    lim = np.full((3, 3), np.inf)
    lim[2] = 0.05
    model = SkeletonModel(parents=[-1, -1, 1], rest_offsets=[[0, 0, 0], [0.3, 0, 0], [0, 0.1, 0]],
                          rest_rotations=[quat.IDENTITY] * 3, joint_types=["ball", "ball", "hinge"],
                          capsule_radius=[0.08, 0.03, 0.008], capsule_length=[0.12, 0.1, 0.05],
                          groups=["head", "palm", "fingers"], collide=[False, False, True],
                          limit_lower=-lim, limit_upper=lim)
    v, f = sdf.icosphere(3, 0.03)
    centre = np.array([0.3, 0.15, -0.045])  # 7 mm below the tip capsule at rest
    tip_local = np.array([0.0, 0.05, 0.0])

    def tip_depth(rotations):
        return _tip_depth(model, rotations, 2, tip_local, 0.008, v + centre, f)

    fps, n = 60, 61
    lower = -0.017 / 0.15 * np.clip(np.arange(n) / 30, 0, 1)  # palm about X: the tip 17 mm down
    rot = np.tile(quat.IDENTITY, (n, 3, 1))
    rot[:, 1] = quat.exp(np.stack([lower, 0 * lower, 0 * lower], -1))
    ref = rigs.motion_reference(rot, fps, face_vertices=v + centre, face_triangles=f, face_bone=0)
    assert tip_depth(ref.rotations[-1:])[0] >= 0.009
    gains = {"head": GroupGains(20.0), "palm": GroupGains(8.0), "fingers": GroupGains(8.0)}
    res = simulate(model, ref, SimSettings(group_gains=gains))
    finger = np.abs(quat.log(res.rotations[:, 2])[:, 0])
    print(f"limit solved with the contacts: tip depth {tip_depth(res.rotations).max() * 1e3:.2f} mm, "
          f"finger {finger.max():.4f} rad")
    assert tip_depth(res.rotations).max() <= 0.5e-3
    assert finger.max() <= 0.05 + 1e-6
    assert tip_depth(res.rotations[-1:])[0] > -1e-3  # pressed against the skin, not bounced off

    monkeypatch.setattr(integrator, "limit_rows",
                        lambda model, x: (np.zeros((0, model.n_dof)), np.zeros(0)))
    projected = simulate(model, ref, SimSettings(group_gains=gains))
    print(f"limit only projected: tip depth {tip_depth(projected.rotations).max() * 1e3:.2f} mm")
    assert tip_depth(projected.rotations).max() > 1e-3

"""solver/retarget/contact_transfer.py without Blender: detection on a synthetic proportional body,
the ramps, the damped least squares IK on a planar chain, the skin part's signed distance
on a sphere."""
import numpy as np

from solver.retarget import contact_transfer
from solver.core import posing, quat, sdf


def _body(n, tip, palms=None):
    """A SourceBody of n frames, head at the origin with axes left, forward, up = x, y, z,
    one fingertip (index_R) at tip (n, 3), scale 1."""
    axes = np.broadcast_to(np.eye(3), (n, 3, 3)).copy()
    return contact_transfer.SourceBody(1.0, np.zeros((n, 3)), axes, {("R", "index"): tip},
                         {("R", "index"): np.tile([0.0, 0.0, -1.0], (n, 1))}, palms or {})


def test_a_fingertip_resting_on_the_chin_is_one_chin_contact():
    n = 60
    chin = np.array(contact_transfer.LANDMARKS["chin"])
    d, normal = contact_transfer._ellipsoid_distance(chin[None], np.array([c for c, _ in contact_transfer.FACE_SOLIDS]),
                                       np.array([a for _, a in contact_transfer.FACE_SOLIDS]))
    on_skin = chin - d[0] * normal[0] + 0.001 * normal[0]          # 1 mm outside the chin
    tip = np.tile(on_skin + 0.1 * normal[0], (n, 1))                # 10 cm away …
    tip[22:35] = on_skin                                           # … resting on it
    found = contact_transfer.detect(_body(n, tip), fps=30)
    # the first and last resting frames border a 10 cm jump (central differences): moving
    assert [(c.part_a, c.part_b, c.start, c.stop) for c in found] == [("index_R", "chin", 23, 34)]
    c = found[0]
    assert np.allclose(c.gap, 0.001, atol=2e-4)                    # the source's own gap
    lo, hi = contact_transfer.reference_face_box()
    assert np.allclose(contact_transfer.denormalise(c.spot_b, (lo, hi)), on_skin - 0.001 * normal[0], atol=5e-4)
    assert c.weights[23:34].min() > 0.98 and c.weights[0] < 1e-3 and c.weights[-1] < 1e-2   # eased in and out


def test_a_fingertip_sweeping_past_the_face_is_no_contact():
    n = 30
    chin = np.array(contact_transfer.LANDMARKS["chin"])
    tip = chin + np.linspace(-0.3, 0.3, n)[:, None] * [1.0, 0.0, 0.0] + [0.0, 0.012, 0.0]
    assert contact_transfer.detect(_body(n, tip), fps=30) == []


def test_two_palms_facing_and_touching_are_a_palm_contact():
    n = 20
    t = contact_transfer.PALM_HALF_THICKNESS
    gap = np.where((np.arange(n) >= 8) & (np.arange(n) < 14), 0.0, 0.05)
    half = np.array([0.05, 0.05, 0.0])
    axes_l = np.broadcast_to(np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]).T, (n, 3, 3))
    axes_r = np.broadcast_to(np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]]).T, (n, 3, 3))
    c_l = np.zeros((n, 3))
    c_r = np.stack([2 * t + gap, np.zeros(n), np.zeros(n)], -1)    # palm normals face each other along x
    body = _body(n, np.tile([5.0, 5.0, 5.0], (n, 1)), {"L": (c_l, axes_l, half), "R": (c_r, axes_r, half)})
    body.tips.clear()
    found = contact_transfer.detect(body, fps=30)
    # palms meeting in a clap move fast: their impact frames are the contact (but the
    # first and last, next to a 5 cm jump in one frame, which the fitted distance reads)
    assert [(c.part_a, c.part_b, c.start, c.stop) for c in found] == [("palm_L", "palm_R", 9, 13)]
    assert np.allclose(found[0].spot_a[:, 2], 1.0) and np.allclose(found[0].spot_b[:, 2], 1.0)   # palm sides


def test_blend_fades_a_correction_in_and_out_and_bridges_close_runs():
    n = 60
    plain = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    turn = quat.exp(np.tile([0.2, 0.0, 0.0], (5, 1)))
    one = np.degrees(quat.angle_between(plain, contact_transfer._blend(plain, [(20, 25, turn)], 6)))
    w = contact_transfer._blend_weights(n, [(20, 25)], 6)
    assert np.allclose(one, np.degrees(0.2) * w, atol=1e-9)          # the correction times its weight
    assert w[5] == 0.0 and w[40] == 0.0 and np.all(w[20:25] > 0.95)
    assert np.all(np.diff(w[8:21]) > 0) and np.all(np.diff(w[24:37]) < 0)
    two = np.degrees(quat.angle_between(plain, contact_transfer._blend(plain, [(20, 25, turn), (30, 35, turn)], 6)))
    assert np.allclose(two[21:34], np.degrees(0.2), rtol=0.02)      # no release between close runs


def _planar_chain():
    """Three 0.3 m bones along +Y from the origin, bone 0 the root (rest = identity frames
    shifted along Y), one frame."""
    rest = np.array([np.eye(4) for _ in range(3)])
    for i in range(3):
        rest[i, 1, 3] = 0.3 * i
    return contact_transfer.Target(np.array([-1, 0, 1]), rest, np.eye(4), np.tile([1.0, 0.0, 0.0, 0.0], (1, 3, 1)), {})


def test_damped_least_squares_puts_a_point_on_a_reachable_goal():
    target = _planar_chain()
    goal_point = np.array([[0.45, 0.55, 0.0]])
    tip = np.array([[0.0, 0.3, 0.0]])                                # the end of bone 2, in its frame
    anchor = np.zeros((1, 3))                                         # the root's origin (fixed bone 0)
    goal = contact_transfer.Goal(2, tip, [0, 1, 2], 0, anchor, [], {0: 1.0, 1: 1.0, 2: 1.0})
    solved = contact_transfer.solve_goal(target, np.array([0]), goal, goal_point, size=1.0)
    target.basis[0, [0, 1, 2]] = np.array([solved[j][0] for j in (0, 1, 2)])
    M = target.pose()
    end = M[0, 2, :3, :3] @ tip[0] + M[0, 2, :3, 3]
    assert np.linalg.norm(end - goal_point[0]) < 1e-5
    assert np.allclose(np.linalg.norm(quat.to_matrix(target.basis[0]), axis=1), 1.0)   # still rotations


def test_a_skin_parts_signed_distance_on_a_sphere_with_a_hole():
    v, t = sdf.icosphere(4, radius=0.05)
    keep = ~np.all(v[t][..., 2] > 0.04, axis=1)                      # a hole at the top
    part = contact_transfer.Part(0, v, t[keep])
    assert sdf.is_closed(part.triangles)                              # the hole is capped
    dirs = np.random.default_rng(1).normal(size=(200, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    dirs = dirs[dirs[:, 2] < 0.5]
    for r in (0.03, 0.049, 0.051, 0.07):
        _q, _n, sd = part.closest(dirs * r)
        assert np.allclose(sd, r - 0.05, atol=4e-4), r               # facets ≈ 0.3 mm off the sphere


def test_a_resting_fingertip_with_capture_noise_is_one_contact():
    # 2 mm of jitter per frame (a degree of noise on the finger joints at a fingertip)
    # takes single frames beyond TOUCH and SLOW: the contact lasts through them
    n = 60
    chin = np.array(contact_transfer.LANDMARKS["chin"])
    d, normal = contact_transfer._ellipsoid_distance(chin[None], np.array([c for c, _ in contact_transfer.FACE_SOLIDS]),
                                       np.array([a for _, a in contact_transfer.FACE_SOLIDS]))
    on_skin = chin - d[0] * normal[0] + 0.001 * normal[0]
    tip = np.tile(on_skin + 0.1 * normal[0], (n, 1))
    rng = np.random.default_rng(3)
    tip[20:40] = on_skin + rng.normal(0.0, 0.002, (20, 3))
    tip[[27, 33]] = on_skin + 0.006 * normal[0]                       # 6 mm off: beyond TOUCH
    clean = tip.copy()
    clean[20:40] = on_skin
    found = contact_transfer.detect(_body(n, tip), fps=30)
    assert [(c.part_a, c.part_b) for c in found] == [("index_R", "chin")]
    reference = contact_transfer.detect(_body(n, clean), fps=30)[0]
    assert found[0].start <= reference.start + 2 and found[0].stop >= reference.stop - 2


def test_runs_join_across_short_gaps_only():
    mask = np.array([0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 1, 1], bool)
    # gaps of 4 and 2 frames
    assert posing.joined(mask, 2).tolist() == [0, 1, 1, 0, 0, 0, 0] + [1] * 5
    assert posing.joined(mask, 4).tolist() == [0] + [1] * 11
    assert posing.joined(mask, 1).tolist() == mask.tolist()

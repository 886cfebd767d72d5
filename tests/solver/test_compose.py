"""Composition numerics (solver/compose/composition.py): weights, splices, alignment, seam checks,
transition points, feet held across seams, layers."""

import numpy as np
import pytest

from solver.compose import composition
from solver.core import quat

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
    return composition.Track(rot, pos[:, None, :])


def test_smoothstep_values_and_c1_endpoints():
    s = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(composition.curve(s, "smoothstep"), [0, 0.15625, 0.5, 0.84375, 1], atol=1e-15)
    np.testing.assert_allclose(composition.curve(s, "smootherstep"), [0, 0.103515625, 0.5, 0.896484375, 1],
                               atol=1e-15)
    np.testing.assert_allclose(composition.curve(s, "linear"), s)
    h = 1e-6
    for kind in ("smoothstep", "smootherstep"):
        for end in (0.0, 1.0 - h):       # one-sided slopes at both ends vanish (C¹ joins)
            assert abs((composition.curve(end + h, kind) - composition.curve(end, kind)) / h) < 1e-5
    # smootherstep is C² too: second differences vanish at the ends
    for kind, second in (("smoothstep", 6.0), ("smootherstep", 0.0)):
        f = lambda x: composition.curve(x, kind)   # noqa: E731
        assert abs((f(2e-4) - 2 * f(1e-4) + f(0.0)) / 1e-8 - second) < 0.05
    np.testing.assert_allclose(composition.blend_weights(3), composition.curve([0.25, 0.5, 0.75]))
    assert len(composition.blend_weights(0)) == 0
    with pytest.raises(ValueError, match="unknown blend curve"):
        composition.curve(0.5, "cubic")


def test_splice_keeps_unit_norm_and_continuous_hemispheres():
    a, b = track(40, seed=1), track(50, seed=2, heading=2.5)
    b.rotations[::3] *= -1.0                       # sign flips in the input
    out, seams, planted = composition.compose([a, b, track(30, seed=3)], FPS, windows=[12, 7], search=0)
    assert len(out) == 40 + 50 + 30 - 12 - 7 and planted is None          # no legs
    np.testing.assert_allclose(np.linalg.norm(out.rotations, axis=-1), 1.0, atol=1e-12)
    assert np.all(np.sum(out.rotations[1:] * out.rotations[:-1], axis=-1) > 0.0)
    assert [s["index"] for s in seams] == [1, 2] and [s["window"] for s in seams] == [12, 7]
    # outside the windows the clips are untouched (up to sign and the heading of the root)
    np.testing.assert_allclose(np.abs(np.sum(out.rotations[:28, 1:] * a.rotations[:28, 1:], -1)), 1.0, atol=1e-12)


def test_root_alignment_starts_b_where_a_is_with_its_heading():
    a = track(30, heading=0.4, velocity=(0.3, 0.1, 0.0))
    b = track(30, seed=5, heading=-1.2, start=(5.0, -3.0, 0.9))
    yaw = lambda q: 2 * np.arctan2(q[3], q[0])   # noqa: E731
    for window in (0, 6):
        out, info = composition.splice(a, b, window)
        s = info["start"]
        anchor = a.positions[s, 0] if window else 2 * a.positions[-1, 0] - a.positions[-2, 0]
        psi = yaw(a.rotations[min(s, 29), 0]) - yaw(b.rotations[0, 0])
        b2, _off = composition.align(b, anchor, psi, composition.Rig())
        np.testing.assert_allclose(b2.positions[0, 0], anchor, atol=1e-12)
        assert abs(np.angle(np.exp(1j * (yaw(b2.rotations[0, 0]) - yaw(a.rotations[min(s, 29), 0]))))) < 1e-9
        steps = np.linalg.norm(np.diff(out.positions[:, 0], axis=0), axis=-1)
        own = max(np.linalg.norm(np.diff(a.positions[:, 0], axis=0), axis=-1).max(),
                  np.linalg.norm(np.diff(b.positions[:, 0], axis=0), axis=-1).max())
        assert steps.max() < own + 1e-3            # root continuous within 1 mm
    # a height offset puts B on a floor of its own: its root keeps B's height + offset
    b3, _off = composition.align(b, [1.0, 2.0, 7.0], 0.0, composition.Rig(), height=-0.25)
    np.testing.assert_allclose(b3.positions[:, 0, 2], b.positions[:, 0, 2] - 0.25, atol=1e-12)


def test_window_slerp_keeps_one_hemisphere_where_shortest_arc_flips():
    """A bone about 180° from B's pose: the shortest arc chosen per frame switches sides
    when the angle passes 180°, the window's one hemisphere does not."""
    n = 30
    angle = np.linspace(np.radians(170), np.radians(190), n)        # B's pose relative to A's
    a = np.tile(quat.IDENTITY, (n, 1, 1))
    b = quat.exp(angle[:, None, None] * np.array([0.0, 0.0, 1.0]))
    t = composition.blend_weights(n)
    per_frame = quat.slerp(a, b, t[:, None])
    fixed = composition.window_slerp(a, b, t)
    step = lambda q: np.degrees(quat.angle_between(q[1:], q[:-1])).max()   # noqa: E731
    assert step(per_frame) > 60.0                  # the mid-window flip of a per-frame arc
    assert step(fixed) < 15.0
    np.testing.assert_allclose(np.linalg.norm(fixed, axis=-1), 1.0, atol=1e-12)


def test_robust_limits_ignore_a_flip_and_stay_per_seam():
    calm, lively = track(80, amp=0.2), track(80, seed=1, freq=1.0)
    flipped = composition.Track(lively.rotations.copy(), lively.positions)
    flipped.rotations[40:42, 2] = quat.mul(quat.exp(np.array([np.pi * 0.95, 0, 0])), flipped.rotations[40:42, 2])
    a, b = composition.ClipInfo(lively, FPS, composition.Rig()), composition.ClipInfo(flipped, FPS, composition.Rig())
    # the flipped bone's own limit barely moves (median/MAD over clean frames) ...
    assert abs(b.jump_limit[2] - a.jump_limit[2]) < 0.05 * a.jump_limit[2]
    # ... while the 99th percentile the flip inflates more than tenfold
    j = composition.bone_jumps(lively.rotations, FPS)[:, 2]
    jf = composition.bone_jumps(flipped.rotations, FPS)[:, 2]
    assert np.percentile(jf, 99) > 10 * np.percentile(j, 99)
    # a flip in the third clip leaves the first seam's limits as they were, bit for bit
    _o, plain, _s = composition.compose([calm, track(80, seed=2, amp=0.2), lively], FPS, search=0)
    _o, flip, _s = composition.compose([calm, track(80, seed=2, amp=0.2), flipped], FPS, search=0)
    assert plain[0]["worst"] == flip[0]["worst"] and plain[0]["window"] == flip[0]["window"]


def test_seam_checks_flag_hard_cuts_and_one_frame_turns():
    a = track(60, seed=3, amp=0.5)
    b = track(60, seed=3, amp=0.5, phase=2.5)             # the same motion in another pose
    _o, cut, _s = composition.compose([a, b], FPS, windows=[0], search=0)
    assert cut[0]["flagged"] and "jump" in cut[0]["failures"] and "step" in cut[0]["failures"]
    assert cut[0]["max_step_deg"] > 20.0
    _o, blended, _s = composition.compose([a, b], FPS, search=0)
    assert not blended[0]["flagged"] and blended[0]["window"] > 1 and blended[0]["max_step_deg"] < 20.0
    # the shortest passing window: one frame less fails
    _o, shorter, _s = composition.compose([a, b], FPS, windows=[blended[0]["window"] - 1], search=0)
    assert shorter[0]["flagged"] and shorter[0]["suggested"] == blended[0]["window"]
    # clips that turn a bone 30° a frame themselves may do so at the seam
    fast = composition.Track(quat.exp(np.radians(30.0) * np.arange(60)[:, None, None] * np.array([0, 0, 1.0])
                                  * np.ones((1, 5, 1))), a.positions)
    _o, own, _s = composition.compose([fast, fast], FPS, windows=[0], search=0)
    assert own[0]["max_step_deg"] == pytest.approx(30.0) and "step" not in own[0]["failures"]


def test_best_transition_finds_the_matching_phase_and_lowers_d():
    """B is A's periodic motion (1 s period) 0.6 s later: the best pair joins A's end to the
    frame of B that continues it, which makes D (the velocity jump of the cut) nearly vanish."""
    a = composition.Track(wave(48, freq=1.0, amp=0.5))
    b = composition.Track(wave(60, freq=1.0, amp=0.5, phase=-2 * np.pi * 0.6))
    ia, ib = composition.ClipInfo(a, FPS, composition.Rig()), composition.ClipInfo(b, FPS, composition.Rig())
    end, start, dist, at_ends = composition.best_transition(ia, ib, composition.Rig(), 12, 15)
    assert dist < at_ends
    # B's frame k shows A's frame k − 14.4 (mod the 24-frame period): A's frame end − 1
    # matches B's frame start − 1 to within half a frame
    lag = ((end - start) + 0.6 * FPS) % FPS
    assert min(lag, FPS - lag) <= 0.5 and dist < 0.2
    # D there is what A's own continuous motion gives (its velocity two steps on), far
    # below D of joining the clip ends
    d = composition.transition_jump(a.rotations, end, b.rotations, start, FPS)
    own = max(composition.transition_jump(a.rotations, k, a.rotations, k, FPS) for k in range(2, len(a) - 2))
    assert d < 1.2 * own < 0.5 * composition.transition_jump(a.rotations, len(a), b.rotations, 0, FPS)


def test_transition_distance_holds_d_and_never_loses_to_the_ends():
    """The velocity part of the search's feature distance is VELOCITY_TIME · D of the same
    pair, and when the clip ends are the best join (B continues A exactly) they are kept."""
    a = composition.Track(wave(48, freq=1.0, amp=0.5))
    b = composition.Track(wave(60, freq=0.7, amp=0.4, phase=1.0, seed=3))
    ia, ib = composition.ClipInfo(a, FPS, composition.Rig()), composition.ClipInfo(b, FPS, composition.Rig())
    nb = a.rotations.shape[1]
    for end, start in ((48, 0), (40, 1), (37, 9), (45, 14)):
        fa = composition.features(ia, composition.Rig(), [end - 1], [end - 2])
        fb = composition.features(ib, composition.Rig(), [max(start - 1, 0)], [max(start - 1, 0)])
        vel = np.linalg.norm((fa - fb)[0, 3 * nb:6 * nb])
        d = composition.transition_jump(a.rotations, end, b.rotations, start, FPS)
        assert vel == pytest.approx(composition.VELOCITY_TIME * d, rel=1e-9)
    whole = composition.Track(wave(100, freq=0.25, amp=0.5))     # no repeat within the clips
    first, rest = whole.slice(0, 50), whole.slice(50, 100)
    i1, i2 = composition.ClipInfo(first, FPS, composition.Rig()), composition.ClipInfo(rest, FPS, composition.Rig())
    end, start, dist, at_ends = composition.best_transition(i1, i2, composition.Rig(), 12, 12)
    assert (end, start) == (50, 0) and dist == at_ends
    still = np.zeros((50, 1, 3))
    _o, seams, _p = composition.compose([composition.Track(first.rotations, still), composition.Track(rest.rotations, still)], FPS)
    assert seams[0]["transition"] == [50, 0] and seams[0]["match"] == seams[0]["match_ends"]


def test_windows_at_a_transition_point_keep_the_matched_frames_together():
    """A window blends A's and B's frames with the same offset as the matched pair (end,
    start), moved back in both where A has too few frames after end; a window that would
    need B's frames before its first is made at the clip ends instead."""
    a = composition.Track(wave(48, freq=1.0, amp=0.5), np.zeros((48, 1, 3)))
    b = composition.Track(wave(60, freq=1.0, amp=0.5, phase=-2 * np.pi * 0.6), np.zeros((60, 1, 3)))
    end, start = composition.compose([a, b], FPS)[1][0]["transition"]
    assert end < len(a) and start > 0
    room = len(a) - end + start          # the longest window that can keep them together
    assert room > len(a) - end + 2
    for w in (2, room - 2, room + 1):    # after end; moved back in both; too long
        seam = composition.compose([a, b], FPS, windows=[w])[1][0]
        a0, b0 = len(a) - seam["cut"][0] - w, seam["cut"][1]
        if w <= room:
            assert seam["transition"] == [end, start] and a0 - b0 == end - start and a0 + w <= len(a)
            assert a0 == min(end, len(a) - w)
        else:                            # B would have to start before its frame 0: the clip ends
            assert seam["transition"] == [len(a), 0] and seam["cut"] == [0, 0]


def test_step_limit_is_per_frame_not_the_windows_largest_turn():
    """A clip that turns a bone 80° in one frame raises that bone's step limit at that frame
    of the seam (and its neighbour) only; elsewhere in the window the limit is 20°."""
    n, w = 40, 10
    angles = np.zeros(n)
    angles[33:] = np.radians(80.0)              # one 80° step: frame 32 → 33
    rot = quat.exp(angles[:, None, None] * np.array([0, 0, 1.0]) * np.ones((1, 3, 1)))
    ia = composition.ClipInfo(composition.Track(rot), FPS, composition.Rig())
    ib = composition.ClipInfo(composition.Track(np.tile(quat.IDENTITY, (n, 3, 1))), FPS, composition.Rig())
    lim = composition.SeamLimits(ia, ib, n - w, 0, w)
    assert lim.step.shape == (w + 3, 3)
    step_deg = np.degrees(lim.step[:, 0])
    r = 32 - (n - w)                            # the offset of A's fast step in the window
    assert step_deg[r + 2] == pytest.approx(96.0)
    fast = [k - 2 for k in np.flatnonzero(step_deg > 20.0 + 1e-9)]
    assert fast == [r - 1, r, r + 1]            # the frame and its neighbours only
    # a seam that turns the bone 60° at another frame of the window is flagged
    world = np.tile(quat.IDENTITY, (60, 3, 1))
    s0 = 20
    world[s0 + w - 2:, 0] = quat.exp(np.radians(60.0) * np.array([0, 0, 1.0]))
    chk = composition.check_seam(world, np.zeros((60, 3)), FPS, s0, w, lim)
    assert "step" in chk["failures"] and chk["max_step_deg"] == pytest.approx(60.0)
    assert chk["step_excess_deg"] == pytest.approx(40.0)
    world[s0 + w - 2:, 0] = quat.IDENTITY
    world[s0 + r + 1:, 0] = quat.exp(np.radians(60.0) * np.array([0, 0, 1.0]))   # where A turns 80°
    chk = composition.check_seam(world, np.zeros((60, 3)), FPS, s0, w, lim)
    assert "step" not in chk["failures"] and chk["worst"][0]["own_step_deg"] == pytest.approx(80.0)


def test_errors_name_the_problem():
    a, b, c = track(20), track(10, seed=1), track(20, seed=2)
    with pytest.raises(ValueError, match="reaches into the previous seam"):
        composition.compose([a, b, c], FPS, windows=[6, 5], search=0)
    with pytest.raises(ValueError, match="one window and curve per seam"):
        composition.compose([a, b, c], FPS, windows=[3])
    with pytest.raises(ValueError, match="clip 2 has 1 frame"):
        composition.compose([a, track(1)], FPS)


def leg_rig():
    """A pelvis (root, 1 m up) with two bent legs: thigh, shin, foot, toe per side (m)."""
    def bone(head, y, x=(1.0, 0, 0)):
        y = np.asarray(y, float) / np.linalg.norm(y)
        x = np.asarray(x, float) - np.dot(x, y) * y
        x /= np.linalg.norm(x)
        m = np.eye(4)
        m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = x, y, np.cross(x, y), head
        return m
    rest, parents, lengths = [bone([0, 0, 1.0], [0, 0, 1.0])], [-1], [0.2]
    for side in (1.0, -1.0):
        hip, knee, ankle = np.array([0.1 * side, 0, 1.0]), np.array([0.1 * side, -0.05, 0.55]), \
            np.array([0.1 * side, 0, 0.1])
        base = len(rest)
        for head, tail, parent in ((hip, knee, 0), (knee, ankle, base), (ankle, ankle + [0, -0.12, -0.1], base + 1),
                                   (ankle + [0, -0.12, -0.1], ankle + [0, -0.2, -0.1], base + 2)):
            rest.append(bone(head, tail - head))
            parents.append(parent)
            lengths.append(float(np.linalg.norm(tail - head)))
    legs = [(1, 2, 3, (4,)), (5, 6, 7, (8,))]
    rig = composition.Rig(parents=parents, rest=np.array(rest), lengths=lengths, legs=legs)
    rig.rest_rotation_matrix = rest[0][:3, :3]
    return rig


LEG_RIG = leg_rig()


def standing(n, drift=(0.0, 0.0), start=(0.0, 0.0)):
    """A clip standing still in the rest pose whose root drifts horizontally (m/s); the root
    rotation is in armature space (its rest rotation), the others local."""
    rot = np.tile(quat.IDENTITY, (n, 9, 1))
    rot[:, 0] = quat.from_matrix(LEG_RIG.rest_rotation_matrix)
    pos = np.zeros((n, 1, 3))
    pos[:, 0, :2] = np.array(start) + np.arange(n)[:, None] / FPS * np.array(drift)
    pos[:, 0, 2] = 1.0
    return composition.Track(rot, pos)


def test_forward_kinematics_heading_and_floor_of_the_leg_rig():
    rig = LEG_RIG
    world, heads = composition.forward(standing(3), rig)
    np.testing.assert_allclose(heads[0, 3], [0.1, 0.0, 0.1], atol=1e-12)        # left ankle
    np.testing.assert_allclose(composition.heading(world, heads, rig), -np.pi / 2, atol=1e-9)   # facing −Y
    turned = standing(3)
    qz = quat.exp(np.array([0, 0, 0.7]))
    turned.rotations[:, 0] = quat.mul(qz, turned.rotations[:, 0])
    w2, h2 = composition.forward(turned, rig)
    np.testing.assert_allclose(composition.heading(w2, h2, rig), -np.pi / 2 + 0.7, atol=1e-9)
    info = composition.ClipInfo(standing(20), FPS, rig)
    assert info.planted.all() and info.floor == pytest.approx(0.0, abs=1e-9)   # toe tips at z 0


def test_planted_feet_are_held_across_a_seam_and_clips_share_one_floor():
    """Two standing clips whose roots drift apart and whose floors differ: the second is
    put on the first one's floor, and during the plant that spans the seam both ankles stay
    at one spot while the root moves (the legs bend)."""
    rig = LEG_RIG
    a = standing(40, drift=(0.06, 0.0))
    b = standing(40, drift=(-0.06, 0.0), start=(3.0, 1.0))
    b.positions[:, 0, 2] += 0.3                                    # B stands 30 cm higher
    infos = [composition.ClipInfo(t, FPS, rig) for t in (a, b)]
    out, seams, planted = composition.compose([a, b], FPS, windows=[10], rig=rig, search=0, infos=infos)
    assert planted.all()
    np.testing.assert_allclose(out.positions[:, 0, 2], 1.0, atol=1e-9)           # one floor
    held, plants = composition.hold_feet(out, rig, FPS, seams, planted, infos[0].floor)
    assert {p["leg"] for p in plants} == {0, 1} and all(p["held"] for p in plants)
    _w, before = composition.forward(out, rig)
    world, heads = composition.forward(held, rig)
    for p in plants:
        lo, hi = p["frames"]
        ankle = heads[lo:hi + 1, rig.legs[p["leg"]][2]]
        assert np.linalg.norm(ankle - ankle[:1], axis=-1).max() < 1e-6           # pinned
        assert np.ptp(before[lo:hi + 1, rig.legs[p["leg"]][2], 0]) > 0.05        # it slid before
    # the feet keep their world rotation; the root and the rest of the body are untouched
    w0, _h = composition.forward(out, rig)
    np.testing.assert_allclose(np.abs(np.sum(world[:, [3, 7]] * w0[:, [3, 7]], -1)), 1.0, atol=1e-9)
    assert np.array_equal(held.positions, out.positions) and np.array_equal(held.rotations[:, 0], out.rotations[:, 0])


def test_a_step_lifts_before_it_moves_and_lands_at_rest():
    """A synthesised step (the foot's path when the next clip stands it elsewhere): from
    one spot to the other, lifted by its height at the middle, at rest at both ends, and
    hardly moving across while still near the floor (a foot that slid there would skate)."""
    start, end = np.array([0.0, 0.0, 0.1]), np.array([0.4, 0.1, 0.1])
    n, height = 31, 0.1
    path = composition._swing(start, end, np.full(n, 0.1), np.full(n, 0.1), height)
    np.testing.assert_allclose(path[[0, -1]], [start, end], atol=1e-12)
    assert path[n // 2, 2] == pytest.approx(0.1 + height)
    steps = np.linalg.norm(np.diff(path, axis=0), axis=1)
    assert max(steps[0], steps[-1]) < 0.1 * steps.mean()          # it leaves and lands at rest
    lift = path[:, 2] - 0.1
    across = np.linalg.norm(path[:, :2] - start[:2], axis=1) / np.linalg.norm(end[:2] - start[:2])
    low = lift < 0.35 * height                       # the lowest third of the lift, at either end
    assert np.minimum(across, 1 - across)[low].max() < 0.02
    # a path below the floor is lifted by as much more, so the swing clears the floor by
    # its height, still from and to the two spots
    ground = np.full(n, 0.12)
    sunk = composition._swing(start, end, np.full(n, 0.1), ground, height)
    assert sunk[n // 2, 2] == pytest.approx(0.12 + height) and (sunk[:, 2] >= path[:, 2]).all()
    np.testing.assert_allclose(sunk[[0, -1]], [start, end], atol=1e-12)


def test_steps_wait_for_a_landing_and_split_a_long_way():
    """Where a foot steps to: where it is down next from the window's end (waiting while it
    is in the air), in as many steps as the leg's reach needs, none past the limits."""
    fps, leg, n = 30.0, 0.9, 200
    reach = composition.STEP_REACH * leg
    down = np.ones(n, dtype=bool)
    down[40:46] = False                               # in the air as the window ends at 40
    ankle = np.zeros((n, 3))
    ankle[46:, 0] = 0.5 * reach
    landings = composition._steps(ankle, down, 20, np.zeros(3), 40, n, fps, leg)
    assert landings[0] == 20 and landings[-1] >= 46 and len(landings) == 2      # one step, after landing
    ankle[46:, 0] = 1.5 * reach
    assert len(composition._steps(ankle, down, 20, np.zeros(3), 40, n, fps, leg)) == 3     # two steps
    ankle[46:, 0] = (composition.MAX_STEPS + 0.5) * reach
    assert composition._steps(ankle, down, 20, np.zeros(3), 40, n, fps, leg) is None       # too far
    down[40:] = False                                  # never lands (within the wait)
    ankle[46:, 0] = 0.5 * reach
    assert composition._steps(ankle, down, 20, np.zeros(3), 40, n, fps, leg) is None


def test_landings_paced_by_the_body_keep_step_times_and_move_towards_the_hip():
    """Two steps over frames 0 … 40 while the hip covers its whole way in the first 10:
    the candidates run from equal times (landing at 20) to the hip's pace (landing when it
    is half way, frame 5), each step at least STEP_FRAMES long; one step has nothing to pace."""
    fps = 30.0
    hip = np.zeros((41, 3))
    hip[:, 1] = np.minimum(np.arange(41) / 10.0, 1.0) * 0.4
    tries = composition._paced([0, 20, 40], hip, fps)
    shortest = int(composition.STEP_FRAMES * fps)
    assert tries[0] == (0, 20, 40) and tries[-1] == (0, max(5, shortest), 40)
    assert all(t[0] == 0 and t[-1] == 40 and np.all(np.diff(t) >= shortest) for t in tries)
    assert [t[1] for t in tries] == sorted((t[1] for t in tries), reverse=True)      # nearer the hip's pace in turn
    assert composition._paced([0, 40], hip, fps) == [(0, 40)]


def test_a_foot_rolling_on_the_floor_does_not_skate_a_dragged_one_does():
    """Skating counts the foot's least moving point on the floor: a flat foot whose ball
    and toe tip (5.8 cm apart, both on the floor) take turns being lowest travels nothing
    (the lowest point alone would jump 5.8 cm at each turn); the same foot dragged 3 cm a
    frame travels every step."""
    fps, leg, n = 30.0, 0.9, 12
    pts = np.zeros((n, 2, 3))
    pts[:, 1, 0] = 0.058
    pts[:, 1, 2] = np.where(np.arange(n) % 2, -1e-4, 1e-4)          # the tip lowest every other frame
    assert composition.skating(pts, fps, 0.0, leg) == 0.0
    low = pts[np.arange(n), np.argmin(pts[..., 2], axis=1)]
    assert np.linalg.norm(np.diff(low[:, :2], axis=0), axis=1).sum() == pytest.approx(0.058 * (n - 1))
    dragged = pts.copy()
    dragged[..., 0] += 0.03 * np.arange(n)[:, None]
    assert composition.skating(dragged, fps, 0.0, leg) == pytest.approx(0.03 * (n - 1))
    dragged[..., 2] += 0.2                                              # in the air: a swing, not skating
    assert composition.skating(dragged, fps, 0.0, leg) == 0.0


def test_additive_layer_identity_delta_and_mask():
    rng = np.random.default_rng(4)
    base = quat.normalize(rng.normal(size=(20, 6, 4)))
    layer = quat.normalize(rng.normal(size=(20, 6, 4)))
    ref = quat.normalize(rng.normal(size=(6, 4)))
    same = composition.apply_layer(base, layer, 0.0, reference=ref)
    np.testing.assert_allclose(np.abs(np.sum(same * base, -1)), 1.0, atol=1e-12)
    full = composition.apply_layer(base, layer, 1.0, reference=ref)
    delta = quat.mul(layer, quat.conj(ref))
    got = quat.mul(quat.conj(base), full)
    np.testing.assert_allclose(np.abs(np.sum(got * delta, -1)), 1.0, atol=1e-12)
    half = composition.apply_layer(base, layer, np.full(20, 0.5), reference=ref)
    np.testing.assert_allclose(quat.angle_between(base, half), 0.5 * quat.angle_between(base, full), atol=1e-9)
    mask = np.array([False, True, False, False, True, False])
    masked = composition.apply_layer(base, layer, 1.0, mask=mask, reference=ref)
    assert np.array_equal(masked[:, ~mask], base[:, ~mask])          # bit-identical
    np.testing.assert_allclose(np.abs(np.sum(masked[:, mask] * full[:, mask], -1)), 1.0, atol=1e-12)



"""Planted-foot IK and the scapulohumeral rhythm (analytic checks)."""
import numpy as np
from scipy.spatial.transform import Rotation

from solver.core import posing


def test_swing_is_the_smallest_rotation(rng):
    a = rng.normal(size=(50, 3))
    b = rng.normal(size=(50, 3))
    r = posing.swing(a, b)
    au, bu = a / np.linalg.norm(a, axis=1)[:, None], b / np.linalg.norm(b, axis=1)[:, None]
    assert np.allclose(np.einsum("fij,fj->fi", r, au), bu, atol=1e-12)
    angle = np.linalg.norm(Rotation.from_matrix(r).as_rotvec(), axis=1)
    assert np.allclose(angle, np.arccos(np.clip(np.sum(au * bu, 1), -1, 1)), atol=1e-9)
    # the axis is normal to both: a vector along a × b does not move
    ax = np.cross(au, bu)
    assert np.allclose(np.einsum("fij,fj->fi", r, ax), ax, atol=1e-12)
    flip = posing.swing(np.array([[0, 0, 1.0]]), np.array([[0, 0, -1.0]]))
    assert np.allclose(flip[0] @ [0, 0, 1.0], [0, 0, -1.0])


def test_two_bone_ik_reaches_reachable_goals_and_keeps_lengths(rng):
    n = 200
    root = rng.normal(size=(n, 3))
    mid = root + posing._unit(rng.normal(size=(n, 3))) * 0.45
    end = mid + posing._unit(rng.normal(size=(n, 3))) * 0.4
    goal = root + posing._unit(rng.normal(size=(n, 3))) * rng.uniform(0.1, 0.8, (n, 1))
    du, dl = posing.two_bone_ik(root, mid, end, goal, pole=root + [0, -1.0, 0])
    new_mid = root + np.einsum("fij,fj->fi", du, mid - root)
    new_end = new_mid + np.einsum("fij,fj->fi", dl, end - mid)
    assert np.abs(new_end - goal).max() < 1e-9
    assert np.allclose(np.linalg.norm(new_mid - root, axis=1), 0.45)
    # the knee stays on its side of the root → goal line
    g = posing._unit(goal - root)
    side_old = (mid - root) - np.sum((mid - root) * g, 1)[:, None] * g
    side_new = (new_mid - root) - np.sum((new_mid - root) * g, 1)[:, None] * g
    assert np.all(np.sum(side_old * side_new, 1) > 0)
    # out of reach: straight towards the goal
    far = root + [0, 0, -5.0]
    du, dl = posing.two_bone_ik(root, mid, end, far, pole=root + [0, -1.0, 0])
    new_end = root + np.einsum("fij,fj->fi", du, mid - root) + np.einsum("fij,fj->fi", dl, end - mid)
    assert np.allclose(posing._unit(new_end - root), [0, 0, -1.0], atol=1e-5)


def test_planted_frames_weights_and_goals():
    fps = 30.0
    t = np.arange(60)
    x = np.where(t < 20, 0.0, np.where(t < 40, (t - 20) * 0.05, 1.0))   # still, walk 1.5 m/s, still
    z = np.where((t >= 20) & (t < 40), 0.2, 0.01)
    pts = np.stack([x, 0 * x, z], 1)
    mask = posing.planted(pts, fps, floor=0.0)
    assert mask[:19].all() and not mask[21:40].any() and mask[41:].all()
    w = posing.plant_weights(mask, ramp=4)
    assert np.all((w >= 0) & (w <= 1)) and np.all(w[mask] == 1)
    assert np.abs(np.diff(w)).max() <= 0.5


def test_contact_hold_pins_one_point_of_a_rolling_foot():
    """A foot rolling over its toes on planted frames: the toe (lowest on average) is held
    at one spot, the lowest point lands `lift` above the floor, other frames stay put."""
    n = 30
    t = np.arange(n)
    mask = (t >= 5) & (t < 25)
    heel_up = np.clip((t - 15) * 0.01, 0.0, None)                      # the heel rises
    drift = np.stack([0.002 * t, 0 * t, 0 * t], 1)                     # the foot creeps forward
    heel = np.stack([0 * t, 0 * t, 0.03 + heel_up], 1) + drift
    toe = np.stack([0.2 + 0 * t, 0 * t, 0.02 + 0 * t], 1) + drift
    pts = np.stack([heel, toe], 1)                                     # (F, 2, 3)
    lift = np.full(n, 0.005)
    corr = posing.contact_holds(pts, mask, floor=0.0, lift=lift)
    held = toe + corr
    assert np.ptp(held[mask, 0]) < 1e-12 and np.ptp(held[mask, 1]) < 1e-12
    assert np.allclose((pts[mask] + corr[mask][:, None])[..., 2].min(axis=1), 0.005)
    assert not corr[~mask].any()


def test_plant_corrections_ease_between_runs():
    n = 40
    mask = np.zeros(n, bool)
    mask[5:12] = mask[15:25] = True
    corr = np.zeros((n, 3))
    corr[5:12] = [0.02, 0.0, -0.01]
    corr[15:25] = [-0.01, 0.01, 0.0]
    out = posing.plant_corrections(corr, mask, ramp=4)
    assert np.allclose(out[mask], corr[mask])
    # between the runs: linearly from one run's end to the next's start, times the weight
    w = posing.plant_weights(mask, ramp=4)
    assert np.allclose(out[13], (corr[11] + (corr[15] - corr[11]) * 2 / 4) * w[13])
    assert 0 < w[13] < 1
    assert np.abs(np.diff(out, axis=0)).max() < 0.011        # no step larger than the runs' own change
    assert not out[30:].any() and not out[:1].any()          # faded out beyond the ramp


def test_eased_max_covers_and_rises_smoothly():
    x = np.zeros(30)
    x[10], x[20] = 1.0, 0.5
    out = posing.eased_max(x, ramp=4)
    assert np.all(out >= x) and out[10] == 1.0 and out[20] == 0.5
    assert out[4] == 0.0 and np.abs(np.diff(out)).max() < 0.35


def test_girdle_follows_the_arm_at_the_rhythm_ratio():
    up = np.tile([0, 0, 1.0], (91, 1))
    elev = np.radians(np.arange(91.0) * 2)                 # 0 … 180°
    arm = np.stack([np.sin(elev), 0 * elev, -np.cos(elev)], 1)
    rise = posing.girdle_rise(arm, up)
    assert rise[elev < np.radians(10)].max() < np.radians(0.1)
    past = elev > np.radians(50)
    slope = np.polyfit(elev[past], rise[past], 1)[0]
    assert abs(slope - posing.RHYTHM_RATIO) < 1e-3
    assert np.all(np.diff(rise) >= 0)
    clav = np.tile([1.0, 0, 0], (91, 1))
    r = posing.girdle_rotation(clav, up, rise)
    raised = np.einsum("fij,fj->fi", r, clav)
    assert np.allclose(np.arcsin(raised[:, 2]), rise)


def _steps(turns, w):
    rot = Rotation.from_rotvec((turns * w[None, :, None]).reshape(-1, 3)).as_matrix()
    rot = rot.reshape(turns.shape[0], -1, 3, 3)
    cos = (np.trace(np.swapaxes(rot[:, :-1], -1, -2) @ rot[:, 1:], axis1=-2, axis2=-1) - 1) / 2
    return np.arccos(np.clip(cos, -1.0, 1.0))


def test_rate_limited_weights_cap_each_bones_step(rng):
    limit = np.radians(4.0)
    # two bones whose correction snaps on in one frame (0 -> 30° and 0 -> 20° about
    # different axes), held, and off again over three frames
    n = 40
    turns = np.zeros((2, n, 3))
    turns[0, 8:30] = np.radians(30.0) * np.array([1.0, 0.0, 0.0])
    turns[1, 8:30] = np.radians(20.0) * np.array([0.0, 0.6, 0.8])
    turns[:, 30:33] = turns[:, 29:30] * np.array([0.75, 0.5, 0.25])[None, :, None]
    w = posing.rate_limited_weights(turns, limit)
    assert (w >= 0).all() and (w <= 1).all()
    assert _steps(turns, w).max() <= limit + 1e-9
    # the weights fall only where a step must be cut: a 30° snap needs at least 30/4 frames
    # of ramp, so the first held frame is taken at most in part; then the hold is whole
    # until it has to come down (7.5° a frame) in steps of at most 4°
    assert w[8] <= limit / np.radians(30.0) + 1e-9
    assert w[:8].min() == 1.0 and w[18:24].min() == 1.0 and w[33:].min() == 1.0
    assert w[29] < 1.0
    # a slow correction (1° a frame) is left whole
    slow = np.radians(np.arange(n, dtype=float))[None, :, None] * np.array([0.0, 0.0, 1.0])
    assert (posing.rate_limited_weights(slow, limit) == 1.0).all()
    # random corrections: every step within the limit
    noisy = rng.normal(scale=0.3, size=(3, 50, 3))
    assert _steps(noisy, posing.rate_limited_weights(noisy, limit)).max() <= limit + 1e-9

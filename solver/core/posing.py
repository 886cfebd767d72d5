"""Pose corrections a retarget applies after the rotation transfer (numpy only).

- planted feet: frames where a foot rests on the floor (slow and low), the correction that
  holds it there (a point of the foot, or the ankle), and a two-bone IK (thigh, shin) that
  puts the ankle where the foot must stand, knee kept in its bend plane, blended in and
  out so no frame jumps;
- the shoulder girdle by the scapulohumeral rhythm: past about 30° of arm elevation the
  shoulder girdle rises about one degree for every two of the arm (Inman, Saunders &
  Abbott, "Observations on the function of the shoulder joint", J. Bone Joint Surg. 1944:
  glenohumeral to scapulothoracic ≈ 2 : 1).

Rotations are (…, 3, 3) matrices acting on column vectors, positions (…, 3) in metres,
angles in radians unless the name says degrees.
"""
import numpy as np
from scipy.spatial.transform import Rotation

RHYTHM_ONSET = np.radians(30.0)   # arm elevation where the girdle starts to follow
RHYTHM_RATIO = 0.42               # girdle elevation per arm elevation past the onset


def _unit(v):
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def swing(a, b):
    """Smallest rotations (F, 3, 3) taking directions a onto b (F, 3) (about a × b); a half
    turn about an axis normal to a for opposite directions."""
    a, b = _unit(np.atleast_2d(a)), _unit(np.atleast_2d(b))
    a, b = np.broadcast_arrays(a, b)
    axis = np.cross(a, b)
    s = np.linalg.norm(axis, axis=-1)
    c = np.sum(a * b, axis=-1)
    angle = np.arctan2(s, c)
    flip = s < 1e-9
    if np.any(flip & (c < 0)):
        alt = np.cross(a[flip], [1.0, 0.0, 0.0])
        bad = np.linalg.norm(alt, axis=-1) < 1e-6
        alt[bad] = np.cross(a[flip][bad], [0.0, 1.0, 0.0])
        axis[flip] = alt
    rv = _unit(axis) * angle[:, None]
    rv[flip & (c >= 0)] = 0.0
    return Rotation.from_rotvec(rv).as_matrix()


def planted(points, fps, floor, speed=0.3, height=0.04, min_frames=3):
    """Frames (bool (F,)) where a foot is planted: its lowest point (F, 3) moves slower
    than `speed` (m/s, horizontal) and lies within `height` (m) of `floor` (z, m), for at
    least min_frames frames in a row."""
    v = np.zeros(len(points))
    if len(points) > 1:
        step = np.linalg.norm(np.diff(points[:, :2], axis=0), axis=1) * fps
        v[1:] = step
        v[0] = step[0]
    mask = (v < speed) & (points[:, 2] < floor + height)
    for start, stop in runs(mask):
        if stop - start < min_frames:
            mask[start:stop] = False
    return mask


def runs(mask):
    """(start, stop) of each run of True in a bool array (F,), stop exclusive."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], np.asarray(mask, dtype=int), [0]])))
    return [(int(a), int(b)) for a, b in zip(edges[::2], edges[1::2])]


def joined(mask, frames):
    """mask (F,) bool with the gap between two of its runs filled where it lasts at most
    `frames` frames: a run that detection loses for a frame or two stays one run."""
    out = np.array(mask, dtype=bool)
    r = runs(mask)
    for (_a, b), (c, _d) in zip(r, r[1:]):
        if c - b <= frames:
            out[b:c] = True
    return out


def plant_weights(mask, ramp=4):
    """Weights (F,) in [0, 1]: 1 on planted frames, easing to 0 over `ramp` frames before
    and after each run (smoothstep), so the IK comes and goes without a jump."""
    w = mask.astype(float)
    idx = np.nonzero(mask)[0]
    if not len(idx):
        return w
    dist = np.abs(np.arange(len(mask))[:, None] - idx[None]).min(axis=1)
    t = np.clip(1.0 - dist / (ramp + 1.0), 0.0, 1.0)
    return np.where(mask, 1.0, t * t * (3 - 2 * t))


def eased_max(x, ramp=4):
    """x (F,) ≥ 0 spread over `ramp` frames each side: out(t) = max over τ of x(τ) ·
    smoothstep(1 − |t − τ| / (ramp + 1)), so out ≥ x and it rises and falls without a
    jump."""
    t = np.arange(len(x))
    u = np.clip(1.0 - np.abs(t[:, None] - t[None]) / (ramp + 1.0), 0.0, 1.0)
    return (x[None] * u * u * (3 - 2 * u)).max(axis=1)


def plant_corrections(corr, mask, ramp=4):
    """Corrections (F, 3) eased in and out around runs of planted frames: corr (F, 3) on
    planted frames (mask (F,)), linearly interpolated between the facing ends of two runs
    and held beyond the first and last, all times plant_weights(mask, ramp), so the hold
    comes and goes without a jump (a correction that dropped to nothing just outside a
    run would turn the leg in one frame)."""
    idx = np.nonzero(mask)[0]
    if not len(idx):
        return np.zeros_like(corr)
    t = np.arange(len(mask))
    out = np.stack([np.interp(t, idx, corr[idx, i]) for i in range(corr.shape[1])], axis=1)
    return out * plant_weights(mask, ramp)[:, None]


def contact_holds(points, mask, floor, lift=None):
    """Corrections (F, 3) that hold a foot on planted frames (mask (F,)), zero elsewhere.
    points (F, m, 3): the foot's points that can touch the floor (its bones' heads and
    tails). Per run of planted frames, the point lowest on average over the run is held at
    its mean horizontal position in the run, and the lowest point of each frame is put
    `lift` (F,) m (default 0) above `floor` (z, m). Holding a point of the foot, not the
    ankle, lets a foot roll over its toes at lift-off (the ankle rises, the toes stay)
    without stretching the leg."""
    corr = np.zeros((len(mask), 3))
    lift = np.zeros(len(mask)) if lift is None else lift
    for start, stop in runs(mask):
        run = points[start:stop]
        contact = run[:, int(np.argmin(run[..., 2].mean(axis=0)))]
        corr[start:stop, :2] = contact[:, :2].mean(axis=0) - contact[:, :2]
        corr[start:stop, 2] = floor + lift[start:stop] - run[..., 2].min(axis=1)
    return corr


def two_bone_ik(root, mid, end, goal, pole):
    """World rotation changes (D_upper, D_lower), each (F, 3, 3), that move a two-bone
    chain root → mid → end (joint positions (F, 3)) so the end reaches `goal` (F, 3) (or
    the nearest reachable point), the mid joint staying on its side of the root → goal
    line (towards `pole` (F, 3) when the chain is straight). Applied as W' = D · W to the
    world rotations of the upper and lower bone; bone lengths are kept.
    Source: the law-of-cosines two-bone solution, as in any IK text (e.g. Buss,
    "Introduction to inverse kinematics with Jacobian transpose, pseudoinverse and damped
    least squares methods", 2004, §1 for the setting)."""
    a = np.linalg.norm(mid - root, axis=-1)
    b = np.linalg.norm(end - mid, axis=-1)
    to_goal = goal - root
    d = np.clip(np.linalg.norm(to_goal, axis=-1), np.abs(a - b) + 1e-6, a + b - 1e-6)
    g = _unit(to_goal)
    # the knee's side of the root → goal line: where it is, leaning towards the pole so a
    # nearly straight chain cannot flip sides between frames
    side = (mid - root) + 0.1 * a[:, None] * _unit(pole - mid)
    side = _unit(side - np.sum(side * g, axis=-1, keepdims=True) * g)
    cos_alpha = np.clip((a * a + d * d - b * b) / (2 * a * d), -1.0, 1.0)
    alpha = np.arccos(cos_alpha)
    new_mid = root + a[:, None] * (np.cos(alpha)[:, None] * g + np.sin(alpha)[:, None] * side)
    new_end = root + d[:, None] * g
    d_upper = swing(mid - root, new_mid - root)
    lower_now = np.einsum("fij,fj->fi", d_upper, end - mid)
    d_lower = swing(lower_now, new_end - new_mid) @ d_upper
    return d_upper, d_lower


def girdle_rise(arm_dir, chest_up, onset=RHYTHM_ONSET, ratio=RHYTHM_RATIO, soft=np.radians(5.0)):
    """Shoulder girdle elevation (rad, (F,)) for an upper-arm direction arm_dir (F, 3) in a
    chest whose up axis is chest_up (F, 3): ratio × the arm elevation (angle from the
    chest's down axis) past the onset, with a smooth start over `soft` rad (softplus) so
    the girdle never kinks."""
    elev = np.arccos(np.clip(-np.sum(_unit(arm_dir) * _unit(chest_up), axis=-1), -1.0, 1.0))
    x = (elev - onset) / soft
    return ratio * soft * np.logaddexp(0.0, x)


def girdle_rotation(clavicle_dir, chest_up, angle):
    """World rotations (F, 3, 3) raising a clavicle (direction (F, 3) from its head to the
    shoulder joint) by `angle` (F,) rad towards the chest's up axis, about the axis normal
    to both."""
    axis = _unit(np.cross(clavicle_dir, chest_up))
    return Rotation.from_rotvec(axis * np.asarray(angle)[:, None]).as_matrix()


def rate_limited_weights(turns, limit, iterations=200):
    """Weights w (F,) in [0, 1], as large as they can be, such that scaling the correction
    turns of B bones moved together (a leg's thigh, shin and foot; one weight per frame
    keeps the chain one pose of a blend) by their frame's weight, u_b(t) = w(t) ·
    turns[b, t], changes no bone's turn by more than `limit` (rad) between adjacent frames:
    angle(exp(u_b(t))⁻¹ · exp(u_b(t+1))) ≤ limit. A correction applied as
    W′ = exp(u) · W then adds at most `limit` to the bone's own frame-to-frame rotation,
    since angle(A · B) ≤ angle(A) + angle(B).

    turns: (B, F, 3) rotation vectors (rad). Where a pair of frames steps too far, the
    frame whose weighted correction is larger gives way: its weight drops to the largest
    value that keeps the pair's rotation-vector distance |a · v − c| (first order in the
    angle) within 0.9 · limit for every bone; where no value does, or that does not bring
    the true angle down, both frames' weights shrink by a tenth (which shrinks their
    difference in proportion). Repeated until no pair steps too far: the weights only
    fall and all-zero weights meet the limit. F < 2 returns ones."""
    turns = np.asarray(turns, dtype=float)
    n = turns.shape[1]
    w = np.ones(n)
    if n < 2:
        return w
    mag = np.linalg.norm(turns, axis=-1).max(axis=0)            # (F,)

    def steps(w):
        rot = Rotation.from_rotvec((turns * w[None, :, None]).reshape(-1, 3)).as_matrix()
        rot = rot.reshape(turns.shape[0], n, 3, 3)
        cos = (np.trace(np.swapaxes(rot[:, :-1], -1, -2) @ rot[:, 1:], axis1=-2, axis2=-1) - 1) / 2
        return np.arccos(np.clip(cos, -1.0, 1.0)).max(axis=0)   # (F-1,)

    for _ in range(iterations):
        bad = np.flatnonzero(steps(w) > limit)
        if not len(bad):
            break
        for t in bad:
            give, keep = (t, t + 1) if w[t] * mag[t] >= w[t + 1] * mag[t + 1] else (t + 1, t)
            v, c = turns[:, give], w[keep] * turns[:, keep]
            vv, vc, cc = np.sum(v * v, -1), np.sum(v * c, -1), np.sum(c * c, -1)
            moving = vv > 1e-18
            vv = np.where(moving, vv, 1.0)
            disc = vc * vc - vv * (cc - (0.9 * limit) ** 2)
            top = np.where(moving & (disc >= 0), (vc + np.sqrt(np.maximum(disc, 0.0))) / vv, np.inf)
            a = float(np.clip(top.min(), 0.0, 1.0))
            if (disc[moving] >= 0).all() and a < w[give] - 1e-9:
                w[give] = a
            else:
                w[give] *= 0.9
                w[keep] *= 0.9
    return w

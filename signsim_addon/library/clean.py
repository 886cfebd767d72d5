"""Array helpers of the motion library (numpy only, no bpy): rotations and clip cleaning.

Quaternions are w-first arrays (..., 4). Euler orders follow Blender's convention: order
"XYZ" applies X first, so R = Rz · Ry · Rx and q = q_z ⊗ q_y ⊗ q_x.
"""
import numpy as np

_AXES = {"X": 0, "Y": 1, "Z": 2}


def quat_mul(a, b):
    """Hamilton product of w-first quaternions (broadcasting)."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack((
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ), axis=-1)


def axis_quat(angle, axis):
    """Quaternions (n, 4) of rotations by `angle` (radians, shape (n,)) about axis 0/1/2."""
    angle = np.asarray(angle, dtype=np.float64)
    q = np.zeros(angle.shape + (4,))
    q[..., 0] = np.cos(angle / 2)
    q[..., 1 + axis] = np.sin(angle / 2)
    return q


def euler_to_quat(angles, order="XYZ"):
    """Euler angles (n, 3) in radians, stored as (x, y, z), applied in `order` → (n, 4)."""
    angles = np.asarray(angles, dtype=np.float64)
    q = None
    for letter in order:  # first letter applied first: q = q_last ⊗ … ⊗ q_first
        i = _AXES[letter]
        qi = axis_quat(angles[..., i], i)
        q = qi if q is None else quat_mul(qi, q)
    return q


def quat_to_matrix(q):
    """Rotation matrices (..., 3, 3) of w-first quaternions (normalised first)."""
    q = np.asarray(q, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = np.moveaxis(q, -1, 0)
    return np.stack((
        np.stack((1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)), -1),
        np.stack((2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)), -1),
        np.stack((2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)), -1),
    ), -2)


def make_continuous(q):
    """Flip signs so that q[t] · q[t-1] ≥ 0 along axis 0 (hemisphere continuity).

    q: (frames, ..., 4). Returns a normalised copy; the rotations are unchanged.
    """
    q = np.array(q, dtype=np.float64)
    norm = np.linalg.norm(q, axis=-1, keepdims=True)
    q = q / np.where(norm > 0, norm, 1.0)
    if len(q) < 2:
        return q
    dots = np.sum(q[1:] * q[:-1], axis=-1)
    flips = np.cumsum(dots < 0, axis=0) % 2  # each negative dot toggles all later frames
    sign = np.concatenate((np.ones_like(flips[:1]), 1 - 2 * flips), axis=0)
    return q * sign[..., None]


def step_angles(q):
    """Geodesic angle (radians) between consecutive frames: (frames-1, ...)."""
    q = np.asarray(q, dtype=np.float64)
    dots = np.abs(np.sum(q[1:] * q[:-1], axis=-1))
    return 2 * np.arccos(np.clip(dots, 0.0, 1.0))


def pair_angles(a, b):
    """Geodesic angle (radians) between quaternion arrays a and b of equal shape."""
    dots = np.abs(np.sum(np.asarray(a) * np.asarray(b), axis=-1))
    return 2 * np.arccos(np.clip(dots, 0.0, 1.0))


def find_spikes(q, min_angle=np.radians(25.0), ratio=4.0):
    """Single-frame spikes: frame t far from both neighbours, which agree with each other.

    q: (frames, bones, 4). Returns a list of (frame_index, [bone indices]) sorted by frame.
    A frame is a spike on a bone when both steps into and out of it exceed
    max(min_angle, ratio × the bone's median step) and the neighbours are closer to each
    other than a quarter of the smaller of those two steps.
    """
    q = np.asarray(q, dtype=np.float64)
    if len(q) < 3:
        return []
    steps = step_angles(q)                      # (F-1, B)
    typical = np.median(steps, axis=0)          # (B,)
    limit = np.maximum(min_angle, ratio * typical)
    into, out = steps[:-1], steps[1:]           # for frames 1..F-2
    across = pair_angles(q[:-2], q[2:])
    spike = (into > limit) & (out > limit) & (across < 0.25 * np.minimum(into, out))
    frames, bones = np.nonzero(spike)
    result = {}
    for f, b in zip(frames.tolist(), bones.tolist()):
        result.setdefault(f + 1, []).append(b)
    return sorted(result.items())


def pose_steps(q, loc=None, loc_scale=1.0):
    """Per-frame pose change (frames-1,): the largest bone rotation step in radians, plus
    the root translation step divided by `loc_scale` (a length counted like one radian)."""
    d = step_angles(q).max(axis=1) if q.shape[1] else np.zeros(len(q) - 1)
    if loc is not None and len(loc) == len(q):
        d = d + np.linalg.norm(np.diff(loc, axis=0), axis=-1) / max(loc_scale, 1e-9)
    return d


def calibration_frames(q, loc=None, loc_scale=1.0, max_lead=3,
                       min_jump=np.radians(30.0), ratio=8.0):
    """How many leading frames form a calibration pose followed by a jump (0 when none).

    q: (frames, bones, 4) local rotations; loc: optional (frames, 3) root positions.
    The jump must happen within the first `max_lead` steps, exceed `min_jump` and be
    `ratio` times larger than the clip's typical (median) frame-to-frame change.
    """
    if len(q) < 6:
        return 0
    d = pose_steps(q, loc, loc_scale)
    typical = float(np.median(d))
    for k in range(min(max_lead, len(d) - 1)):
        if d[k] > max(min_jump, ratio * typical) and d[k] > ratio * float(np.median(d[k + 1:k + 30])):
            return k + 1
    return 0

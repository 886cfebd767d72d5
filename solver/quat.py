"""Quaternion algebra, w-first (w, x, y, z) like Blender, vectorised over leading axes.

A unit quaternion q rotates a vector v as q v q*. Rotation vectors are in radians
(axis times angle). Every function accepts arrays of shape (..., 4) or (..., 3)
and broadcasts over the leading axes.
"""

import numpy as np

_CONJ = np.array([1.0, -1.0, -1.0, -1.0])
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def mul(a, b):
    """Hamilton product a ⊗ b of quaternions (..., 4); a is applied after b."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack([aw * bw - ax * bx - ay * by - az * bz,
                     aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx,
                     aw * bz + ax * by - ay * bx + az * bw], axis=-1)


def conj(q):
    """Conjugate (the inverse of a unit quaternion), shape (..., 4)."""
    return q * _CONJ


def normalize(q):
    """Unit quaternions (..., 4). Raises ValueError on a zero quaternion."""
    n = np.linalg.norm(q, axis=-1, keepdims=True)
    if np.any(n == 0.0):
        raise ValueError("cannot normalise a zero quaternion")
    return q / n


def exp(r):
    """Unit quaternion of the rotation vector r (..., 3) in rad: (cos |r|/2, sin(|r|/2) r/|r|)."""
    theta = np.linalg.norm(r, axis=-1, keepdims=True)
    half = 0.5 * theta
    # sin(half)/theta through sinc keeps the small-angle limit exact (no 0/0).
    return np.concatenate([np.cos(half), 0.5 * np.sinc(half / np.pi) * r], axis=-1)


def log(q):
    """Rotation vector (..., 3) in rad of the unit quaternion q (..., 4), shortest arc (angle ≤ π)."""
    q = np.where(q[..., :1] < 0.0, -q, q)
    w = q[..., :1]
    v = q[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    small = s < 1e-9
    # 2 atan2(s, w)/s tends to 2/w as s -> 0; w ≈ 1 there.
    factor = np.where(small, 2.0 / np.where(small, w, 1.0),
                      2.0 * np.arctan2(s, w) / np.where(small, 1.0, s))
    return factor * v


def angle_between(a, b):
    """Geodesic angle (...,) in rad between rotations a and b (..., 4), in [0, π]; sign-invariant."""
    d = mul(conj(a), b)
    return 2.0 * np.arctan2(np.linalg.norm(d[..., 1:], axis=-1), np.abs(d[..., 0]))


def rotate(q, v):
    """Rotate vectors v (..., 3) by unit quaternions q (..., 4)."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def to_matrix(q):
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz, wx, wy, wz = x * y, x * z, y * z, w * x, w * y, w * z
    m = np.stack([1 - 2 * (yy + zz), 2 * (xy - wz), 2 * (xz + wy),
                  2 * (xy + wz), 1 - 2 * (xx + zz), 2 * (yz - wx),
                  2 * (xz - wy), 2 * (yz + wx), 1 - 2 * (xx + yy)], axis=-1)
    return m.reshape(q.shape[:-1] + (3, 3))


def from_matrix(m):
    """Unit quaternions (..., 4) with w ≥ 0 of rotation matrices (..., 3, 3).

    Shepperd's method: each of the four candidates divides by its own largest component,
    so the result stays accurate near 180° rotations.
    """
    m00, m01, m02 = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    m10, m11, m12 = m[..., 1, 0], m[..., 1, 1], m[..., 1, 2]
    m20, m21, m22 = m[..., 2, 0], m[..., 2, 1], m[..., 2, 2]
    sq = np.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22,
                   1 - m00 + m11 - m22, 1 - m00 - m11 + m22], axis=-1)
    k = np.argmax(sq, axis=-1)
    big = 0.5 * np.sqrt(np.maximum(np.take_along_axis(sq, k[..., None], -1)[..., 0], 1e-300))
    f = 0.25 / big
    cands = np.stack([
        np.stack([big, (m21 - m12) * f, (m02 - m20) * f, (m10 - m01) * f], -1),
        np.stack([(m21 - m12) * f, big, (m01 + m10) * f, (m02 + m20) * f], -1),
        np.stack([(m02 - m20) * f, (m01 + m10) * f, big, (m12 + m21) * f], -1),
        np.stack([(m10 - m01) * f, (m02 + m20) * f, (m12 + m21) * f, big], -1)], axis=-2)
    q = np.take_along_axis(cands, k[..., None, None], -2)[..., 0, :]
    return np.where(q[..., :1] < 0.0, -q, q)


def slerp(a, b, t):
    """Spherical interpolation from a to b (..., 4) at fraction t (broadcastable), shortest arc."""
    t = np.asarray(t, dtype=float)[..., None]
    d = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(d < 0.0, -b, b)
    d = np.abs(d)
    theta = np.arccos(np.clip(d, -1.0, 1.0))
    s = np.sin(theta)
    near = s < 1e-9
    safe = np.where(near, 1.0, s)
    wa = np.where(near, 1.0 - t, np.sin((1.0 - t) * theta) / safe)
    wb = np.where(near, t, np.sin(t * theta) / safe)
    return normalize(wa * a + wb * b)


def make_continuous(q, reference=None):
    """Flip signs along axis 0 of q (n, ..., 4) so consecutive quaternions lie in one hemisphere.

    With `reference` (..., 4), the first element is first put in the hemisphere of it.
    Blender interpolates keyed quaternion components linearly, so a sign jump between
    keys would spin the bone the long way round.
    """
    q = np.array(q, dtype=float)
    if q.shape[0] == 0:
        return q
    first = np.ones(q.shape[1:-1])
    if reference is not None:
        first = np.where(np.sum(q[0] * reference, axis=-1) < 0.0, -1.0, 1.0)
    step = np.where(np.sum(q[1:] * q[:-1], axis=-1) < 0.0, -1.0, 1.0)
    sign = np.cumprod(np.concatenate([first[None], step], axis=0), axis=0)
    return q * sign[..., None]

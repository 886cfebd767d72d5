"""Quaternion algebra, w-first (w, x, y, z) like Blender, vectorised over leading axes.

A unit quaternion q rotates a vector v as q v q*. Rotation vectors are in radians
(axis times angle). Every function accepts arrays of shape (..., 4) or (..., 3)
and broadcasts over the leading axes.
"""

import numpy as np

_CONJ = np.array([1.0, -1.0, -1.0, -1.0])
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def _product_tensors():
    """Constant tensors that turn products into single matrix multiplications:
    (a @ _MUL).reshape(4, 4) is the left-multiplication matrix of a, and
    (q qᵀ).reshape(16) @ _MAT is the rotation matrix of a unit q (homogeneous form)."""
    mul = np.zeros((4, 4, 4))  # [j, i, k]: coefficient of a_j b_k in (a ⊗ b)_i
    w, x, y, z = range(4)
    for i, terms in enumerate((((w, w, 1), (x, x, -1), (y, y, -1), (z, z, -1)),
                               ((w, x, 1), (x, w, 1), (y, z, 1), (z, y, -1)),
                               ((w, y, 1), (x, z, -1), (y, w, 1), (z, x, 1)),
                               ((w, z, 1), (x, y, 1), (y, x, -1), (z, w, 1)))):
        for j, k, sign in terms:
            mul[j, i, k] = sign
    mat = np.zeros((4, 4, 9))
    entries = {0: ((w, w, 1), (x, x, 1), (y, y, -1), (z, z, -1)), 1: ((x, y, 2), (w, z, -2)),
               2: ((x, z, 2), (w, y, 2)), 3: ((x, y, 2), (w, z, 2)), 4: ((w, w, 1), (x, x, -1), (y, y, 1), (z, z, -1)),
               5: ((y, z, 2), (w, x, -2)), 6: ((x, z, 2), (w, y, -2)), 7: ((y, z, 2), (w, x, 2)),
               8: ((w, w, 1), (x, x, -1), (y, y, -1), (z, z, 1))}
    for e, terms in entries.items():
        for j, k, c in terms:
            mat[j, k, e] += c / 2
            mat[k, j, e] += c / 2
    return mul.reshape(4, 16), mat.reshape(16, 9)


_MUL, _MAT = _product_tensors()


def mul(a, b):
    """Hamilton product a ⊗ b of quaternions (..., 4); a is applied after b."""
    left = (a @ _MUL).reshape(a.shape[:-1] + (4, 4))
    return (left @ b[..., None])[..., 0]


_CONJ_MUL = _CONJ[:, None] * _MUL


def conj_mul(a, b):
    """conj(a) ⊗ b of quaternions (..., 4): the rotation from a to b in a's frame."""
    left = (a @ _CONJ_MUL).reshape(a.shape[:-1] + (4, 4))
    return (left @ b[..., None])[..., 0]


def conj(q):
    """Conjugate (the inverse of a unit quaternion), shape (..., 4)."""
    return q * _CONJ


def normalize(q):
    """Unit quaternions (..., 4). Raises ValueError on a zero quaternion."""
    n = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
    if (n == 0.0).any():
        raise ValueError("cannot normalise a zero quaternion")
    return q / n


def exp(r):
    """Unit quaternion of the rotation vector r (..., 3) in rad: (cos |r|/2, sin(|r|/2) r/|r|)."""
    theta = np.sqrt(np.einsum("...i,...i->...", r, r))[..., None]
    half = 0.5 * theta
    out = np.empty(r.shape[:-1] + (4,))
    np.cos(half, out=out[..., :1])
    # sin(θ/2)/θ: floating-point sin is exact to rounding for tiny θ (sin x = x), so only
    # θ = 0 needs care, where the floored divisor gives 0 and r = 0 anyway.
    np.multiply(np.sin(half) / np.maximum(theta, 1e-300), r, out=out[..., 1:])
    return out


def log(q):
    """Rotation vector (..., 3) in rad of the unit quaternion q (..., 4), shortest arc (angle ≤ π)."""
    w = q[..., :1]
    v = q[..., 1:]
    s = np.sqrt(np.einsum("...i,...i->...", v, v))[..., None]
    # 2 atan2(s, |w|)/s; the sign of w picks the short arc. atan2(s, |w|) = s/|w| to
    # rounding for tiny s, so only s = 0 needs care: the floored divisor gives 0, v = 0.
    factor = np.arctan2(s, np.abs(w)) / np.maximum(s, 1e-300)
    return np.copysign(factor, w) * (2.0 * v)


def angle_between(a, b):
    """Geodesic angle (...,) in rad between rotations a and b (..., 4), in [0, π]; sign-invariant."""
    d = conj_mul(a, b)
    v = d[..., 1:]
    return 2.0 * np.arctan2(np.sqrt(np.einsum("...i,...i->...", v, v)), np.abs(d[..., 0]))


def rotate(q, v):
    """Rotate vectors v (..., 3) by unit quaternions q (..., 4)."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def to_matrix(q):
    """Rotation matrices (..., 3, 3) of unit quaternions (..., 4)."""
    outer = (q[..., :, None] * q[..., None, :]).reshape(q.shape[:-1] + (16,))
    return (outer @ _MAT).reshape(q.shape[:-1] + (3, 3))


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


def from_euler(angles, order="XYZ"):
    """Quaternions (..., 4) from Euler angles (..., 3) rad in Blender's convention.

    `order` names the axes in the order they are applied (Blender's rotation_mode, e.g.
    'XYZ' is R = R_z · R_y · R_x); angles[..., k] is the angle about axis 'XYZ'[k].
    """
    angles = np.asarray(angles, dtype=float)
    q = None
    for ax in order:
        k = "XYZ".index(ax)
        half = 0.5 * angles[..., k]
        qa = np.zeros(angles.shape[:-1] + (4,))
        qa[..., 0] = np.cos(half)
        qa[..., 1 + k] = np.sin(half)
        q = qa if q is None else mul(qa, q)
    return q

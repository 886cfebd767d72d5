"""Quaternion algebra, w-first (w, x, y, z) like Blender, over any leading axes (products,
exp and log compiled: kernels.py).

A unit quaternion q rotates a vector v as q v q*. Rotation vectors are in radians
(axis times angle). Every function accepts arrays of shape (..., 4) or (..., 3)
and broadcasts over the leading axes.
"""

import numpy as np

from . import kernels

_CONJ = np.array([1.0, -1.0, -1.0, -1.0])
IDENTITY = np.array([1.0, 0.0, 0.0, 0.0])


def _matrix_tensor():
    """(q qᵀ).reshape(16) @ _MAT is the rotation matrix of a unit q (homogeneous form)."""
    w, x, y, z = range(4)
    mat = np.zeros((4, 4, 9))
    entries = {0: ((w, w, 1), (x, x, 1), (y, y, -1), (z, z, -1)), 1: ((x, y, 2), (w, z, -2)),
               2: ((x, z, 2), (w, y, 2)), 3: ((x, y, 2), (w, z, 2)), 4: ((w, w, 1), (x, x, -1), (y, y, 1), (z, z, -1)),
               5: ((y, z, 2), (w, x, -2)), 6: ((x, z, 2), (w, y, -2)), 7: ((y, z, 2), (w, x, 2)),
               8: ((w, w, 1), (x, x, -1), (y, y, -1), (z, z, 1))}
    for e, terms in entries.items():
        for j, k, c in terms:
            mat[j, k, e] += c / 2
            mat[k, j, e] += c / 2
    return mat.reshape(16, 9)


_MAT = _matrix_tensor()


def _pair(a, b):
    """a and b (..., 4) as (k_a, 4) and (k_b, 4) kernel arguments and their broadcast
    batch shape; the kernel reads row k mod k_a, so an operand whose batch shape is a
    suffix of the result's (the usual case: one pose against a batch) is not copied."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    shape = a.shape[:-1] if a.shape == b.shape else np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    return _tiled(a, shape), _tiled(b, shape), shape


def _tiled(a, shape):
    own = a.shape[:-1]
    while own and own[0] == 1:
        own = own[1:]
    if own == shape[len(shape) - len(own):]:
        return kernels.argument(a, a.shape).reshape(-1, 4)
    return kernels.argument(a, shape + (4,)).reshape(-1, 4)


def mul(a, b):
    """Hamilton product a ⊗ b of quaternions (..., 4); a is applied after b."""
    a, b, shape = _pair(a, b)
    out = np.empty(shape + (4,))
    kernels.quat_mul(a, b, False, out.reshape(-1, 4))
    return out


def conj_mul(a, b):
    """conj(a) ⊗ b of quaternions (..., 4): the rotation from a to b in a's frame."""
    a, b, shape = _pair(a, b)
    out = np.empty(shape + (4,))
    kernels.quat_mul(a, b, True, out.reshape(-1, 4))
    return out


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
    r = np.asarray(r, dtype=float)
    out = np.empty(r.shape[:-1] + (4,))
    kernels.quat_exp(kernels.argument(r, r.shape).reshape(-1, 3), out.reshape(-1, 4))
    return out


def log(q):
    """Rotation vector (..., 3) in rad of the unit quaternion q (..., 4), shortest arc (angle ≤ π)."""
    q = np.asarray(q, dtype=float)
    out = np.empty(q.shape[:-1] + (3,))
    kernels.quat_log(kernels.argument(q, q.shape).reshape(-1, 4), out.reshape(-1, 3))
    return out


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

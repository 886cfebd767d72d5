"""Reference motion: the keyed animation the physics pass tracks, and its C² spline.

Each quaternion track (bones and base) is made hemisphere-continuous and interpolated
component-wise by a cubic spline (scipy CubicSpline, C²), then renormalised; the
derivatives of the normalised curve give angular velocity and acceleration analytically
(seed §4.1: a C² trajectory with q_ref, q̇_ref, q̈_ref as feedforward input).
"""

from dataclasses import dataclass

import numpy as np
from scipy.interpolate import CubicSpline

from . import quat


@dataclass(frozen=True, eq=False)
class Reference:
    """Reference animation sampled at frames.

    times (n_frames,) s, strictly increasing, n_frames ≥ 2;
    rotations (n_frames, n_bones, 4): local pose quaternions w-first (relative to rest);
    base_positions (n_frames, 3) m and base_rotations (n_frames, 4) w-first: the
        kinematic base (chest) in world, followed exactly;
    face_vertices (V, 3) m and face_triangles (T, 3) int: optional closed face mesh in
        the local frame of bone `face_bone` (its signed distance field is built once).
    Raises ValueError on NaN, inconsistent shapes or non-increasing times.
    """

    times: np.ndarray
    rotations: np.ndarray
    base_positions: np.ndarray
    base_rotations: np.ndarray
    face_vertices: np.ndarray = None
    face_triangles: np.ndarray = None
    face_bone: int = -1

    def __post_init__(self):
        put = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731  (frozen dataclass)
        t = np.array(self.times, dtype=float)
        if t.ndim != 1 or t.size < 2:
            raise ValueError("times must be a 1-D array of at least 2 frames")
        n = t.size
        rot = np.array(self.rotations, dtype=float)
        if rot.ndim != 3 or rot.shape[0] != n or rot.shape[2] != 4:
            raise ValueError(f"rotations must have shape ({n}, n_bones, 4), got {rot.shape}")
        bp = np.array(self.base_positions, dtype=float)
        br = np.array(self.base_rotations, dtype=float)
        if bp.shape != (n, 3) or br.shape != (n, 4):
            raise ValueError(f"base_positions must be ({n}, 3) and base_rotations ({n}, 4)")
        for name, a in (("times", t), ("rotations", rot), ("base_positions", bp), ("base_rotations", br)):
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{name} contains NaN or infinite values")
        if np.any(np.diff(t) <= 0):
            raise ValueError("times must be strictly increasing")
        put("times", t)
        put("rotations", quat.normalize(rot))
        put("base_positions", bp)
        put("base_rotations", quat.normalize(br))
        if (self.face_vertices is None) != (self.face_triangles is None):
            raise ValueError("face_vertices and face_triangles go together")
        if self.face_vertices is not None and not 0 <= self.face_bone < rot.shape[1]:
            raise ValueError("face_bone must index a bone when a face mesh is given")

    @property
    def n_frames(self):
        return self.times.size


@dataclass(frozen=True, eq=False)
class ReferenceSample:
    """Reference evaluated at times (T,) (batch axis first).

    rotations (T, n_bones, 4) unit; omega (T, n_bones, 3) rad/s and omega_dot
    (T, n_bones, 3) rad/s²: local angular velocity/acceleration in each bone's frame;
    base_position/base_velocity/base_acceleration (T, 3) m, m/s, m/s²; base_rotation
    (T, 3, 3); base_omega, base_omega_dot (T, 3) world rad/s, rad/s².
    """

    rotations: np.ndarray
    omega: np.ndarray
    omega_dot: np.ndarray
    base_position: np.ndarray
    base_velocity: np.ndarray
    base_acceleration: np.ndarray
    base_rotation: np.ndarray
    base_omega: np.ndarray
    base_omega_dot: np.ndarray


def _vec_conj_mul(p, b):
    """vec(p* ⊗ b) (..., 3) of quaternions (..., 4): component arithmetic on whole
    columns, faster than quat.conj_mul's stacked 4×4 products for long batches."""
    w, x, y, z = p.reshape(-1, 4).T
    bw, bx, by, bz = b.reshape(-1, 4).T
    out = np.empty((3, w.size))
    out[0] = w * bx - bw * x - (y * bz - z * by)
    out[1] = w * by - bw * y - (z * bx - x * bz)
    out[2] = w * bz - bw * z - (x * by - y * bx)
    return out.T.reshape(p.shape[:-1] + (3,))


def _normalised_derivatives(q, dq, ddq):
    """Unit quaternion q/|q| and its first two time derivatives (quotient rule)."""
    # einsum: reductions over a short last axis are several times faster than np.sum's.
    n = np.sqrt(np.einsum("...i,...i->...", q, q))[..., None]
    u = q / n
    nd = np.einsum("...i,...i->...", u, dq)[..., None]
    ud = (dq - u * nd) / n
    ndd = (np.einsum("...i,...i->...", dq, dq) + np.einsum("...i,...i->...", q, ddq))[..., None]
    ndd = (ndd - nd ** 2) / n
    udd = (ddq - 2.0 * ud * nd - u * ndd) / n
    return u, ud, udd


class ReferenceSpline:
    """C² interpolant of a Reference; sample(times) gives poses, velocities, accelerations.

    Body-frame angular velocity of a bone: ω = 2 vec(q* q̇), acceleration ω̇ = 2 vec(q* q̈)
    (the q̇* q̇ term is a pure scalar); world-frame for the base: ω = 2 vec(q̇ q*).
    Times outside [t0, t_end] are clamped to the range.
    """

    def __init__(self, reference):
        self.t0 = reference.times[0]
        self.t1 = reference.times[-1]
        n = reference.n_frames
        rot = quat.make_continuous(reference.rotations)
        base = quat.make_continuous(reference.base_rotations)
        self.n_bones = rot.shape[1]
        data = np.concatenate([rot.reshape(n, -1), base, reference.base_positions], axis=1)
        spline = CubicSpline(reference.times, data, axis=0)
        # Piecewise coefficients per interval (n − 1, 4, m), highest power first, so that
        # value and both derivatives come from one interval lookup (sample()).
        self._breaks = np.asarray(spline.x)
        self._coef = np.ascontiguousarray(np.moveaxis(spline.c, 0, 1))

    def sample(self, times):
        """ReferenceSample at times (T,) s."""
        t = np.clip(np.atleast_1d(np.asarray(times, dtype=float)), self.t0, self.t1)
        x = self._breaks
        i = np.clip(np.searchsorted(x, t, side="right") - 1, 0, len(x) - 2)
        dx = (t - x.take(i))[:, None]
        c = self._coef.take(i, axis=0)
        c0, c1, c2 = c[:, 0], c[:, 1], c[:, 2]
        y = ((c0 * dx + c1) * dx + c2) * dx + c[:, 3]
        yd = ((3.0 * dx) * c0 + 2.0 * c1) * dx + c2
        ydd = (6.0 * dx) * c0 + 2.0 * c1
        nb4 = 4 * self.n_bones
        shape = (len(t), self.n_bones, 4)
        # For u = p/|p|: ω = 2 vec(u* u̇) = 2 vec(p* ṗ)/|p|² and ω̇ = 2 vec(u* ü)
        # = 2 vec(p* p̈)/|p|² − 2 (p·ṗ)/|p|² ω (vec(u* u) = 0), without forming u̇ and ü.
        p, pd, pdd = y[:, :nb4].reshape(shape), yd[:, :nb4].reshape(shape), ydd[:, :nb4].reshape(shape)
        inv_sq = 1.0 / np.einsum("...i,...i->...", p, p)[..., None]
        q = p * np.sqrt(inv_sq)
        omega = (2.0 * inv_sq) * _vec_conj_mul(p, pd)
        omega_dot = ((2.0 * inv_sq) * _vec_conj_mul(p, pdd)
                     - (2.0 * inv_sq * np.einsum("...i,...i->...", p, pd)[..., None]) * omega)
        b, bd, bdd = _normalised_derivatives(y[:, nb4:nb4 + 4], yd[:, nb4:nb4 + 4], ydd[:, nb4:nb4 + 4])
        bc = quat.conj(b)
        return ReferenceSample(
            rotations=q, omega=omega, omega_dot=omega_dot,
            base_position=y[:, nb4 + 4:], base_velocity=yd[:, nb4 + 4:], base_acceleration=ydd[:, nb4 + 4:],
            base_rotation=quat.to_matrix(b), base_omega=2.0 * quat.mul(bd, bc)[..., 1:],
            base_omega_dot=2.0 * quat.mul(bdd, bc)[..., 1:])

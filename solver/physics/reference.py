"""Reference motion: the keyed animation the physics pass tracks, and its C² spline.

Each quaternion track (bones and base) is made hemisphere-continuous and interpolated
component-wise by a cubic spline (scipy CubicSpline, C²), then renormalised; the
derivatives of the normalised curve give angular velocity and acceleration analytically
(a C² trajectory with q_ref, q̇_ref, q̈_ref as feedforward input).

Before that, `fit_reference` may replace the keyed bone rotations by a zero-phase
smoothing-spline fit (single-frame spikes rejected), so that key noise does not become
noise in q̈_ref and hence in the feedforward torque.
"""

from dataclasses import dataclass, replace
from math import comb

import numpy as np
from scipy.interpolate import CubicSpline

from ..core import quat


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


def spike_frames(r, threshold, scale_factor=4.0):
    """Single-frame spikes of tracks r (F, m, 3) (rotation vectors, rad): (F, m) bool.

    The residual of each interior frame against the mean of its two neighbours,
    e_k = r_k − (r_{k−1} + r_{k+1})/2, is compared with a robust scale of the same
    residuals over the whole track (1.4826 × median |e|, the normal-consistent median
    absolute deviation of Hampel's identifier: Hampel, "The influence curve and its
    role in robust estimation", 1974). A frame is a spike when |e_k| exceeds both
    scale_factor times that scale and `threshold` (rad), exceeds half the distance
    between its two neighbours (the sample jumps out and back, leaving the ball its
    neighbours span; a fast but real movement carries its neighbours apart), and is the largest residual of its three frames (a
    spike's neighbours carry half its residual).
    """
    out = np.zeros(r.shape[:2], bool)
    if len(r) < 3:
        return out
    e = np.linalg.norm(r[1:-1] - 0.5 * (r[:-2] + r[2:]), axis=-1)  # (F − 2, m)
    scale = 1.4826 * np.median(e, axis=0)
    big = (e > scale_factor * scale) & (e > threshold) & (e > 0.5 * np.linalg.norm(r[2:] - r[:-2], axis=-1))
    padded = np.pad(e, ((1, 1), (0, 0)))
    out[1:-1] = big & (e >= padded[:-2]) & (e >= padded[2:])
    return out


NOISE_DIFFERENCE_ORDER = 8


def noise_scale(y):
    """Robust per-channel noise standard deviation (m,) of tracks y (F, m), F > 8.

    From eighth differences d = Δ⁸y: white noise σ gives them standard deviation
    σ √C(16, 8), while smooth motion nearly cancels (a sinusoid of f ≤ fs/10 keeps less
    than 2 % of its amplitude), so fast but clean movement is not taken for noise.
    σ = 1.4826 × median |d| / √C(16, 8), a difference-based variance estimator (Hall,
    Kay & Titterington, "Asymptotically optimal difference-based estimation of variance
    in nonparametric regression", 1990) made robust with the median absolute deviation.
    """
    k = NOISE_DIFFERENCE_ORDER
    d = np.diff(y, k, axis=0)
    return 1.4826 * np.median(np.abs(d), axis=0) / np.sqrt(comb(2 * k, k))


PEAK_RESIDUAL = 4.0  # largest residual of a smoothing fit, in units of its RMS target
# RMS residual of the fit in units of the noise level: a smoother that keeps part of the
# noise (its degrees of freedom) leaves a residual below σ; fitting exactly σ oversmooths
# peaks.
RESIDUAL_SHARE = 0.8


def smoothing_spline(t, y, rms):
    """Cubic smoothing spline values (F, m) of tracks y (F, m) at the knots t (F,), each
    channel with the largest smoothing whose RMS residual is at most rms[c] and whose
    largest residual is at most PEAK_RESIDUAL · rms[c] (white noise of that RMS rarely
    exceeds it; flattening a real fast movement does), same units as y.

    Reinsch's form (Reinsch, "Smoothing by spline functions", 1967; Green & Silverman,
    "Nonparametric Regression and Generalized Linear Models", 1994, §2.3): with Q
    (F, F−2) the second-difference operator and R (F−2, F−2) the tridiagonal Gram matrix
    of the knot spacings, (R + λ QᵀQ) γ = Qᵀ y and f = y − λ Q γ minimises
    Σ (y − f)² + λ ∫ f''². λ is found by bisection on log λ (the residual grows with
    λ): Reinsch's choice of the smoothing parameter from the data's noise level.
    """
    from scipy.linalg import solveh_banded
    F = len(t)
    h = np.diff(t)
    qa, qc = 1.0 / h[:-1], 1.0 / h[1:]
    qb = -qa - qc  # column j of Q: rows j, j+1, j+2 = (qa_j, qb_j, qc_j)
    # QᵀQ (F−2)² pentadiagonal, upper banded form for solveh_banded.
    qtq = np.zeros((3, F - 2))
    qtq[2] = qa ** 2 + qb ** 2 + qc ** 2
    qtq[1, 1:] = qb[:-1] * qa[1:] + qc[:-1] * qb[1:]
    qtq[0, 2:] = qc[:-2] * qa[2:]
    rr = np.zeros((3, F - 2))
    rr[2] = (h[:-1] + h[1:]) / 3.0
    rr[1, 1:] = h[1:-1] / 6.0
    qty = qa[:, None] * y[:-2] + qb[:, None] * y[1:-1] + qc[:, None] * y[2:]

    def fit(lam, c):
        g = solveh_banded(rr + lam * qtq, qty[:, c])
        qg = np.zeros(F)
        qg[:-2] += qa * g
        qg[1:-1] += qb * g
        qg[2:] += qc * g
        return y[:, c] - lam * qg

    out = y.astype(float).copy()
    for c in range(y.shape[1]):
        if not rms[c] > 0:
            continue
        lo, hi = -16.0, 4.0  # log10 λ bracket (s³): interpolation … a straight line
        for _ in range(30):
            mid = 0.5 * (lo + hi)
            res = fit(10.0 ** mid, c) - y[:, c]
            if np.sqrt(np.mean(res ** 2)) > rms[c] or np.abs(res).max() > PEAK_RESIDUAL * rms[c]:
                hi = mid
            else:
                lo = mid
        out[:, c] = fit(10.0 ** lo, c)
    return out


def fit_reference(reference, tolerance_deg=2.0, spike_deg=8.0):
    """The Reference with its bone rotations replaced by a zero-phase smoothing fit.

    Per bone the track is written as rotation vectors r = log(q̄* q) about the bone's
    mean rotation q̄ (a continuous chart for joints within 180° of their mean).
    Single-frame spikes (spike_frames, larger than spike_deg) are replaced by the mean
    of their neighbours. Each bone's components are then fitted by the cubic smoothing
    spline whose RMS residual is RESIDUAL_SHARE times the bone's noise level
    (noise_scale, pooled over its three components), at most tolerance_deg
    (smoothing_spline). Noise-free tracks
    (noise level below 0.01°) are kept as keyed apart from their spikes. The fit is
    symmetric in time, so it adds no lag. Base (chest) tracks are kept as keyed.
    Returns a new Reference (the input is not modified); references of at most
    NOISE_DIFFERENCE_ORDER frames are returned unchanged.
    """
    n = reference.n_frames
    if n <= NOISE_DIFFERENCE_ORDER:
        return reference
    q = quat.make_continuous(reference.rotations)
    mean = np.broadcast_to(quat.normalize(q.sum(axis=0)), q.shape)
    r = quat.log(quat.conj_mul(mean, q))  # (F, n_bones, 3)
    spikes = spike_frames(r, np.radians(spike_deg))
    if np.count_nonzero(spikes):
        f, b = np.nonzero(spikes)
        r[f, b] = 0.5 * (r[f - 1, b] + r[f + 1, b])
    y = r.reshape(n, -1)
    sigma = RESIDUAL_SHARE * noise_scale(y).reshape(-1, 3).mean(axis=1)
    rms = np.repeat(np.where(sigma > np.radians(0.01), np.minimum(sigma, np.radians(tolerance_deg)), 0.0), 3)
    fitted = smoothing_spline(reference.times, y, rms).reshape(r.shape)
    return replace(reference, rotations=quat.mul(mean, quat.exp(fitted)))

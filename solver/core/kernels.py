"""Compiled kernels of the physics pass (numba; compiled on first use, then cached).

Tree recursions over the skeleton in world coordinates (spatial vectors at the world
origin, angular part first) after Featherstone, *Rigid Body Dynamics Algorithms*
(Springer 2008): forward kinematics and motion subspaces (ch. 4), the recursive
Newton–Euler algorithm (ch. 5), the composite-rigid-body algorithm (ch. 6); plus the
capsule closest-point narrow phase (Ericson, *Real-Time Collision Detection*, 2005,
§5.1.9) and trilinear distance-grid lookups. The public functions with array shapes and
units are in kinematics.py, sdf.py, physics/dynamics.py and physics/capsule_contacts.py; these kernels take
plain arrays. Every kernel is compiled once per machine and cached on disk
(`cache=True`) in the folder configure_cache() sets (default: the virtualenv's, or
Blender's extension user folder when the add-on sets it); no fastmath and no threads,
so results are bit-identical run to run.

Bones are ordered parents first (SkeletonModel), so a forward loop over bones is an
outward recursion and a backward loop an inward one.
"""

import math
import os
import sys

import numba
import numpy as np
from numba.core import caching

_CACHE_SUBDIR = "signsim-numba-cache"


def default_cache_dir():
    """Folder for compiled code when nothing else is configured: inside the running
    Python's prefix (the virtualenv when run from the repository)."""
    return os.path.join(sys.prefix, _CACHE_SUBDIR)


def configure_cache(path):
    """Store compiled kernels under `path` (created if missing). Numba binds the cache
    folder when a kernel is defined, so this runs at import, from NUMBA_CACHE_DIR (the
    add-on sets it to Blender's extension user folder) or default_cache_dir()."""
    os.makedirs(path, exist_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = path
    numba.config.CACHE_DIR = path


try:  # an explicit NUMBA_CACHE_DIR (the add-on sets Blender's user folder) wins
    configure_cache(os.environ.get("NUMBA_CACHE_DIR") or default_cache_dir())
except OSError:  # not writable: numba's own per-user fallback applies
    pass



# the solver package's folder: kernels in any of its subpackages are cached by real path
_SOLVER_ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


class _RealPathLocator(caching._UserProvidedCacheLocator):
    """numba's cache locator for this package's files by their real path and module name:
    the add-on run from a source checkout reaches them through a temporary folder of
    symlinks, which would otherwise start a new cache (and a new compile) every session;
    the module name keeps apart the entries of the same file imported as `solver` and as
    part of the add-on (cached code refers to its module by name)."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        self._cache_path = os.path.join(self._cache_path, py_func.__module__)

    @classmethod
    def from_function(cls, py_func, py_file):
        real = os.path.realpath(py_file)
        if os.path.commonpath([real, _SOLVER_ROOT]) != _SOLVER_ROOT:
            return None
        return super().from_function(py_func, real)


if _RealPathLocator not in caching.CacheImpl._locator_classes:
    caching.CacheImpl._locator_classes.insert(0, _RealPathLocator)

# error_model="numpy": a division by zero gives inf or NaN as numpy does (degenerate
# triangles are rejected by the callers), not an exception from inside a loop.
jit = numba.njit(cache=True, fastmath=False, parallel=False, nogil=True, error_model="numpy")


def argument(a, shape, dtype=float):
    """a broadcast to `shape` as a writable C-contiguous array: a kernel argument of one
    compiled signature whatever the caller passes (views, read-only arrays). Arrays that
    already are one pass through uncopied."""
    if (type(a) is np.ndarray and a.shape == shape and a.dtype == dtype and a.flags.c_contiguous
            and a.flags.writeable):
        return a
    return np.require(np.broadcast_to(np.asarray(a, dtype=dtype), shape), dtype, ("C", "W"))


# ----------------------------------------------------------------------------- kinematics

@jit
def _quat_matrix(q, out):
    """Rotation matrix of the unit quaternion q (4,) w-first into out (3, 3)."""
    w, x, y, z = q[0], q[1], q[2], q[3]
    out[0, 0] = w * w + x * x - y * y - z * z
    out[0, 1] = 2.0 * (x * y - w * z)
    out[0, 2] = 2.0 * (x * z + w * y)
    out[1, 0] = 2.0 * (x * y + w * z)
    out[1, 1] = w * w - x * x + y * y - z * z
    out[1, 2] = 2.0 * (y * z - w * x)
    out[2, 0] = 2.0 * (x * z - w * y)
    out[2, 1] = 2.0 * (y * z + w * x)
    out[2, 2] = w * w - x * x - y * y + z * z


@jit
def forward_kinematics(parents, rest_matrices, rest_offsets, dof_bone, dof_axis, q, base_r, base_p,
                       R, P, motion):
    """World frames of a batch: q (B, n, 4), base_r (B, 3, 3), base_p (B, 3) → R (B, n, 3, 3),
    P (B, n, 3) and motion subspaces S = (a, p × a) (B, n_dof, 6), a the joint axis
    (column dof_axis of the bone's world frame) through the bone head p."""
    n = parents.shape[0]
    local = np.empty((3, 3))
    Rp = np.empty((3, 3))
    pp = np.empty(3)
    for k in range(q.shape[0]):
        for i in range(n):
            p = parents[i]
            _quat_matrix(q[k, i], local)
            if p < 0:
                Rp[:] = base_r[k]
                pp[:] = base_p[k]
            else:
                Rp[:] = R[k, p]
                pp[:] = P[k, p]
            for r in range(3):
                acc = pp[r]
                for c in range(3):
                    acc += Rp[r, c] * rest_offsets[i, c]
                P[k, i, r] = acc
                for c in range(3):
                    s = 0.0
                    for m in range(3):
                        t = 0.0
                        for l in range(3):
                            t += rest_matrices[i, m, l] * local[l, c]
                        s += Rp[r, m] * t
                    R[k, i, r, c] = s
        for d in range(dof_bone.shape[0]):
            b, ax = dof_bone[d], dof_axis[d]
            a0, a1, a2 = R[k, b, 0, ax], R[k, b, 1, ax], R[k, b, 2, ax]
            p0, p1, p2 = P[k, b, 0], P[k, b, 1], P[k, b, 2]
            motion[k, d, 0] = a0
            motion[k, d, 1] = a1
            motion[k, d, 2] = a2
            motion[k, d, 3] = p1 * a2 - p2 * a1
            motion[k, d, 4] = p2 * a0 - p0 * a2
            motion[k, d, 5] = p0 * a1 - p1 * a0


@jit
def normal_rows(parents, dof_start, dof_count, motion, bones, points, normals, other, out):
    """Rows n·(J_p(bone) − J_p(other)) (k, n_dof) into out (zeroed here): the spatial
    force (p × n, n) times the motion subspace of every DOF on bone's path, minus the
    same on other's path (other = n_bones: the base, no DOF). motion (n_dof, 6)."""
    n = parents.shape[0]
    out[:] = 0.0
    f = np.empty(6)
    for k in range(bones.shape[0]):
        px, py, pz = points[k, 0], points[k, 1], points[k, 2]
        nx, ny, nz = normals[k, 0], normals[k, 1], normals[k, 2]
        f[0] = py * nz - pz * ny
        f[1] = pz * nx - px * nz
        f[2] = px * ny - py * nx
        f[3], f[4], f[5] = nx, ny, nz
        for side in range(2):
            j = bones[k] if side == 0 else other[k]
            sign = 1.0 if side == 0 else -1.0
            while 0 <= j < n:
                for d in range(dof_start[j], dof_start[j] + dof_count[j]):
                    s = 0.0
                    for c in range(6):
                        s += f[c] * motion[d, c]
                    out[k, d] += sign * s
                j = parents[j]


# ----------------------------------------------------------------------------- dynamics

@jit
def body_inertias(R, P, mass, com_y, inertia_perp, inertia_axial, com, inertia, spatial):
    """Per bone of a batch (R (B, n, 3, 3), P (B, n, 3)): world centre of mass com (B, n, 3)
    on the bone's Y axis, rotational inertia about it (B, n, 3, 3) (a capsule's
    diag(i⊥, i_axial, i⊥) in the bone frame is i⊥ 1 + (i_axial − i⊥) y yᵀ in world)
    and the 6×6 spatial inertia at the world origin (B, n, 6, 6)."""
    for k in range(R.shape[0]):
        for i in range(R.shape[1]):
            for r in range(3):
                com[k, i, r] = P[k, i, r] + R[k, i, r, 1] * com_y[i]
            excess = inertia_axial[i] - inertia_perp[i]
            for r in range(3):
                for c in range(3):
                    inertia[k, i, r, c] = excess * R[k, i, r, 1] * R[k, i, c, 1]
                inertia[k, i, r, r] += inertia_perp[i]
    spatial_inertias(com, inertia, mass, spatial)


@jit
def spatial_inertias(com, inertia, mass, out):
    """[[Ī + m c×c×ᵀ, m c×], [m c×ᵀ, m 1]] (B, n, 6, 6) from com (B, n, 3), Ī (B, n, 3, 3)."""
    cx = np.empty((3, 3))
    for k in range(com.shape[0]):
        for i in range(com.shape[1]):
            m = mass[i]
            x, y, z = com[k, i, 0], com[k, i, 1], com[k, i, 2]
            cx[0, 0], cx[0, 1], cx[0, 2] = 0.0, -z, y
            cx[1, 0], cx[1, 1], cx[1, 2] = z, 0.0, -x
            cx[2, 0], cx[2, 1], cx[2, 2] = -y, x, 0.0
            o = out[k, i]
            for r in range(3):
                for c in range(3):
                    s = 0.0
                    for l in range(3):
                        s += cx[r, l] * cx[l, c]
                    # c×ᵀ = −c×, so m c× c×ᵀ = −m c× c×.
                    o[r, c] = inertia[k, i, r, c] - m * s
                    o[r, 3 + c] = m * cx[r, c]
                    o[3 + r, c] = -m * cx[r, c]
                    o[3 + r, 3 + c] = m if r == c else 0.0


@jit
def composite_inertias(parents, spatial, out):
    """Subtree sums of the spatial inertias (B, n, 6, 6): in one frame, a plain inward sum."""
    out[:] = spatial
    for k in range(spatial.shape[0]):
        for i in range(parents.shape[0] - 1, -1, -1):
            p = parents[i]
            if p >= 0:
                for r in range(6):
                    for c in range(6):
                        out[k, p, r, c] += out[k, i, r, c]


@jit
def mass_matrix(parents, dof_bone, dof_start, dof_count, motion, composite, out):
    """CRBA: M[d, e] = M[e, d] = S_eᵀ I^c(bone d) S_d for bone(e) on bone(d)'s path
    (n_dof, n_dof) from motion (n_dof, 6) and composite inertias (n, 6, 6)."""
    out[:] = 0.0
    F = np.empty(6)
    for d in range(dof_bone.shape[0]):
        b = dof_bone[d]
        Ic = composite[b]
        for r in range(6):
            s = 0.0
            for c in range(6):
                s += Ic[r, c] * motion[d, c]
            F[r] = s
        j = b
        while j >= 0:
            for e in range(dof_start[j], dof_start[j] + dof_count[j]):
                if j == b and e > d:
                    break
                s = 0.0
                for c in range(6):
                    s += motion[e, c] * F[c]
                out[d, e] = s
                out[e, d] = s
            j = parents[j]


@jit
def _motion_cross(v, m, out):
    """crm(v) m: (ω × m_ω, v_O × m_ω + ω × m_v) for spatial vectors v, m (6,)."""
    w0, w1, w2, v0, v1, v2 = v[0], v[1], v[2], v[3], v[4], v[5]
    a0, a1, a2, b0, b1, b2 = m[0], m[1], m[2], m[3], m[4], m[5]
    out[0] = w1 * a2 - w2 * a1
    out[1] = w2 * a0 - w0 * a2
    out[2] = w0 * a1 - w1 * a0
    out[3] = v1 * a2 - v2 * a1 + w1 * b2 - w2 * b1
    out[4] = v2 * a0 - v0 * a2 + w2 * b0 - w0 * b2
    out[5] = v0 * a1 - v1 * a0 + w0 * b1 - w1 * b0


@jit
def rnea(parents, dof_bone, dof_start, dof_count, motion, spatial, qd, qdd, base_velocity,
         base_acceleration, gravity, tau, V, momentum):
    """RNEA over a batch: motion (B, n_dof, 6), spatial (B, n, 6, 6), qd, qdd (B, n_dof),
    base velocity/acceleration (B, 6) → tau (B, n_dof), bone velocities V (B, n, 6) and
    momenta I V (B, n, 6). Gravity is an upward base acceleration; Ṡ = v × S for axes
    fixed in the child bone."""
    n = parents.shape[0]
    A = np.empty((n, 6))
    F = np.empty((n, 6))
    sq = np.empty(6)
    c = np.empty(6)
    ia = np.empty(6)
    for k in range(motion.shape[0]):
        for i in range(n):
            p = parents[i]
            for r in range(6):
                V[k, i, r] = base_velocity[k, r] if p < 0 else V[k, p, r]
                A[i, r] = base_acceleration[k, r] if p < 0 else A[p, r]
            if p < 0:
                A[i, 5] += gravity
            for d in range(dof_start[i], dof_start[i] + dof_count[i]):
                for r in range(6):
                    V[k, i, r] += motion[k, d, r] * qd[k, d]
            for d in range(dof_start[i], dof_start[i] + dof_count[i]):
                for r in range(6):
                    sq[r] = motion[k, d, r] * qd[k, d]
                _motion_cross(V[k, i], sq, c)
                for r in range(6):
                    A[i, r] += c[r] + motion[k, d, r] * qdd[k, d]
            I = spatial[k, i]
            for r in range(6):
                s = 0.0
                t = 0.0
                for col in range(6):
                    s += I[r, col] * A[i, col]
                    t += I[r, col] * V[k, i, col]
                ia[r] = s
                momentum[k, i, r] = t
            # f = I a + crf(v) I v, crf(v) h = (ω × h_ω + v_O × h_v, ω × h_v).
            w0, w1, w2, v0, v1, v2 = V[k, i, 0], V[k, i, 1], V[k, i, 2], V[k, i, 3], V[k, i, 4], V[k, i, 5]
            h = momentum[k, i]
            F[i, 0] = ia[0] + w1 * h[2] - w2 * h[1] + v1 * h[5] - v2 * h[4]
            F[i, 1] = ia[1] + w2 * h[0] - w0 * h[2] + v2 * h[3] - v0 * h[5]
            F[i, 2] = ia[2] + w0 * h[1] - w1 * h[0] + v0 * h[4] - v1 * h[3]
            F[i, 3] = ia[3] + w1 * h[5] - w2 * h[4]
            F[i, 4] = ia[4] + w2 * h[3] - w0 * h[5]
            F[i, 5] = ia[5] + w0 * h[4] - w1 * h[3]
        for i in range(n - 1, -1, -1):
            for d in range(dof_start[i], dof_start[i] + dof_count[i]):
                s = 0.0
                for r in range(6):
                    s += motion[k, d, r] * F[i, r]
                tau[k, d] = s
            p = parents[i]
            if p >= 0:
                for r in range(6):
                    F[p, r] += F[i, r]


@jit
def gravity_stiffness(parents, dof_bone, dof_start, dof_count, axes, origins, composite, gravity, out):
    """Symmetric part of −∂G/∂q (n_dof, n_dof) from world joint axes and origins (n_dof, 3)
    and composite inertias (n, 6, 6): with W_d = Σ_subtree m (c − o_d) (the composite's
    m and m c× blocks hold m and (m cx, m cy, m cz) at [3, 3], [2, 4], [0, 5], [1, 3])
    and L_d = g (a_d,z W_d − W_d,z a_d), entry [d, e] = L_d·a_e for bone(e) a strict
    ancestor of bone(d) (and its mirror), ½(L_d·a_e + a_d·L_e) within one bone."""
    n_dof = dof_bone.shape[0]
    L = np.empty((n_dof, 3))
    for d in range(n_dof):
        C = composite[dof_bone[d]]
        m = C[3, 3]
        W0 = C[2, 4] - m * origins[d, 0]
        W1 = C[0, 5] - m * origins[d, 1]
        W2 = C[1, 3] - m * origins[d, 2]
        a0, a1, a2 = axes[d, 0], axes[d, 1], axes[d, 2]
        L[d, 0] = gravity * (a2 * W0 - W2 * a0)
        L[d, 1] = gravity * (a2 * W1 - W2 * a1)
        L[d, 2] = gravity * (a2 * W2 - W2 * a2)
    out[:] = 0.0
    for d in range(n_dof):
        b = dof_bone[d]
        j = b
        while j >= 0:
            for e in range(dof_start[j], dof_start[j] + dof_count[j]):
                if j == b:
                    if e > d:
                        break
                    v = 0.5 * (L[d, 0] * axes[e, 0] + L[d, 1] * axes[e, 1] + L[d, 2] * axes[e, 2]
                               + axes[d, 0] * L[e, 0] + axes[d, 1] * L[e, 1] + axes[d, 2] * L[e, 2])
                else:
                    v = L[d, 0] * axes[e, 0] + L[d, 1] * axes[e, 1] + L[d, 2] * axes[e, 2]
                out[d, e] = v
                out[e, d] = v
            j = parents[j]


@jit
def rigid_terms(parents, rest_matrices, rest_offsets, dof_bone, dof_axis, dof_start, dof_count, mass, com_y,
                inertia_perp, inertia_axial, q, base_r, base_p, qd, base_velocity, base_acceleration, gravity,
                R, P, motion, origins, com, spatial, M, bias, V, momentum, K):
    """Everything the step needs from the rigid bodies at one state, in one call, into
    the output arrays R … K: kinematics, centres of mass, spatial inertias, mass matrix,
    bias c(q, q̇), bone velocities and momenta, gravity stiffness. Inputs and outputs
    have the shapes of the kernels above with a batch axis of length 1 where they take
    one (q, base_r, base_p, qd, base_velocity, base_acceleration, R, P, motion, com,
    spatial, bias, V, momentum)."""
    n, n_dof = parents.shape[0], dof_bone.shape[0]
    forward_kinematics(parents, rest_matrices, rest_offsets, dof_bone, dof_axis, q, base_r, base_p, R, P, motion)
    inertia = np.empty((1, n, 3, 3))
    body_inertias(R, P, mass, com_y, inertia_perp, inertia_axial, com, inertia, spatial)
    composite = np.empty((1, n, 6, 6))
    composite_inertias(parents, spatial, composite)
    mass_matrix(parents, dof_bone, dof_start, dof_count, motion[0], composite[0], M)
    rnea(parents, dof_bone, dof_start, dof_count, motion, spatial, qd, np.zeros((1, n_dof)),
         base_velocity, base_acceleration, gravity, bias, V, momentum)
    axes = np.empty((n_dof, 3))
    for d in range(n_dof):
        for r in range(3):
            axes[d, r] = motion[0, d, r]
            origins[d, r] = P[0, dof_bone[d], r]
    gravity_stiffness(parents, dof_bone, dof_start, dof_count, axes, origins, composite[0], gravity, K)


# ----------------------------------------------------------------------------- contacts

@jit
def _unit(x):
    return min(max(x, 0.0), 1.0)


@jit
def capsule_pairs(seg, pair_i, pair_j, pair_reach, pair_min_radius, pair_radius_sum, pair_radius_diff):
    """Broad and narrow phase of the capsule pairs for axis segments seg (n, 2, 3) m.

    Broad: the gap between bounding spheres (centre at the axis midpoint, radius
    half-length + radius) lower-bounds the surface gap. Narrow, for pairs whose bound
    is below the smaller radius: closest points of the axes (Ericson §5.1.9: free s, t
    for it clamped, s for that t clamped; 0 for parallel axes). Returns (gap (n_pairs,)
    exact for narrow-phase pairs, candidate pair indices (k,) with depth > −smaller
    radius, depth (k,) m, overlap midpoint (k, 3) m, unit normal from bone j to bone i
    (k, 3)); crossing axes take their common perpendicular (or +Z) as normal.
    """
    eps = 1e-12
    n_pairs = pair_i.shape[0]
    gap = np.empty(n_pairs)
    pair = np.empty(n_pairs, np.intp)
    depth = np.empty(n_pairs)
    point = np.empty((n_pairs, 3))
    normal = np.empty((n_pairs, 3))
    k = 0
    d1 = np.empty(3)
    d2 = np.empty(3)
    w = np.empty(3)
    delta = np.empty(3)
    for q in range(n_pairs):
        i, j = pair_i[q], pair_j[q]
        dc = 0.0
        for r in range(3):
            x = 0.5 * (seg[i, 0, r] + seg[i, 1, r]) - 0.5 * (seg[j, 0, r] + seg[j, 1, r])
            dc += x * x
        gap[q] = np.sqrt(dc) - pair_reach[q]
        if not gap[q] < pair_min_radius[q]:
            continue
        a = e = b = c = f = 0.0
        for r in range(3):
            d1[r] = seg[i, 1, r] - seg[i, 0, r]
            d2[r] = seg[j, 1, r] - seg[j, 0, r]
            w[r] = seg[i, 0, r] - seg[j, 0, r]
            a += d1[r] * d1[r]
            e += d2[r] * d2[r]
            b += d1[r] * d2[r]
            c += d1[r] * w[r]
            f += d2[r] * w[r]
        a = max(a, eps)
        e = max(e, eps)
        ae = a * e
        denom = ae - b * b
        s = _unit((b * f - c * e) / denom) if denom > 1e-12 * ae else 0.0
        t = _unit((b * s + f) / e)
        s = _unit((b * t - c) / a)
        dist2 = 0.0
        for r in range(3):
            delta[r] = w[r] + s * d1[r] - t * d2[r]
            dist2 += delta[r] * delta[r]
        dist = np.sqrt(dist2)
        dp = pair_radius_sum[q] - dist
        gap[q] = -dp
        if not dp > -pair_min_radius[q]:
            continue
        if dist <= 1e-9:
            delta[0] = d1[1] * d2[2] - d1[2] * d2[1]
            delta[1] = d1[2] * d2[0] - d1[0] * d2[2]
            delta[2] = d1[0] * d2[1] - d1[1] * d2[0]
            if not np.sqrt(delta[0] ** 2 + delta[1] ** 2 + delta[2] ** 2) > eps:
                delta[0], delta[1], delta[2] = 0.0, 0.0, 1.0
            dist = np.sqrt(delta[0] ** 2 + delta[1] ** 2 + delta[2] ** 2)
        half = 0.5 * (dist + pair_radius_diff[q])
        for r in range(3):
            nr = delta[r] / dist
            normal[k, r] = nr
            # Midpoint of the overlap: ½(c1 + c2 + (r2 − r1) n) with c1 − c2 = dist·n.
            point[k, r] = seg[j, 0, r] + t * d2[r] + half * nr
        pair[k] = q
        depth[k] = dp
        k += 1
    return gap, pair[:k], depth[:k], point[:k], normal[:k]


@jit
def capsule_tunnelling(seg0, seg1, pair_i, pair_j, pair_half_min_radius, gap_bound, contact_pair, contact_normal):
    """True when a step from seg0 to seg1 (n, 2, 3) m moves some pair too far: the
    relative displacement of two rigid segments is affine over (s, t) ∈ [0, 1]², so its
    extremes are at end-point combinations; contact pairs (contact_pair (k,) with their
    normals (k, 3)) may approach along the normal by at most half the smaller radius,
    every other pair may move by at most max(gap_bound, half the smaller radius).
    The cheap bound |Δx − Δy| ≤ |Δx| + |Δy| screens the pairs first."""
    n, n_pairs = seg0.shape[0], pair_i.shape[0]
    disp = seg1 - seg0
    end_move = np.empty(n)
    for b in range(n):
        s0 = disp[b, 0, 0] ** 2 + disp[b, 0, 1] ** 2 + disp[b, 0, 2] ** 2
        s1 = disp[b, 1, 0] ** 2 + disp[b, 1, 1] ** 2 + disp[b, 1, 2] ** 2
        end_move[b] = np.sqrt(max(s0, s1))
    slot = np.full(n_pairs, -1, np.intp)
    for c in range(contact_pair.shape[0]):
        slot[contact_pair[c]] = c
    for q in range(n_pairs):
        i, j = pair_i[q], pair_j[q]
        allowed = max(pair_half_min_radius[q], gap_bound[q])
        if not end_move[i] + end_move[j] > allowed:
            continue
        c = slot[q]
        best = -np.inf
        for ei in range(2):
            for ej in range(2):
                r0 = disp[i, ei, 0] - disp[j, ej, 0]
                r1 = disp[i, ei, 1] - disp[j, ej, 1]
                r2 = disp[i, ei, 2] - disp[j, ej, 2]
                if c >= 0:
                    v = -(r0 * contact_normal[c, 0] + r1 * contact_normal[c, 1] + r2 * contact_normal[c, 2])
                else:
                    v = r0 * r0 + r1 * r1 + r2 * r2
                best = max(best, v)
        reach = best if c >= 0 else np.sqrt(best)
        if reach > allowed:
            return True
    return False


@jit
def field_tunnelling(points0, points1, normals0, clearance0, clearance1, radius):
    """True when a field sample (k,) moves from points0 to points1 (k, 3) m (its field's
    frame) by more than half its radius and more than its clearance0 (k,) m, or by more
    than a quarter of its radius ending within its radius of the field (clearance1 (k,)
    m): the move measured along −normals0 (k, 3) for samples within their radius of the
    field. The second rule refines a step in which a contact engages: its row is the
    linearised distance, whose error grows with the square of the step's turn (a
    fingertip curling onto the palm is pushed back along the tangent of its arc)."""
    for m in range(points0.shape[0]):
        d0 = points1[m, 0] - points0[m, 0]
        d1 = points1[m, 1] - points0[m, 1]
        d2 = points1[m, 2] - points0[m, 2]
        if clearance0[m] < radius[m]:
            reach = -(d0 * normals0[m, 0] + d1 * normals0[m, 1] + d2 * normals0[m, 2])
        else:
            reach = np.sqrt(d0 * d0 + d1 * d1 + d2 * d2)
        if reach > 0.5 * radius[m] and reach > clearance0[m]:
            return True
        if reach > 0.25 * radius[m] and clearance1[m] < radius[m]:
            return True
    return False


# ----------------------------------------------------------------------------- distance grids

@jit
def grid_point(values, nx, ny, nz, origin, spacing, margin, point, outside_gradient, grad):
    """Trilinear distance (returned, m) and its analytic gradient (into grad (3,)) at one
    point (3,) in the grid frame of the C-order node values (nx·ny·nz,) flattened;
    outside the box margin + distance to the box, gradient pointing away from it (zero
    unless outside_gradient)."""
    top = (nx - 1.0, ny - 1.0, nz - 1.0)
    dims = (nx, ny, nz)
    out2 = 0.0
    uc0 = uc1 = uc2 = 0.0
    for r in range(3):
        u = (point[r] - origin[r]) / spacing
        uc = min(max(u, 0.0), top[r])
        o = (u - uc) * spacing
        grad[r] = o
        out2 += o * o
        if r == 0:
            uc0 = uc
        elif r == 1:
            uc1 = uc
        else:
            uc2 = uc
    outside = np.sqrt(out2)
    if outside != 0.0:
        for r in range(3):
            grad[r] = grad[r] / max(outside, 1e-300) if outside_gradient else 0.0
        return margin + outside
    x = min(np.intp(uc0), dims[0] - 2)
    y = min(np.intp(uc1), dims[1] - 2)
    z = min(np.intp(uc2), dims[2] - 2)
    fx, fy, fz = uc0 - x, uc1 - y, uc2 - z
    sx, sy = ny * nz, nz
    i = x * sx + y * sy + z
    c0, c1, c2, c3 = values[i], values[i + sx], values[i + sy], values[i + sx + sy]
    c4, c5 = values[i + 1], values[i + sx + 1]
    c6, c7 = values[i + sy + 1], values[i + sx + sy + 1]
    gx, gy, gz = 1 - fx, 1 - fy, 1 - fz
    c00 = c0 * gx + c1 * fx
    c10 = c2 * gx + c3 * fx
    c01 = c4 * gx + c5 * fx
    c11 = c6 * gx + c7 * fx
    e0 = c00 * gy + c10 * fy
    e1 = c01 * gy + c11 * fy
    grad[0] = ((c1 - c0) * gy * gz + (c3 - c2) * fy * gz + (c5 - c4) * gy * fz + (c7 - c6) * fy * fz) / spacing
    grad[1] = ((c10 - c00) * gz + (c11 - c01) * fz) / spacing
    grad[2] = (e1 - e0) / spacing
    return e0 * gz + e1 * fz


@jit
def grid_sample(values, origin, spacing, margin, points, outside_gradient):
    """Trilinear distance (k,) m and its analytic gradient (k, 3) at points (k, 3) in the
    grid frame of the node values (nx, ny, nz) (grid_point)."""
    nx, ny, nz = values.shape
    flat = values.reshape(-1)
    k = points.shape[0]
    phi = np.empty(k)
    grad = np.zeros((k, 3))
    for m in range(k):
        phi[m] = grid_point(flat, nx, ny, nz, origin, spacing, margin, points[m], outside_gradient, grad[m])
    return phi, grad


@jit
def _triangle_distance(p, tri):
    """Distance from p (3,) to the triangle tri (3, 3): Ericson's closest point by
    Voronoi region (§5.1.5), as a + v·ab + w·ac with the region's weights."""
    a0, a1, a2 = tri[0, 0], tri[0, 1], tri[0, 2]
    ab0, ab1, ab2 = tri[1, 0] - a0, tri[1, 1] - a1, tri[1, 2] - a2
    ac0, ac1, ac2 = tri[2, 0] - a0, tri[2, 1] - a1, tri[2, 2] - a2
    ap0, ap1, ap2 = p[0] - a0, p[1] - a1, p[2] - a2
    d1 = ab0 * ap0 + ab1 * ap1 + ab2 * ap2
    d2 = ac0 * ap0 + ac1 * ap1 + ac2 * ap2
    bp0, bp1, bp2 = p[0] - tri[1, 0], p[1] - tri[1, 1], p[2] - tri[1, 2]
    d3 = ab0 * bp0 + ab1 * bp1 + ab2 * bp2
    d4 = ac0 * bp0 + ac1 * bp1 + ac2 * bp2
    cp0, cp1, cp2 = p[0] - tri[2, 0], p[1] - tri[2, 1], p[2] - tri[2, 2]
    d5 = ab0 * cp0 + ab1 * cp1 + ab2 * cp2
    d6 = ac0 * cp0 + ac1 * cp1 + ac2 * cp2
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    if d1 <= 0 and d2 <= 0:
        v, w = 0.0, 0.0
    elif d3 >= 0 and d4 <= d3:
        v, w = 1.0, 0.0
    elif vc <= 0 and d1 >= 0 and d3 <= 0:
        v, w = d1 / (d1 - d3), 0.0
    elif d6 >= 0 and d5 <= d6:
        v, w = 0.0, 1.0
    elif vb <= 0 and d2 >= 0 and d6 <= 0:
        v, w = 0.0, d2 / (d2 - d6)
    elif va <= 0 and (d4 - d3) >= 0 and (d5 - d6) >= 0:
        t = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        v, w = 1.0 - t, t
    else:
        denom = 1.0 / (va + vb + vc)
        v, w = vb * denom, vc * denom
    q0 = a0 + v * ab0 + w * ac0 - p[0]
    q1 = a1 + v * ab1 + w * ac1 - p[1]
    q2 = a2 + v * ab2 + w * ac2 - p[2]
    return np.sqrt(q0 * q0 + q1 * q1 + q2 * q2)


@jit
def nearest_triangles(points, tri, candidates, start):
    """Nearest of each point's candidate triangles: points (k, 3), triangles (T, 3, 3),
    candidates of point m at candidates[start[m]:start[m + 1]]. Returns (distance (k,),
    triangle index (k,)); ties keep the first candidate."""
    k = points.shape[0]
    dist = np.empty(k)
    best = np.empty(k, np.intp)
    for m in range(k):
        d_min, i_min = np.inf, -1
        for c in range(start[m], start[m + 1]):
            t = candidates[c]
            d = _triangle_distance(points[m], tri[t])
            if d < d_min:
                d_min, i_min = d, t
        dist[m], best[m] = d_min, i_min
    return dist, best


@jit
def nearest_in_radius(points, tri, centroid, radius, fallback, fallback_dist, origin, cell, dims, cell_start, items):
    """Nearest triangle (T, 3, 3) to each point (k, 3) among those whose centroid lies
    within radius (k,) m of it, found through a uniform grid of cells of size `cell` m
    (dims (3,) cells from origin (3,); the triangles of cell c are
    items[cell_start[c]:cell_start[c + 1]], cells in C order). A point without any such
    triangle gets its fallback triangle and distance. Returns (distance (k,), index (k,))."""
    k = points.shape[0]
    dist = np.empty(k)
    best = np.empty(k, np.intp)
    lo = np.empty(3, np.intp)
    hi = np.empty(3, np.intp)
    for m in range(k):
        r = radius[m]
        for a in range(3):
            lo[a] = max(0, np.intp(np.floor((points[m, a] - r - origin[a]) / cell)))
            hi[a] = min(dims[a] - 1, np.intp(np.floor((points[m, a] + r - origin[a]) / cell)))
        d_min, i_min = np.inf, -1
        for x in range(lo[0], hi[0] + 1):
            for y in range(lo[1], hi[1] + 1):
                for z in range(lo[2], hi[2] + 1):
                    c = (x * dims[1] + y) * dims[2] + z
                    for j in range(cell_start[c], cell_start[c + 1]):
                        t = items[j]
                        e0 = centroid[t, 0] - points[m, 0]
                        e1 = centroid[t, 1] - points[m, 1]
                        e2 = centroid[t, 2] - points[m, 2]
                        if e0 * e0 + e1 * e1 + e2 * e2 > r * r:
                            continue
                        d = _triangle_distance(points[m], tri[t])
                        if d < d_min or (d == d_min and t < i_min):
                            d_min, i_min = d, t
        if i_min < 0:
            d_min, i_min = fallback_dist[m], fallback[m]
        dist[m], best[m] = d_min, i_min
    return dist, best


@jit
def winding_numbers(corners, points):
    """Generalized winding numbers (k,) of points (k, 3) w.r.t. triangles given by their
    corners (T, 3, 3): Σ Ω/4π with tan(Ω/2) = a·(b×c) / (|a||b||c| + (a·b)|c| + (b·c)|a|
    + (c·a)|b|) (Van Oosterom & Strackee 1983)."""
    out = np.empty(points.shape[0])
    for m in range(points.shape[0]):
        px, py, pz = points[m, 0], points[m, 1], points[m, 2]
        total = 0.0
        for t in range(corners.shape[0]):
            ax, ay, az = corners[t, 0, 0] - px, corners[t, 0, 1] - py, corners[t, 0, 2] - pz
            bx, by, bz = corners[t, 1, 0] - px, corners[t, 1, 1] - py, corners[t, 1, 2] - pz
            cx, cy, cz = corners[t, 2, 0] - px, corners[t, 2, 1] - py, corners[t, 2, 2] - pz
            la = np.sqrt(ax * ax + ay * ay + az * az)
            lb = np.sqrt(bx * bx + by * by + bz * bz)
            lc = np.sqrt(cx * cx + cy * cy + cz * cz)
            det = ax * (by * cz - bz * cy) + ay * (bz * cx - bx * cz) + az * (bx * cy - by * cx)
            den = (la * lb * lc + (ax * bx + ay * by + az * bz) * lc + (bx * cx + by * cy + bz * cz) * la
                   + (cx * ax + cy * ay + cz * az) * lb)
            total += math.atan2(det, den)
        out[m] = total / (2.0 * np.pi)
    return out


# ----------------------------------------------------------------------------- quaternions

@jit
def quat_mul(a, b, conj_a, out):
    """Hamilton products a ⊗ b (or conj(a) ⊗ b) of quaternions w-first into out (k, 4);
    row k uses rows k mod len(a) and k mod len(b) (broadcasting by tiling)."""
    sign = -1.0 if conj_a else 1.0
    na, nb = a.shape[0], b.shape[0]
    for k in range(out.shape[0]):
        i, j = k % na, k % nb
        aw, ax, ay, az = a[i, 0], sign * a[i, 1], sign * a[i, 2], sign * a[i, 3]
        bw, bx, by, bz = b[j, 0], b[j, 1], b[j, 2], b[j, 3]
        out[k, 0] = aw * bw - ax * bx - ay * by - az * bz
        out[k, 1] = aw * bx + ax * bw + ay * bz - az * by
        out[k, 2] = aw * by - ax * bz + ay * bw + az * bx
        out[k, 3] = aw * bz + ax * by - ay * bx + az * bw


@jit
def quat_exp(r, out):
    """Unit quaternions (k, 4) of rotation vectors r (k, 3) rad: (cos θ/2, sin(θ/2) r/θ).
    sin x = x to rounding for tiny x, so only θ = 0 needs the floored divisor (r = 0)."""
    for k in range(r.shape[0]):
        theta = np.sqrt(r[k, 0] * r[k, 0] + r[k, 1] * r[k, 1] + r[k, 2] * r[k, 2])
        half = 0.5 * theta
        f = np.sin(half) / max(theta, 1e-300)
        out[k, 0] = np.cos(half)
        out[k, 1] = f * r[k, 0]
        out[k, 2] = f * r[k, 1]
        out[k, 3] = f * r[k, 2]


@jit
def quat_log(q, out):
    """Rotation vectors (k, 3) rad of unit quaternions q (k, 4), the short arc (angle ≤ π):
    2 atan2(s, |w|)/s · v with the sign of w; atan2(s, |w|) = s/|w| to rounding for tiny s."""
    for k in range(q.shape[0]):
        w = q[k, 0]
        s = np.sqrt(q[k, 1] * q[k, 1] + q[k, 2] * q[k, 2] + q[k, 3] * q[k, 3])
        f = 2.0 * math.copysign(math.atan2(s, abs(w)) / max(s, 1e-300), w)
        out[k, 0] = f * q[k, 1]
        out[k, 1] = f * q[k, 2]
        out[k, 2] = f * q[k, 3]


# ----------------------------------------------------------------------------- the implicit step

@jit
def evaluate_state(parents, rest_matrices, rest_offsets, dof_bone, dof_axis, dof_start, dof_count, mass, com_y,
                   inertia_perp, inertia_axial, capsule_length, pair_i, pair_j, pair_reach, pair_min_radius,
                   pair_radius_sum, pair_radius_diff, field_values, field_start, field_shape, field_origin,
                   field_spacing, field_margin, field_bone, field_outside, sample_start, sample_bone, sample_local,
                   sample_radius, sample_allowance, q, qd, base_r, base_p, base_velocity, base_acceleration, gravity,
                   limit_rows, limit_depth):
    """Everything about one state that a step needs, in one call (integrator.evaluate).

    Rigid-body terms (rigid_terms) for q (n, 4), qd (n_dof,) and the base pose and motion
    (base_r (3, 3), base_p (3,), spatial base velocity and acceleration (6,)); capsule
    segments (n, 2, 3) and candidate pairs (capsule_pairs); the sample spheres of every
    distance field f (samples sample_start[f]:sample_start[f + 1]: bone, local centre
    (3,) m, radius m) in the frame of field_bone[f] (−1: the base), looked up in its grid
    (node values field_values[field_start[f]:field_start[f + 1]] of shape field_shape[f],
    origin, spacing, margin; outside gradients when field_outside[f]), a contact where
    the clearance φ − r + a is below r (a = sample_allowance (S,) m, the depth this state
    may have without a force); the contact rows n·(J₁ − J₂) with depths (capsule
    pairs, then field samples, then the given joint-limit rows (k_l, n_dof) and depths),
    K q̇ and G q̇. Field normals are unit where any sample of the field is near it (the
    raw gradient otherwise).

    Returns (R (n, 3, 3), P (n, 3), motion (n_dof, 6), origins (n_dof, 3), com (n, 3),
    spatial (n, 6, 6), M, bias (n_dof,), V (n, 6), momentum (n, 6), K, segments, gap
    (n_pairs,), and of the capsule candidates pair, bone1, bone2 (k_c,), point, normal
    (k_c, 3), depth (k_c,); field
    points (S, 3), normals (S, 3), clearances (S,), rows (k, n_dof), depth (k,),
    deepest contact penetration m (≥ 0), K q̇ (n_dof,), G q̇ (k,)).
    """
    n, n_dof = parents.shape[0], dof_bone.shape[0]
    R, P, motion = np.empty((1, n, 3, 3)), np.empty((1, n, 3)), np.empty((1, n_dof, 6))
    origins, com, spatial = np.empty((n_dof, 3)), np.empty((1, n, 3)), np.empty((1, n, 6, 6))
    M, bias, V = np.empty((n_dof, n_dof)), np.empty((1, n_dof)), np.empty((1, n, 6))
    momentum, K = np.empty((1, n, 6)), np.empty((n_dof, n_dof))
    rigid_terms(parents, rest_matrices, rest_offsets, dof_bone, dof_axis, dof_start, dof_count, mass, com_y,
                inertia_perp, inertia_axial, q.reshape(1, n, 4), base_r.reshape(1, 3, 3), base_p.reshape(1, 3),
                qd.reshape(1, n_dof), base_velocity.reshape(1, 6), base_acceleration.reshape(1, 6), gravity,
                R, P, motion, origins, com, spatial, M, bias, V, momentum, K)
    Rw, Pw = R[0], P[0]
    seg = np.empty((n, 2, 3))
    for i in range(n):
        for r in range(3):
            seg[i, 0, r] = Pw[i, r]
            seg[i, 1, r] = Pw[i, r] + Rw[i, r, 1] * capsule_length[i]
    gap, pair, cap_depth, cap_point, cap_normal = capsule_pairs(seg, pair_i, pair_j, pair_reach, pair_min_radius,
                                                                pair_radius_sum, pair_radius_diff)
    n_cap = pair.shape[0]
    n_samples = sample_bone.shape[0]
    points = np.empty((n_samples, 3))
    normals = np.empty((n_samples, 3))
    clear = np.empty(n_samples)
    phi = np.empty(n_samples)
    n_rows = n_cap + n_samples + limit_depth.shape[0]
    b1 = np.empty(n_rows, np.intp)
    b2 = np.empty(n_rows, np.intp)
    cp = np.empty((n_rows, 3))
    cn = np.empty((n_rows, 3))
    depth = np.empty(n_rows)
    penetration = 0.0
    for c in range(n_cap):
        b1[c], b2[c] = pair_i[pair[c]], pair_j[pair[c]]
        for r in range(3):
            cp[c, r] = cap_point[c, r]
            cn[c, r] = cap_normal[c, r]
        depth[c] = cap_depth[c]
        penetration = max(penetration, cap_depth[c])
    k = n_cap
    Rh = np.empty((3, 3))
    ph = np.empty(3)
    world = np.empty(3)
    for f in range(field_bone.shape[0]):
        h = field_bone[f]
        for r in range(3):
            ph[r] = base_p[r] if h < 0 else Pw[h, r]
            for c in range(3):
                Rh[r, c] = base_r[r, c] if h < 0 else Rw[h, r, c]
        values = field_values[field_start[f]:field_start[f + 1]]
        nx, ny, nz = field_shape[f, 0], field_shape[f, 1], field_shape[f, 2]
        any_near = False
        for m in range(sample_start[f], sample_start[f + 1]):
            b = sample_bone[m]
            for r in range(3):
                world[r] = Pw[b, r] + (Rw[b, r, 0] * sample_local[m, 0] + Rw[b, r, 1] * sample_local[m, 1]
                                       + Rw[b, r, 2] * sample_local[m, 2]) - ph[r]
            for c in range(3):
                points[m, c] = Rh[0, c] * world[0] + Rh[1, c] * world[1] + Rh[2, c] * world[2]
            phi[m] = grid_point(values, nx, ny, nz, field_origin[f], field_spacing[f], field_margin[f], points[m],
                                 field_outside[f], normals[m])
            clear[m] = phi[m] - sample_radius[m] + sample_allowance[m]
            any_near = any_near or clear[m] < sample_radius[m]
        if not any_near:
            continue
        for m in range(sample_start[f], sample_start[f + 1]):
            g = np.sqrt(normals[m, 0] ** 2 + normals[m, 1] ** 2 + normals[m, 2] ** 2)
            for r in range(3):
                normals[m, r] = normals[m, r] / max(g, 1e-12)
            if not clear[m] < sample_radius[m]:
                continue
            b1[k], b2[k] = sample_bone[m], h if h >= 0 else n
            half = 0.5 * (sample_radius[m] + phi[m])
            for r in range(3):
                nr = Rh[r, 0] * normals[m, 0] + Rh[r, 1] * normals[m, 1] + Rh[r, 2] * normals[m, 2]
                cn[k, r] = nr
                cp[k, r] = Rh[r, 0] * points[m, 0] + Rh[r, 1] * points[m, 1] + Rh[r, 2] * points[m, 2] + ph[r] \
                    - half * nr
            depth[k] = -clear[m]
            penetration = max(penetration, depth[k])
            k += 1
    rows = np.empty((k + limit_depth.shape[0], n_dof))
    normal_rows(parents, dof_start, dof_count, motion[0], b1[:k], cp[:k], cn[:k], b2[:k], rows[:k])
    for j in range(limit_depth.shape[0]):
        for d in range(n_dof):
            rows[k + j, d] = limit_rows[j, d]
        depth[k + j] = limit_depth[j]
    n_rows = k + limit_depth.shape[0]
    return (Rw, Pw, motion[0], origins, com[0], spatial[0], M, bias[0], V[0], momentum[0], K, seg, gap, pair,
            b1[:n_cap].copy(), b2[:n_cap].copy(), cap_point, cap_normal, cap_depth, points, normals, clear, rows,
            depth[:n_rows].copy(), penetration, _matvec(K, qd), _matvec(rows, qd))


@jit
def _matvec(A, x):
    """A x for A (m, n), x (n,), summed in column order."""
    out = np.empty(A.shape[0])
    for j in range(A.shape[0]):
        acc = 0.0
        for d in range(A.shape[1]):
            acc += A[j, d] * x[d]
        out[j] = acc
    return out


@jit
def _ltl_factor(H, parent):
    """H = Lᵀ L in place (L lower triangular, in H's lower triangle) for a symmetric
    H (n, n) that is nonzero only between a DOF and its ancestors in the DOF tree
    `parent` (n,) (parents first): Featherstone's LTL factorisation, which keeps that
    sparsity (no fill-in), in O(n d²) for tree depth d (Featherstone, *Rigid Body
    Dynamics Algorithms*, 2008, §6.5). Returns False when H is not positive definite."""
    for k in range(H.shape[0] - 1, -1, -1):
        if not H[k, k] > 0.0:
            return False
        H[k, k] = np.sqrt(H[k, k])
        i = parent[k]
        while i >= 0:
            H[k, i] /= H[k, k]
            i = parent[i]
        i = parent[k]
        while i >= 0:
            j = i
            while j >= 0:
                H[i, j] -= H[k, i] * H[k, j]
                j = parent[j]
            i = parent[i]
    return True


@jit
def _ltl_solve(L, parent, b, out):
    """out = (Lᵀ L)⁻¹ b with L from _ltl_factor: Lᵀ y = b outward-in, then L x = y."""
    n = b.shape[0]
    out[:] = b
    for k in range(n - 1, -1, -1):
        out[k] /= L[k, k]
        i = parent[k]
        while i >= 0:
            out[i] -= L[k, i] * out[k]
            i = parent[i]
    for k in range(n):
        i = parent[k]
        while i >= 0:
            out[k] -= L[k, i] * out[i]
            i = parent[i]
        out[k] /= L[k, k]


@jit
def _dense_cholesky(S):
    """S = L Lᵀ in place (lower triangle) for a small dense symmetric S; False when S is
    not positive definite."""
    for i in range(S.shape[0]):
        for j in range(i + 1):
            s = S[i, j]
            for k in range(j):
                s -= S[i, k] * S[j, k]
            if i == j:
                if not s > 0.0:
                    return False
                S[i, i] = np.sqrt(s)
            else:
                S[i, j] = s / S[j, j]
    return True


@jit
def implicit_step(dof_flat, dof_bone, dof_parent, dof_upper, dof_lower, limit_lower, limit_upper, rotations,
                  velocity, limit_x, M, bias, K, gravity_velocity, rows, depth, normal_velocity, tau_ff,
                  end_rotations, mid_qd, h, omega_sq, kd_factor, limit_omega, limit_zeta, damping_scale,
                  contact_stiffness, contact_damping, max_iterations):
    """One linearised backward-Euler step (integrator.implicit_step) from a state
    (rotations (n, 4), velocity and limit coordinates (n_dof,)) with its evaluation (M,
    bias, gravity stiffness K, K q̇, contact rows (k, n_dof), depths and G q̇ (k,)),
    feedforward tau_ff (n_dof,) N·m (zeros for none), the reference rotations at the
    step's end (n, 4) and velocity at its middle (n_dof,), for h s.

    PD (Kp = I ω², Kd = 2 ζ I ω · damping_scale with I = diag(M)) and limit penalties
    active where x + h q̇ leaves the limits give A = M + h D + h² K, which has the DOF
    tree's sparsity (dof_parent) and is factorised once (_ltl_factor); the active
    contacts add GᵀWG (w_j = h c_j + h² k_c), solved by the Sherman–Morrison–Woodbury
    identity (A + GᵀWG)⁻¹ = A⁻¹ − A⁻¹Gᵀ (W⁻¹ + G A⁻¹ Gᵀ)⁻¹ G A⁻¹ with a small dense
    Cholesky; the active set is iterated at most max_iterations times (join when the
    end depth would be positive, leave when the force would pull). A row's damper c_j
    is c_d where the contact already penetrates at the step start and 0 where it is
    still clear (the step it touches in is a spring's; damping proportional to contact,
    as in Hunt & Crossley, "Coefficient of restitution interpreted as damping in
    vibroimpact", 1975). Then q ⊗ exp(h v⁺)
    per bone and the joint limits projected (limits.project_limits). Returns
    (rotations, velocity, limit coordinates, status): status 0, 1 when a matrix is not
    positive definite, 2 when the result is not finite.
    """
    n, n_dof = rotations.shape[0], dof_bone.shape[0]
    hh = h * h
    rel = np.empty((n, 4))
    quat_mul(rotations, end_rotations, True, rel)
    log = np.empty((n, 3))
    quat_log(rel, log)
    err = log.reshape(-1)
    A = np.empty((n_dof, n_dof))
    b = np.empty(n_dof)
    lo2 = limit_omega * limit_omega
    for d in range(n_dof):
        inertia = M[d, d]
        kp = inertia * omega_sq[d]
        kd = inertia * (damping_scale * kd_factor[d])
        v = velocity[d]
        f = kp * err[dof_flat[d]] + kd * (mid_qd[d] - v) - bias[d]
        f += tau_ff[d]
        x, x_end = limit_x[d], limit_x[d] + h * v
        upper = x_end > dof_upper[d]
        if upper or x_end < dof_lower[d]:
            kl = inertia * lo2
            dl = 2.0 * limit_zeta * inertia * limit_omega
            f -= kl * (x - (dof_upper[d] if upper else dof_lower[d])) + dl * v
            kp, kd = kp + kl, kd + dl
        for e in range(n_dof):
            A[d, e] = hh * K[d, e] + M[d, e]
        A[d, d] += h * kd + hh * kp
        b[d] = h * (f - h * (gravity_velocity[d] + kp * v))
    if not _ltl_factor(A, dof_parent):
        return rotations, velocity, limit_x, 1
    free = np.empty(n_dof)  # A⁻¹ b: the step without contacts
    _ltl_solve(A, dof_parent, b, free)
    n_rows = depth.shape[0]
    # A row's damper acts once its contact penetrates at the step start: one that would
    # brake an approach from outside the surface stops a fingertip curling past the palm
    # before it gets there (and its force would disagree in sign with its depth).
    damping = np.empty(n_rows)
    usable = np.empty(n_rows, np.bool_)  # a row with neither spring nor damper exerts nothing
    for j in range(n_rows):
        damping[j] = contact_damping if depth[j] > 0.0 else 0.0
        usable[j] = h * damping[j] + hh * contact_stiffness > 0.0
    on = np.empty(n_rows, np.bool_)
    now = np.empty(n_rows, np.bool_)
    for j in range(n_rows):
        on[j] = usable[j] and depth[j] - h * normal_velocity[j] > 0.0
    Z = np.empty((n_rows, n_dof))  # A⁻¹ g_j, solved when row j first becomes active
    solved = np.zeros(n_rows, np.bool_)
    v_new = np.empty(n_dof)
    y = np.empty(n_dof)
    for _ in range(max_iterations):
        active = np.flatnonzero(on)
        k = active.shape[0]
        y[:] = free
        for a in range(k):
            j = active[a]
            if not solved[j]:
                _ltl_solve(A, dof_parent, rows[j], Z[j])
                solved[j] = True
            s = h * (contact_stiffness * depth[j] - (damping[j] + h * contact_stiffness) * normal_velocity[j])
            for d in range(n_dof):
                y[d] += s * Z[j, d]
        if k:
            S = np.empty((k, k))
            t = np.empty(k)
            for a in range(k):
                ga = rows[active[a]]
                t[a] = 0.0
                for d in range(n_dof):
                    t[a] += ga[d] * y[d]
                for c in range(a + 1):
                    zc = Z[active[c]]
                    acc = 0.0
                    for d in range(n_dof):
                        acc += ga[d] * zc[d]
                    S[a, c] = acc
                S[a, a] += 1.0 / (h * damping[active[a]] + hh * contact_stiffness)
            if not _dense_cholesky(S):
                return rotations, velocity, limit_x, 1
            u = np.empty(k)
            _cholesky_solve(S, t, u)
            for a in range(k):
                za = Z[active[a]]
                for d in range(n_dof):
                    y[d] -= za[d] * u[a]
        for d in range(n_dof):
            v_new[d] = velocity[d] + y[d]
        if n_rows == 0:
            break
        changed = False
        u_new = _matvec(rows, v_new)
        for j in range(n_rows):
            u = u_new[j]
            end_depth = depth[j] - h * u
            if k and on[j]:
                now[j] = contact_stiffness * end_depth - damping[j] * u > 0.0
            else:
                now[j] = usable[j] and end_depth > 0.0
            changed = changed or now[j] != on[j]
        if not changed:
            break
        on[:] = now
    # q ⊗ exp(h v⁺) per bone, then the joint limits projected.
    increment = np.zeros(3 * n)
    for d in range(n_dof):
        increment[dof_flat[d]] = h * v_new[d]
    turn = np.empty((n, 4))
    quat_exp(increment.reshape(n, 3), turn)
    moved = np.empty((n, 4))
    quat_mul(rotations, turn, False, moved)
    quat_log(moved, log)
    moved_log = log.reshape(-1)  # the moved pose's coordinates (log, and err's view of it, overwritten)
    x_new = np.empty(n_dof)
    out = np.zeros(n, np.bool_)
    for d in range(n_dof):
        x_new[d] = moved_log[dof_flat[d]]
        hi, lo = x_new[d] > dof_upper[d], x_new[d] < dof_lower[d]
        if hi or lo:
            out[dof_bone[d]] = True
            if (hi and v_new[d] > 0) or (lo and v_new[d] < 0):
                v_new[d] = 0.0
            x_new[d] = min(max(x_new[d], dof_lower[d]), dof_upper[d])
    for i in range(n):
        if out[i]:
            for r in range(3):
                log[i, r] = min(max(log[i, r], limit_lower[i, r]), limit_upper[i, r])
            quat_exp(log[i:i + 1], moved[i:i + 1])
    total = 0.0
    for i in range(n):
        total += moved[i, 0] + moved[i, 1] + moved[i, 2] + moved[i, 3]
    for d in range(n_dof):
        total += v_new[d] * v_new[d]
    if not np.isfinite(total):
        return moved, v_new, x_new, 2
    return moved, v_new, x_new, 0


@jit
def _cholesky_solve(L, b, out):
    """out = (L Lᵀ)⁻¹ b for a lower-triangular L (n, n): two triangular substitutions."""
    n = b.shape[0]
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * out[j]
        out[i] = s / L[i, i]
    for i in range(n - 1, -1, -1):
        s = out[i]
        for j in range(i + 1, n):
            s -= L[j, i] * out[j]
        out[i] = s / L[i, i]


# ----------------------------------------------------------------------------- first compile

def _misses():
    return sum(sum(k.stats.cache_misses.values()) for k in (
        forward_kinematics, body_inertias, spatial_inertias, composite_inertias, mass_matrix, rnea,
        gravity_stiffness, rigid_terms, capsule_pairs, capsule_tunnelling, normal_rows, grid_sample, quat_mul,
        quat_exp, quat_log, nearest_triangles, nearest_in_radius, winding_numbers, evaluate_state, implicit_step,
        field_tunnelling))

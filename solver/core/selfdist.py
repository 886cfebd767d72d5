"""Signed distances between the body parts of a posed skeleton, with their gradients
with respect to the joint rotations.

Pose coordinates are the components of each bone's local rotation vector θ_b = log(q_b)
(rad) that are joint DOFs (model.dof_flat; the limit coordinates of physics/joint_limits.py, so joint
limits are plain bounds); a hinge's off-axis components stay at their given values. A
change of θ_b turns the bone by the body angular velocity J_r(θ_b) θ̇_b, J_r the right
Jacobian of SO(3) (Chirikjian, *Stochastic Models, Information Theory, and Lie Groups*,
vol. 2, 2011, §10.2), so the world axis of DOF d is a_d = R_b J_r(θ_b) e_axis and a
point p on or below bone b moves with a_d × (p − P_b) (kinematics.normal_jacobian's
structure with these axes).

Body parts (n = n_bones, g in metres, negative = penetration depth):
- capsule pairs model.pairs (no parent/child pair, none overlapping in the rest pose):
  g = ‖c₁ − c₂‖ − r₁ − r₂ between the closest points of the axes
  (contacts.segment_closest_points); dg = n·(v₁ − v₂) with n = (c₁ − c₂)/‖c₁ − c₂‖;
- body volumes (face, torso, palms: body.BodyField, a distance grid attached to a bone
  or to the kinematic base, and sample spheres on the bones that may touch it):
  g = φ(p) − r with φ the trilinear signed distance and its analytic gradient.
Both gradients are exact derivatives of these g (the closest-point and interpolant
derivatives vanish by the envelope theorem / are analytic), never zero away from a
crossing of two capsule axes: the constraint qualification SLSQP needs. The distances
and their rows are one compiled kernel (numba, cached on disk like core/kernels.py's).
"""

from dataclasses import dataclass

import numpy as np

from . import kernels, quat
from .kinematics import forward_kinematics

jit = kernels.jit  # the package's compile settings and its disk cache


@jit
def _right_jacobian(r, out):
    """J_r(r) (3, 3) into out for one rotation vector r (3,) rad (right_jacobian)."""
    phi2 = r[0] * r[0] + r[1] * r[1] + r[2] * r[2]
    if phi2 < 1e-8:
        a = 0.5 - phi2 / 24.0
        b = 1.0 / 6.0 - phi2 / 120.0
    else:
        phi = np.sqrt(phi2)
        a = (1.0 - np.cos(phi)) / phi2
        b = (phi - np.sin(phi)) / (phi2 * phi)
    x, y, z = r[0], r[1], r[2]
    # [r]x and [r]x² = r rᵀ − φ² I
    out[0, 0] = 1.0 + b * (x * x - phi2)
    out[1, 1] = 1.0 + b * (y * y - phi2)
    out[2, 2] = 1.0 + b * (z * z - phi2)
    out[0, 1] = a * z + b * x * y
    out[1, 0] = -a * z + b * x * y
    out[0, 2] = -a * y + b * x * z
    out[2, 0] = a * y + b * x * z
    out[1, 2] = a * x + b * y * z
    out[2, 1] = -a * x + b * y * z


@jit
def _right_jacobians(r, out):
    for k in range(r.shape[0]):
        _right_jacobian(r[k], out[k])


def right_jacobian(r):
    """Right Jacobian J_r(r) (..., 3, 3) of SO(3) at rotation vectors r (..., 3) rad:
    I − (1 − cos φ)/φ² [r]× + (φ − sin φ)/φ³ [r]×², series near φ = 0."""
    r = np.asarray(r, dtype=float)
    out = np.empty(r.shape + (3,))
    _right_jacobians(kernels.argument(r, r.shape).reshape(-1, 3), out.reshape(-1, 3, 3))
    return out


@jit
def distance_term(full, q0, weights, dof_bone, dof_axis, grad):
    """Σ_b w_b ‖log(q⁰_b⁻¹ q_b)‖² (returned, rad²) with q_b = exp(full_b), and its
    gradient with respect to the DOF components of full into grad (n_dof,):
    2 w_b J_r(full_b)ᵀ e_b, e_b = log(q⁰_b⁻¹ q_b) (the log's own Jacobian drops out because
    J_r(e)⁻ᵀ e = e). full (n, 3) rad, q0 (n, 4), weights (n,)."""
    n = full.shape[0]
    q = np.empty((n, 4))
    kernels.quat_exp(full, q)
    rel = np.empty((n, 4))
    kernels.quat_mul(q0, q, True, rel)
    J = np.empty((3, 3))
    e = np.empty((n, 3))
    kernels.quat_log(rel, e)
    gf = np.empty((n, 3))
    f = 0.0
    for b in range(n):
        f += weights[b] * (e[b, 0] ** 2 + e[b, 1] ** 2 + e[b, 2] ** 2)
        _right_jacobian(full[b], J)
        for k in range(3):
            gf[b, k] = 2.0 * weights[b] * (J[0, k] * e[b, 0] + J[1, k] * e[b, 1] + J[2, k] * e[b, 2])
    for d in range(dof_bone.shape[0]):
        grad[d] = gf[dof_bone[d], dof_axis[d]]
    return f


@jit
def _separations(parents, rest_matrices, rest_offsets, dof_bone, dof_axis, dof_start, dof_count, capsule_length,
                 full, base_r, base_p, pair_i, pair_j, radius_sum, s_bone, s_local, s_radius, s_frame, s_grid,
                 grid_values, grid_dims, grid_start, grid_origin, grid_spacing, grid_margin, column, gradient,
                 g, rows):
    """Signed distances g (p + s,) m of capsule pairs (pair_i, pair_j (p,), radius_sum)
    and sphere samples (on bone s_bone at s_local (s, 3) m, radius s_radius, in grid
    s_grid attached to bone s_frame, n_bones for the base) at the pose full (n, 3) rad;
    with gradient, their rows (p + s, n_cols) m/rad into rows (zeroed here). Grids are
    packed: grid k's node values are grid_values[grid_start[k]:] in C order of
    grid_dims[k]."""
    n = parents.shape[0]
    n_dof = dof_bone.shape[0]
    q = np.empty((1, n, 4))
    kernels.quat_exp(full, q[0])
    frames = np.empty((1, n, 3, 3))
    heads = np.empty((1, n, 3))
    body_motion = np.empty((1, n_dof, 6))  # along the bone axes: not the θ coordinates' (below)
    kernels.forward_kinematics(parents, rest_matrices, rest_offsets, dof_bone, dof_axis, q,
                               base_r.reshape((1, 3, 3)), base_p.reshape((1, 3)), frames, heads, body_motion)
    R, P = frames[0], heads[0]
    J = np.empty((3, 3))
    motion = np.empty((n_dof, 6))
    n_parts = g.shape[0]
    # each part's row: n·(v(bone) − v(other)) at world point p along the normal n
    p_bone, p_other = np.empty(n_parts, np.intp), np.empty(n_parts, np.intp)
    p_point, p_normal = np.empty((n_parts, 3)), np.empty((n_parts, 3))
    if gradient:
        for b in range(n):
            if dof_count[b] == 0:
                continue
            _right_jacobian(full[b], J)
            for d in range(dof_start[b], dof_start[b] + dof_count[b]):
                k = dof_axis[d]
                for r in range(3):
                    motion[d, r] = R[b, r, 0] * J[0, k] + R[b, r, 1] * J[1, k] + R[b, r, 2] * J[2, k]
                a0, a1, a2 = motion[d, 0], motion[d, 1], motion[d, 2]
                motion[d, 3] = P[b, 1] * a2 - P[b, 2] * a1
                motion[d, 4] = P[b, 2] * a0 - P[b, 0] * a2
                motion[d, 5] = P[b, 0] * a1 - P[b, 1] * a0
    d1 = np.empty(3)
    d2 = np.empty(3)
    w = np.empty(3)
    c1 = np.empty(3)
    c2 = np.empty(3)
    nrm = np.empty(3)
    n_pairs = pair_i.shape[0]
    for k in range(n_pairs):
        i, j = pair_i[k], pair_j[k]
        a = e = b = c = f = 0.0
        for r in range(3):
            d1[r] = R[i, r, 1] * capsule_length[i]
            d2[r] = R[j, r, 1] * capsule_length[j]
            w[r] = P[i, r] - P[j, r]
            a += d1[r] * d1[r]
            e += d2[r] * d2[r]
            b += d1[r] * d2[r]
            c += d1[r] * w[r]
            f += d2[r] * w[r]
        # closest points of the axes (Ericson §5.1.9, as contacts.segment_closest_points)
        a = max(a, 1e-12)
        e = max(e, 1e-12)
        denom = a * e - b * b
        s = min(max((b * f - c * e) / denom, 0.0), 1.0) if denom > 1e-12 * a * e else 0.0
        t = min(max((b * s + f) / e, 0.0), 1.0)
        s = min(max((b * t - c) / a, 0.0), 1.0)
        dist2 = 0.0
        for r in range(3):
            c1[r] = P[i, r] + s * d1[r]
            c2[r] = P[j, r] + t * d2[r]
            nrm[r] = c1[r] - c2[r]
            dist2 += nrm[r] * nrm[r]
        dist = np.sqrt(dist2)
        g[k] = dist - radius_sum[k]
        if not gradient:
            continue
        if dist > 1e-9:
            for r in range(3):
                nrm[r] /= dist
        else:  # crossing axes: their common perpendicular (or +Z)
            nrm[0] = d1[1] * d2[2] - d1[2] * d2[1]
            nrm[1] = d1[2] * d2[0] - d1[0] * d2[2]
            nrm[2] = d1[0] * d2[1] - d1[1] * d2[0]
            norm = np.sqrt(nrm[0] ** 2 + nrm[1] ** 2 + nrm[2] ** 2)
            if norm > 1e-12:
                for r in range(3):
                    nrm[r] /= norm
            else:
                nrm[0], nrm[1], nrm[2] = 0.0, 0.0, 1.0
        p_bone[k], p_other[k] = i, j
        for r in range(3):
            p_point[k, r] = 0.5 * (c1[r] + c2[r])
            p_normal[k, r] = nrm[r]
    world = np.empty(3)
    x = np.empty(3)
    grad = np.empty(3)
    for m in range(s_bone.shape[0]):
        b, h, k = s_bone[m], s_frame[m], s_grid[m]
        for r in range(3):
            world[r] = P[b, r] + R[b, r, 0] * s_local[m, 0] + R[b, r, 1] * s_local[m, 1] + R[b, r, 2] * s_local[m, 2]
        for r in range(3):
            acc = 0.0
            for c in range(3):
                acc += (R[h, c, r] * (world[c] - P[h, c]) if h < n else base_r[c, r] * (world[c] - base_p[c]))
            x[r] = acc
        nx, ny, nz = grid_dims[k, 0], grid_dims[k, 1], grid_dims[k, 2]
        start = grid_start[k]
        phi = kernels.grid_point(grid_values[start:start + nx * ny * nz], nx, ny, nz, grid_origin[k],
                                  grid_spacing[k], grid_margin[k], x, True, grad)
        g[n_pairs + m] = phi - s_radius[m]
        if not gradient:
            continue
        p_bone[n_pairs + m], p_other[n_pairs + m] = b, h
        for r in range(3):
            p_point[n_pairs + m, r] = world[r]
            acc = 0.0
            for c in range(3):
                acc += (R[h, r, c] if h < n else base_r[r, c]) * grad[c]
            p_normal[n_pairs + m, r] = acc
    if gradient:
        every = np.empty((n_parts, n_dof))
        kernels.normal_rows(parents, dof_start, dof_count, motion, p_bone, p_point, p_normal, p_other, every)
        for d in range(n_dof):
            if column[d] >= 0:
                for k in range(n_parts):
                    rows[k, column[d]] = every[k, d]


@dataclass(frozen=True, eq=False)
class PartSet:
    """The body parts to test against each other (one pose's constraint set).

    pairs (p,) int: indices into model.pairs; field (s,) int: index into `fields` of
    each sphere sample; sample (s,) int: the sample's index in that field.
    """

    pairs: np.ndarray
    field: np.ndarray
    sample: np.ndarray

    @property
    def size(self):
        return len(self.pairs) + len(self.field)


def all_parts(model, fields):
    """PartSet of every capsule pair and every field sample."""
    f = np.concatenate([np.full(len(fd.bones), k, np.intp) for k, fd in enumerate(fields)] or [np.zeros(0, np.intp)])
    s = np.concatenate([np.arange(len(fd.bones)) for fd in fields] or [np.zeros(0, np.intp)])
    return PartSet(np.arange(len(model.pairs)), f, s)


def full_coordinates(model, x, fixed):
    """Rotation vectors (n, 3) rad: `fixed` (n, 3) with the DOF components set to x (n_dof,)."""
    full = np.array(fixed, dtype=float)
    full.reshape(-1)[model.dof_flat] = x
    return full


class Pose:
    """One pose: full (n, 3) rad every bone's local rotation vector; base_rotation
    (3, 3), base_position (3,) m: the kinematic base of model (SkeletonModel).
    Attributes: kin (kinematics.Kinematics), segments (n, 2, 3) m the capsule axes."""

    def __init__(self, model, full, base_rotation, base_position):
        self.model = model
        self.full = kernels.argument(full, (model.n_bones, 3))
        self.base_rotation = kernels.argument(base_rotation, (3, 3))
        self.base_position = kernels.argument(base_position, (3,))
        self.kin = forward_kinematics(model, quat.exp(self.full), self.base_rotation, self.base_position)
        seg = np.empty((model.n_bones, 2, 3))
        seg[:, 0] = self.kin.positions
        seg[:, 1] = self.kin.positions + self.kin.rotations[:, :, 1] * model.capsule_length[:, None]
        self.segments = seg


_PACKED = []  # [(the grids, their packing)]: the last fields packed (a sequence reuses them)


def _packed_grids(fields):
    """(values (N,), dims (G, 3), start (G,), origin (G, 3), spacing (G,), margin (G,)) of
    the fields' distance grids in one buffer, the kernel's argument."""
    grids = [fd.grid for fd in fields]
    if _PACKED and len(_PACKED[0][0]) == len(grids) and all(a is b for a, b in zip(_PACKED[0][0], grids)):
        return _PACKED[0][1]
    sizes = [gr.values.size for gr in grids]
    packed = (np.concatenate([gr.values.reshape(-1) for gr in grids] or [np.zeros(0)]),
              np.array([gr.values.shape for gr in grids], np.intp).reshape(-1, 3),
              np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)[:len(grids)],
              np.array([gr.origin for gr in grids], float).reshape(-1, 3),
              np.array([gr.spacing for gr in grids], float), np.array([gr.margin for gr in grids], float))
    _PACKED[:] = [(grids, packed)]
    return packed


class Separations:
    """Compiled signed distances of one PartSet of model (SkeletonModel) and fields
    (body.BodyField: grid, bones, local, radius), and their gradient columns.

    columns (c,) int: the DOFs whose gradient columns are wanted, in order (None: all).
    Call with (full (n, 3) rad, base_rotation (3, 3), base_position (3,) m, gradient):
    returns (g (k,) m with capsule pairs first, rows (k, c) m/rad or None); the rows
    array is reused by the next call.
    """

    def __init__(self, model, fields, parts, columns=None):
        self.model = model
        self.pair_i = np.ascontiguousarray(model.pair_i[parts.pairs], np.intp)
        self.pair_j = np.ascontiguousarray(model.pair_j[parts.pairs], np.intp)
        self.radius_sum = np.ascontiguousarray(model.pair_radius_sum[parts.pairs], float)
        s = len(parts.field)
        self.s_bone, self.s_frame = np.empty(s, np.intp), np.empty(s, np.intp)
        self.s_local, self.s_radius = np.empty((s, 3)), np.empty(s)
        for k, fd in enumerate(fields):
            m = parts.field == k
            self.s_bone[m], self.s_local[m] = fd.bones[parts.sample[m]], fd.local[parts.sample[m]]
            self.s_radius[m] = fd.radius[parts.sample[m]]
            self.s_frame[m] = fd.grid.bone if fd.grid.bone >= 0 else model.n_bones
        self.s_grid = np.ascontiguousarray(parts.field, np.intp)
        self.grids = _packed_grids(fields)
        self.column = np.full(model.n_dof, -1, np.intp)
        cols = np.arange(model.n_dof) if columns is None else np.asarray(columns, np.intp)
        self.column[cols] = np.arange(len(cols))
        self.g = np.empty(len(self.pair_i) + s)
        self.rows = np.empty((len(self.g), len(cols)))

    def __call__(self, full, base_rotation, base_position, gradient=True):
        m = self.model
        _separations(m.parents, m.rest_matrices, m.rest_offsets, m.dof_bone, m.dof_axis, m.dof_start, m.dof_count,
                     m.capsule_length, full, base_rotation, base_position, self.pair_i, self.pair_j, self.radius_sum,
                     self.s_bone, self.s_local, self.s_radius, self.s_frame, self.s_grid, *self.grids, self.column,
                     gradient, self.g, self.rows)
        return self.g.copy(), (self.rows if gradient else None)


def capsule_gap_bounds(model, pose):
    """Lower bound (n_pairs,) m on every capsule pair's surface gap (exact for near pairs):
    kernels.capsule_pairs' broad and narrow phase."""
    gap, *_ = kernels.capsule_pairs(pose.segments, model.pair_i, model.pair_j, model.pair_reach,
                                    model.pair_min_radius, model.pair_radius_sum, model.pair_radius_diff)
    return gap


def field_world_samples(fields, pose, parts):
    """(world points (s, 3) m, field-frame points (s, 3) m, bone (s,)) of the sphere
    samples in parts."""
    kin, n = pose.kin, pose.model.n_bones
    s = len(parts.field)
    bones, local, hb = np.empty(s, np.intp), np.empty((s, 3)), np.empty(s, np.intp)
    for k, fd in enumerate(fields):
        m = parts.field == k
        if np.count_nonzero(m):
            bones[m], local[m] = fd.bones[parts.sample[m]], fd.local[parts.sample[m]]
            hb[m] = fd.grid.bone if fd.grid.bone >= 0 else n
    world = kin.positions[bones] + np.einsum("kij,kj->ki", kin.rotations[bones], local)
    Rh = np.where((hb < n)[:, None, None], kin.rotations[np.minimum(hb, n - 1)], pose.base_rotation)
    ph = np.where((hb < n)[:, None], kin.positions[np.minimum(hb, n - 1)], pose.base_position)
    in_field = np.einsum("kji,kj->ki", Rh, world - ph)
    return world, in_field, bones


def separations(model, fields, pose, parts, gradient=True):
    """Signed distances g (k,) m of the parts (capsule pairs first, then field samples) at
    `pose`, and with gradient=True their rows dg/dθ (k, n_dof) m/rad (else None)."""
    g, rows = Separations(model, fields, parts)(pose.full, pose.base_rotation, pose.base_position, gradient)
    return g, rows


def part_bones(model, fields, parts):
    """(bone (k,), other bone (k,)) of each part (capsule pairs first): the two capsules,
    or the sample's bone and the bone its volume is attached to (n_bones: the base)."""
    n = model.n_bones
    bones = np.concatenate([fd.bones for fd in fields] + [np.zeros(0, np.intp)]).astype(np.intp)
    offset = np.cumsum([0] + [len(fd.bones) for fd in fields])[:len(fields)].astype(np.intp)
    frame = np.array([fd.grid.bone if fd.grid.bone >= 0 else n for fd in fields] + [n], np.intp)
    return (np.concatenate([model.pair_i[parts.pairs], bones[offset[parts.field] + parts.sample]]).astype(np.intp),
            np.concatenate([model.pair_j[parts.pairs], frame[parts.field]]).astype(np.intp))


class Margins:
    """The clearance m every part must keep: `margin` m, plus extra[(a, b)] m for the
    parts between bones a and b (either order; −1 is the kinematic base, for volumes
    attached to it; the larger when both orders are given). A negative extra lowers the
    clearance: margin + extra < 0 lets the pair penetrate by that depth (an intended
    contact). of(parts) gives the (k,) clearances of a PartSet."""

    def __init__(self, model, fields, margin, extra=None):
        n = model.n_bones
        table = np.full((n + 1, n + 1), -np.inf)
        for (a, b), e in (extra or {}).items():
            a, b = (n if a < 0 else a), (n if b < 0 else b)
            table[a, b] = table[b, a] = max(table[a, b], float(e))
        table[np.isinf(table)] = 0.0
        every = all_parts(model, fields)
        one, other = part_bones(model, fields, every)
        clearance = margin + table[one, other]
        self.pairs = clearance[:len(every.pairs)]
        self.samples = clearance[len(every.pairs):]
        self.offset = np.concatenate([[0], np.cumsum([len(fd.bones) for fd in fields])]).astype(np.intp)

    def of(self, parts):
        return np.concatenate([self.pairs[parts.pairs], self.samples[self.offset[parts.field] + parts.sample]])


def near_parts(model, fields, pose, margins, reach, samples_per_bone=4):
    """PartSet of the capsule pairs and field samples less than `reach` m beyond their
    clearance (Margins); of one bone's samples against one field only the
    samples_per_bone nearest (neighbouring spheres on one axis are nearly parallel
    constraints; the active-set loop of the caller adds others when they come near)."""
    gap = capsule_gap_bounds(model, pose) - margins.pairs
    every = all_parts(model, fields)
    world, in_field, bones = field_world_samples(fields, pose, PartSet(np.zeros(0, np.intp), every.field,
                                                                      every.sample))
    clearance = np.full(len(every.field), np.inf)
    for k, fd in enumerate(fields):
        m = every.field == k
        if np.count_nonzero(m):
            phi, _ = fd.grid.sample(in_field[m], False)
            clearance[m] = phi - fd.radius[every.sample[m]]
    clearance -= margins.samples
    near = np.flatnonzero(clearance < reach)
    # rank within each (field, bone): lexsort by clearance inside the group
    order = near[np.lexsort((clearance[near], bones[near], every.field[near]))]
    group = every.field[order] * (model.n_bones + 1) + bones[order]
    first = np.r_[True, group[1:] != group[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    keep = np.sort(order[np.arange(len(order)) - start < samples_per_bone])
    return PartSet(np.flatnonzero(gap < reach), every.field[keep], every.sample[keep])

"""Signed distances between the body parts of a posed skeleton, with their gradients
with respect to the joint rotations.

Pose coordinates are the components of each bone's local rotation vector θ_b = log(q_b)
(rad) that are joint DOFs (model.dof_flat; the limit coordinates of limits.py, so joint
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
crossing of two capsule axes: the constraint qualification SLSQP needs.
"""

from dataclasses import dataclass

import numpy as np

from . import kernels, quat
from .contacts import segment_closest_points
from .kinematics import forward_kinematics, skew


def right_jacobian(r):
    """Right Jacobian J_r(r) (..., 3, 3) of SO(3) at rotation vectors r (..., 3) rad:
    I − (1 − cos φ)/φ² [r]× + (φ − sin φ)/φ³ [r]×², series near φ = 0."""
    r = np.asarray(r, dtype=float)
    phi2 = np.sum(r * r, axis=-1)
    phi = np.sqrt(phi2)
    small = phi < 1e-4
    safe = np.where(small, 1.0, phi)
    a = np.where(small, 0.5 - phi2 / 24.0, (1.0 - np.cos(safe)) / safe ** 2)
    b = np.where(small, 1.0 / 6.0 - phi2 / 120.0, (safe - np.sin(safe)) / safe ** 3)
    k = skew(r)
    return np.eye(3) - a[..., None, None] * k + b[..., None, None] * (k @ k)


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
    """Forward kinematics of one pose and the world DOF axes of the θ coordinates.

    model: SkeletonModel; full (n, 3) rad: every bone's local rotation vector;
    base_rotation (3, 3), base_position (3,) m: the kinematic base.
    Attributes: kin (kinematics.Kinematics), motion (n_dof, 6) spatial motion subspaces
    (a_d, P_b × a_d) of the θ coordinates.
    """

    def __init__(self, model, full, base_rotation, base_position):
        self.model = model
        self.base_rotation = np.asarray(base_rotation, dtype=float)
        self.base_position = np.asarray(base_position, dtype=float)
        self.kin = forward_kinematics(model, quat.exp(full), self.base_rotation, self.base_position)
        axes = self.kin.rotations @ right_jacobian(full)  # (n, 3, 3): column k = world axis of θ_k
        a = axes[model.dof_bone, :, model.dof_axis]
        o = self.kin.positions[model.dof_bone]
        self.motion = np.ascontiguousarray(np.concatenate([a, np.cross(o, a)], axis=1))
        seg = np.empty((model.n_bones, 2, 3))
        seg[:, 0] = self.kin.positions
        seg[:, 1] = self.kin.positions + self.kin.rotations[:, :, 1] * model.capsule_length[:, None]
        self.segments = seg

    def rows(self, bones, points, normals, other):
        """Gradient rows n·(v(bone) − v(other)) (k, n_dof) at world points (k, 3) per unit
        θ; other = n_bones for the kinematic base."""
        m = self.model
        k = len(bones)
        out = np.empty((k, m.n_dof))
        kernels.normal_rows(m.parents, m.dof_start, m.dof_count, self.motion, kernels.argument(bones, (k,), np.intp),
                            kernels.argument(points, (k, 3)), kernels.argument(normals, (k, 3)),
                            kernels.argument(other, (k,), np.intp), out)
        return out


def capsule_gap_bounds(model, pose):
    """Lower bound (n_pairs,) m on every capsule pair's surface gap (exact for near pairs):
    kernels.capsule_pairs' broad and narrow phase."""
    gap, *_ = kernels.capsule_pairs(pose.segments, model.pair_i, model.pair_j, model.pair_reach,
                                    model.pair_min_radius, model.pair_radius_sum, model.pair_radius_diff)
    return gap


def field_world_samples(fields, pose, parts):
    """(world points (s, 3) m, field-frame points (s, 3) m, field-frame rotation (s, 3, 3),
    bone (s,), field bone (s,) with n_bones for the base) of the sphere samples in parts."""
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
    return world, in_field, Rh, bones, hb


def separations(model, fields, pose, parts, gradient=True):
    """Signed distances g (k,) m of the parts (capsule pairs first, then field samples) at
    `pose`, and with gradient=True their rows dg/dθ (k, n_dof) m/rad (else None)."""
    i, j = model.pair_i[parts.pairs], model.pair_j[parts.pairs]
    seg = pose.segments
    c1, c2 = segment_closest_points(seg[i, 0], seg[i, 1], seg[j, 0], seg[j, 1])
    d = c1 - c2
    dist = np.sqrt(np.sum(d * d, axis=1))
    g_caps = dist - model.pair_radius_sum[parts.pairs]
    world, in_field, Rh, bones, hb = field_world_samples(fields, pose, parts)
    phi, grad, r = np.zeros(len(bones)), np.zeros((len(bones), 3)), np.zeros(len(bones))
    for k, fd in enumerate(fields):
        m = parts.field == k
        if np.count_nonzero(m):
            phi[m], grad[m] = fd.grid.sample(in_field[m])
            r[m] = fd.radius[parts.sample[m]]
    g = np.concatenate([g_caps, phi - r])
    if not gradient:
        return g, None
    # Crossing axes have no closest-point direction: their common perpendicular (or +Z).
    n_caps = np.where((dist > 1e-9)[:, None], d / np.maximum(dist, 1e-300)[:, None],
                      _perpendicular(seg[i, 1] - seg[i, 0], seg[j, 1] - seg[j, 0]))
    normal_world = np.einsum("kij,kj->ki", Rh, grad)
    rows = pose.rows(np.concatenate([i, bones]), np.concatenate([0.5 * (c1 + c2), world]),
                     np.concatenate([n_caps, normal_world]), np.concatenate([j, hb]))
    return g, rows


def _perpendicular(u, v):
    c = np.cross(u, v)
    norm = np.linalg.norm(c, axis=1, keepdims=True)
    return np.where(norm > 1e-12, c / np.maximum(norm, 1e-300), np.array([0.0, 0.0, 1.0]))


def near_parts(model, fields, pose, reach, samples_per_bone=4):
    """PartSet of the capsule pairs and field samples whose gap is below `reach` m; of
    one bone's samples against one field only the samples_per_bone nearest (neighbouring
    spheres on one axis are nearly parallel constraints; the active-set loop of the
    caller adds others when they come near)."""
    gap = capsule_gap_bounds(model, pose)
    every = all_parts(model, fields)
    world, in_field, _, bones, _ = field_world_samples(fields, pose, PartSet(np.zeros(0, np.intp), every.field,
                                                                             every.sample))
    clearance = np.full(len(every.field), np.inf)
    for k, fd in enumerate(fields):
        m = every.field == k
        if np.count_nonzero(m):
            phi, _ = fd.grid.sample(in_field[m], False)
            clearance[m] = phi - fd.radius[every.sample[m]]
    near = np.flatnonzero(clearance < reach)
    # rank within each (field, bone): lexsort by clearance inside the group
    order = near[np.lexsort((clearance[near], bones[near], every.field[near]))]
    group = every.field[order] * (model.n_bones + 1) + bones[order]
    first = np.r_[True, group[1:] != group[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(len(order)), 0))
    keep = np.sort(order[np.arange(len(order)) - start < samples_per_bone])
    return PartSet(np.flatnonzero(gap < reach), every.field[keep], every.sample[keep])

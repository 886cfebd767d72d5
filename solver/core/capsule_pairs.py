"""Capsule pairs of a skeleton in its rest pose: the closest points of two segments and the
pairs that may collide (rest_filtered_pairs, used by model.SkeletonModel)."""

import numpy as np

from .kinematics import capsule_segments, forward_kinematics

_EPS = 1e-12


def _unit(x):
    """Clamp to [0, 1] (plain ufuncs: np.clip's dispatch costs more than the work here)."""
    return np.minimum(np.maximum(x, 0.0), 1.0)


def segment_closest_points(p1, q1, p2, q2):
    """Closest points between segments [p1, q1] and [p2, q2], all (..., 3) m.

    Returns (c1, c2) (..., 3). Minimises the convex quadratic over (s, t) ∈ [0, 1]²: the
    free optimum of s (0 for parallel segments), t for that s clamped, then s for that t
    clamped, which is exact (Ericson, *Real-Time Collision Detection*, 2005, §5.1.9).
    Zero-length segments work because their squared length is floored at a tiny value.
    """
    d1 = q1 - p1
    d2 = q2 - p2
    # All five dot products from one batched Gram matrix of (d1, d2, p1 − p2).
    D = np.stack([d1, d2, p1 - p2], axis=-2)
    gram = D @ np.swapaxes(D, -1, -2)
    a = np.maximum(gram[..., 0, 0], _EPS)
    e = np.maximum(gram[..., 1, 1], _EPS)
    b, c, f = gram[..., 0, 1], gram[..., 0, 2], gram[..., 1, 2]
    denom = a * e - b * b
    general = denom > 1e-12 * a * e  # not parallel
    s = np.where(general, _unit((b * f - c * e) / np.where(general, denom, 1.0)), 0.0)
    t = _unit((b * s + f) / e)
    s = _unit((b * t - c) / a)
    return p1 + s[..., None] * d1, p2 + t[..., None] * d2


def rest_filtered_pairs(model):
    """Capsule pairs (k, 2) int, i < j, that may collide.

    Excluded: bones with collide=False, parent/child pairs, model.no_contact pairs, and pairs already
    overlapping in the rest pose (neighbouring knuckles), which would otherwise push
    the skeleton away from its own rest pose.
    """
    n = model.n_bones
    rest = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    seg = capsule_segments(model, forward_kinematics(model, rest, np.eye(3), np.zeros(3)))
    i, j = np.triu_indices(n, k=1)
    keep = model.collide[i] & model.collide[j]
    keep &= (model.parents[j] != i) & (model.parents[i] != j) & ~model.no_contact_mask[i, j]
    c1, c2 = segment_closest_points(seg[i, 0], seg[i, 1], seg[j, 0], seg[j, 1])
    dist = np.linalg.norm(c1 - c2, axis=-1)
    keep &= dist > model.capsule_radius[i] + model.capsule_radius[j]
    return np.stack([i[keep], j[keep]], axis=-1)

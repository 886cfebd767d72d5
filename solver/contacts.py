"""Capsule–capsule penalty contacts: closest points, rest-pose pair filtering, broad phase.

Penetration d = r₁ + r₂ − ‖c₁ − c₂‖ between the closest points c₁, c₂ of the capsule
axes, normal n from bone 2 to bone 1. Forces and their
implicit linearisation live in integrator.py; this module only does geometry.
"""

from dataclasses import dataclass

import numpy as np

from . import kernels
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


@dataclass(frozen=True, eq=False)
class CapsuleContacts:
    """Near capsule pairs at one state (k candidates).

    pair (k,) int: index into model.pairs; bone1, bone2 (k,) int; point (k, 3) m:
    midpoint of the overlap region, used for both bones' Jacobians; normal (k, 3): unit,
    from bone2 towards bone1; depth (k,) m: penetration (negative = gap); gap_bound
    (n_pairs,) m: every pair's surface gap, exact for pairs that passed the broad phase
    and a lower bound (bounding spheres) for the others.
    """

    pair: np.ndarray
    bone1: np.ndarray
    bone2: np.ndarray
    point: np.ndarray
    normal: np.ndarray
    depth: np.ndarray
    gap_bound: np.ndarray


def capsule_contacts(model, seg):
    """Candidate contacts for capsule axis segments seg (n_bones, 2, 3) m.

    A pair is a candidate when its gap is below the smaller radius; capsule_tunnelling
    keeps every other pair from closing such a gap within one step.
    """
    gap, pair, depth, point, normal = kernels.capsule_pairs(
        kernels.argument(seg, (model.n_bones, 2, 3)), model.pair_i, model.pair_j, model.pair_reach,
        model.pair_min_radius, model.pair_radius_sum, model.pair_radius_diff)
    return CapsuleContacts(pair, model.pair_i.take(pair), model.pair_j.take(pair), point, normal, depth, gap)


def pair_depths(model, seg):
    """(F, n_pairs) m: r₁ + r₂ − axis distance of every capsule pair (model.pairs, zero
    levels included) for axis segments seg (F, n_bones, 2, 3) m over F poses; −inf for
    pairs that are no candidates (capsule_contacts: farther apart than the smaller radius)."""
    out = np.full((len(seg), len(model.pair_i)), -np.inf)
    for f in range(len(seg)):
        c = capsule_contacts(model, seg[f])
        out[f, c.pair] = c.depth
    return out


def capsule_tunnelling(model, seg0, seg1, contacts0):
    """True when a step from seg0 to seg1 (n_bones, 2, 3) moves contact points too far.

    The relative displacement of two rigid segments is affine over (s, t) ∈ [0,1]², so
    its extremes are at end-point combinations. For candidate pairs (contacts0, the
    contacts at seg0) the approach along the contact normal must stay below half the
    smaller radius; sliding along the surface is harmless. Any other pair may move at
    most its gap bound, or half the smaller radius, towards anything.
    """
    n = model.n_bones
    return kernels.capsule_tunnelling(kernels.argument(seg0, (n, 2, 3)), kernels.argument(seg1, (n, 2, 3)),
                                      model.pair_i, model.pair_j, model.pair_half_min_radius, contacts0.gap_bound,
                                      contacts0.pair, contacts0.normal)

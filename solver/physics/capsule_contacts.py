"""Capsule–capsule penalty contacts: the contact pass of each step (closest points and the rest-pose
pair filter: core/capsule_pairs.py).

Penetration d = r₁ + r₂ − ‖c₁ − c₂‖ between the closest points c₁, c₂ of the capsule
axes, normal n from bone 2 to bone 1. Forces and their
implicit linearisation live in integrator.py; this module only does geometry.
"""

from dataclasses import dataclass

import numpy as np

from ..core import kernels


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

"""Overlaps the reference holds still are the contact shapes' error, not a collision.

Capsules and sample spheres are fatter than the skin between some parts (adjacent
fingers held together, a phalanx inside the palm volume, a fingertip resting on the
chin): the reference then "penetrates" by the same amount on every frame it holds that
pose, while the skin does not intersect. A collision in the motion (hands passing
through each other) changes from frame to frame. So each capsule pair and each body
sample gets a zero level: the deepest overlap the reference keeps for at least HOLD_S
without getting shallower (the maximum over frames of a sliding-window minimum,
a sliding-window minimum). Contacts and reports then measure only what goes
beyond it: the physics pass never pushes a held pose apart, and still resolves what
the reference does not hold. Pure numpy.
"""

import copy
from dataclasses import replace

import numpy as np

from . import quat
from .body import _field_clearance
from .contacts import capsule_contacts
from .kinematics import capsule_segments, forward_kinematics

HOLD_S = 0.25  # s: an overlap kept this long is the pose's, not a collision
MIN_SAMPLE_RADIUS = 1e-4  # m: a sample sphere shrunk below this is dropped


def held_depth(depth, frames):
    """(k,) m: the deepest value each column of depth (F, k) m keeps on `frames`
    consecutive frames (max over windows of the window's minimum), ≥ 0."""
    depth = np.asarray(depth, dtype=float)
    if len(depth) == 0:
        return np.zeros(depth.shape[1:])
    frames = min(max(int(frames), 1), len(depth))
    windows = np.lib.stride_tricks.sliding_window_view(depth, frames, axis=0)  # (F − frames + 1, k, frames)
    return np.maximum(windows.min(axis=-1).max(axis=0), 0.0)


def held_overlaps(model, fields, rotations, base_positions, base_rotations, frame_time, hold_s=HOLD_S):
    """(pairs (n_pairs,) m, samples [(k_i,) m per field]): held_depth of every capsule
    pair of model.pairs (r₁ + r₂ − axis distance) and of every sample sphere of each
    field (r − φ) over the reference pose rotations (F, n, 4), base_positions (F, 3) m,
    base_rotations (F, 4); frame_time s. fields: body.BodyField or objects with grid,
    bones, local, radius."""
    kin = forward_kinematics(model, rotations, quat.to_matrix(base_rotations), base_positions)
    seg = capsule_segments(model, kin)
    depth = np.full((len(seg), len(model.pairs)), -np.inf)
    for f in range(len(seg)):
        c = capsule_contacts(model, seg[f])
        depth[f, c.pair] = c.depth
    frames = int(round(hold_s / frame_time)) + 1
    samples = [held_depth(-_field_clearance(kin, field, base_positions, base_rotations), frames)
               for field in fields]
    return held_depth(depth, frames), samples


def without_held_overlaps(model, fields, pairs, samples):
    """(model, fields) whose contacts start at the held overlaps (held_overlaps' output):
    a copy of the SkeletonModel with pair_radius_sum reduced by `pairs` (m), and each
    field with its sample radii reduced by its `samples` (m), samples shrunk below
    MIN_SAMPLE_RADIUS dropped. Inputs are not modified."""
    out = copy.copy(model)
    object.__setattr__(out, "pair_radius_sum", model.pair_radius_sum - np.asarray(pairs, dtype=float))
    kept = []
    for field, held in zip(fields, samples):
        radius = field.radius - held
        keep = radius > MIN_SAMPLE_RADIUS
        kept.append(replace(field, bones=field.bones[keep], local=field.local[keep], radius=radius[keep],
                            kinds=tuple(k for k, ok in zip(field.kinds, keep) if ok)))
    return out, tuple(kept)

"""Capsule overlaps the reference holds still are the capsules' error, not a collision.

Capsules are fatter than the skin between some parts (adjacent fingers held together):
the reference then "penetrates" by the same amount on every frame it holds that pose,
while the skin does not intersect. A collision in the motion (hands passing through
each other) changes from frame to frame. So each capsule pair gets a zero level: the deepest overlap the reference keeps for at least HOLD_S
without getting shallower (the maximum over frames of a sliding-window minimum,
a sliding-window minimum). Capsule contacts and reports then measure only what
goes beyond it: the physics pass never pushes a held pose apart, and still resolves
what the reference does not hold. Body volumes (face, torso, palm) are the real skin
and keep their zero level: a pose held inside them is resolved. Pure numpy.
"""

import copy

import numpy as np

from ..core import quat
from .capsule_contacts import pair_depths
from ..core.kinematics import capsule_segments, forward_kinematics

HOLD_S = 0.25  # s: an overlap kept this long is the pose's, not a collision


def held_depth(depth, frames):
    """(k,) m: the deepest value each column of depth (F, k) m keeps on `frames`
    consecutive frames (max over windows of the window's minimum), ≥ 0."""
    depth = np.asarray(depth, dtype=float)
    if len(depth) == 0:
        return np.zeros(depth.shape[1:])
    frames = min(max(int(frames), 1), len(depth))
    windows = np.lib.stride_tricks.sliding_window_view(depth, frames, axis=0)  # (F − frames + 1, k, frames)
    return np.maximum(windows.min(axis=-1).max(axis=0), 0.0)


def held_overlaps(model, rotations, base_positions, base_rotations, frame_time, hold_s=HOLD_S):
    """(n_pairs,) m: held_depth of every capsule pair of model.pairs (r₁ + r₂ − axis
    distance) over the reference pose rotations (F, n, 4), base_positions (F, 3) m,
    base_rotations (F, 4); frame_time s."""
    kin = forward_kinematics(model, rotations, quat.to_matrix(base_rotations), base_positions)
    return held_depth(pair_depths(model, capsule_segments(model, kin)), int(round(hold_s / frame_time)) + 1)


def without_held_overlaps(model, pairs):
    """A copy of the SkeletonModel whose capsule contacts start at the held overlaps
    `pairs` (n_pairs,) m (held_overlaps): pair_radius_sum reduced by them. The input
    is not modified."""
    out = copy.copy(model)
    object.__setattr__(out, "pair_radius_sum", model.pair_radius_sum - np.asarray(pairs, dtype=float))
    return out

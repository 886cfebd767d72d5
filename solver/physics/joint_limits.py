"""Joint limits on the components of each bone's local rotation vector.

A ball joint's limit coordinates are the three components of log(q_pose) (rad), a
hinge's is its angle about local X. Inside a step the limits act as one-sided penalty
springs (integrator.py); after the step, project_limits clamps the coordinates and
zeroes the velocity components that point further out.
"""

import numpy as np

from ..core import quat


def limit_coordinates(model, rotations):
    """Limit coordinates (..., n_dof) rad of local rotations (..., n_bones, 4)."""
    r = quat.log(rotations)
    return r.reshape(r.shape[:-2] + (-1,)).take(model.dof_flat, axis=-1)


def limit_excess(model, rotations):
    """Amount (..., n_dof) rad by which each DOF exceeds its limits (0 inside)."""
    x = limit_coordinates(model, rotations)
    return np.maximum(np.maximum(x - model.dof_upper, model.dof_lower - x), 0.0)


def project_limits(model, rotations, velocity):
    """Clamp rotations (n_bones, 4) into the limits and zero outward velocity (n_dof,) rad/s.

    Returns (rotations, velocity, limit coordinates (n_dof,) of the returned rotations);
    bones inside their limits are returned untouched.
    """
    r = quat.log(rotations)
    x = r.reshape(-1).take(model.dof_flat)
    hi = x > model.dof_upper
    lo = x < model.dof_lower
    if not np.count_nonzero(hi | lo):
        return rotations, velocity, x
    r = np.clip(r, model.limit_lower, model.limit_upper)
    bones = np.unique(model.dof_bone[hi | lo])
    rotations = rotations.copy()
    rotations[bones] = quat.exp(r[bones])
    velocity = np.where((hi & (velocity > 0)) | (lo & (velocity < 0)), 0.0, velocity)
    return rotations, velocity, np.clip(x, model.dof_lower, model.dof_upper)


LIMIT_MARGIN = np.radians(5.0)
"""How far beyond the reference's own range a widened limit lies (rad)."""
HINGE_TOLERANCE = np.radians(3.0)
"""Largest off-axis rotation (rad) of a hinge's reference that the hinge may ignore."""


def fit_to_reference(model, rotations, margin=LIMIT_MARGIN, hinge_tolerance=HINGE_TOLERANCE):
    """A model whose joints can follow the reference rotations (F, n_bones, 4) exactly.

    A limit stops the physics from inventing a pose; it must not reject the animator's:
    every limit is widened to cover the reference's own range plus `margin` (rad), and a
    hinge whose reference turns more than hinge_tolerance (rad) about its other local
    axes (the rig's bone roll does not put the curl on local X, or the motion is not a
    hinge's) becomes a ball joint, its extra axes limited to the reference's range plus
    the margin. Returns (model, widened, freed): widened is a list of (bone, axis,
    (lower, upper) before, (lower, upper) after) in rad, freed the hinge bones made balls.
    """
    from dataclasses import replace
    from ..core.model import BALL
    r = quat.log(np.asarray(rotations, dtype=float))  # (F, n, 3)
    lo_ref, hi_ref = r.min(axis=0) - margin, r.max(axis=0) + margin
    types = list(model.joint_types)
    lower, upper = model.limit_lower.copy(), model.limit_upper.copy()
    freed = []
    for b in np.flatnonzero(model.hinge):
        if np.abs(r[:, b, 1:]).max(initial=0.0) > hinge_tolerance:
            types[b] = BALL
            lower[b, 1:], upper[b, 1:] = lo_ref[b, 1:], hi_ref[b, 1:]
            freed.append(int(b))
    # The axes a joint moves about (hinges: local X only).
    moves = np.array([[True, t == BALL, t == BALL] for t in types])
    new_lower = np.where(moves, np.minimum(lower, lo_ref), lower)
    new_upper = np.where(moves, np.maximum(upper, hi_ref), upper)
    widened = [(int(b), int(a), (float(lower[b, a]), float(upper[b, a])),
                (float(new_lower[b, a]), float(new_upper[b, a])))
               for b, a in zip(*np.nonzero(moves & ((new_lower < lower) | (new_upper > upper))))
               if b not in freed or a == 0]
    if not widened and not freed:
        return model, [], []
    return replace(model, joint_types=types, limit_lower=new_lower, limit_upper=new_upper), widened, freed


LIMIT_LEVER = 0.05
"""m: a joint limit enters the contact solve as a contact this far from the joint axis."""
LIMIT_REACH = 0.02
"""rad: a limit joins the contact solve when its coordinate is this close to it."""


def limit_rows(model, x):
    """Joint limits as unilateral contact rows: (rows (k, n_dof) m, depth (k,) m).

    For every DOF within LIMIT_REACH of a limit (x (n_dof,) rad, limit_coordinates), a
    row ±LIMIT_LEVER·e_d whose product with the velocity is the separation speed and
    depth LIMIT_LEVER × the excess (negative inside). Solved with the contacts, a limit
    holds against them; otherwise a contact pushing a joint into its limit is undone
    by project_limits after every step and the contact never resolves through the
    joints that are free to move.
    """
    up = np.flatnonzero(x > model.dof_upper - LIMIT_REACH)
    lo = np.flatnonzero(x < model.dof_lower + LIMIT_REACH)
    rows = np.zeros((len(up) + len(lo), model.n_dof))
    rows[np.arange(len(up)), up] = -LIMIT_LEVER
    rows[len(up) + np.arange(len(lo)), lo] = LIMIT_LEVER
    depth = LIMIT_LEVER * np.concatenate([x[up] - model.dof_upper[up], model.dof_lower[lo] - x[lo]])
    return rows, depth

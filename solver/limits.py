"""Joint limits on the components of each bone's local rotation vector (seed §4.3).

A ball joint's limit coordinates are the three components of log(q_pose) (rad), a
hinge's is its angle about local X. Inside a step the limits act as one-sided penalty
springs (integrator.py); after the step, project_limits clamps the coordinates and
zeroes the velocity components that point further out.
"""

import numpy as np

from . import quat


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

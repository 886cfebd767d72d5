"""Forward kinematics and point Jacobians, vectorised over bones (and optional batch axes).

Spatial vectors are expressed in world coordinates at the world origin, angular part
first (Featherstone 2008, ch. 2): a joint DOF with world axis a through the point o
has motion subspace S = (a, o × a), and a point p on a bone moves with a × (p − o) per
unit DOF velocity.
"""

from dataclasses import dataclass

import numpy as np

from . import quat


# skew(a).reshape(9) = a @ _SKEW, so a stack of skew matrices costs one matrix product.
_SKEW = np.zeros((3, 9))
_SKEW[2, 1], _SKEW[1, 2], _SKEW[2, 3], _SKEW[0, 5], _SKEW[1, 6], _SKEW[0, 7] = -1, 1, 1, -1, -1, 1


_EYE3 = np.eye(3)


def skew(a):
    """Cross-product matrices (..., 3, 3) of vectors a (..., 3): skew(a) @ b = a × b."""
    return (a @ _SKEW).reshape(a.shape[:-1] + (3, 3))


def cross(a, b):
    """Cross product of broadcastable (..., 3) arrays; with few rows per call this is
    about twice as fast as np.cross (the solver's arrays are small, overhead dominates)."""
    return (skew(a) @ b[..., None])[..., 0]


@dataclass(frozen=True, eq=False)
class Kinematics:
    """World pose of every bone (batch axes '...' optional).

    rotations (..., n_bones, 3, 3); positions (..., n_bones, 3) m (bone heads = joint
    origins); axes (..., n_dof, 3) world joint axes; origins (..., n_dof, 3) m;
    motion (..., n_dof, 6) spatial motion subspaces S = (a, o × a).
    """

    rotations: np.ndarray
    positions: np.ndarray
    axes: np.ndarray
    origins: np.ndarray
    motion: np.ndarray


def forward_kinematics(model, local_rotations, base_rotation, base_position):
    """World pose of all bones.

    local_rotations (..., n_bones, 4) pose quaternions w-first (relative to rest);
    base_rotation (..., 3, 3) and base_position (..., 3) m: the kinematic base (chest).
    Returns Kinematics. Ball-joint axes are the bone's own frame columns because their
    velocities are angular velocities in the bone frame; hinges use the bone's X column.
    """
    local = model.rest_matrices @ quat.to_matrix(local_rotations)
    batch = local.shape[:-3]
    n = model.n_bones
    # Pointer jumping: after round r every bone holds its transform relative to the
    # ancestor 2^r levels up, so the tree depth costs log2(depth) vectorised rounds.
    # Slot n holds the base, here the identity; offsets broadcast over the batch axes.
    R = np.empty(batch + (n + 1, 3, 3))
    R[..., :n, :, :] = local
    R[..., n, :, :] = _EYE3
    P = model.offsets_ext
    for jump in model.jumps:
        Rj = R.take(jump, axis=-3)
        P = P.take(jump, axis=-2) + (Rj @ P[..., None])[..., 0]
        R = Rj @ R
    base_rotation = np.asarray(base_rotation)[..., None, :, :]
    R = base_rotation @ R[..., :n, :, :]
    P = np.asarray(base_position)[..., None, :] + (base_rotation @ P[..., :n, :, None])[..., 0]
    axes = np.swapaxes(R, -1, -2).reshape(batch + (3 * n, 3)).take(model.dof_flat, axis=-2)
    origins = P.take(model.dof_bone, axis=-2)
    motion = np.concatenate([axes, cross(origins, axes)], axis=-1)
    return Kinematics(R, P, axes, origins, motion)


def capsule_segments(model, kin):
    """Capsule axis end points (..., n_bones, 2, 3) m: bone head and head + length·Y."""
    out = np.empty(kin.positions.shape[:-1] + (2, 3))
    out[..., 0, :] = kin.positions
    np.add(kin.positions, kin.rotations[..., :, 1] * model.capsule_length[:, None], out=out[..., 1, :])
    return out


def normal_jacobian(model, kin, bones, points, normals, other_bones=None):
    """Rows n·J_p (k, n_dof) for world points (k, 3) on `bones` (k,) and directions (k, 3).

    With other_bones (k,), the rows are relative: n·(J_p(bone) − J_p(other bone)) for the
    same point. n·(a × (p − o)) = (p × n)·a + n·(o × a) is the product of the spatial
    force (p × n, n) with the motion subspace S = (a, o × a): no (k, 3, n_dof) array.
    """
    rows = np.concatenate([cross(points, normals), normals], axis=-1) @ kin.motion.T
    mask = model.dof_ancestors.take(bones, axis=0)
    if other_bones is not None:
        mask = mask - model.dof_ancestors.take(other_bones, axis=0)
    return rows * mask

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


_EYE34 = np.eye(3, 4)


# (p @ _LIFT + _LIFT0).reshape(6, 3) = [1; p×]: maps a bone's frame to its motion subspaces.
_LIFT = np.zeros((3, 18))
_LIFT[:, 9:] = _SKEW
_LIFT0 = np.concatenate([np.eye(3).reshape(9), np.zeros(9)])


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
    local_rotations = np.asarray(local_rotations)
    base_rotation = np.asarray(base_rotation)
    base_position = np.asarray(base_position)
    batch = local_rotations.shape[:-2]
    if base_rotation.ndim > 2 or base_position.ndim > 1:
        batch = np.broadcast_shapes(batch, base_rotation.shape[:-2], base_position.shape[:-1])
    n = model.n_bones
    # Rigid transforms [R | p] (3×4), bones in slots 0..n−1, the base in slot n and the
    # world (identity) in slot n + 1. Pointer jumping: after round r every slot holds its
    # transform relative to the slot 2^r links up, so the depth costs log2(depth + 1)
    # vectorised rounds and the base is composed on the way.
    T = np.empty(batch + (n + 2, 3, 4))
    np.matmul(model.rest_matrices, quat.to_matrix(local_rotations), out=T[..., :n, :, :3])
    T[..., :n, :, 3] = model.rest_offsets
    T[..., n, :, :3] = base_rotation
    T[..., n, :, 3] = base_position
    T[..., n + 1, :, :] = _EYE34
    for jump in model.jumps_base:
        Tj = T.take(jump, axis=-3)
        T = Tj[..., :3] @ T
        T[..., 3] += Tj[..., 3]
    T = T[..., :n, :, :]
    R = np.ascontiguousarray(T[..., :3])
    P = np.ascontiguousarray(T[..., 3])
    # Motion subspaces of all three axes of every bone at once: [R; p× R] (6×3) per bone.
    W = (P @ _LIFT + _LIFT0).reshape(batch + (n, 6, 3)) @ R
    motion = W.swapaxes(-1, -2).reshape(batch + (3 * n, 6)).take(model.dof_flat, axis=-2)
    axes = motion[..., :3]
    origins = P.take(model.dof_bone, axis=-2)
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
    same point; other bone n_bones stands for the kinematic base (no DOF). n·(a × (p − o)) = (p × n)·a + n·(o × a) is the product of the spatial
    force (p × n, n) with the motion subspace S = (a, o × a): no (k, 3, n_dof) array.
    """
    rows = np.concatenate([cross(points, normals), normals], axis=-1) @ kin.motion.T
    mask = model.dof_ancestors.take(bones, axis=0)
    if other_bones is not None:
        mask = mask - model.dof_ancestors_base.take(other_bones, axis=0)
    return rows * mask

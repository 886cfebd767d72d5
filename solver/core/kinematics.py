"""Forward kinematics and point Jacobians (compiled tree recursions: kernels.py), with
optional batch axes.

Spatial vectors are expressed in world coordinates at the world origin, angular part
first (Featherstone 2008, ch. 2): a joint DOF with world axis a through the point o
has motion subspace S = (a, o × a), and a point p on a bone moves with a × (p − o) per
unit DOF velocity.

local_matrices, pose_matrices and chain: whole-armature forward kinematics from keyed local channels (Blender's pose model).

Blender poses a bone as (Blender manual, "Bone Structure"; bpy.types.PoseBone.matrix):

    M_i = M_parent · (R_parent,rest⁻¹ · R_i,rest) · T(loc_i) · R(q_i) · S(scale_i)

with R_rest the bone's rest matrix in armature space (Bone.matrix_local) and M the posed
matrix in armature space (PoseBone.matrix); a root bone has M_parent = R_parent,rest = I.
The bake uses this to place the kinematic base and the fingertips for every frame without
a scene update per frame.
"""

from dataclasses import dataclass

import numpy as np

from . import kernels, quat


# skew(a).reshape(9) = a @ _SKEW, so a stack of skew matrices costs one matrix product.
_SKEW = np.zeros((3, 9))
_SKEW[2, 1], _SKEW[1, 2], _SKEW[2, 3], _SKEW[0, 5], _SKEW[1, 6], _SKEW[0, 7] = -1, 1, 1, -1, -1, 1


def skew(a):
    """Cross-product matrices (..., 3, 3) of vectors a (..., 3): skew(a) @ b = a × b."""
    return (a @ _SKEW).reshape(a.shape[:-1] + (3, 3))


def cross(a, b):
    """Cross product of broadcastable (..., 3) arrays; with few rows per call this is
    faster than np.cross (the solver's arrays are small, call overhead dominates)."""
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
    local_rotations = np.asarray(local_rotations, dtype=float)
    base_rotation = np.asarray(base_rotation, dtype=float)
    base_position = np.asarray(base_position, dtype=float)
    batch = np.broadcast_shapes(local_rotations.shape[:-2], base_rotation.shape[:-2], base_position.shape[:-1])
    n, n_dof = model.n_bones, model.n_dof
    b = int(np.prod(batch))
    q = kernels.argument(local_rotations, batch + (n, 4)).reshape(b, n, 4)
    base_r = kernels.argument(base_rotation, batch + (3, 3)).reshape(b, 3, 3)
    base_p = kernels.argument(base_position, batch + (3,)).reshape(b, 3)
    R = np.empty((b, n, 3, 3))
    P = np.empty((b, n, 3))
    motion = np.empty((b, n_dof, 6))
    kernels.forward_kinematics(model.parents, model.rest_matrices, model.rest_offsets, model.dof_bone,
                               model.dof_axis, q, base_r, base_p, R, P, motion)
    R, P, motion = R.reshape(batch + (n, 3, 3)), P.reshape(batch + (n, 3)), motion.reshape(batch + (n_dof, 6))
    return Kinematics(R, P, motion[..., :3], P.take(model.dof_bone, axis=-2), motion)


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
    k = len(bones)
    bones = kernels.argument(bones, (k,), np.intp)
    other = kernels.argument(model.n_bones if other_bones is None else other_bones, (k,), np.intp)
    rows = np.empty((k, model.n_dof))
    kernels.normal_rows(model.parents, model.dof_start, model.dof_count, kernels.argument(kin.motion, (model.n_dof, 6)),
                        bones, kernels.argument(points, (k, 3)), kernels.argument(normals, (k, 3)), other, rows)
    return rows


def local_matrices(locations, rotations, scales):
    """T(loc) · R(q) · S(scale) per frame and bone.

    locations (F, B, 3) m, rotations (F, B, 4) w-first, scales (F, B, 3) → (F, B, 4, 4).
    """
    return transforms(quat.to_matrix(quat.normalize(rotations)) * scales[..., None, :], locations)


def transforms(rotations, translations):
    """Homogeneous matrices (..., 4, 4) of rotation matrices (..., 3, 3) and translations
    (..., 3) (broadcast to the rotations' batch shape)."""
    m = np.zeros(rotations.shape[:-2] + (4, 4))
    m[..., :3, :3] = rotations
    m[..., :3, 3] = translations
    m[..., 3, 3] = 1.0
    return m


def pose_matrices(parents, rest, locations, rotations, scales):
    """Posed armature-space matrices of every bone for every frame.

    parents (B,) int, -1 for roots, parents before children; rest (B, 4, 4) armature-space
    rest matrices (Bone.matrix_local); locations (F, B, 3), rotations (F, B, 4) w-first,
    scales (F, B, 3): the pose channels. Returns (F, B, 4, 4).
    Raises ValueError when a parent comes after its child.
    """
    return chain(parents, rest, local_matrices(locations, rotations, scales))


def chain(parents, rest, local, world=None, order=None, relative=None):
    """The one forward kinematics of 4×4 transforms (the compiled kernels.forward_kinematics
    is the physics solver's, with its Jacobians): used for Blender poses (pose_matrices,
    retarget.contact_transfer.Target.pose), compose tracks (compose.composition.forward) and
    BVH joints (mocap.bvh_file.joint_positions).

    Posed armature-space matrices (F, B, 4, 4) from local pose matrices local (F, B, 4, 4)
    (PoseBone.matrix_basis), parents (B,) ordered parents first and rest (B, 4, 4).
    Raises ValueError when a parent comes after its child.

    world (4, 4): the armature's world matrix, for world matrices (a root: world · rest ·
    local). order: only these bones, parents before children but in any index order; local
    is then (F, len(order), 4, 4) in that order and the other bones stay zero. relative
    (B, 4, 4): rest_parent⁻¹ · rest_i (a root: rest_i) when the caller keeps them.
    """
    parents = np.asarray(parents)
    if order is None:
        if np.any(parents >= np.arange(parents.size)):
            raise ValueError("bones must be ordered parents first")
        order = range(parents.size)
        out = np.empty_like(local)
    else:
        out = np.zeros(local.shape[:1] + (parents.size, 4, 4))
    for k, i in enumerate(order):
        p = parents[i]
        if p < 0:
            base = rest[i] if relative is None else relative[i]
            out[:, i] = (base if world is None else world @ base) @ local[:, k]
        else:
            rel = np.linalg.inv(rest[p]) @ rest[i] if relative is None else relative[i]
            out[:, i] = out[:, p] @ rel @ local[:, k]
    return out

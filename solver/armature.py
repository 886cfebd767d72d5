"""Whole-armature forward kinematics from keyed local channels (Blender's pose model).

Blender poses a bone as (Blender manual, "Bone Structure"; bpy.types.PoseBone.matrix):

    M_i = M_parent · (R_parent,rest⁻¹ · R_i,rest) · T(loc_i) · R(q_i) · S(scale_i)

with R_rest the bone's rest matrix in armature space (Bone.matrix_local) and M the posed
matrix in armature space (PoseBone.matrix); a root bone has M_parent = R_parent,rest = I.
The bake uses this to place the kinematic base and the fingertips for every frame without
a scene update per frame.
"""

import numpy as np

from . import quat


def local_matrices(locations, rotations, scales):
    """T(loc) · R(q) · S(scale) per frame and bone.

    locations (F, B, 3) m, rotations (F, B, 4) w-first, scales (F, B, 3) → (F, B, 4, 4).
    """
    F, B = rotations.shape[:2]
    m = np.zeros((F, B, 4, 4))
    m[..., :3, :3] = quat.to_matrix(quat.normalize(rotations)) * scales[..., None, :]
    m[..., :3, 3] = locations
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


def chain(parents, rest, local):
    """Posed armature-space matrices (F, B, 4, 4) from local pose matrices local (F, B, 4, 4)
    (PoseBone.matrix_basis), parents (B,) ordered parents first and rest (B, 4, 4).
    Raises ValueError when a parent comes after its child.
    """
    parents = np.asarray(parents)
    if np.any(parents >= np.arange(parents.size)):
        raise ValueError("bones must be ordered parents first")
    out = np.empty_like(local)
    for i, p in enumerate(parents):
        if p < 0:
            out[:, i] = rest[i] @ local[:, i]
        else:
            out[:, i] = out[:, p] @ (np.linalg.inv(rest[p]) @ rest[i]) @ local[:, i]
    return out

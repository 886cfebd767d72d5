"""Rigid-body dynamics of the skeleton: CRBA mass matrix, RNEA, gravity stiffness, energy.

Both algorithms follow Featherstone, *Rigid Body Dynamics Algorithms* (2008): the
recursive Newton–Euler algorithm (ch. 5) and the composite-rigid-body algorithm (ch. 6),
written in world coordinates as O(n) recursions over the tree (compiled: core/kernels.py).
Units: SI (kg, m, s, N, N·m). Spatial vectors: angular part first, at the world origin.
"""

import numpy as np

from ..core import kernels
from ..core.kinematics import Kinematics, cross

GRAVITY = 9.81  # m/s², along −Z in world


def base_motion(position, linear_velocity, angular_velocity, linear_acceleration,
                angular_acceleration):
    """Spatial velocity and acceleration (..., 6) of the kinematic base at the world origin.

    Inputs: the base's position (..., 3) m, linear velocity (m/s) and acceleration (m/s²),
    world angular velocity (rad/s) and acceleration (rad/s²). The linear part is the
    velocity of the base-fixed point at the origin, v_O = ṗ − ω × p, and its derivative.
    """
    w, wd = angular_velocity, angular_acceleration
    vo = linear_velocity - cross(w, position)
    ao = linear_acceleration - cross(wd, position) - cross(w, linear_velocity)
    return np.concatenate([w, vo], axis=-1), np.concatenate([wd, ao], axis=-1)


def body_inertia_world(model, kin):
    """World centres of mass (..., n_bones, 3) m and rotational inertias about them (..., n_bones, 3, 3).

    Capsules have their centre of mass on the bone's Y axis and the inertia
    diag(i⊥, i_axial, i⊥) in the bone frame, so R I Rᵀ = i⊥ 1 + (i_axial − i⊥) y yᵀ.
    """
    batch, n = kin.positions.shape[:-2], model.n_bones
    b = int(np.prod(batch))
    com, inertia, spatial = np.empty((b, n, 3)), np.empty((b, n, 3, 3)), np.empty((b, n, 6, 6))
    kernels.body_inertias(kernels.argument(kin.rotations, batch + (n, 3, 3)).reshape(b, n, 3, 3),
                          kernels.argument(kin.positions, batch + (n, 3)).reshape(b, n, 3), model.mass, model.com_y,
                          model.inertia_perp, model.inertia_axial, com, inertia, spatial)
    return com.reshape(batch + (n, 3)), inertia.reshape(batch + (n, 3, 3))


def spatial_inertias(model, com, inertia):
    """6×6 spatial inertias (..., n_bones, 6, 6) at the world origin:
    [[Ī + m c×c×ᵀ, m c×], [m c×ᵀ, m 1]] with c the centre of mass (..., n_bones, 3) m,
    Ī the inertia about it (..., n_bones, 3, 3) kg·m²."""
    batch, n = np.shape(com)[:-2], model.n_bones
    b = int(np.prod(batch))
    out = np.empty((b, n, 6, 6))
    kernels.spatial_inertias(kernels.argument(com, batch + (n, 3)).reshape(b, n, 3),
                             kernels.argument(inertia, batch + (n, 3, 3)).reshape(b, n, 3, 3), model.mass, out)
    return out.reshape(batch + (n, 6, 6))


def composite_inertias(model, spatial):
    """Composite (subtree) spatial inertias (..., n_bones, 6, 6): in a common frame, a plain subtree sum."""
    batch, n = np.shape(spatial)[:-3], model.n_bones
    b = int(np.prod(batch))
    out = np.empty((b, n, 6, 6))
    kernels.composite_inertias(model.parents, kernels.argument(spatial, batch + (n, 6, 6)).reshape(b, n, 6, 6), out)
    return out.reshape(batch + (n, 6, 6))


def mass_matrix(model, kin, composite):
    """Joint-space mass matrix M (n_dof, n_dof), symmetric positive definite (CRBA, Featherstone ch. 6).

    M[d, e] = S_eᵀ I^c S_d for bone(e) on the path of bone(d), I^c the composite
    inertia (n_bones, 6, 6) of the deeper bone; the other triangle follows by symmetry.
    """
    out = np.empty((model.n_dof, model.n_dof))
    kernels.mass_matrix(model.parents, model.dof_bone, model.dof_start, model.dof_count,
                        kernels.argument(kin.motion, (model.n_dof, 6)), kernels.argument(composite, (model.n_bones, 6, 6)), out)
    return out


def rnea(model, kin, spatial, qd, qdd, base_velocity, base_acceleration, gravity=GRAVITY):
    """Inverse dynamics τ = M(q) q̈ + c(q, q̇) (..., n_dof) in N·m (RNEA, Featherstone ch. 5).

    spatial (..., n_bones, 6, 6): spatial_inertias(); qd, qdd (..., n_dof): joint
    velocities (rad/s, body-frame for ball joints) and accelerations (rad/s²), qdd None
    for zero; base_velocity/base_acceleration (..., 6) spatial, from base_motion().
    Gravity (m/s², along −Z) enters as a fictitious upward base acceleration.
    Returns (tau, bone spatial velocities (..., n_bones, 6)).
    Works with any leading batch axes shared by kin and the inputs.
    """
    return _rnea(model, kin, spatial, qd, qdd, base_velocity, base_acceleration, gravity)[:2]


def _rnea(model, kin, spatial, qd, qdd, base_velocity, base_acceleration, gravity=GRAVITY):
    """rnea() that also returns the bone momenta I v (..., n_bones, 6)."""
    n, n_dof = model.n_bones, model.n_dof
    batch = np.broadcast_shapes(kin.motion.shape[:-2], np.shape(spatial)[:-3], np.shape(qd)[:-1],
                                np.shape(base_velocity)[:-1], np.shape(base_acceleration)[:-1],
                                () if qdd is None else np.shape(qdd)[:-1])
    b = int(np.prod(batch))
    tau, V, momentum = np.empty((b, n_dof)), np.empty((b, n, 6)), np.empty((b, n, 6))
    kernels.rnea(model.parents, model.dof_bone, model.dof_start, model.dof_count,
                 kernels.argument(kin.motion, batch + (n_dof, 6)).reshape(b, n_dof, 6),
                 kernels.argument(spatial, batch + (n, 6, 6)).reshape(b, n, 6, 6), kernels.argument(qd, batch + (n_dof,)).reshape(b, n_dof),
                 np.zeros((b, n_dof)) if qdd is None else kernels.argument(qdd, batch + (n_dof,)).reshape(b, n_dof),
                 kernels.argument(base_velocity, batch + (6,)).reshape(b, 6),
                 kernels.argument(base_acceleration, batch + (6,)).reshape(b, 6), float(gravity), tau, V, momentum)
    return tau.reshape(batch + (n_dof,)), V.reshape(batch + (n, 6)), momentum.reshape(batch + (n, 6))


def gravity_stiffness(model, kin, composite, gravity=GRAVITY):
    """Symmetric part of −∂G/∂q (n_dof, n_dof) N·m/rad, G the generalised gravity force.

    G_d = g·(a_d × W_d) with W_d = Σ_subtree m (c − o_d). Rotating DOF e on the path of d
    turns a_d and W_d together: ∂G_d/∂q_e = g·(a_e × (a_d × W_d)); a DOF e below d only
    moves its own subtree: ∂G_d/∂q_e = g·(a_d × (a_e × W_e)). In body-frame coordinates
    the Jacobian is not exactly symmetric; its symmetric part keeps A = M + h²K symmetric.
    composite (n_bones, 6, 6): composite_inertias().
    """
    out = np.empty((model.n_dof, model.n_dof))
    kernels.gravity_stiffness(model.parents, model.dof_bone, model.dof_start, model.dof_count,
                              kernels.argument(kin.axes, (model.n_dof, 3)), kernels.argument(kin.origins, (model.n_dof, 3)),
                              kernels.argument(composite, (model.n_bones, 6, 6)), float(gravity), out)
    return out


def rigid_body_terms(model, rotations, base_rotation, base_position, qd, base_velocity, base_acceleration,
                     gravity=GRAVITY):
    """One state's rigid-body quantities in one compiled call (what a step evaluates).

    rotations (n_bones, 4) local pose quaternions, base_rotation (3, 3), base_position
    (3,) m, qd (n_dof,) rad/s, base spatial velocity/acceleration (6,) (base_motion()).
    Returns (Kinematics, com (n_bones, 3) m, spatial inertias (n_bones, 6, 6), mass
    matrix (n_dof, n_dof), bias c(q, q̇) (n_dof,) N·m, bone spatial velocities
    (n_bones, 6), momenta I v (n_bones, 6), gravity stiffness (n_dof, n_dof)), equal to
    forward_kinematics, body_inertia_world, spatial_inertias, composite_inertias,
    mass_matrix, _rnea with q̈ = 0 and gravity_stiffness called in turn.
    """
    n, n_dof = model.n_bones, model.n_dof
    R, P, motion, origins = np.empty((1, n, 3, 3)), np.empty((1, n, 3)), np.empty((1, n_dof, 6)), np.empty((n_dof, 3))
    com, spatial, M, bias = np.empty((1, n, 3)), np.empty((1, n, 6, 6)), np.empty((n_dof, n_dof)), np.empty((1, n_dof))
    V, momentum, K = np.empty((1, n, 6)), np.empty((1, n, 6)), np.empty((n_dof, n_dof))
    kernels.rigid_terms(
        model.parents, model.rest_matrices, model.rest_offsets, model.dof_bone, model.dof_axis, model.dof_start,
        model.dof_count, model.mass, model.com_y, model.inertia_perp, model.inertia_axial,
        kernels.argument(rotations, (n, 4)).reshape(1, n, 4), kernels.argument(base_rotation, (3, 3)).reshape(1, 3, 3),
        kernels.argument(base_position, (3,)).reshape(1, 3), kernels.argument(qd, (n_dof,)).reshape(1, n_dof),
        kernels.argument(base_velocity, (6,)).reshape(1, 6), kernels.argument(base_acceleration, (6,)).reshape(1, 6),
        float(gravity), R, P, motion, origins, com, spatial, M, bias, V, momentum, K)
    return Kinematics(R[0], P[0], motion[0, :, :3], origins, motion[0]), com[0], spatial[0], M, bias[0], V[0], \
        momentum[0], K


def energy(model, com, spatial, velocities, gravity=GRAVITY):
    """Total mechanical energy (J): kinetic ½ Σ vᵀ I v (world, base motion included) + Σ m g z_com."""
    kinetic = 0.5 * np.sum(velocities * (spatial @ velocities[..., None])[..., 0])
    return kinetic + gravity * np.sum(model.mass * com[..., 2])

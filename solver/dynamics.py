"""Rigid-body dynamics of the skeleton: CRBA mass matrix, RNEA, gravity stiffness, energy.

Both algorithms follow Featherstone, *Rigid Body Dynamics Algorithms* (2008): the
recursive Newton–Euler algorithm (ch. 5) and the composite-rigid-body algorithm (ch. 6),
written in world coordinates so that the recursions over the tree become products with
the ancestor matrix (sums over paths and subtrees) instead of Python loops over bones.
Units: SI (kg, m, s, N, N·m). Spatial vectors: angular part first, at the world origin.
"""

import numpy as np

from .kinematics import cross, skew

GRAVITY = 9.81  # m/s², along −Z in world
_ONES6 = np.ones(6)


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


# crm(v).reshape(36) = v @ _CRM: the spatial motion cross-product matrix
# [[ω×, 0], [v_O×, ω×]] of v = (ω, v_O); the force cross product is crf(v) = −crm(v)ᵀ.
_CRM = np.zeros((6, 6, 6))
for _i, _j, _k, _s in ((0, 1, 2, -1), (0, 2, 1, 1), (1, 0, 2, 1), (1, 2, 0, -1), (2, 0, 1, -1), (2, 1, 0, 1)):
    _CRM[_k, _i, _j] = _CRM[_k, _i + 3, _j + 3] = _CRM[_k + 3, _i + 3, _j] = _s
_CRM = _CRM.reshape(6, 36)


def motion_cross_matrices(v):
    """Spatial cross-product matrices crm(v) (..., 6, 6) of spatial velocities v (..., 6)."""
    return (v @ _CRM).reshape(v.shape[:-1] + (6, 6))


def body_inertia_world(model, kin):
    """World centres of mass (..., n_bones, 3) m and rotational inertias about them (..., n_bones, 3, 3)."""
    R = kin.rotations
    y = R[..., :, 1]
    # Capsules have their centre of mass on the bone's Y axis and the inertia
    # diag(i⊥, i_axial, i⊥) in the bone frame, so R I Rᵀ = i⊥ 1 + (i_axial − i⊥) y yᵀ.
    com = kin.positions + y * model.com_local[:, 1:2]
    inertia = model.inertia_perp_eye + model.inertia_axial_excess * (y[..., :, None] * y[..., None, :])
    return com, inertia


def spatial_inertias(model, com, inertia):
    """6×6 spatial inertias (..., n_bones, 6, 6) at the world origin:
    [[Ī + m c×c×ᵀ, m c×], [m c×ᵀ, m 1]] with c the centre of mass, Ī the inertia about it."""
    cx = skew(com)
    mcx = model.mass[:, None, None] * cx
    out = np.empty(com.shape[:-1] + (6, 6))
    # Skew matrices are antisymmetric: c×ᵀ = −c×.
    np.subtract(inertia, mcx @ cx, out=out[..., :3, :3])
    out[..., :3, 3:] = mcx
    np.negative(mcx, out=out[..., 3:, :3])
    out[..., 3:, 3:] = model.mass_eye
    return out


def composite_inertias(model, spatial):
    """Composite (subtree) spatial inertias (n_bones, 6, 6): in a common frame, a plain subtree sum."""
    n = model.n_bones
    return (model.ancestors.T @ spatial.reshape(n, 36)).reshape(n, 6, 6)


def mass_matrix(model, kin, composite):
    """Joint-space mass matrix M (n_dof, n_dof), symmetric positive definite (CRBA, Featherstone ch. 6).

    M[d, e] = S_eᵀ I^c S_d for bone(e) on the path of bone(d), I^c the composite inertia
    of the deeper bone; the other triangle follows by symmetry.
    """
    S = kin.motion
    F = (composite.take(model.dof_bone, axis=0) @ S[..., None])[..., 0]
    # (P ⊙ F Sᵀ)ᵀ = Pᵀ ⊙ S Fᵀ: two small products instead of a strided transpose.
    return model.dof_dof_ancestors * (F @ S.T) + model.dof_dof_strict_t * (S @ F.T)


def rnea(model, kin, spatial, qd, qdd, base_velocity, base_acceleration, gravity=GRAVITY):
    """Inverse dynamics τ = M(q) q̈ + c(q, q̇) (..., n_dof) in N·m (RNEA, Featherstone ch. 5).

    spatial (..., n_bones, 6, 6): spatial_inertias(); qd, qdd (..., n_dof): joint
    velocities (rad/s, body-frame for ball joints) and accelerations (rad/s²);
    base_velocity/base_acceleration (..., 6) spatial, from base_motion(). Gravity
    (m/s², along −Z) enters as a fictitious upward base acceleration. The outward
    recursions are sums over each bone's path (ancestor matrix), the inward one a sum
    over its subtree. Returns (tau, bone spatial velocities (..., n_bones, 6)).
    Works with any leading batch axes shared by kin and the inputs.
    """
    return _rnea(model, kin, spatial, qd, qdd, base_velocity, base_acceleration, gravity)[:2]


def _rnea(model, kin, spatial, qd, qdd, base_velocity, base_acceleration, gravity=GRAVITY):
    """rnea() that also returns the bone momenta I v (..., n_bones, 6)."""
    S = kin.motion
    a0 = base_acceleration + np.array([0.0, 0.0, 0.0, 0.0, 0.0, gravity])
    s_qd = S * qd[..., None]
    V = base_velocity[..., None, :] + model.dof_ancestors @ s_qd
    X = motion_cross_matrices(V)
    # Ṡ = v × S for axes fixed in the child bone (world-frame spatial notation).
    c_j = (X.take(model.dof_bone, axis=-3) @ s_qd[..., None])[..., 0]
    if qdd is not None:  # None: q̈ = 0 (the bias c(q, q̇))
        c_j += S * qdd[..., None]
    A = a0[..., None, :] + model.dof_ancestors @ c_j
    # I a and I v in one batched product.
    AV = np.empty(V.shape + (2,))
    AV[..., 0] = A
    AV[..., 1] = V
    IAV = spatial @ AV
    f = IAV[..., 0] - (X.swapaxes(-1, -2) @ IAV[..., 1:])[..., 0]
    F = model.ancestors_t @ f
    tau = (S * F.take(model.dof_bone, axis=-2)) @ _ONES6
    return tau, V, IAV[..., 1]


_FIRST_MOMENT = np.array([16, 5, 9])  # Σ m c from the m c× block of a flattened 6×6 inertia


def gravity_stiffness(model, kin, composite, gravity=GRAVITY):
    """Symmetric part of −∂G/∂q (n_dof, n_dof) N·m/rad, G the generalised gravity force.

    G_d = g·(a_d × W_d) with W_d = Σ_subtree m (c − o_d). Rotating DOF e on the path of d
    turns a_d and W_d together: ∂G_d/∂q_e = g·(a_e × (a_d × W_d)); a DOF e below d only
    moves its own subtree: ∂G_d/∂q_e = g·(a_d × (a_e × W_e)). In body-frame coordinates
    the Jacobian is not exactly symmetric; its symmetric part keeps A = M + h²K symmetric.
    """
    # Subtree mass and first moment Σ m c from the composite inertia's m and m c× blocks.
    comp = composite.reshape(-1, 36).take(model.dof_bone, axis=0)
    W = comp.take(_FIRST_MOMENT, axis=1) - comp[:, 21:22] * kin.origins
    a = kin.axes
    # k1[d, e] = (g·a_d)(a_e·W_d) − (g·W_d)(a_e·a_d) = L_d·a_e with g = (0, 0, −gravity):
    # a rank-3 product. L is negated here so that the result needs no final negation.
    L = gravity * (a[:, 2:3] * W - W[:, 2:3] * a)
    # −½(dG + dGᵀ) with dG = P⊙k1 + (S⊙k1)ᵀ (P: path incl. own bone, S: strict path).
    return model.dof_dof_path_weight * (L @ a.T) + model.dof_dof_path_weight_t * (a @ L.T)


def energy(model, com, spatial, velocities, gravity=GRAVITY):
    """Total mechanical energy (J): kinetic ½ Σ vᵀ I v (world, base motion included) + Σ m g z_com."""
    kinetic = 0.5 * np.sum(velocities * (spatial @ velocities[..., None])[..., 0])
    return kinetic + gravity * np.sum(model.mass * com[..., 2])

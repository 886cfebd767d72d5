"""Linearised backward-Euler step of the tracked skeleton.

One step solves

    (M + h D + h² K) Δv = h (f − h K v),   v⁺ = v + Δv,   q⁺ = q ⊕ h v⁺

with one Cholesky factorisation (Baraff & Witkin, "Large Steps in Cloth Simulation",
SIGGRAPH 1998: one linearised implicit step). f = τ_pd + τ_ff + τ_contact + τ_limit − c;
K and D collect −∂f/∂q and −∂f/∂v of every spring-like term: PD gains, gravity,
joint-limit penalties, capsule and face contacts, which therefore act with their
end-of-step values, as backward Euler requires. The reference enters where each term
lives in the step (implicit_step). Evaluation and step are compiled (core/kernels.py). Contacts use an active set: a contact joins when
its end-of-step penetration would be positive and leaves when its force would pull (no
adhesion). After the step the joint limits are enforced by projection.
⊕ is q ⊗ exp(h ω) in each bone's frame.
"""

from dataclasses import dataclass

import numpy as np

from ..core import kernels
from . import dynamics
from .capsule_contacts import CapsuleContacts
from ..core.kinematics import Kinematics
from .joint_limits import limit_coordinates, limit_rows

_MAX_ACTIVE_SET_ITERATIONS = 8


class StepFailure(RuntimeError):
    """A step could not be taken: failed factorisation or a non-finite result."""


@dataclass(frozen=True, eq=False)
class State:
    """Simulated state: rotations (n_bones, 4) local pose quaternions, velocity (n_dof,)
    rad/s, and limit_x (n_dof,) rad, the joint-limit coordinates of the rotations
    (limits.limit_coordinates), kept so that each state's logarithms are taken once."""

    rotations: np.ndarray
    velocity: np.ndarray
    limit_x: np.ndarray


def make_state(model, rotations, velocity):
    """State from rotations (n_bones, 4) and velocity (n_dof,)."""
    return State(rotations, velocity, limit_coordinates(model, rotations))


@dataclass(frozen=True, eq=False)
class Target:
    """Reference at one time: rotations (n_bones, 4), qd (n_dof,) rad/s, base pose
    (base_rotation (3, 3), base_position (3,) m) and base spatial velocity/acceleration
    (6,) at the world origin (dynamics.base_motion); allowance (n_pairs + S,) m or None
    (none): the depth each capsule pair (model.pairs) and then each field sample
    (Physics.fields, in order) may reach at this time without a contact force (the
    reference's own path between two clear keys). A step asks for the allowance at its
    end (implicit_step), as backward Euler does of every term."""

    rotations: np.ndarray
    qd: np.ndarray
    base_rotation: np.ndarray
    base_position: np.ndarray
    base_velocity: np.ndarray
    base_acceleration: np.ndarray
    allowance: np.ndarray = None


@dataclass(frozen=True, eq=False)
class Physics:
    """Per-run constants of the step.

    omega, zeta (n_dof,): PD natural frequency (rad/s) and damping ratio per DOF;
    limit_omega (rad/s), limit_zeta: joint-limit penalty; gravity m/s²; fields: tuple
    of FaceSamples, one per distance field a hand may touch (face, torso, palms).
    """

    omega: np.ndarray
    zeta: np.ndarray
    limit_omega: float
    limit_zeta: float
    gravity: float
    fields: tuple = ()

    def __post_init__(self):
        # Per-DOF constants of the PD law, computed once per run (frozen dataclass).
        object.__setattr__(self, "omega_sq", np.asarray(self.omega) ** 2)
        object.__setattr__(self, "kd_factor", 2.0 * np.asarray(self.zeta) * np.asarray(self.omega))
        fields = tuple(f for f in self.fields if len(f.bones))
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "field_radius", np.concatenate([f.radius for f in fields]) if fields
                           else np.zeros(0))
        object.__setattr__(self, "field_arguments", _field_arguments(fields))
        object.__setattr__(self, "no_allowance", np.zeros(len(self.field_radius)))


def _field_arguments(fields):
    """The distance fields and their samples as the flat arrays kernels.evaluate_state takes."""
    grids = [f.grid for f in fields]
    sizes = [g.values.size for g in grids]
    counts = [len(f.bones) for f in fields]
    return (np.concatenate([g.values.reshape(-1) for g in grids]) if grids else np.zeros(0),
            np.concatenate([[0], np.cumsum(sizes)]).astype(np.intp),
            np.array([g.values.shape for g in grids], dtype=np.intp).reshape(-1, 3),
            np.array([g.origin for g in grids], dtype=float).reshape(-1, 3),
            np.array([g.spacing for g in grids], dtype=float),
            np.array([g.margin for g in grids], dtype=float),
            np.array([g.bone for g in grids], dtype=np.intp),
            np.array([f.outside_normals for f in fields], dtype=bool),
            np.concatenate([[0], np.cumsum(counts)]).astype(np.intp),
            kernels.argument(np.concatenate([f.bones for f in fields]) if fields else np.zeros(0), (sum(counts),),
                             np.intp),
            kernels.argument(np.concatenate([f.local for f in fields]) if fields else np.zeros((0, 3)),
                             (sum(counts), 3)),
            kernels.argument(np.concatenate([f.radius for f in fields]) if fields else np.zeros(0), (sum(counts),)))


@dataclass(frozen=True, eq=False)
class FaceSamples:
    """Contact with one distance field: grid (sdf.DistanceGrid attached to grid.bone, −1
    for the kinematic base), and the sample spheres on the bones that may touch it:
    bones (k,), local (k, 3) m centres in the bone frame, radius (k,) m."""

    grid: object
    bones: np.ndarray
    local: np.ndarray
    radius: np.ndarray

    def __post_init__(self):
        # Samples outside the grid are at least margin − r from the face, so with every
        # r ≤ margin/2 none of them is near it and their normals are never read.
        radius = np.asarray(self.radius)
        object.__setattr__(self, "outside_normals", bool(len(radius) and radius.max() > 0.5 * self.grid.margin))


def face_samples(model, grid):
    """FaceSamples for the colliding bones outside the face bone's chain whose radius is
    at most half the grid margin (hands and fingers at the default 2 cm margin).

    Capsule axes outside the grid are then always farther than a radius from the face,
    so the grid alone decides contact. Points are spaced at most one radius apart along
    each axis, so the surface between samples sinks by at most 0.13 r before it is seen.
    """
    head = grid.bone
    related = (model.ancestors[head] > 0) | (model.ancestors[:, head] > 0)
    thin = model.capsule_radius <= 0.5 * grid.margin
    bones, local, radius = [], [], []
    for b in np.flatnonzero(model.collide & ~related & thin):
        r, L = model.capsule_radius[b], model.capsule_length[b]
        k = int(np.ceil(L / r)) + 1
        s = np.linspace(0.0, L, k)
        bones.append(np.full(k, b))
        local.append(np.stack([np.zeros(k), s, np.zeros(k)], -1))
        radius.append(np.full(k, r))
    if not bones:
        return FaceSamples(grid, np.zeros(0, np.intp), np.zeros((0, 3)), np.zeros(0))
    return FaceSamples(grid, np.concatenate(bones), np.concatenate(local), np.concatenate(radius))


@dataclass(frozen=True, eq=False)
class Evaluation:
    """Everything about a state at time t that does not depend on the step size.

    kin (kinematics.Kinematics), segments (n_bones, 2, 3) m, com (n_bones, 3) m and
    spatial inertias (n_bones, 6, 6) in world, mass_matrix M and bias c = RNEA(q, q̇, 0)
    (n_dof,) N·m, bone spatial velocities (n_bones, 6), symmetric gravity stiffness
    (n_dof, n_dof), contact rows G (k, n_dof) = n·(J₁ − J₂) with depths (k,) m (capsule
    pairs, then field samples, then joint limits near reach: limits.limit_rows), capsules (contacts.CapsuleContacts), face sample
    positions, unit outward normals (face-bone frame; when no sample is within its
    radius of the face, which is when normals are read, the raw grid gradient, zero
    outside the grid unless FaceSamples.outside_normals) and clearances (m), and the
    deepest penetration (m, ≥ 0); gravity_velocity = K q̇ (n_dof,) and normal_velocity
    = G q̇ (k,), shared by every step from this state; allowance: the target's
    (Target.allowance), which the field depths are counted beyond.
    """

    state: State
    kin: object
    segments: np.ndarray
    com: np.ndarray
    spatial: np.ndarray
    mass_matrix: np.ndarray
    bias: np.ndarray
    velocities: np.ndarray
    gravity_stiffness: np.ndarray
    rows: np.ndarray
    depth: np.ndarray
    capsules: object
    face_points: np.ndarray
    face_normals: np.ndarray
    face_clearance: np.ndarray
    penetration: float
    gravity_velocity: np.ndarray
    normal_velocity: np.ndarray
    momentum: np.ndarray = None
    allowance: np.ndarray = None

    def energy(self, model, gravity):
        """Total mechanical energy (J) at this state (dynamics.energy)."""
        if self.momentum is None:
            return dynamics.energy(model, self.com, self.spatial, self.velocities, gravity)
        # The same sum from the bone momenta I v that the RNEA already formed.
        return 0.5 * np.vdot(self.velocities, self.momentum) + gravity * (model.mass @ self.com[:, 2])


def evaluate(model, physics, state, target):
    """Evaluation of `state` with the base placed as in `target` (same time), in one
    compiled call (kernels.evaluate_state)."""
    limit_g, limit_depth = limit_rows(model, state.limit_x)  # solved with the contacts (limits.limit_rows)
    if target.allowance is None:
        radius_sum, samples = model.pair_radius_sum, physics.no_allowance
    else:  # the pairs' allowance lowers their zero level, the samples' is the kernel's
        n_pairs = len(model.pair_radius_sum)
        radius_sum = model.pair_radius_sum - target.allowance[:n_pairs]
        samples = kernels.argument(target.allowance[n_pairs:], physics.no_allowance.shape)
    n = model.n_bones
    (R, P, motion, origins, com, spatial, M, bias, velocities, momentum, kg, seg, gap, pair, bone1, bone2,
     cap_point, cap_normal, cap_depth, face_points, face_normals, face_clear, rows, depth, penetration,
     gravity_velocity, normal_velocity) = kernels.evaluate_state(
        model.parents, model.rest_matrices, model.rest_offsets, model.dof_bone, model.dof_axis, model.dof_start,
        model.dof_count, model.mass, model.com_y, model.inertia_perp, model.inertia_axial, model.capsule_length,
        model.pair_i, model.pair_j, model.pair_reach, model.pair_min_radius, radius_sum,
        model.pair_radius_diff, *physics.field_arguments, samples, kernels.argument(state.rotations, (n, 4)),
        kernels.argument(state.velocity, (model.n_dof,)), kernels.argument(target.base_rotation, (3, 3)),
        kernels.argument(target.base_position, (3,)), kernels.argument(target.base_velocity, (6,)),
        kernels.argument(target.base_acceleration, (6,)), float(physics.gravity),
        kernels.argument(limit_g, limit_g.shape), kernels.argument(limit_depth, limit_depth.shape))
    kin = Kinematics(R, P, motion[:, :3], origins, motion)
    cap = CapsuleContacts(pair, bone1, bone2, cap_point, cap_normal, cap_depth, gap)
    return Evaluation(state, kin, seg, com, spatial, M, bias, velocities, kg, rows, depth, cap, face_points,
                      face_normals, face_clear, penetration, gravity_velocity, normal_velocity, momentum,
                      target.allowance)


def _step_depth(physics, ev, end):
    """ev.depth (k,) m with the contact rows counted beyond the allowance at the step's
    end (Target `end`) instead of the one at its start."""
    if ev.allowance is None and end.allowance is None:
        return ev.depth
    change = (0.0 if end.allowance is None else end.allowance) - (0.0 if ev.allowance is None else ev.allowance)
    n_pairs, cap = len(ev.capsules.gap_bound), ev.capsules.pair
    # Rows: the capsule candidates, then one per field sample nearer than its radius, in order.
    samples = np.flatnonzero(ev.face_clearance < physics.field_radius)
    depth = ev.depth.copy()
    depth[:len(cap)] -= change[cap]
    depth[len(cap):len(cap) + len(samples)] -= change[n_pairs + samples]
    return depth


def implicit_step(model, physics, ev, tau_ff, mid, end, h, contact_stiffness, contact_damping,
                  damping_scale=1.0):
    """Advance ev.state by h (s) with feedforward tau_ff (n_dof,) N·m (None for none) and
    the reference Targets at the step's middle and end.

    The reference enters where each term lives in the step q⁺ = q ⊕ h v⁺: positions at
    its end (`end`), the velocity v⁺ at its middle (`mid`: v⁺ is the secant velocity over
    the step) and the feedforward at its start, which makes the explicit part a leapfrog
    step and keeps the feedforward second-order accurate instead of leading the
    reference by h/2. PD towards the reference (Kp = I ω², Kd = 2 ζ I ω with I =
    diag(M)), joint-limit penalties (active where a limit is or would be crossed within
    the step), minus the bias c(q, q̇) (kernels.implicit_step).
    contact_stiffness N/m and contact_damping N·s/m apply to all contacts;
    damping_scale multiplies the PD damping (fallback ladder). Returns the new State.
    Raises StepFailure when A is not positive definite or the result is not finite.
    """
    state = ev.state
    n_dof = model.n_dof
    rotations, velocity, limit_x, status = kernels.implicit_step(
        model.dof_flat, model.dof_bone, model.dof_parent, model.dof_upper, model.dof_lower, model.limit_lower, model.limit_upper,
        kernels.argument(state.rotations, (model.n_bones, 4)), kernels.argument(state.velocity, (n_dof,)),
        kernels.argument(state.limit_x, (n_dof,)), ev.mass_matrix, ev.bias, ev.gravity_stiffness,
        ev.gravity_velocity, ev.rows, _step_depth(physics, ev, end), ev.normal_velocity,
        np.zeros(n_dof) if tau_ff is None else kernels.argument(tau_ff, (n_dof,)),
        kernels.argument(end.rotations, (model.n_bones, 4)), kernels.argument(mid.qd, (n_dof,)), float(h),
        physics.omega_sq, physics.kd_factor, float(physics.limit_omega), float(physics.limit_zeta),
        float(damping_scale), float(contact_stiffness), float(contact_damping), _MAX_ACTIVE_SET_ITERATIONS)
    if status == 1:
        raise StepFailure("implicit matrix is not positive definite")
    if status == 2:
        raise StepFailure("non-finite state")
    return State(rotations, velocity, limit_x)


def face_tunnelling(physics, ev0, ev1):
    """True when field samples move too far within a step (each in its field's frame).

    Samples near the face may approach it along its normal by at most half their
    radius; farther ones may move at most their clearance (or half their radius)
    (kernels.field_tunnelling).
    """
    if len(physics.field_radius) == 0:
        return False
    return kernels.field_tunnelling(ev0.face_points, ev1.face_points, ev0.face_normals, ev0.face_clearance,
                                    ev1.face_clearance,
                                    physics.field_radius)

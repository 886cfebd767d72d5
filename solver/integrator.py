"""Linearised backward-Euler step of the tracked skeleton.

One step solves

    (M + h D + h² K) Δv = h (f − h K v),   v⁺ = v + Δv,   q⁺ = q ⊕ h v⁺

with one Cholesky factorisation (Baraff & Witkin, "Large Steps in Cloth Simulation",
SIGGRAPH 1998: one linearised implicit step). f = τ_pd + τ_ff + τ_contact + τ_limit − c;
K and D collect −∂f/∂q and −∂f/∂v of every spring-like term: PD gains, gravity,
joint-limit penalties, capsule and face contacts, which therefore act with their
end-of-step values, as backward Euler requires. The reference enters where each term
lives in the step (tracking_forces). Contacts use an active set: a contact joins when
its end-of-step penetration would be positive and leaves when its force would pull (no
adhesion). After the step the joint limits are enforced by projection.
⊕ is q ⊗ exp(h ω) in each bone's frame.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg.blas import dsyrk
from scipy.linalg.lapack import dpotrf, dpotrs

from . import dynamics, quat
from .contacts import capsule_contacts
from .kinematics import capsule_segments, normal_jacobian
from .limits import limit_coordinates, limit_rows, project_limits

_MAX_ACTIVE_SET_ITERATIONS = 8
_ONES3 = np.ones(3)


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
    (6,) at the world origin (dynamics.base_motion)."""

    rotations: np.ndarray
    qd: np.ndarray
    base_rotation: np.ndarray
    base_position: np.ndarray
    base_velocity: np.ndarray
    base_acceleration: np.ndarray


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
        # Points on the bones' Y axes (as face_samples places them) take a cheaper path.
        local = np.asarray(self.local)
        on_axis = len(local) > 0 and not np.any(local[:, [0, 2]])
        object.__setattr__(self, "axial", np.ascontiguousarray(local[:, 1:2]) if on_axis else None)
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
    deepest penetration (m, ≥ 0).
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
    gravity_velocity: np.ndarray = None
    normal_velocity: np.ndarray = None
    momentum: np.ndarray = None

    def __post_init__(self):
        # Products with the state velocity shared by every step from this state.
        v = self.state.velocity
        object.__setattr__(self, "gravity_velocity", self.gravity_stiffness @ v)
        object.__setattr__(self, "normal_velocity", self.rows @ v)

    def energy(self, model, gravity):
        """Total mechanical energy (J) at this state (dynamics.energy)."""
        if self.momentum is None:
            return dynamics.energy(model, self.com, self.spatial, self.velocities, gravity)
        # The same sum from the bone momenta I v that the RNEA already formed.
        return 0.5 * np.vdot(self.velocities, self.momentum) + gravity * (model.mass @ self.com[:, 2])


def evaluate(model, physics, state, target):
    """Evaluation of `state` with the base placed as in `target` (same time)."""
    kin, com, spatial, M, bias, velocities, momentum, kg = dynamics.rigid_body_terms(
        model, state.rotations, target.base_rotation, target.base_position, state.velocity,
        target.base_velocity, target.base_acceleration, physics.gravity)
    seg = capsule_segments(model, kin)
    cap = capsule_contacts(model, seg)
    b1, b2, point, normal, depth = [cap.bone1], [cap.bone2], [cap.point], [cap.normal], [cap.depth]
    face_points, face_normals, face_clear = [np.zeros((0, 3))], [np.zeros((0, 3))], [np.zeros(0)]
    for face in physics.fields:
        h = face.grid.bone
        if h < 0:
            Rh, ph = target.base_rotation, target.base_position
        else:
            Rh, ph = kin.rotations[h], kin.positions[h]
        if face.axial is not None:
            # Sample points p = head + s·Y of their bone, in the face bone's frame.
            points = (((kin.positions - ph) @ Rh).take(face.bones, axis=0)
                      + (kin.rotations[:, :, 1] @ Rh).take(face.bones, axis=0) * face.axial)
        else:
            world = (kin.positions.take(face.bones, axis=0)
                     + (kin.rotations.take(face.bones, axis=0) @ face.local[..., None])[..., 0])
            points = (world - ph) @ Rh
        phi, normals = face.grid.sample(points, face.outside_normals)
        clear = phi - face.radius
        near = clear < face.radius
        if np.count_nonzero(near):
            # Normals are only read where a sample is near the face (here and in face_tunnelling).
            grad = normals
            normals = grad / np.maximum(np.sqrt((grad * grad) @ _ONES3), 1e-12)[:, None]
            world = points[near] @ Rh.T + ph
            n = normals[near] @ Rh.T
            b1.append(face.bones[near])
            # The base sits in slot n_bones of normal_jacobian's ancestor table.
            b2.append(np.full(int(near.sum()), h if h >= 0 else model.n_bones))
            point.append(world - 0.5 * (face.radius[near] + phi[near])[:, None] * n)
            normal.append(n)
            depth.append(-clear[near])
        face_points.append(points)
        face_normals.append(normals)
        face_clear.append(clear)
    if len(face_points) == 2:
        face_points, face_normals, face_clear = face_points[1], face_normals[1], face_clear[1]
    else:
        face_points, face_normals, face_clear = (np.concatenate(x) for x in (face_points, face_normals, face_clear))
    if len(b1) > 1:
        b1, b2, point, normal, depth = (np.concatenate(x) for x in (b1, b2, point, normal, depth))
    else:
        b1, b2, point, normal, depth = b1[0], b2[0], point[0], normal[0], depth[0]
    rows = normal_jacobian(model, kin, b1, point, normal, b2)
    penetration = float(max(0.0, depth.max(initial=0.0)))
    limit_g, limit_depth = limit_rows(model, state.limit_x)
    if len(limit_depth):  # joint limits solved with the contacts (limits.limit_rows)
        rows, depth = np.concatenate([rows, limit_g]), np.concatenate([depth, limit_depth])
    return Evaluation(state, kin, seg, com, spatial, M, bias, velocities, kg, rows, depth, cap,
                      face_points, face_normals, face_clear, penetration, momentum=momentum)


def tracking_forces(model, physics, ev, tau_ff, mid, end, h, damping_scale=1.0):
    """Generalised force f (n_dof,) N·m without contacts, and the diagonal stiffness and
    damping it adds to K and D (n_dof,), for a step of h seconds.

    PD towards the reference (Kp = I ω², Kd = 2 ζ I ω with I = diag(M)),
    feedforward, joint-limit penalties (active where a limit is or would be crossed
    within the step), minus the bias c(q, q̇). The reference is sampled where each term
    lives in the step q⁺ = q ⊕ h v⁺: positions at its end (`end` Target), the velocity
    v⁺ at its middle (`mid`: v⁺ is the secant velocity over the step) and the
    feedforward tau_ff (n_dof,) N·m, or None for none, at its start, which makes the
    explicit part a leapfrog step and keeps the feedforward second-order accurate
    instead of leading the reference by h/2.
    """
    state = ev.state
    v = state.velocity
    inertia = ev.mass_matrix.diagonal()
    kp = inertia * physics.omega_sq
    kd = inertia * (physics.kd_factor if damping_scale == 1.0 else damping_scale * physics.kd_factor)
    err = quat.log(quat.conj_mul(state.rotations, end.rotations)).reshape(-1).take(model.dof_flat)
    f = kp * err + kd * (mid.qd - v) - ev.bias
    if tau_ff is not None:
        f += tau_ff
    x = state.limit_x
    x_end = x + h * v
    upper = x_end > model.dof_upper
    active = upper | (x_end < model.dof_lower)
    if np.count_nonzero(active):
        beyond = np.where(active, x - np.where(upper, model.dof_upper, model.dof_lower), 0.0)
        kl = np.where(active, inertia * physics.limit_omega ** 2, 0.0)
        dl = np.where(active, 2.0 * physics.limit_zeta * inertia * physics.limit_omega, 0.0)
        f -= kl * beyond + dl * v
        kp, kd = kp + kl, kd + dl
    return f, kp, kd


def implicit_step(model, physics, ev, tau_ff, mid, end, h, contact_stiffness, contact_damping,
                  damping_scale=1.0):
    """Advance ev.state by h (s) with feedforward tau_ff and the reference Targets at the
    step's middle and end (see tracking_forces).

    contact_stiffness N/m and contact_damping N·s/m apply to all contacts;
    damping_scale multiplies the PD damping (fallback ladder). Returns the new State.
    Raises StepFailure when A is not positive definite or the result is not finite.
    """
    f, k_diag, d_diag = tracking_forces(model, physics, ev, tau_ff, mid, end, h, damping_scale)
    v_new = _solve_velocity(model, ev, f, k_diag, d_diag, h, contact_stiffness, contact_damping)
    rotations = advance_rotations(model, ev.state.rotations, h * v_new)
    rotations, v_new, x_new = project_limits(model, rotations, v_new)
    if not math.isfinite(rotations.sum() + v_new @ v_new):
        raise StepFailure("non-finite state")
    return State(rotations, v_new, x_new)


def implicit_step_pair(model, physics, ev, tau_ff, mids, ends, hs, contact_stiffness, contact_damping,
                       damping_scale=1.0):
    """Two implicit_step()s from the same evaluation (step doubling's first half step and
    single step): mids, ends and hs are pairs of Targets and step sizes. Returns the two
    States, exactly as two implicit_step calls would (which is what happens when a joint
    limit is involved); the per-bone quaternion work of both is done in one batch.
    """
    state = ev.state
    v, x = state.velocity, state.limit_x
    h2 = np.array(hs)[:, None]
    x_end = x + h2 * v
    if np.count_nonzero((x_end > model.dof_upper) | (x_end < model.dof_lower)):
        return tuple(implicit_step(model, physics, ev, tau_ff, mids[k], ends[k], hs[k], contact_stiffness,
                                   contact_damping, damping_scale) for k in range(2))
    # tracking_forces for both steps (no limit is active in either).
    inertia = ev.mass_matrix.diagonal()
    kp = inertia * physics.omega_sq
    kd = inertia * (physics.kd_factor if damping_scale == 1.0 else damping_scale * physics.kd_factor)
    n_bones, n = model.n_bones, model.n_dof
    pair = np.empty((2, n_bones, 4))
    pair[0], pair[1] = ends[0].rotations, ends[1].rotations
    err = quat.log(quat.conj_mul(state.rotations, pair)).reshape(2, -1).take(model.dof_flat, axis=1)
    qd = np.empty((2, n))
    qd[0], qd[1] = mids[0].qd, mids[1].qd
    f = kp * err + kd * (qd - v) - ev.bias
    if tau_ff is not None:
        f += tau_ff
    # Both implicit matrices and right-hand sides at once (as _solve_velocity builds them).
    hh2 = h2 * h2
    A2 = hh2[:, :, None] * ev.gravity_stiffness
    A2 += ev.mass_matrix
    A2.reshape(2, -1)[:, ::n + 1] += h2 * kd + hh2 * kp
    b2 = h2 * (f - h2 * (ev.gravity_velocity + kp * v))
    velocity = np.empty((2, n))
    for k in range(2):
        velocity[k] = _active_set_solve(ev, A2[k], b2[k], hs[k], contact_stiffness, contact_damping)
    omega = np.zeros((2, 3 * n_bones))
    omega[:, model.dof_flat] = h2 * velocity
    rotations = quat.mul(state.rotations, quat.exp(omega.reshape(2, n_bones, 3)))
    limit_x = quat.log(rotations).reshape(2, -1).take(model.dof_flat, axis=1)
    outside = (limit_x > model.dof_upper) | (limit_x < model.dof_lower)
    out = []
    for k in range(2):
        r, vk, xk = rotations[k], velocity[k], limit_x[k]
        if np.count_nonzero(outside[k]):
            r, vk, xk = project_limits(model, r, vk)
        if not math.isfinite(r.sum() + vk @ vk):
            raise StepFailure("non-finite state")
        out.append(State(r, vk, xk))
    return tuple(out)


def _solve_velocity(model, ev, f, k_diag, d_diag, h, contact_stiffness, contact_damping):
    """v⁺ (n_dof,) of the implicit step with the contact active set (see implicit_step)."""
    v = ev.state.velocity
    n = model.n_dof
    hh = h * h
    A = hh * ev.gravity_stiffness
    A += ev.mass_matrix
    A.flat[::n + 1] += h * d_diag + hh * k_diag
    b = h * (f - h * (ev.gravity_velocity + k_diag * v))
    return _active_set_solve(ev, A, b, h, contact_stiffness, contact_damping)


def _active_set_solve(ev, A, b, h, contact_stiffness, contact_damping):
    """Solve A Δv = b plus the active contacts' terms (A symmetric, C order); returns v⁺."""
    v = ev.state.velocity
    hh = h * h
    # A is symmetric, so its transpose is a Fortran-ordered view of the same matrix that
    # BLAS/LAPACK take without reordering; only its lower triangle is read.
    A = A.T
    G, depth = ev.rows, ev.depth
    u = ev.normal_velocity
    weight = h * contact_damping + hh * contact_stiffness
    on = depth - h * u > 0.0  # contacts predicted by the current velocity: usually the final set
    for _ in range(_MAX_ACTIVE_SET_ITERATIONS):
        n_on = np.count_nonzero(on)
        if n_on:
            Ga = G.compress(on, axis=0)
            rhs = b + h * ((contact_stiffness * depth.compress(on)
                            - (contact_damping + h * contact_stiffness) * u.compress(on)) @ Ga)
            C = dsyrk(weight, Ga.T, beta=1.0, c=A, trans=0, lower=1)  # A + w GaᵀGa (lower)
        else:
            rhs = b
            C = A
        chol, info = dpotrf(C, lower=1, clean=0)
        if info != 0:
            raise StepFailure("implicit matrix is not positive definite")
        dv, _ = dpotrs(chol, rhs, lower=1)
        v_new = v + dv
        if len(depth) == 0:
            break
        u_new = G @ v_new
        end_depth = depth - h * u_new
        # Join when the end of the step would penetrate; leave only when the force would
        # pull (adhesion). Leaving merely because the contact stopped the approach just
        # short of the surface would undo that very stop (the damper acts at d = 0).
        if n_on:
            now = np.where(on, contact_stiffness * end_depth - contact_damping * u_new > 0.0, end_depth > 0.0)
            if not np.count_nonzero(now != on):
                break
        else:
            now = end_depth > 0.0
            if not np.count_nonzero(now):
                break
        on = now
    return v_new


def advance_rotations(model, rotations, increment):
    """q ⊗ exp(Δ) per bone for DOF increments (n_dof,) rad in each bone's frame (the ⊕ of the rotation manifold).

    Products of unit quaternions stay unit to rounding (~1e-16 per step), so no
    renormalisation is needed here; simulate() normalises its output.
    """
    omega = np.zeros(3 * model.n_bones)
    omega[model.dof_flat] = increment
    return quat.mul(rotations, quat.exp(omega.reshape(-1, 3)))


def face_tunnelling(physics, ev0, ev1):
    """True when field samples move too far within a step (each in its field's frame).

    Samples near the face may approach it along its normal by at most half their
    radius; farther ones may move at most their clearance (or half their radius).
    """
    radius = physics.field_radius
    if len(radius) == 0:
        return False
    move = ev1.face_points - ev0.face_points
    reach = np.sqrt((move * move) @ _ONES3)
    near = ev0.face_clearance < radius
    if np.count_nonzero(near):
        reach[near] = -((move[near] * ev0.face_normals[near]) @ _ONES3)
    return bool(np.count_nonzero((reach > 0.5 * radius) & (reach > ev0.face_clearance)))

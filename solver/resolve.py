"""Pose-space self-collision resolution: the nearest pose in which no body part is inside
another.

For one pose with local rotations q⁰ (the constrained pose-space problem of PoseShield,
self-collision resolution with neural collision fields, here with exact distances):

    minimise  Σ_b w_b ‖log(q_b⁻¹ q⁰_b)‖²   over the joint coordinates θ (selfdist.py)
    subject to g_k(θ) ≥ margin for every capsule pair and body-volume sample k,
               joint limits as bounds on θ,

w_b the size of bone b's subtree (turning a shoulder moves the whole arm, so it costs
more than turning a fingertip), g_k the exact signed distances of selfdist.py, solved
with scipy's SLSQP (Kraft, "A software package for sequential quadratic programming",
DFVLR-FB 88-28, 1988). Only the parts within a reach of touching enter as constraints
and only the joints above them as variables; after each solve every part is tested
again and the ones a solve brought near are added (an active-set outer loop).

For a sequence every frame is solved in order, warm-started from the previous frame's
correction d = θ − θ⁰ and with a temporal term λ ‖d − c d_prev‖²_W (c ∈ [0, 1] the
W-projection of d on d_prev), so the correction keeps its direction from frame to frame
and the solver does not alternate between equally good answers, while it may shrink
freely as a contact ends; frames already clear of every part are returned unchanged.

The baseline to compare against, penalty_descent, is gradient descent on the same
objective plus a quadratic penalty on the constraint violation, without constraints.
"""

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from . import quat
from .selfdist import Pose, PartSet, full_coordinates, near_parts, right_jacobian, separations


@dataclass(frozen=True)
class ResolveSettings:
    """margin m: the clearance every part pair must keep; reach m: parts closer than
    margin + reach enter the constraint set; tolerance m: a pose counts as resolved when
    every g ≥ margin − tolerance; temporal_weight: λ of the sequence term (relative to
    the distance term); max_rounds: active-set rounds; max_iterations: SLSQP iterations
    per round."""

    margin: float = 0.002
    reach: float = 0.015
    tolerance: float = 1e-4
    temporal_weight: float = 4.0
    max_rounds: int = 4
    max_iterations: int = 60

    def __post_init__(self):
        if not (np.isfinite(self.margin) and self.margin >= 0):
            raise ValueError("margin must be a finite distance >= 0 (m)")
        if not (self.reach > 0 and self.tolerance > 0 and self.temporal_weight >= 0):
            raise ValueError("reach and tolerance must be > 0 and temporal_weight >= 0")


@dataclass(frozen=True, eq=False)
class PoseResult:
    """rotations (n, 4): the resolved local rotations (the input's own array values where
    nothing changed); resolved: every part at least margin − tolerance apart; changed:
    whether any bone moved; gap_before, gap_after m: the smallest g over the tested parts
    (inf when none is near); change (n,) rad: each bone's rotation change; correction
    (n_dof,) rad: θ − θ⁰ (the next frame's warm start); evaluations: distance evaluations."""

    rotations: np.ndarray
    resolved: bool
    changed: bool
    gap_before: float
    gap_after: float
    change: np.ndarray
    correction: np.ndarray
    evaluations: int


def subtree_weights(model):
    """Number of bones (n,) in each bone's subtree, itself included."""
    return model.ancestors.sum(axis=0)


def _dof_scope(model, bones):
    """(n_dof,) bool: the DOFs of the given bones and of all their ancestors."""
    chain = model.ancestors[np.asarray(bones, dtype=np.intp)].sum(axis=0) > 0 if len(bones) else np.zeros(
        model.n_bones, bool)
    return chain[model.dof_bone]


def _involved_bones(model, fields, parts, n):
    b = [model.pair_i[parts.pairs], model.pair_j[parts.pairs]]
    for k, fd in enumerate(fields):
        m = parts.field == k
        b.append(fd.bones[parts.sample[m]])
        if fd.grid.bone >= 0 and np.count_nonzero(m):
            b.append([fd.grid.bone])
    out = np.unique(np.concatenate([np.asarray(x, dtype=np.intp) for x in b]))
    return out[out < n]


def _union(a, b):
    pairs = np.union1d(a.pairs, b.pairs)
    fs = np.unique(np.stack([np.concatenate([a.field, b.field]), np.concatenate([a.sample, b.sample])], 1), axis=0)
    return PartSet(pairs.astype(np.intp), fs[:, 0].astype(np.intp), fs[:, 1].astype(np.intp))


SHRINK_COST = 0.25
"""Weight of ‖d − d_prev‖² beside the direction term: a correction shrinks a little slower
than the contact lets go, and does not alternate in size from frame to frame."""


class _Problem:
    """Objective, constraints and their gradients over the DOFs in `scope` (caching the
    last evaluation: SLSQP asks for values and gradients at the same point)."""

    def __init__(self, model, fields, fixed, base_r, base_p, weights, scope, parts, margin, previous, lam):
        self.model, self.fields, self.fixed = model, fields, fixed
        self.base_r, self.base_p = base_r, base_p
        self.x0 = fixed.reshape(-1)[model.dof_flat]
        self.q0 = quat.exp(fixed)
        self.scope = np.flatnonzero(scope)
        self.parts, self.margin = parts, margin
        self.w_dof = weights[model.dof_bone][self.scope]
        self.weights = weights
        self.previous = None if previous is None else previous[self.scope]
        self.lam = lam
        self._key, self._value = None, None
        self.evaluations = 0

    def full_x(self, xs):
        x = self.x0.copy()
        x[self.scope] = xs
        return x

    def _eval(self, xs):
        key = xs.tobytes()
        if key != self._key:
            m = self.model
            full = full_coordinates(m, self.full_x(xs), self.fixed)
            q = quat.exp(full)
            e = quat.log(quat.conj_mul(self.q0, q))  # log(q⁰⁻¹ q): same norm as log(q⁻¹ q⁰)
            f = float(np.sum(self.weights * np.sum(e * e, axis=1)))
            grad_full = 2.0 * self.weights[:, None] * np.einsum("bji,bj->bi", right_jacobian(full), e)
            grad = grad_full.reshape(-1)[m.dof_flat][self.scope]
            if self.previous is not None and self.lam > 0:
                # Residual of the correction d from the previous one p scaled by c ∈ [0, 1]
                # (W-projection): turning or growing past p costs, shrinking along p is
                # free, so a correction fades as fast as the contact lets go. Its
                # gradient is 2λ W r with c clipped or not (r ⊥_W p when c is free).
                d = xs - self.x0[self.scope]
                p = self.previous
                pp = float(np.sum(self.w_dof * p * p))
                c = min(max(float(np.sum(self.w_dof * d * p)) / pp, 0.0), 1.0) if pp > 0 else 0.0
                r = d - c * p
                e = d - p
                f += self.lam * float(np.sum(self.w_dof * (r * r + SHRINK_COST * e * e)))
                grad = grad + 2.0 * self.lam * self.w_dof * (r + SHRINK_COST * e)
            pose = Pose(m, full, self.base_r, self.base_p)
            g, rows = separations(m, self.fields, pose, self.parts)
            self.evaluations += 1
            self._key, self._value = key, (f, grad, g, rows[:, self.scope])
        return self._value

    def objective(self, xs):
        return self._eval(xs)[0]

    def objective_grad(self, xs):
        return self._eval(xs)[1]

    def constraint(self, xs):
        return 1e3 * (self._eval(xs)[2] - self.margin)  # mm: values of order one

    def constraint_jac(self, xs):
        return 1e3 * self._eval(xs)[3]


def _slsqp(prob, xs, s, lo, hi, max_iterations):
    """scipy SLSQP on prob from xs in the coordinates z = x / s (s (k,) scales)."""
    return minimize(lambda z: prob.objective(z * s), xs / s, jac=lambda z: prob.objective_grad(z * s) * s,
                    method="SLSQP", bounds=list(zip(lo / s, hi / s)),
                    constraints=[{"type": "ineq", "fun": lambda z: prob.constraint(z * s),
                                  "jac": lambda z: prob.constraint_jac(z * s) * s}],
                    options={"maxiter": max_iterations, "ftol": 1e-8})


def _start_pose(model, x0, fixed, base_r, base_p):
    return Pose(model, full_coordinates(model, x0, fixed), base_r, base_p)


def resolve_pose(model, fields, rotations, base_rotation, base_position, settings=ResolveSettings(),
                 previous=None, method="SLSQP"):
    """The nearest pose of `model` (SkeletonModel) in which every part pair keeps
    settings.margin m.

    fields: body volumes (objects with grid, bones, local, radius: body.BodyField);
    rotations (n, 4) local pose quaternions w-first; base_rotation (4,) and base_position
    (3,) m: the kinematic base. previous (n_dof,) rad or None: the previous frame's
    correction (sequence term and warm start). method: "SLSQP" or "penalty" (the
    baseline: penalty_descent). Joint limits (model.dof_lower/upper, rad) are bounds;
    a pose already outside them keeps its own value as the bound.
    Returns PoseResult; a pose with every part clear is returned unchanged (the same
    array values, changed False).
    """
    q_in = np.asarray(rotations, dtype=float)
    base_r = quat.to_matrix(np.asarray(base_rotation, dtype=float))
    base_p = np.asarray(base_position, dtype=float)
    fixed = quat.log(q_in)
    x0 = fixed.reshape(-1)[model.dof_flat]
    n = model.n_bones
    reach = settings.margin + settings.reach
    pose0 = _start_pose(model, x0, fixed, base_r, base_p)
    parts = near_parts(model, fields, pose0, reach)
    g0 = separations(model, fields, pose0, parts, gradient=False)[0]
    gap0 = float(g0.min()) if len(g0) else np.inf
    ok = settings.margin - settings.tolerance
    if gap0 >= ok:
        return PoseResult(q_in.copy(), True, False, gap0, gap0, np.zeros(n), np.zeros(model.n_dof), 1)
    weights = subtree_weights(model).astype(float)
    lo = np.minimum(model.dof_lower, x0)
    hi = np.maximum(model.dof_upper, x0)
    x = x0.copy()
    if previous is not None:
        x = np.clip(x0 + previous, lo, hi)  # warm start from the previous frame's correction
    evaluations = 1
    for _ in range(settings.max_rounds):
        scope = _dof_scope(model, _involved_bones(model, fields, parts, n))
        prob = _Problem(model, fields, fixed, base_r, base_p, weights, scope, parts, settings.margin, previous,
                        settings.temporal_weight)
        xs = x[prob.scope]
        if method == "SLSQP":
            # In z = x / s, s = 1/√(weight), the objective's Hessian is ≈ 2 I: the identity
            # SLSQP's quasi-Newton matrix starts from, so it needs few iterations.
            s = 1.0 / np.sqrt(prob.w_dof * (1.0 + (settings.temporal_weight if previous is not None else 0.0)))
            res = _slsqp(prob, xs, s, lo[prob.scope], hi[prob.scope], settings.max_iterations)
            if not res.success and np.min(prob.constraint(res.x * s)) < -1e3 * settings.tolerance:
                # SLSQP stopped short (its linearised constraints incompatible at the start,
                # or a failed line search): the penalty descent reaches a nearby feasible
                # region, and SLSQP starts again from there.
                res = _slsqp(prob, penalty_descent(prob, res.x * s, lo[prob.scope], hi[prob.scope]), s,
                             lo[prob.scope], hi[prob.scope], settings.max_iterations)
            xs = res.x * s
        elif method == "penalty":
            xs = penalty_descent(prob, xs, lo[prob.scope], hi[prob.scope])
        else:
            raise ValueError(f"unknown method '{method}' (SLSQP or penalty)")
        evaluations += prob.evaluations
        x = prob.full_x(np.clip(xs, lo[prob.scope], hi[prob.scope]))
        pose = _start_pose(model, x, fixed, base_r, base_p)
        near = near_parts(model, fields, pose, reach)
        parts = _union(parts, near)
        g = separations(model, fields, pose, parts, gradient=False)[0]
        evaluations += 1
        if g.min() >= ok:
            break
    gap = float(g.min())
    full = full_coordinates(model, x, fixed)
    q = quat.exp(full)
    moved = np.zeros(n, bool)
    moved[model.dof_bone[x != x0]] = True
    q = np.where(moved[:, None], q * np.sign(np.sum(q * q_in, axis=1, keepdims=True) + 1e-300), q_in)
    change = np.where(moved, quat.angle_between(q_in, q), 0.0)
    return PoseResult(q, gap >= ok, bool(moved.any()), gap0, gap, change, x - x0, evaluations)


PENALTY_STIFFNESS = 10.0   # per mm² of violation, against the rad² of the distance term
PENALTY_ITERATIONS = 200


def penalty_descent(prob, xs, lo, hi, stiffness=PENALTY_STIFFNESS, iterations=PENALTY_ITERATIONS):
    """Baseline: projected gradient descent with Armijo backtracking on
    objective + stiffness Σ min(0, g − margin)² (g in mm), no constraints; returns xs."""
    def value(z):
        c = np.minimum(prob.constraint(z), 0.0)
        return prob.objective(z) + stiffness * float(c @ c)

    def grad(z):
        c = np.minimum(prob.constraint(z), 0.0)
        return prob.objective_grad(z) + 2.0 * stiffness * (c @ prob.constraint_jac(z))

    step = 1e-2
    v = value(xs)
    for _ in range(iterations):
        d = grad(xs)
        dd = float(d @ d)
        if dd < 1e-18:
            break
        while step > 1e-12:
            z = np.clip(xs - step * d, lo, hi)
            vz = value(z)
            if vz <= v - 1e-4 * step * dd:
                xs, v = z, vz
                step *= 2.0
                break
            step *= 0.5
        else:
            break
    return xs


def resolve_sequence(model, fields, rotations, base_rotations, base_positions, settings=ResolveSettings(),
                     method="SLSQP"):
    """resolve_pose over frames in order, each warm-started from and drawn towards the
    previous frame's correction (settings.temporal_weight).

    rotations (F, n, 4); base_rotations (F, 4); base_positions (F, 3) m.
    Returns a list of F PoseResult.
    """
    out, previous = [], None
    for f in range(len(rotations)):
        r = resolve_pose(model, fields, rotations[f], base_rotations[f], base_positions[f], settings,
                         previous, method)
        out.append(r)
        previous = r.correction if r.changed else None
    return out

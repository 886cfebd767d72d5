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
and only the joints between the bones of a part closer than its clearance and their
common ancestor as variables; after each solve every part is tested again and the
ones a solve brought near are added (an active-set outer loop).

For a sequence every frame is solved in order, warm-started from the previous frame's
correction d = θ − θ⁰ and with a temporal term λ ‖d − c d_prev‖²_W (c ∈ [0, 1] the
W-projection of d on d_prev), so the correction keeps its direction from frame to frame
and the solver does not alternate between equally good answers, while it may shrink
freely as a contact ends; frames already clear of every part are returned unchanged.
Each run of changed frames is then optimised as one trajectory of least added jerk
(smooth_corrections).

The baseline to compare against, penalty_descent, is gradient descent on the same
objective plus a quadratic penalty on the constraint violation, without constraints.
"""

import time
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize

from . import quat
from .selfdist import (Margins, Pose, PartSet, Separations, distance_term, full_coordinates, near_parts, part_bones,
                       separations)


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
    max_iterations: int = 30

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


def _part_paths(model, fields, parts):
    """(k, n_dof) bool: the DOFs each part's g depends on: those on the paths from its
    two bones up to (not including) their deepest common ancestor. A DOF above that
    ancestor moves both bones rigidly together and changes nothing of this g."""
    one, other = part_bones(model, fields, parts)
    anc = np.vstack([model.ancestors.astype(bool), np.zeros((1, model.n_bones), bool)])  # row n: the base
    return (anc[one] ^ anc[other])[:, model.dof_bone]  # ancestors of exactly one of the two


def _subset(parts, keep):
    """The parts of a PartSet where keep (size,) bool is set."""
    p = len(parts.pairs)
    return PartSet(parts.pairs[keep[:p]], parts.field[keep[p:]], parts.sample[keep[p:]])


def _union(a, b):
    """The parts of a followed by those of b not in a (a's order kept)."""
    pairs = np.concatenate([a.pairs, np.setdiff1d(b.pairs, a.pairs)])
    key_a, key_b = a.field * (1 << 32) + a.sample, b.field * (1 << 32) + b.sample
    new = ~np.isin(key_b, key_a)
    return PartSet(pairs.astype(np.intp), np.concatenate([a.field, b.field[new]]).astype(np.intp),
                   np.concatenate([a.sample, b.sample[new]]).astype(np.intp))


def _extend(mask, n_pairs, parts):
    """A per-part mask of an earlier PartSet with n_pairs capsule pairs, for `parts` (its
    _union with more parts): False for the parts added."""
    p = len(parts.pairs)
    out = np.zeros(parts.size, bool)
    out[:n_pairs] = mask[:n_pairs]
    out[p:p + len(mask) - n_pairs] = mask[n_pairs:]
    return out


SHRINK_COST = 0.25
"""Weight of ‖d − d_prev‖² beside the direction term: a correction shrinks a little slower
than the contact lets go, and does not alternate in size from frame to frame."""


class _Problem:
    """Objective, constraints and their gradients over the DOFs in `scope` (caching the
    last evaluation: SLSQP asks for values and gradients at the same point)."""

    def __init__(self, model, fields, fixed, base_r, base_p, weights, scope, parts, margins, previous, lam):
        self.model, self.fixed = model, fixed
        self.base_r, self.base_p = base_r, base_p
        self.x0 = fixed.reshape(-1)[model.dof_flat]
        self.q0 = quat.exp(fixed)
        self.scope = np.flatnonzero(scope)
        self.margins = margins  # (k,) m: each part's clearance
        self.w_dof = weights[model.dof_bone][self.scope]
        self.weights = weights
        self.previous = None if previous is None else previous[self.scope]
        self.lam = lam
        self.separations = Separations(model, fields, parts, self.scope)
        self._full = np.array(fixed, dtype=float)
        self._flat_scope = model.dof_flat[self.scope]
        self._grad = np.empty(model.n_dof)
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
            full = self._full
            full.reshape(-1)[self._flat_scope] = xs
            f = distance_term(full, self.q0, self.weights, m.dof_bone, m.dof_axis, self._grad)
            grad = self._grad[self.scope]
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
            g, rows = self.separations(full, self.base_r, self.base_p)
            self.evaluations += 1
            self._key, self._value = key, (f, grad, g, rows.copy())
        return self._value

    def objective(self, xs):
        return self._eval(xs)[0]

    def objective_grad(self, xs):
        return self._eval(xs)[1]

    def constraint(self, xs):
        return 1e3 * (self._eval(xs)[2] - self.margins)  # mm: values of order one

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
                 previous=None, method="SLSQP", extra_margin=None):
    """The nearest pose of `model` (SkeletonModel) in which every part pair keeps
    settings.margin m.

    fields: body volumes (objects with grid, bones, local, radius: body.BodyField);
    rotations (n, 4) local pose quaternions w-first; base_rotation (4,) and base_position
    (3,) m: the kinematic base. previous (n_dof,) rad or None: the previous frame's
    correction (sequence term and warm start). method: "SLSQP" or "penalty" (the
    baseline: penalty_descent). extra_margin: {(bone a, bone b): m} more clearance for
    the parts between those bones (−1: the kinematic base), e.g. where the skin is
    thicker than the capsules; resolved then means clear by these grown margins.
    Joint limits (model.dof_lower/upper, rad) are bounds;
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
    margins = Margins(model, fields, settings.margin, extra_margin)
    pose0 = _start_pose(model, x0, fixed, base_r, base_p)
    parts = near_parts(model, fields, pose0, margins, settings.reach)
    g0 = separations(model, fields, pose0, parts, gradient=False)[0]
    gap0 = float(g0.min()) if len(g0) else np.inf
    if np.all(g0 - margins.of(parts) >= -settings.tolerance):
        return PoseResult(q_in.copy(), True, False, gap0, gap0, np.zeros(n), np.zeros(model.n_dof), 1)
    weights = subtree_weights(model).astype(float)
    lo = np.minimum(model.dof_lower, x0)
    hi = np.maximum(model.dof_upper, x0)
    x = x0.copy()
    if previous is not None:
        x = np.clip(x0 + previous, lo, hi)  # warm start from the previous frame's correction
    evaluations = 1
    # Only the DOFs that move a part closer than its clearance (at the start or after a
    # round) are solved for: a DOF that moves only clear parts would stay where the
    # distance term wants it, at θ⁰. The other near parts those DOFs move are constraints.
    g = g0 if previous is None else separations(model, fields, _start_pose(model, x, fixed, base_r, base_p), parts,
                                                gradient=False)[0]
    hot, hot_pairs = g0 - margins.of(parts) < settings.tolerance, len(parts.pairs)
    scope = np.zeros(model.n_dof, bool)
    last, failures = None, 0
    for _ in range(settings.max_rounds):
        paths = _part_paths(model, fields, parts)
        clearance = margins.of(parts)
        hot = _extend(hot, hot_pairs, parts) | (g - clearance < settings.tolerance)
        hot_pairs = len(parts.pairs)
        scope |= paths[hot].any(axis=0)
        if last == (parts.size, int(scope.sum())):
            break  # the same problem again
        last = (parts.size, int(scope.sum()))
        keep = paths[:, scope].any(axis=1)
        prob = _Problem(model, fields, fixed, base_r, base_p, weights, scope, _subset(parts, keep), clearance[keep],
                        previous, settings.temporal_weight)
        xs = x[prob.scope]
        infeasible = False
        if method == "SLSQP":
            # In z = x / s, s = 1/√(weight), the objective's Hessian is ≈ 2 I: the identity
            # SLSQP's quasi-Newton matrix starts from, so it needs few iterations.
            s = 1.0 / np.sqrt(prob.w_dof * (1.0 + (settings.temporal_weight if previous is not None else 0.0)))
            res = _slsqp(prob, xs, s, lo[prob.scope], hi[prob.scope], settings.max_iterations)
            xs = res.x * s
            if not res.success and np.min(prob.constraint(xs)) < -1e3 * settings.tolerance:
                # SLSQP stopped short (its linearised constraints incompatible at the start,
                # or a failed line search): the penalty descent reaches a nearby feasible
                # region, and SLSQP starts again from there; where the descent finds none
                # either, the constraints have no solution within the limits and its
                # least violation is the answer.
                xs = penalty_descent(prob, xs, lo[prob.scope], hi[prob.scope])
                infeasible = np.min(prob.constraint(xs)) < -1e3 * settings.tolerance
                if not infeasible:
                    xs = _slsqp(prob, xs, s, lo[prob.scope], hi[prob.scope], settings.max_iterations).x * s
        elif method == "penalty":
            xs = penalty_descent(prob, xs, lo[prob.scope], hi[prob.scope])
        else:
            raise ValueError(f"unknown method '{method}' (SLSQP or penalty)")
        evaluations += prob.evaluations
        x = prob.full_x(np.clip(xs, lo[prob.scope], hi[prob.scope]))
        pose = _start_pose(model, x, fixed, base_r, base_p)
        parts = _union(parts, near_parts(model, fields, pose, margins, settings.reach))
        g = separations(model, fields, pose, parts, gradient=False)[0]
        evaluations += 1
        clear = bool(np.all(g - margins.of(parts) >= -settings.tolerance))
        failures = failures + 1 if infeasible else 0
        if clear or failures == 2:  # twice without a feasible point: none within the limits
            break
    return _result(model, q_in, fixed, x, clear, gap0, float(g.min()), evaluations)


def _result(model, q_in, fixed, x, resolved, gap0, gap, evaluations):
    """PoseResult of coordinates x (n_dof,) for the input rotations q_in (n, 4) whose
    rotation vectors are fixed (n, 3): bones none of whose DOFs moved keep q_in's values."""
    x0 = fixed.reshape(-1)[model.dof_flat]
    q = quat.exp(full_coordinates(model, x, fixed))
    moved = np.zeros(model.n_bones, bool)
    moved[model.dof_bone[x != x0]] = True
    q = np.where(moved[:, None], q * np.sign(np.sum(q * q_in, axis=1, keepdims=True) + 1e-300), q_in)
    change = np.where(moved, quat.angle_between(q_in, q), 0.0)
    return PoseResult(q, resolved, bool(moved.any()), gap0, gap, change, x - x0, evaluations)


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
                     method="SLSQP", extra_margins=None, progress=None):
    """resolve_pose over frames in order, each warm-started from and drawn towards the
    previous frame's correction (settings.temporal_weight); then each run of changed
    frames is smoothed as a trajectory (smooth_corrections).

    rotations (F, n, 4); base_rotations (F, 4); base_positions (F, 3) m; extra_margins
    None or (F,) resolve_pose's extra_margin per frame; progress: None or callable(fraction
    of the frames solved, in [0, 1]) after each frame (raise from it to abort).
    Returns a list of F PoseResult.
    """
    out, previous = [], None
    for f in range(len(rotations)):
        r = resolve_pose(model, fields, rotations[f], base_rotations[f], base_positions[f], settings,
                         previous, method, extra_margins[f] if extra_margins else None)
        out.append(r)
        previous = r.correction if r.changed else None
        if progress is not None:
            progress((f + 1) / len(rotations))
    return smooth_corrections(model, fields, rotations, base_rotations, base_positions, out, settings, extra_margins)


SIZE_COST = 1e-3  # weight of Σ‖d‖²_W beside the jerk term: of two smooth corrections, the smaller
# frames optimised together at most: the dual problem has one variable per constraint of
# the window's frames, so a long run is smoothed window by window, each against its
# neighbours' corrections
SMOOTH_WINDOW = 12
SMOOTH_ROUNDS = 3  # linearisations of the constraints per window (sequential quadratic programming)


def _runs(changed):
    """[(first, last)] of the runs of changed frames; runs fewer than 3 frames apart (their
    third differences share frames) are one."""
    out = []
    for f in np.flatnonzero(changed):
        if out and f - out[-1][1] <= 3:
            out[-1] = (out[-1][0], f)
        else:
            out.append((f, f))
    return out


def _windows(runs, size=SMOOTH_WINDOW):
    """The runs [(first, last)] cut into consecutive pieces of at most `size` frames."""
    return [(a, min(a + size - 1, last)) for first, last in runs for a in range(first, last + 1, size)]


def _smooth_step(M_inv, d_free, A, b, row_frame, w):
    """The least-jerk correction under linear constraints, by its dual.

    The objective Σ_j w_j (‖T D_j‖² + SIZE_COST ‖D_j‖²) separates by DOF j with the same
    frame matrix M = (TᵀT + SIZE_COST I) on the free frames, so with the fixed frames'
    part folded into the unconstrained optimum d_free (V, k) the problem
        minimise ½ Σ_j w_j (D_j − d_free_j)ᵀ M (D_j − d_free_j)  subject to  A_r · D[frame_r] ≥ b_r
    has the dual  min_{λ ≥ 0} ½ λᵀQλ − (b − A d_free)ᵀλ,  Q_rs = M⁻¹[t_r, t_s] Σ_j A_rj A_sj / w_j,
    and D = d_free + M⁻¹ Σ_r e_{t_r} (A_r / w) λ_r. The dual is a non-negative least-squares
    problem (Q = L Lᵀ; scipy.optimize.nnls, Lawson & Hanson's active set, deterministic).
    M_inv (V, V) over the free frames; A (m, k) rows per constraint, b (m,),
    row_frame (m,) index into the V free frames; w (k,) weights. Returns D (V, k)."""
    from scipy.linalg import cholesky, solve_triangular
    from scipy.optimize import nnls
    if not len(b):
        return d_free
    Aw = A / w
    Q = M_inv[np.ix_(row_frame, row_frame)] * (Aw @ A.T)
    q = b - np.einsum("rk,rk->r", A, d_free[row_frame])
    Q[np.diag_indices_from(Q)] += 1e-9 * max(float(np.trace(Q)) / len(Q), 1e-12)
    L = cholesky(Q, lower=True)
    lam = nnls(L.T, solve_triangular(L, q, lower=True), maxiter=50 * len(q))[0]
    return d_free + M_inv[:, row_frame] @ (lam[:, None] * Aw)


def smooth_corrections(model, fields, rotations, base_rotations, base_positions, results, settings=ResolveSettings(),
                       extra_margins=None):
    """The per-frame corrections d_t (PoseResult.correction) of each run of changed frames
    optimised together as a trajectory, so that the correction adds no jitter:

        minimise  Σ_t ‖Δ³d_t‖²_W + SIZE_COST Σ_t ‖d_t‖²_W   (Δ³: third difference over
                  frames, so the jerk the correction adds; W the subtree weights)
        subject to g_k(θ⁰_t + d_t) ≥ margin on every frame of the run (the parts near the
                  per-frame solution),

    with d = 0 on the frames clear of every part (they keep their pose exactly), over the
    DOFs the per-frame solutions move: the constraints linearised at the current
    trajectory (from the per-frame solutions), the quadratic problem solved exactly by its
    dual (_smooth_step), up to SMOOTH_ROUNDS times until every frame is clear, joint
    limits clipped. A window whose smoothed trajectory is not as clear on every frame as
    its per-frame solutions, or not smoother, keeps its per-frame solutions. A run longer
    than SMOOTH_WINDOW frames is smoothed window by window, each window's third
    differences reaching into its neighbours' corrections. Arguments as resolve_sequence,
    results its per-frame PoseResults, extra_margins None or per frame resolve_pose's
    extra_margin; returns the list.
    """
    results = list(results)
    changed = np.array([r.changed for r in results])
    if not changed.any():
        return results
    weights = subtree_weights(model).astype(float)
    fixed = quat.log(np.asarray(rotations, dtype=float))
    x0 = fixed.reshape(len(fixed), -1)[:, model.dof_flat]
    for a, b in _windows(_runs(changed)):
        corr = np.stack([r.correction for r in results])  # the windows before smoothed
        scope = np.flatnonzero(np.abs(corr[a:b + 1]).max(axis=0) > 0)  # the DOFs that carry the correction
        frames = np.arange(a, b + 1)
        w = weights[model.dof_bone[scope]]
        # the third differences reach 3 frames beyond the window, where d is the
        # neighbours' correction (0 on clear frames)
        lo_pad, hi_pad = min(a, 3), min(len(results) - 1 - b, 3)
        L = len(frames) + lo_pad + hi_pad
        if L < 4 or not len(scope):  # no third difference: nothing to smooth
            continue
        T = np.zeros((L - 3, L))
        for k in range(L - 3):
            T[k, k:k + 4] = (-1.0, 3.0, -3.0, 1.0)
        H = T.T @ T + SIZE_COST * np.eye(L)
        rows = np.arange(L)
        free = lo_pad + np.flatnonzero(changed[frames])  # rows of the frames to optimise
        held = np.setdiff1d(rows, free)  # padding and clear frames: their corrections stay
        D0 = corr[a - lo_pad:b + 1 + hi_pad][:, scope]
        M_inv = np.linalg.inv(H[np.ix_(free, free)])
        d_free = -M_inv @ (H[np.ix_(free, held)] @ D0[held])  # the unconstrained optimum

        def cost(D):
            J = T @ D
            return float(np.sum(w * J * J)) + SIZE_COST * float(np.sum(w * D * D))

        seps, base_r, bases = {}, {}, {}
        moved = frames[changed[frames]]  # the run's frames the per-frame solutions changed
        for f in moved:
            base_r[f] = quat.to_matrix(base_rotations[f])
            pose = _start_pose(model, x0[f] + corr[f], fixed[f], base_r[f], base_positions[f])
            margins = Margins(model, fields, settings.margin, extra_margins[f] if extra_margins else None)
            parts = near_parts(model, fields, pose, margins, settings.reach)
            seps[f] = (Separations(model, fields, parts, scope), margins.of(parts))
            bases[f] = full_coordinates(model, x0[f] + corr[f], fixed[f])  # outside the scope: kept
        lower = {f: np.minimum(model.dof_lower, x0[f])[scope] - x0[f][scope] for f in seps}
        upper = {f: np.maximum(model.dof_upper, x0[f])[scope] - x0[f][scope] for f in seps}

        def evaluate(D, gradient):
            """Per free frame: (g − clearance (k_t,) mm, rows (k_t, scope) mm/rad or None)."""
            out = []
            for i, f in enumerate(moved):
                full = bases[f].copy()
                full.reshape(-1)[model.dof_flat[scope]] = x0[f][scope] + D[free[i]]
                sep, m = seps[f]
                g, rows_f = sep(full, base_r[f], base_positions[f], gradient)
                out.append((1e3 * (g - m), None if rows_f is None else 1e3 * rows_f.copy()))
            return out

        before = [min(np.min(g, initial=np.inf), 0.0) for g, _ in evaluate(D0, False)]
        D, rounds = D0.copy(), 0
        for rounds in range(1, SMOOTH_ROUNDS + 1):
            lin = evaluate(D, True)
            A = np.concatenate([r for _, r in lin]) if lin else np.zeros((0, len(scope)))
            row_frame = np.concatenate([np.full(len(g), i, np.intp) for i, (g, _) in enumerate(lin)])
            # g + rows (d − d_now) ≥ 0  ⇔  rows d ≥ rows d_now − g
            b_lin = np.concatenate([r @ D[free[i]] - g for i, (g, r) in enumerate(lin)])
            D = D0.copy()
            D[free] = _smooth_step(M_inv, d_free, A, b_lin, row_frame, w)
            D[free] = np.clip(D[free], [lower[f] for f in seps], [upper[f] for f in seps])
            after = [np.min(g, initial=np.inf) for g, _ in evaluate(D, False)]
            if all(x >= -1e3 * settings.tolerance for x in after):
                break
        if any(x < y - 1e3 * settings.tolerance for x, y in zip(after, before)) or cost(D) >= cost(D0):
            continue
        for i, f in enumerate(moved):
            x = x0[f] + corr[f]
            x[scope] = x0[f][scope] + D[free[i]]
            g = seps[f][0](full_coordinates(model, x, fixed[f]), base_r[f], base_positions[f], False)[0]
            r = results[f]
            results[f] = _result(model, np.asarray(rotations[f], dtype=float), fixed[f], x,
                                 bool(np.all(g - seps[f][1] >= -settings.tolerance)), r.gap_before,
                                 float(g.min()) if len(g) else np.inf, r.evaluations + 2 * rounds + 2)
    return results


def warm_up():
    """Compile (or load from the disk cache) the distance kernels with the argument types
    a resolve uses, by resolving a two-arm collision with a volume; returns CPU seconds.
    The first call after an install compiles (tens of seconds), later ones load."""
    from types import SimpleNamespace

    from . import sdf
    from .model import SkeletonModel
    start = time.process_time()
    model = SkeletonModel(parents=[-1, -1], rest_offsets=[[0.0, 0.0, 0.0], [0.05, 0.0, 0.0]],
                          rest_rotations=np.tile([1.0, 0.0, 0.0, 0.0], (2, 1)), joint_types=["ball", "hinge"],
                          capsule_radius=[0.02] * 2, capsule_length=[0.2] * 2, groups=["arm"] * 2,
                          limit_lower=np.full((2, 3), -2.0), limit_upper=np.full((2, 3), 2.0))
    grid = sdf.DistanceGrid(np.full(3, -0.1), 0.1, np.full((3, 3, 3), 0.05), -1, 0.05)
    field = SimpleNamespace(grid=grid, bones=np.array([0]), local=np.zeros((1, 3)), radius=np.array([0.02]))
    resolve_pose(model, (field,), quat.exp(np.array([[0.0, 0.0, 0.3], [0.0, 0.0, 0.0]])), quat.IDENTITY,
                 np.zeros(3))
    return time.process_time() - start

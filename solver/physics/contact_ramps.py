"""Contact holds of a bake, eased in and out: the contacts the retarget kept, as depth
allowances (intended_contacts), and the blend towards the reference on a hold's ramps
chosen for the least fingertip jerk under a depth bound (smooth_ramps). Arrays only;
the bake (signsim_addon/bake/job.py) calls both after the simulation."""

import numpy as np

from ..core import quat
from .contact_depths import contact_depths, pair_depth
from .guard import RAMP_S, towards_reference
from .metrics import tip_positions


RAMP_DEPTH_M = 0.0005  # a hold's ramp may penetrate this much more than the simulation there
HOLD_RAMP_S = 0.5      # s: a contact hold's ramps, over which smooth_ramps chooses the blend
_RAMP_LEVELS = 8       # weights tried per ramp frame for its depth bound
_RAMP_TRIES = 4        # least-squares solves, each halving the weights of frames still too deep


def smooth_ramps(model, reference, fields, rotations, hold, intended, pair_kinds, tips):
    """The bake on and around contact holds: `rotations` (F, n, 4), the simulation, slerped
    towards the reference on the hold's frames (hold (F, n), solver.physics.guard.contact_hold's
    weights: 1 on the contact's chains, in (0, 1) on its ramps), with one weight w_f per
    ramp frame (the same for each bone ramping there) chosen for the least fingertip
    jerk Σ‖Δ³p‖² of `tips` (k,) (bone indices), p linearised in w, under bounds:
    0 ≤ w_f ≤ the largest of _RAMP_LEVELS levels whose blend penetrates nothing more than
    RAMP_DEPTH_M deeper than the simulation does at f (contact_depths, the intended
    contacts counted beyond their level: intended_contacts). Bounded least squares
    (scipy.optimize.lsq_linear, BVLS: Stark & Parker, "Bounded-variable least-squares",
    1995, deterministic); frames the blend still takes too deep get their bound halved and
    are solved again, up to _RAMP_TRIES times, then clipped to the bound. A fixed ramp
    into a contact whose first frame the simulation reaches elsewhere (pushed off by the
    reference's own dive through the skin) snaps in the frames before it (chin_cheek on
    the bundled signer: fingertip jerk +37 % over the reference with the linear ramp
    whose deep frames were halved). Returns the rotations (F, n, 4)."""
    from scipy.optimize import lsq_linear
    ramp = (hold > 0.0) & (hold < 1.0)
    rows = np.flatnonzero(ramp.any(axis=1))
    full = np.where(hold >= 1.0, 1.0, 0.0)
    if not len(rows):
        return towards_reference(rotations, reference.rotations, full)
    lo, hi = max(int(rows[0]) - 3, 0), min(int(rows[-1]) + 4, len(hold))  # with the third differences' reach
    here = [(a, b, start - lo, stop - lo, level) for a, b, start, stop, level in intended]
    span = slice(lo, hi)
    base = (reference.base_positions[span], reference.base_rotations[span])
    sim, ref = rotations[span], reference.rotations[span]
    var = rows - lo
    on = ramp[span]

    def blend(w):  # w (hi − lo,) on the ramp frames
        return towards_reference(sim, ref, np.where(on, w[:, None], full[span]))

    def deepest(poses):  # poses (c·(hi − lo), n, 4): c copies of the span, measured in one call
        c = len(poses) // (hi - lo)
        copies = [(a, b, start + i * (hi - lo), stop + i * (hi - lo), level)
                  for i in range(c) for a, b, start, stop, level in here]
        return _deepest(poses, model, np.tile(base[0], (c, 1)), np.tile(base[1], (c, 1)), fields, pair_kinds, copies)
    allowed = deepest(sim) + RAMP_DEPTH_M
    levels = np.arange(1, _RAMP_LEVELS + 1) / _RAMP_LEVELS
    w = np.zeros((_RAMP_LEVELS, hi - lo))
    w[:, var] = levels[:, None]
    ok = (deepest(np.concatenate([blend(x) for x in w])).reshape(_RAMP_LEVELS, hi - lo) <= allowed).astype(int)
    bound = np.cumprod(ok, axis=0).sum(axis=0) / _RAMP_LEVELS  # the largest level of an unbroken run from 0
    p0 = tip_positions(model, blend(np.zeros(hi - lo)), *base, tips).reshape(hi - lo, -1)
    w1 = np.zeros(hi - lo)
    w1[var] = 1.0
    dp = tip_positions(model, blend(w1), *base, tips).reshape(hi - lo, -1) - p0
    n3 = hi - lo - 3
    diff3 = np.zeros((n3, hi - lo))
    for k, c in enumerate((-1.0, 3.0, -3.0, 1.0)):
        diff3[np.arange(n3), np.arange(n3) + k] = c
    # Δ³(p0 + w·dp) = diff3 p0 + Σ_f diff3[:, f] dp_f w_f, every coordinate a row
    A = (diff3[:, var, None] * dp[None, var]).transpose(0, 2, 1).reshape(-1, len(var))
    b = -(diff3 @ p0).reshape(-1)
    w = np.zeros(hi - lo)
    for _ in range(_RAMP_TRIES):
        w[var] = lsq_linear(A, b, bounds=(0.0, np.maximum(bound[var], 1e-12)), method="bvls").x
        deep = deepest(blend(w))[var] > allowed[var]
        if not np.count_nonzero(deep):
            break
        bound[var[deep]] = 0.5 * w[var[deep]]
    else:
        w[var] = np.minimum(w[var], bound[var])
    out = towards_reference(rotations, reference.rotations, full)
    out[span] = blend(w)
    return quat.make_continuous(out, reference.rotations[0])


def _deepest(pose, model, base_positions, base_rotations, fields, pair_kinds, intended):
    """(F,) m: the deepest penetration of each frame of pose (F, n, 4) over every contact kind."""
    depth = contact_depths(model, pose, base_positions, base_rotations, fields, pair_kinds, intended)
    return np.max(np.stack(list(depth.values())), axis=0)


def intended_contacts(model, reference, fields, contacts, frame_time):
    """contact_depths.contact_depths' `intended` [(bone a, bone b, start, stop, level m)] of the
    preserved contacts (the bake reads them from the action) between two simulated bones (a fingertip and
    the head the face hangs from): over the contact's frames and its hold's ramps
    (solver.physics.guard.contact_hold), depth counts only beyond the deepest the reference has
    on the contact's frames (contact_depths.pair_depth)."""
    ramp = int(round(RAMP_S / frame_time))
    out = []
    for c in contacts:
        if len(c["index"]) != 2:
            continue
        a, b = (int(i) for i in c["index"])
        depth = pair_depth(model, reference.rotations[c["start"]:c["stop"]], reference.base_positions[c["start"]:c["stop"]],
                           reference.base_rotations[c["start"]:c["stop"]], fields, a, b)
        out.append((a, b, c["start"] - ramp, c["stop"] + ramp, float(depth.max(initial=0.0))))
    return out

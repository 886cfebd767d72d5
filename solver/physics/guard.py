"""The deviation guard: bones a simulation threw far from the reference.

After the physics pass every bone's world orientation is compared with the reference's.
A contact deflects the bones it touches and the ones carrying them by a few degrees,
and by more only while the reference itself touches something there. A bone further
than DIVERGED_DEG from the reference where the reference touches nothing with it or
within CONTACT_LEVELS bones below it has strayed: the simulation found another pose
(a finger caught on the wrong side of a body volume by a fast closure); it is kept and
reported. A bone that strayed further than CONTACT_MAX_DEG means the simulation diverged
(a chain flung by a penalty force, an unstable step): those bones, with every bone they
carry, whose world pose hangs from them, are passed through from the reference on those
frames (the fallback ladder's kinematic pass-through, for those bones only), blended
back over RAMP_S on each side so that nothing snaps. Pure numpy.
"""

from dataclasses import dataclass, replace

import numpy as np

from ..core import quat
from ..core.kinematics import forward_kinematics
from .simulate import LEVEL_KINEMATIC

DIVERGED_DEG = 30.0     # world-orientation error (deg) no tracking error reaches without a contact
CONTACT_MAX_DEG = 90.0  # world-orientation error (deg) beyond which a strayed bone is passed through
CONTACT_WINDOW_S = 0.25  # a contact explains deviations this long before it starts and after it ends
RAMP_S = 0.1            # s: blend between the bake and the pass-through on each side
CONTACT_LEVELS = 3      # a contact explains its bone and this many parents up (a fingertip: its finger and palm)


@dataclass(frozen=True)
class Diverged:
    """What the guard found and did (F frames, n bones).

    error_deg (F, n): world-orientation error of the simulation before the guard (deg);
    strayed (F, n) bool: bones beyond DIVERGED_DEG without an explaining contact (kept);
    diverged (F, n) bool: strayed bones beyond CONTACT_MAX_DEG (passed through);
    passed (F, n) float in [0, 1]: weight of the reference in the returned rotations
    (1 on diverged bones and the bones they carry, ramping to 0 over RAMP_S).
    """

    error_deg: np.ndarray
    strayed: np.ndarray
    diverged: np.ndarray
    passed: np.ndarray

    @property
    def frames(self):
        """(k,) int: frames where some bone follows the reference (passed > 0)."""
        return np.nonzero(self.passed.max(axis=1) > 0)[0]


def world_error_deg(model, reference_rotations, rotations, base_positions, base_rotations):
    """Angle (F, n) deg between each bone's world orientation in two poses.

    reference_rotations, rotations (F, n, 4): local pose quaternions; base_positions
    (F, 3) m, base_rotations (F, 4): the kinematic base both share. Geodesic angle
    arccos((tr(R₁ᵀR₂) − 1)/2), twist included.
    """
    base = quat.to_matrix(base_rotations)
    r1 = forward_kinematics(model, reference_rotations, base, base_positions).rotations
    r2 = forward_kinematics(model, rotations, base, base_positions).rotations
    cos = 0.5 * (np.einsum("...ij,...ij->...", r1, r2) - 1.0)
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def near_contact(model, touching, frame_time, window_s=CONTACT_WINDOW_S, before=True, levels=None):
    """(F, n) bool: the bone or one it carries touches within window_s s (after, and with
    before=True also before, the frame). touching (F, n) bool (body.bone_contacts);
    frame_time s; levels: how many parents up a contact reaches (None: all ancestors).
    A contact on a fingertip deflects the finger and the bones carrying it."""
    carried = touching.astype(float) @ _reach(model, levels) > 0
    out = carried.copy()
    for k in range(1, int(round(window_s / frame_time)) + 1):
        out[k:] |= carried[:-k]
        if before:
            out[:-k] |= carried[k:]
    return out


def _reach(model, levels):
    """(n, n) float: [b, a] = 1 where bone a is b or carries it at most `levels` parents
    up (None: any number), model.ancestors' convention."""
    if levels is None:
        return model.ancestors
    n = model.n_bones
    parents = np.asarray(model.parents)
    child = np.flatnonzero(parents >= 0)
    up = np.zeros((n, n))
    up[child, parents[child]] = 1.0  # [b, parent of b]
    out, step = np.eye(n), np.eye(n)
    for _ in range(levels):
        step = step @ up
        out = out + step
    return (out > 0).astype(float)


def guard(model, reference_rotations, rotations, base_positions, base_rotations, reference_touching,
          frame_time, limit_deg=DIVERGED_DEG):
    """(rotations (F, n, 4), Diverged): `rotations` with diverged bones passed through.

    reference_rotations, rotations (F, n, 4) local pose quaternions (the reference keys
    and the simulation); base_positions (F, 3) m, base_rotations (F, 4);
    reference_touching (F, n) bool: bones the reference pose has in contact
    (body.bone_contacts on the reference); frame_time s; limit_deg: DIVERGED_DEG.
    A bone has strayed where its world error exceeds limit_deg without a reference
    contact near (near_contact), and diverged where it also exceeds CONTACT_MAX_DEG; the
    returned rotations are slerp(simulated, reference, passed) per bone and frame (see
    Diverged).
    """
    err = world_error_deg(model, reference_rotations, rotations, base_positions, base_rotations)
    explained = near_contact(model, reference_touching, frame_time, levels=CONTACT_LEVELS)
    strayed = (err > limit_deg) & ~explained
    diverged = strayed & (err > CONTACT_MAX_DEG)
    core = (diverged.astype(float) @ model.ancestors.T) > 0  # the bone or one carrying it diverged
    passed = ramped(core, frame_time)
    if not np.count_nonzero(passed):
        return rotations, Diverged(err, strayed, diverged, passed)
    return towards_reference(rotations, reference_rotations, passed), Diverged(err, strayed, diverged, passed)


def ramped(core, frame_time, ramp_s=RAMP_S):
    """(F, n) float in [0, 1]: 1 where core (F, n) bool is set, falling linearly to 0 over
    ramp_s s (frame_time s per frame) before and after each run of frames."""
    ramp = int(round(ramp_s / frame_time))
    weight = core.astype(float)
    for k in range(1, ramp + 1):
        w = 1.0 - k / (ramp + 1.0)
        weight[k:] = np.maximum(weight[k:], w * core[:-k])
        weight[:-k] = np.maximum(weight[:-k], w * core[k:])
    return weight


def towards_reference(rotations, reference_rotations, weight):
    """slerp(rotations, reference_rotations, weight) (F, n, 4) per bone and frame
    (rotations, reference_rotations (F, n, 4) local quaternions; weight (F, n) in [0, 1]),
    hemisphere-continuous from the reference's first frame."""
    return quat.make_continuous(quat.slerp(rotations, reference_rotations, weight), reference_rotations[0])


def contact_hold(model, n_frames, contacts, frame_time, ramp_s=RAMP_S):
    """(F, n) float in [0, 1]: how much each bone keeps the reference for contacts the
    reference makes on purpose (the retarget placed a fingertip on the chin).

    n_frames F; contacts: [(bones (k,) int, start, stop)]: the bones touching each other
    and the frame indices [start, stop) of the touch; frame_time s. On those frames these
    bones and every bone carrying them (their chains up to the kinematic base) keep the
    reference (weight 1), so the pair stays at the distance the reference has: its
    resting contact is neither pushed apart nor pressed in. Over ramp_s before and after,
    the weight falls linearly to 0 (`ramped`); the bake chooses its own blend on those
    ramp frames (contact_ramps.smooth_ramps).
    """
    core = np.zeros((n_frames, model.n_bones), bool)
    for bones, start, stop in contacts:
        start, stop = max(start, 0), min(stop, n_frames)
        core[start:stop] |= model.ancestors[np.asarray(bones, dtype=np.intp)].max(axis=0) > 0  # the bones and their parents
    return ramped(core, frame_time, ramp_s)


def with_pass_through(result, rotations, diverged):
    """simulate.SimResult `result` with the guarded `rotations` (F, n, 4) and the frames
    where bones were passed through (Diverged.frames) at fallback level LEVEL_KINEMATIC,
    counted in fallback_counts."""
    level = np.asarray(result.fallback_level).copy()
    level[diverged.frames] = LEVEL_KINEMATIC
    counts = np.array([np.count_nonzero(level == lv) for lv in (1, 2, 3)])
    return replace(result, rotations=rotations, fallback_level=level, fallback_counts=counts)

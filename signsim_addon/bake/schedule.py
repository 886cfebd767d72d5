"""Contact-stiffness schedules: the animatable `signsim.physics.contact_multiplier` keyed
per phase of the motion (hold / transition / contact).

A schedule is an ordinary F-curve on the armature's reference action (the action the
next bake tracks; bake._schedule reads it per frame), so the animator can edit it in the
Graph Editor like any other curve. Laying a phase replaces the keys inside its frame range
by a plateau: a key at the first and at the last frame with the phase's multiplier.
"""

from .. import compat
from .. import keys
from ..errors import SignSimError

DATA_PATH = "signsim.physics.contact_multiplier"
GROUP = "SignSim schedule"
# phase id → (label, multiplier, what it is for)
PHASES = {
    'HOLD': ("Hold", 1.0, "Hands hold a handshape: the stored contact stiffness"),
    'TRANSITION': ("Transition", 0.5, "Fingers move fast between handshapes: softer contacts"),
    'CONTACT': ("Contact", 2.0, "Hand touches hand or face: stiffer contacts"),
}


def target(ob):
    """(action, slot) the schedule of armature `ob` lives on, or raise SignSimError.

    That is the assigned action, or its reference when the assigned action is a
    physics bake (keys on a bake would never reach the next bake).
    """
    if ob is None or ob.type != 'ARMATURE':
        raise SignSimError(f"'{getattr(ob, 'name', ob)}' is not an armature")
    ad = ob.animation_data
    action = ad.action if ad else None
    if action is None:
        raise SignSimError(f"armature '{ob.name}' has no action to key a schedule on")
    slot = ad.action_slot
    ref = action.signsim.reference_action
    if ref is not None:
        slot = ref.slots.get(slot.identifier) if slot else None
        action = ref
    if slot is None:
        slots = [s for s in action.slots if s.target_id_type in ('OBJECT', 'UNSPECIFIED')]
        if not slots:
            raise SignSimError(f"action '{action.name}' has no object slot")
        slot = slots[0]
    return action, slot


def curve(action, slot, create=False):
    """The schedule F-curve of `action`'s `slot`, or None (create=True: make it)."""
    if create:
        bag = compat.ensure_channelbag(action, slot)
    else:
        bag = keys.channelbag(action, slot)
        if bag is None:
            return None
    fc = bag.fcurves.find(DATA_PATH)
    if fc is None and create:
        fc = compat.new_fcurve(bag, DATA_PATH, 0, GROUP)
    return fc


def lay_phase(ob, phase, frame_start, frame_end, value=None):
    """Key the multiplier of `phase` (or `value`) from frame_start to frame_end inclusive.

    Keys strictly inside the range are replaced; returns (action, [(frame, value), …]) of
    the whole curve afterwards. Raises SignSimError: unknown phase, empty range,
    non-positive value, no action.
    """
    if phase not in PHASES:
        raise SignSimError(f"unknown phase '{phase}': choose {', '.join(p.lower() for p in PHASES)}")
    if frame_end < frame_start:
        raise SignSimError(f"empty frame range {frame_start}–{frame_end}")
    value = PHASES[phase][1] if value is None else float(value)
    if not value > 0:
        raise SignSimError("the contact stiffness multiplier must be positive")
    action, slot = target(ob)
    fc = curve(action, slot, create=True)
    points = fc.keyframe_points
    for k in reversed(range(len(points))):
        if frame_start <= points[k].co.x <= frame_end:
            points.remove(points[k], fast=True)
    for f in sorted({float(frame_start), float(frame_end)}):
        kp = points.insert(f, value, options={'FAST'})
        kp.interpolation = 'LINEAR'
    fc.update()
    return action, curve_keys(fc)


def clear(ob):
    """Remove the schedule F-curve; returns the action it was on, or None if there was none."""
    action, slot = target(ob)
    fc = curve(action, slot)
    if fc is None:
        return None
    keys.channelbag(action, slot).fcurves.remove(fc)
    return action


def curve_keys(fc):
    """[(frame, multiplier), …] of a schedule F-curve."""
    return [(kp.co.x, kp.co.y) for kp in fc.keyframe_points] if fc else []


def phase_of(value):
    """The phase id whose multiplier is `value` (within 1e-6), or None."""
    return next((p for p, (_l, v, _d) in PHASES.items() if abs(v - value) < 1e-6), None)


def summary(ob):
    """Rows for the panel: [(frame, multiplier, phase id or None)] of the schedule of `ob`;
    [] when there is no schedule, None when `ob` has no action to key."""
    try:
        action, slot = target(ob)
    except SignSimError:
        return None
    return [(f, v, phase_of(v)) for f, v in curve_keys(curve(action, slot))]


def _side(name):
    """'L', 'R' or '' from a bone name (.L/_L/-L suffixes, Left/Right words)."""
    low = name.lower()
    if low.endswith((".l", "_l", "-l")) or "left" in low:
        return "L"
    if low.endswith((".r", "_r", "-r")) or "right" in low:
        return "R"
    return ""


def contact_frames(rig, reference, gap_mm=1.0):
    """(F,) bool: frames where the hands touch — a capsule pair of bones on different sides
    (hand–hand, hand–arm), or a thumb and a finger of one hand, closer than gap_mm.
    Neighbouring fingers of one hand always touch, so they do not count."""
    import numpy as np

    from ...solver.physics.capsule_contacts import capsule_contacts
    from ...solver.core.kinematics import capsule_segments, forward_kinematics
    from ...solver.core import quat

    model = rig.model
    sides = np.array([_side(n) for n in rig.bone_names])
    groups = np.array(model.groups)
    kin = forward_kinematics(model, reference.rotations, quat.to_matrix(reference.base_rotations),
                             reference.base_positions)
    out = np.zeros(len(reference.times), dtype=bool)
    for f, seg in enumerate(capsule_segments(model, kin)):
        c = capsule_contacts(model, seg)
        close = c.depth > -gap_mm * 1e-3
        i, j = c.bone1[close], c.bone2[close]
        cross = (sides[i] != sides[j]) & (sides[i] != "") & (sides[j] != "")
        gi, gj = groups[i], groups[j]
        pinch = (sides[i] == sides[j]) & (((gi == "thumb") & (gj == "fingers"))
                                          | ((gi == "fingers") & (gj == "thumb")))
        out[f] = bool(np.any(cross | pinch))
    return out


def detect_phases(scene, ob, speed_threshold=0.5, gap_mm=1.0, min_frames=3, frame_range=None):
    """The phases of the reference motion of armature `ob`, per frame run:
    [(phase id, first frame, last frame)] in scene frames.

    contact: the hands touch (contact_frames; the face is not sampled here);
    transition: otherwise, the fastest fingertip moves faster than speed_threshold (m/s);
    hold: the rest. Runs shorter than min_frames join the run before them.
    Raises SignSimError like bake.prepare (no action, rig without fingers, …).
    """
    import numpy as np

    from ...solver.physics.metrics import tip_positions
    from . import job as bake

    action, _slot = target(ob)
    job = bake.prepare(scene, ob, action=action, frame_range=frame_range)
    ref, model = job.reference, job.rig.model
    touching = contact_frames(job.rig, ref, gap_mm)
    tips = tip_positions(model, ref.rotations, ref.base_positions, ref.base_rotations,
                         job.rig.fingertips)
    speed = np.linalg.norm(np.gradient(tips, ref.times, axis=0), axis=-1).max(axis=1)
    phases = np.where(touching, 'CONTACT', np.where(speed > speed_threshold, 'TRANSITION', 'HOLD'))
    runs = []
    for f, phase in zip(job.frames, phases):
        if runs and runs[-1][0] == phase:
            runs[-1][2] = f
        else:
            runs.append([str(phase), f, f])
    merged = []
    for run in runs:
        if merged and (run[2] - run[1] + 1 < min_frames or merged[-1][0] == run[0]):
            merged[-1][2] = run[2]
        else:
            merged.append(run)
    return [(p, int(a), int(b)) for p, a, b in merged]


def lay_phases(ob, segments):
    """Replace the schedule of `ob` by plateaus of `segments` [(phase, first, last)];
    returns (action, keys) as lay_phase."""
    if not segments:
        raise SignSimError("no phases to key")
    clear(ob)
    result = None
    for phase, first, last in segments:
        result = lay_phase(ob, phase, first, last)
    return result

"""Penetration depths of a posed skeleton against itself and the body volumes: what the
solver's contacts resolve, measured per frame and contact kind for every report
(capsule pairs: capsule_contacts.pair_depths; volumes: sample spheres in the distance
fields of body_volumes.BodyField)."""

import numpy as np

from ..core import quat


def contact_depths(model, rotations, base_positions, base_rotations, fields=(), pair_kinds=None, intended=()):
    """Deepest penetration per frame and contact kind: {kind: (F,) m, ≥ 0}.

    rotations (F, n, 4) local pose quaternions; base_positions (F, 3) m and
    base_rotations (F, 4) of the kinematic base. Capsule pairs: r₁ + r₂ − axis distance
    (contacts.capsule_contacts), by pair_kinds (n_pairs,) (default: all "capsule");
    fields (objects with grid, bones, local, radius, kinds, as BodyField): r − φ of each
    sample sphere. intended: [(bone a, bone b, start, stop, level m)]: contacts made on
    purpose (kept by the retarget) on frames [start, stop); there the capsule pair a–b
    and a's samples against b's field (or b's against a's) count only beyond `level`,
    the depth the intended pose has (pair_depth).
    This is the penetration the solver's contacts resolve, so every report (per-frame
    curves, summaries) uses it.
    """
    from .capsule_contacts import pair_depths
    from ..core.kinematics import capsule_segments, forward_kinematics
    base = quat.to_matrix(base_rotations)
    kin = forward_kinematics(model, rotations, base, base_positions)
    seg = capsule_segments(model, kin)
    n_frames = len(seg)
    kinds = ("capsule",) * len(model.pairs) if pair_kinds is None else tuple(pair_kinds)
    names = sorted(set(kinds))
    column = {k: i for i, k in enumerate(names)}
    pair_column = np.array([column[k] for k in kinds], dtype=np.intp)
    pairs = np.asarray(model.pairs, dtype=np.intp).reshape(-1, 2)
    zero = np.zeros((n_frames, len(pairs)))
    for a, b, start, stop, level in intended:
        zero[max(start, 0):stop, _pair_of(pairs, a, b)] = level
    out = {k: np.zeros(n_frames) for k in names}
    beyond = np.maximum(pair_depths(model, seg) - zero, 0.0)  # (F, n_pairs)
    for k, i in column.items():
        out[k] = beyond[:, pair_column == i].max(axis=1, initial=0.0)
    for field in fields:
        depth = np.maximum(-field_clearance(kin, field, base_positions, base), 0.0)
        for a, b, start, stop, level in intended:
            mine = _samples_of(field, a, b)
            if mine is not None:
                depth[max(start, 0):stop, mine] = np.maximum(depth[max(start, 0):stop, mine] - level, 0.0)
        for kind in sorted(set(field.kinds)):
            cols = np.array([k == kind for k in field.kinds])
            prev = out.get(kind, np.zeros(n_frames))
            out[kind] = np.maximum(prev, depth[:, cols].max(axis=1))
    return out


def _pair_of(pairs, a, b):
    """(n_pairs,) bool: the capsule pair of bones a and b (either order)."""
    return ((pairs[:, 0] == a) & (pairs[:, 1] == b)) | ((pairs[:, 0] == b) & (pairs[:, 1] == a))


def _samples_of(field, a, b):
    """(k,) bool: the field's samples of bone a when the field hangs from b (or of b when
    from a), else None."""
    h = field.grid.bone
    return (field.bones == a) if h == b else (field.bones == b) if h == a else None


def intended_mask(model, fields, a, b):
    """(n_pairs + S,) bool: the capsule pair of bones a and b (model.pairs), then the
    samples of every field (in order, S in all) that measure a against b (_samples_of)."""
    pairs = np.asarray(model.pairs, dtype=np.intp).reshape(-1, 2)
    return np.concatenate([_pair_of(pairs, a, b)] + [
        np.zeros(len(f.bones), bool) if _samples_of(f, a, b) is None else _samples_of(f, a, b) for f in fields])


def pair_depth(model, rotations, base_positions, base_rotations, fields, a, b):
    """(F,) m, ≥ 0: the deepest penetration between bones a and b per frame: their capsule
    pair, and a's samples in b's field (or b's in a's); arguments as in contact_depths."""
    from .capsule_contacts import pair_depths
    from ..core.kinematics import capsule_segments, forward_kinematics
    base = quat.to_matrix(base_rotations)
    kin = forward_kinematics(model, rotations, base, base_positions)
    seg = capsule_segments(model, kin)
    pairs = np.asarray(model.pairs, dtype=np.intp).reshape(-1, 2)
    hit = _pair_of(pairs, a, b)
    out = np.maximum(pair_depths(model, seg)[:, hit].max(axis=1, initial=0.0), 0.0)
    for field in fields:
        mine = _samples_of(field, a, b)
        if mine is not None and np.count_nonzero(mine):
            clear = field_clearance(kin, field, base_positions, base)[:, mine]
            out = np.maximum(out, -clear.min(axis=1))
    return out


def bone_contacts(model, rotations, base_positions, base_rotations, fields=(), tolerance=1e-3):
    """(F, n) bool: the bone is within `tolerance` m of touching something at that frame
    (a capsule pair or a field sample of it); arguments as in contact_depths."""
    from .capsule_contacts import pair_depths
    from ..core.kinematics import capsule_segments, forward_kinematics
    base = quat.to_matrix(base_rotations)
    kin = forward_kinematics(model, rotations, base, base_positions)
    seg = capsule_segments(model, kin)
    out = np.zeros((len(seg), model.n_bones), bool)
    frames, pair = np.nonzero(pair_depths(model, seg) > -tolerance)
    out[frames, model.pair_i[pair]] = out[frames, model.pair_j[pair]] = True
    for field in fields:
        near = field_clearance(kin, field, base_positions, base) < tolerance
        h = field.grid.bone
        for k, b in enumerate(field.bones):
            out[:, b] |= near[:, k]
            if h >= 0:
                out[:, h] |= near[:, k]
    return out


def field_clearance(kin, field, base_positions, base):
    """φ − r (F, k) m of a field's sample spheres (field: grid, bones (k,), local (k, 3) m,
    radius (k,) m, as BodyField or integrator.FaceSamples) over F frames; kin: batched
    Kinematics of the frames, base_positions (F, 3) m and base (F, 3, 3) the base's
    rotation matrices (the frame of a field attached to bone −1)."""
    h = field.grid.bone
    if h < 0:
        Rh, ph = base, np.asarray(base_positions)
    else:
        Rh, ph = kin.rotations[:, h], kin.positions[:, h]
    world = kin.positions[:, field.bones] + (kin.rotations[:, field.bones] @ field.local[..., None])[..., 0]
    local = np.einsum("nij,nki->nkj", Rh, world - ph[:, None])
    phi, _ = field.grid.sample(local.reshape(-1, 3), False)
    return phi.reshape(len(local), -1) - field.radius


def skin_agreement(model, skin, tolerance=1e-3):
    """How far the body model's depths are from the evaluated skin's, per contact kind.

    model, skin: {kind: (F,) m, ≥ 0} of the same frames (contact_depths of a motion and
    body.skin.skin_depths of the same motion); only kinds present in both are compared
    (the skin tests hand parts and the capsule pairs, not every field kind).
    Returns {kind: {"model_deeper_frames": frames where the model penetrates deeper than
    the skin by more than tolerance m, "clear_frames": those of them where the skin is
    clear (depth 0), "model_excess": the largest model − skin m on those frames (0 when
    none), "skin_deeper_frames", "skin_excess": the same the other way (the model misses
    the skin's penetration)}}. Invariant: the model agrees with the skin within tolerance
    (a pose clear on the skin is clear in the model within tolerance) ⇔
    model_deeper_frames == 0 for every kind.
    """
    out = {}
    for kind in sorted(set(model) & set(skin)):
        m, s = np.asarray(model[kind], float), np.asarray(skin[kind], float)
        deeper, missed = m - s > tolerance, s - m > tolerance
        out[kind] = {"model_deeper_frames": int(np.count_nonzero(deeper)),
                     "clear_frames": int(np.count_nonzero(deeper & (s <= 0.0))),
                     "model_excess": float(np.max(m - s, where=deeper, initial=0.0)),
                     "skin_deeper_frames": int(np.count_nonzero(missed)),
                     "skin_excess": float(np.max(s - m, where=missed, initial=0.0))}
    return out

"""Contact-preserving retargeting, the Blender side: after the plain retarget, the contacts
of the source motion (fingertip on the face, thumb on a finger, palm on palm) are found
from the source's skeleton and kept on the target's own skin (solver/retarget/contact_transfer.py).

- preserve(source, target, result, …): detect, enforce, rewrite the corrected F-curves of
  result.action, store the contacts on the action (custom property CONTACTS_PROP, JSON,
  for the bake and the panel) and on the armature's contact list;
- mark_timeline(scene, action): timeline markers `contact:<part>-<part>` at contact starts;
- summary(action): the JSON-able contact list of an action.

The target's skin is read as the bake reads it (body/geometry.py): the face (a mesh
parented to the head bone, else the skin the head and neck bones own), each palm (the
skin the hand bones own) and each distal phalanx (the skin it owns) in its bone's rest
frame; the source has no skin: its proportional body comes from its bone lengths.
"""
import json

import bpy
import numpy as np

from ...solver.retarget import bonemap
from ...solver.retarget import contact_transfer
from .. import compat
from .. import keys as key_io
from ..body import geometry
from ..keys import CONTACTS_PROP
from ..errors import INFO, WARNING, from_solver, silent
from . import transfer

MARKER_PREFIX = "contact:"
WEIGHTS = {"upper_arm": 1.0, "forearm": 1.0, "hand": 0.5, "segment": 0.3, "finger": 0.12}


def _axes(body):
    an = body.anatomy
    return np.stack([an.left, an.forward, an.up], axis=-1)


def _fingers(body):
    return {k: v for k, v in body.fingers.items() if v}


def _palm_bases(body, side):
    return [body.fingers[(side, f)][0] for f in contact_transfer.FINGERS[1:] if body.fingers.get((side, f))]


def source_body(source, result):
    """ct.SourceBody of source's motion at result.source_frames (world, m), and the
    source's bonemap.Body."""
    # the poses the retarget sampled (sampling again would update the scene per frame,
    # deforming the target's skin, now animated)
    mats = result.source_matrices
    lengths = np.array([b.length for b in source.data.bones])
    tails = mats[..., :3, 3] + mats[..., :3, 1] * lengths[None, :, None]
    heads = mats[..., :3, 3]
    sampled = heads[np.unique(np.linspace(0, len(heads) - 1, transfer.MOTION_SAMPLES).astype(int))]
    sk = transfer.skeleton(source, sampled)
    body = bonemap.analyse(sk)
    arms = [body.limbs.get((s, "upper_arm")) for s in bonemap.SIDES]
    # the shoulder joints' distance in the rest pose: the clavicles' motion does not change it
    scale = (np.linalg.norm(sk.heads[arms[0][0]] - sk.heads[arms[1][0]]) / contact_transfer.REFERENCE_SHOULDERS
             if all(arms) else 1.0)
    origin = axes = None
    if body.head is not None:
        origin, axes = contact_transfer.head_frames(mats, body.head, _axes(body))
    tips, dirs = {}, {}
    for key, bones in _fingers(body).items():
        tips[key] = tails[:, bones[-1]]
        dirs[key] = mats[:, bones[-1], :3, 1] / np.linalg.norm(mats[:, bones[-1], :3, 1], axis=-1, keepdims=True)
    palms = {}
    for side in bonemap.SIDES:
        hand, bases = body.limbs.get((side, "hand")), _palm_bases(body, side)
        if hand and len(bases) >= 2:
            palms[side] = contact_transfer.palm_frames(heads, hand[0], bases, side)
    return contact_transfer.SourceBody(float(scale), origin, axes, tips, dirs, palms), body


def target_body(target, warnings, contacts=()):
    """ct.TargetBody of the target armature (rest pose, armature units) and its Skeleton,
    with the skin the enabled `contacts` ([ct.Contact]) touch with: a finger's distal
    part where a contact uses that finger, the deforming finger skins where two fingers
    touch (all from the skin's vertex-group weights, read once)."""
    on = [c for c in contacts if c.enabled]
    needed = {p for c in on for p in (c.part_a, c.part_b)}
    sk = transfer.skeleton(target)
    body = bonemap.analyse(sk)
    rest = transfer.rest_matrices(target)
    mo = _world_metres(target)
    scale = float(np.linalg.norm(mo[:3, 0]))
    parts = contact_transfer.Parts()
    chest = body.spine[-1] if body.spine else body.hips
    skin = geometry.skin_weights(target, sk)
    meshes = geometry.body_meshes(target, sk, body, set(range(len(sk.names))), rest, 1.0, chest,
                                       None, {}, [], skin)
    for m in meshes:
        if m.kind == "face":
            parts.add("face", m.bone, m.vertices, m.triangles)
        elif m.kind.startswith("palm"):
            parts.add(f"palm_{m.side}", m.bone, m.vertices, m.triangles)
    regions = geometry.bone_regions(sk, body)
    distal = {}
    for (side, finger), bones in _fingers(body).items():
        if f"{finger}_{side}" in needed:
            distal[bones[-1]] = f"{finger}_{side}"
            regions[bones[-1]] = len(geometry.REGIONS) + len(distal)
    skins = geometry.skin_regions(target, sk, regions, skin) if distal else []
    for bone, name in distal.items():
        v, t = geometry.region_points(skins, regions[bone])
        if len(t) >= 4:
            inv = np.linalg.inv(rest[bone])
            parts.add(name, bone, v @ inv[:3, :3].T + inv[:3, 3], t)
    if "face" not in parts:
        warnings.append(f"'{target.name}' has no face skin: fingertip–face contacts are not kept")
    face_box = face_axes = None
    if "face" in parts and body.head is not None:
        to_arm = mo[:3, :3] / scale
        face_axes = rest[body.head][:3, :3].T @ to_arm.T @ _axes(body)
        face_box = contact_transfer.face_box_of(parts.get("face").vertices @ face_axes)
    palms = {}
    for side in bonemap.SIDES:
        hand, bases = body.limbs.get((side, "hand")), _palm_bases(body, side)
        if hand and len(bases) >= 2:
            c, ax, half = contact_transfer.palm_frames(rest[None, :, :3, 3], hand[0], bases, side)
            inv = np.linalg.inv(rest[hand[0]])
            palms[side] = (inv[:3, :3] @ c[0] + inv[:3, 3], inv[:3, :3] @ ax[0], half)
    arms, weights = {}, {}
    for side in bonemap.SIDES:
        ua, hand = body.limbs.get((side, "upper_arm")), body.limbs.get((side, "hand"))
        if ua and hand:
            arms[side] = contact_transfer.chain(sk.parents, ua[0], hand[0])
            for b in arms[side]:
                part = next((p for p in ("upper_arm", "forearm", "hand") if b in body.limbs.get((side, p), [])),
                            "segment")
                weights[b] = WEIGHTS[part]
    fingers = {}
    for (side, finger), bones in _fingers(body).items():
        # from the bone below the hand or the forearm (a robot's thumb) to the tip
        arm = set(arms.get(side, [])) | set(body.limbs.get((side, "hand"), []))
        top = bones[0]
        while sk.parents[top] >= 0 and sk.parents[top] not in arm:
            top = sk.parents[top]
        if sk.parents[top] < 0:
            continue
        fingers[f"{finger}_{side}"] = contact_transfer.chain(sk.parents, top, bones[-1])
        for b in fingers[f"{finger}_{side}"]:
            weights[b] = WEIGHTS["finger"]
    ua = [body.limbs.get((s, "upper_arm")) for s in bonemap.SIDES]
    size = float(np.linalg.norm(mo[:3, :3] @ (rest[ua[0][0]][:3, 3] - rest[ua[1][0]][:3, 3]))) if all(ua) else 0.3
    touching = {p for c in on if c.kind == "finger" for p in (c.part_a, c.part_b)}
    # a finger's last two phalanges (two fingers touching are measured on them), and each
    # palm (the hand bones' skin: whether the retarget leaves a hand inside the head)
    owned = {b: f"palm_{side}" for side in bonemap.SIDES for b in body.limbs.get((side, "hand"), [])}
    for (side, finger), bones in _fingers(body).items():
        if f"{finger}_{side}" in touching:
            owned.update({b: f"{finger}_{side}" for b in bones[-2:]})
    return contact_transfer.TargetBody(parts, face_box, face_axes, palms, arms, fingers, weights, size,
                         _owned_skins(skin, owned)), sk


SKIN_INFLUENCES = 4   # bone weights kept per vertex (the largest)


def _owned_skins(skin, owned):
    """{name: ct.Skin} of the skin (the meshes the Armature modifier of the target deforms;
    skin: their geometry.skin_weights) whose vertices are owned (largest weight) by
    the bones of owned ({bone: name}), with the SKIN_INFLUENCES largest bone weights of
    those vertices (normalised over the bones; equal weights: the later bone first)."""
    pieces = {}
    for _ob, co, tris, sparse, group_bone in skin:
        if sparse is None or not isinstance(group_bone, list):
            continue     # unweighted, or a mesh parented to a bone
        vertex, group, weight = sparse
        bone = np.array([-1 if b is None else b for b in group_bone], np.intp)[group]
        use = (bone >= 0) & (weight > 0)
        vertex, bone, weight = vertex[use], bone[use], weight[use]
        order = np.lexsort((-bone, -weight, vertex))
        vertex, bone, weight = vertex[order], bone[order], weight[order]
        first = np.searchsorted(vertex, vertex)
        rank = np.arange(len(vertex)) - first
        top = rank < SKIN_INFLUENCES
        n = len(co)
        bones = np.zeros((n, SKIN_INFLUENCES), np.intp)
        influence = np.zeros((n, SKIN_INFLUENCES))
        bones[vertex[top], rank[top]] = bone[top]
        influence[vertex[top], rank[top]] = weight[top]
        total = influence.sum(axis=1)
        if not total.any():
            continue
        owner = np.array([owned.get(int(b)) if w > 0 else None for b, w in zip(bones[:, 0], influence[:, 0])],
                         dtype=object)
        for name in set(owned.values()):
            keep = owner == name
            t = tris[np.all(keep[tris], axis=1)]
            if not len(t):
                continue
            used, inverse = np.unique(t, return_inverse=True)
            pieces.setdefault(name, []).append((co[used], bones[used], influence[used] / total[used, None],
                                                inverse.reshape(-1, 3)))
    out = {}
    for name, parts in pieces.items():
        offsets = np.cumsum([0] + [len(p[0]) for p in parts[:-1]])
        out[name] = contact_transfer.Skin(np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                            np.concatenate([p[2] for p in parts]),
                            np.concatenate([p[3] + o for p, o in zip(parts, offsets)]))
    return out


def _world_metres(ob):
    """ob's object matrix (4, 4) in metres: times the scene's unit scale (metres per
    Blender unit, UnitSettings.scale_length)."""
    m = np.array(ob.matrix_world)
    m[:3] *= bpy.context.scene.unit_settings.scale_length
    return m


def _target_pose(target, sk, keys):
    n_frames = len(next(iter(keys["rot"].values())))
    basis = np.tile([1.0, 0.0, 0.0, 0.0], (n_frames, len(sk.names), 1))
    for name, q in keys["rot"].items():
        basis[:, sk.index[name]] = q
    loc = {sk.index[name]: v for name, v in keys["loc"].items()}
    return contact_transfer.Target(np.array(sk.parents), transfer.rest_matrices(target), _world_metres(target),
                     basis, loc)


def _hands_in_face(target, body, pose, frames):
    """Warnings for the palms the retarget leaves inside the target's own face skin, more
    than ct.INSIDE_WARN_MM (reference adult) deep: pose (ct.Target) at scene frames (F,)."""
    out = []
    k = body.size / contact_transfer.REFERENCE_SHOULDERS
    for side, depth in contact_transfer.hands_in_face(pose, body).items():
        inside = np.flatnonzero(depth > 1e-3 * contact_transfer.INSIDE_WARN_MM * k)
        if len(inside):
            worst = int(np.argmax(depth))
            out.append(f"the {'left' if side == 'L' else 'right'} palm ends inside the head of "
                       f"'{target.name}' on {len(inside)} of {len(frames)} frames ({frames[inside[0]]:g}–"
                       f"{frames[inside[-1]]:g}), up to {1e3 * depth[worst]:.0f} mm deep at frame "
                       f"{frames[worst]:g}: the character's proportions put the hand through its own "
                       "face; the pose needs fixing before a bake")
    return out


def preserve(source, target, result, *, forced=(), disabled=(), report=silent):
    """Keep the source's contacts on the target: detect them, correct the arm and finger
    chains of result.action where they touch, store them (CONTACTS_PROP on the action,
    the armature's contact list). Returns the contact list (summary(result.action)).

    source, target: the armatures result (transfer.Result of `retarget`) was made from;
    forced, disabled: [(part_a, part_b, first frame, last frame)] in scene frames: contacts
    the animator added or switched off. Contacts the target cannot keep (no skin for a
    part, out of reach) are reported with report(WARNING, …) and listed with their error.
    A result without an action (transfer's: compose) gets its keys corrected and nothing
    stored; then the stored form of the contacts (CONTACTS_PROP's items, "frames" in
    result.frames) is returned.
    """
    frames = np.asarray(result.frames)
    first = frames[0]

    def to_index(items):
        return [(a, b, int(round(f0 - first)), int(round(f1 - first)) + 1) for a, b, f0, f1 in items]
    warnings = []
    with from_solver():
        src, _body = source_body(source, result)
        fps = key_io.scene_fps(bpy.context.scene)
        found = contact_transfer.detect(src, fps, forced=to_index(forced), disabled=to_index(disabled))
        changed = []
        # the target's skin is read for the contacts to keep and to check where the hands end
        tgt, sk = target_body(target, warnings if found else [], found)
        pose = _target_pose(target, sk, result.keys)
        if found:
            basis = contact_transfer.enforce(pose, tgt, found, fps)
            changed = [b for b in range(basis.shape[1]) if not np.array_equal(basis[:, b], pose.basis[:, b])]
            pose.basis = basis
        warnings += _hands_in_face(target, tgt, pose, frames)
    for b in changed:
        result.keys["rot"][sk.names[b]] = basis[:, b]
    if changed and result.action is not None:
        bag = compat.get_channelbag(result.action, result.action.slots[0])
        for b in changed:
            name = sk.names[b]
            for i in range(4):
                key_io.write_curve(bag, key_io.bone_path(name, "rotation_quaternion"), i, name, frames, basis[:, b, i])
    items = []
    for c in found:
        item = {"name": c.name, "kind": c.kind, "parts": [c.part_a, c.part_b],
                "frames": [int(round(frames[c.start])), int(round(frames[c.stop - 1]))], "enabled": c.enabled,
                **{k: round(v, 3) if isinstance(v, float) else v for k, v in c.measured.items()}}
        touched = np.flatnonzero(c.weights > 0)
        item["influence"] = [float(frames[touched[0]]), float(frames[touched[-1]])]
        if hasattr(c, "target_spots"):
            bone, spots = c.target_spots
            item["bones"] = [sk.names[b] for b in c.bones]
            item["spot_local"] = np.round(spots, 7).tolist()   # on bones[1], its rest frame
        items.append(item)
        where = f"contact {c.name} at frames {item['frames'][0]:g}–{item['frames'][1]:g}"
        if "skipped" in c.measured:
            warnings.append(f"{where} not kept on '{target.name}': {c.measured['skipped']}")
        else:
            m, k = c.measured, tgt.size / contact_transfer.REFERENCE_SHOULDERS
            if m["spot_error_mm"] > contact_transfer.SPOT_WARN_MM * k:
                warnings.append(f"{where} kept touching on '{target.name}', but {m['spot_error_mm']:.0f} mm "
                                "from the spot it touches in the source")
            if contact_transfer.deeper_than_plain(m, k, eased=True):
                warnings.append(f"{where} kept on '{target.name}', but easing in and out of it the parts go "
                                f"{m['eased_penetration_mm']:.1f} mm into each other (the plain retarget: "
                                f"{m['plain_eased_penetration_mm']:.1f} mm)")
    for w in warnings:
        report(WARNING, w)
    report(INFO, f"kept {sum(1 for i in items if 'skipped' not in i)} of {len(items)} contacts on '{target.name}'")
    if result.action is None:
        return items
    result.action[CONTACTS_PROP] = json.dumps(items)
    _store_list(target, items, forced, disabled)
    return summary(result.action)


def summary(action):
    """[{"frames", "parts", "spot_error_mm", "gap_mm", "penetration_mm", "kind"}] of the
    contacts stored on action ([] when none)."""
    keep = ("frames", "parts", "kind", "spot_error_mm", "gap_mm", "penetration_mm", "skipped")
    return [{k: i[k] for k in keep if k in i} for i in json.loads(action.get(CONTACTS_PROP, "[]"))]


def summary_line(item):
    """One human line for a contact of `summary` (frames are scene frames):
    'contact index_R-chin frames 27–38: gap 0.8 mm, spot 0.6 mm off' or '… not kept (why)'."""
    return (f"contact {'-'.join(item['parts'])} frames {item['frames'][0]:g}–{item['frames'][1]:g}: "
            + (f"gap {item['gap_mm']:.1f} mm, spot {item['spot_error_mm']:.1f} mm off" if "gap_mm" in item
               else f"not kept ({item.get('skipped', '')})"))


def animator_choices(target):
    """{"forced": [...], "disabled": [...]} from the armature's contact list: the contacts
    the animator added and the ones switched off, as (part a, part b, first, last frame)."""
    coll = target.signsim_contacts
    rows = [(c.part_a, c.part_b, c.frame_start, c.frame_end, c.enabled, c.added) for c in coll]
    return {"forced": [r[:4] for r in rows if r[5] and r[4]],
            "disabled": [r[:4] for r in rows if not r[4]]}


def store_list(target, action, forced=(), disabled=()):
    """The armature's contact list made again from the contacts stored on action (the
    clip a multi-clip retarget assigns, after the others' lists replaced it)."""
    _store_list(target, json.loads(action.get(CONTACTS_PROP, "[]")), forced, disabled)


def _store_list(target, items, forced, disabled):
    """The armature's contact list (Object.signsim_contacts) from the contacts kept, the
    animator's additions marked as added, the ones switched off kept (off)."""
    coll = target.signsim_contacts
    added = {tuple(f) for f in forced}
    rows = [(*i["parts"], int(round(i["frames"][0])), int(round(i["frames"][1])), True) for i in items]
    rows += [(*d, False) for d in disabled]
    coll.clear()
    for a, b, f0, f1, on in sorted(rows, key=lambda r: (r[2], r[0], r[1])):
        it = coll.add()
        it.part_a, it.part_b, it.frame_start, it.frame_end, it.enabled = a, b, f0, f1, on
        it.added = (a, b, f0, f1) in added


def add_contact(target, part_a, part_b, frame_start, frame_end):
    """Add a contact to the armature's list (kept at the next retarget even where the
    source's parts do not touch) and return its list item; part names as in the list
    (index_R, palm_L, chin, cheek_R, …), frames in scene frames."""
    it = target.signsim_contacts.add()
    it.part_a, it.part_b = part_a, part_b
    it.frame_start, it.frame_end = min(frame_start, frame_end), max(frame_start, frame_end)
    it.enabled = it.added = True
    return it


def mark_timeline(scene, action):
    """Timeline markers `contact:<part a>-<part b>` at the first frame of each contact of
    action (earlier contact markers are removed)."""
    for m in [m for m in scene.timeline_markers if m.name.startswith(MARKER_PREFIX)]:
        scene.timeline_markers.remove(m)
    for i in json.loads(action.get(CONTACTS_PROP, "[]")):
        scene.timeline_markers.new(f"{MARKER_PREFIX}{'-'.join(i['parts'])}", frame=int(round(i["frames"][0])))

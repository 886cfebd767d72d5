"""Geometric measurements of a retarget: what a viewer sees, from Blender's evaluated poses.

Each skeleton's body (hips, chains, sides, fingers) is read by solver.core.skeleton from its own
geometry with names ignored, so a measurement can never agree with a wrong bone map by
sharing its names. Values are in metres and degrees.

`Poses(ob, frames)` samples world heads, tails and rotations once; the functions below
compare a source's and a target's Poses over the same clip. A target is measured in its
own facing frame (`facing_turn`): the retarget moves it as the capture moves in front of
its camera, facing where the character faces in its rest pose.
"""
import math

import bpy
import numpy as np

from solver.core import posing, skeleton

ARM = ("upper_arm", "forearm", "hand")
LEG = ("thigh", "shin", "foot")
DEG = math.degrees(1.0)


class Poses:
    """World heads (F, N, 3), tails (F, N, 3), rotations (F, N, 3, 3) of ob's pose bones at
    (sub)frames, and the body read without names (`body`) from ob's rest geometry or, with
    from_motion (a mocap source, whose rest may be no human pose), from the sampled poses."""

    def __init__(self, ob, frames, from_motion=False):
        scene = bpy.context.scene
        n = len(ob.pose.bones)
        buf = np.empty(n * 16)
        self.mats = np.empty((len(frames), n, 4, 4))
        for k, fr in enumerate(frames):
            whole = math.floor(fr)
            scene.frame_set(int(whole), subframe=float(fr - whole))
            ob.pose.bones.foreach_get("matrix", buf)
            self.mats[k] = np.array(ob.matrix_world) @ buf.reshape(n, 4, 4).transpose(0, 2, 1)
        lengths = np.array([b.length for b in ob.data.bones])
        r = self.mats[..., :3, :3]
        scale = np.linalg.norm(r, axis=-2, keepdims=True)
        self.rot = r / scale
        self.heads = self.mats[..., :3, 3]
        self.tails = self.heads + r[..., :, 1] * lengths[None, :, None]
        bones = ob.data.bones
        self.bones = list(bones)
        self.names = [b.name for b in bones]
        parents = [self.names.index(b.parent.name) if b.parent else -1 for b in bones]
        mw = ob.matrix_world
        rest_h = np.array([mw @ b.head_local for b in bones])
        rest_t = np.array([mw @ b.tail_local for b in bones])
        self.rest_heads, self.rest_tails = rest_h, rest_t
        mw3 = np.array(mw)[:3, :3]
        rest_r = np.array([mw3 @ np.array(b.matrix_local)[:3, :3] for b in bones])
        self.rest_rot = rest_r / np.linalg.norm(rest_r, axis=-2, keepdims=True)
        poses = self.heads[np.linspace(0, len(frames) - 1, min(16, len(frames))).astype(int)] \
            if from_motion else None
        self.body = skeleton.analyse([f"n{k}" for k in range(n)], parents, rest_h, rest_t, poses)
        if not from_motion:
            turn = facing_turn(self.body, rest_h)
            self.mats = np.concatenate([turn @ self.mats[..., :3, :], self.mats[..., 3:, :]], axis=-2)
            self.rot = turn @ self.rot
            self.heads, self.tails = self.heads @ turn.T, self.tails @ turn.T
            self.rest_heads, self.rest_tails = rest_h @ turn.T, rest_t @ turn.T
            self.rest_rot = turn @ self.rest_rot


def facing_turn(body, rest_heads):
    """(3, 3) rotation about Z that turns a standing body whose rest heads (N, 3) face
    along its hip line's forward (left thigh − right thigh, × up; the upper arms without
    legs) to face -Y."""
    part = "thigh" if ("L", "thigh") in body.limbs else "upper_arm"
    lat = rest_heads[body.limbs[("L", part)][0]] - rest_heads[body.limbs[("R", part)][0]]
    fwd = np.cross(lat, [0.0, 0.0, 1.0])
    angle = -0.5 * np.pi - math.atan2(fwd[1], fwd[0])
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def rig_turn(ob):
    """facing_turn of an armature object's rest pose (its body read without names)."""
    bones = ob.data.bones
    names = [b.name for b in bones]
    mw = ob.matrix_world
    rest_h = np.array([mw @ b.head_local for b in bones])
    rest_t = np.array([mw @ b.tail_local for b in bones])
    body = skeleton.analyse([f"n{k}" for k in range(len(names))],
                            [names.index(b.parent.name) if b.parent else -1 for b in bones], rest_h, rest_t)
    return facing_turn(body, rest_h)


def _unit(v):
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def landmarks(body):
    """Named chains of landmark bones (heads): {name: [bone, …]} for one body, with keys
    independent of the skeleton (sides anatomical, fingers with joint counts)."""
    out = {}
    b = body
    if b.spine:
        out["spine"] = [b.hips, b.spine[-1]]
    if b.head is not None and b.spine:
        out["neck"] = [b.spine[-1], b.head]
    for side in skeleton.SIDES:
        arm = [b.limbs[(side, p)][0] for p in ARM if (side, p) in b.limbs]
        if len(arm) == 3:
            out[f"arm.{side}"] = arm
        leg = [b.limbs[(side, p)][0] for p in LEG if (side, p) in b.limbs]
        if len(leg) >= 2:
            out[f"leg.{side}"] = leg
        for f in skeleton.FINGERS:
            if (side, f) in b.fingers:
                out[f"{f}.{side}"] = b.fingers[(side, f)]
    return out


def aligned_cosine(ds, dt):
    """Mean cosine between direction series ds and dt (F, 3) after the one constant
    rotation that best aligns them (Wahba's problem over the frames, SVD)."""
    u, _s, vt = np.linalg.svd(dt.T @ ds)
    ds = ds @ (u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt).T
    return float(np.mean(np.sum(ds * dt, axis=1)))


def foot_end(body, side):
    """The last bone of a foot: its toe chain's end, else the foot bone (None without foot)."""
    chain = body.limbs.get((side, "toe"), []) + body.segments.get((side, "toe"), [])
    return (chain or body.limbs.get((side, "foot"), [None]))[-1]


def chain_cosines(src, tgt):
    """Mean direction cosine over the clip per landmark segment present in both bodies:
    {(chain, k): cosine}. Chains of different length (fingers with 2 vs 3 joints, legs
    with or without feet) compare their common landmarks; a finger of different joint
    count compares base → last joint; hips → chest and chest → head after rest alignment;
    each foot as ankle → foot end (the toe tip) after rest alignment, since skeletons put
    the joint between foot and toe at different places (a BVH "foot" bone may end 4 cm
    below the ankle, another at the ball of the foot) and a flat foot is flat in both."""
    ls, lt = landmarks(src.body), landmarks(tgt.body)
    out = {}
    for side in skeleton.SIDES:
        ends = [(p, p.body.limbs.get((side, "foot"), [None])[0], foot_end(p.body, side)) for p in (src, tgt)]
        if all(e[1] is not None for e in ends):
            ds, dt = (_unit(p.tails[:, end] - p.heads[:, ft]) for p, ft, end in ends)
            out[(f"foot.{side}", 0)] = aligned_cosine(ds, dt)
    for name in sorted(set(ls) & set(lt)):
        cs, ct = ls[name], lt[name]
        if len(cs) != len(ct):
            if name.split(".")[0] in skeleton.FINGERS:
                cs, ct = [cs[0], cs[-1]], [ct[0], ct[-1]]
            else:
                k = min(len(cs), len(ct))
                cs, ct = cs[:k], ct[:k]
        for k in range(len(cs) - 1):
            ds = _unit(src.heads[:, cs[k + 1]] - src.heads[:, cs[k]])
            dt = _unit(tgt.heads[:, ct[k + 1]] - tgt.heads[:, ct[k]])
            if np.linalg.norm(src.rest_heads[cs[k + 1]] - src.rest_heads[cs[k]]) < 1e-3:
                continue
            if name in ("spine", "neck"):
                # from the hips and the chest the two skeletons start their lines at
                # different points (a root behind the spine, a neck on the chest): compare
                # after the one constant rotation that best aligns them
                out[(name, k)] = aligned_cosine(ds, dt)
            else:
                out[(name, k)] = float(np.mean(np.sum(ds * dt, axis=1)))
    return out


def _frames(a, b):
    """Orthonormal frames (F, 3, 3) from a main direction a and a second one b (F, 3)."""
    a = _unit(a)
    n = _unit(b - np.sum(a * b, axis=-1, keepdims=True) * a)
    return np.stack([a, n, np.cross(a, n)], axis=-1)


def offset_angles(fs, ft):
    """Per-frame angle (deg) between the rotation from frame fs to ft and its mean over the
    clip: how far the target's frame strays from following the source's after the
    constant rest difference is removed (F,)."""
    off = np.swapaxes(fs, -1, -2) @ ft
    u, _s, vt = np.linalg.svd(off.sum(0))
    mean = u @ np.diag([1.0, 1.0, np.linalg.det(u @ vt)]) @ vt
    cos = (np.trace(np.swapaxes(mean, -1, -2) @ off, axis1=-2, axis2=-1) - 1) / 2
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def palm_frames(p):
    """{side: (F, 3, 3)} palm frames: wrist → middle-finger base, across from the index
    to the last finger base (its normal is the palm normal)."""
    out = {}
    b = p.body
    for side in skeleton.SIDES:
        fingers = [f for f in skeleton.FINGERS[1:] if (side, f) in b.fingers]
        hand = b.limbs.get((side, "hand"))
        if len(fingers) < 2 or not hand:
            continue
        wrist = p.heads[:, hand].mean(axis=1)
        mid = b.fingers[(side, "middle" if "middle" in fingers else fingers[0])][0]
        first, last = b.fingers[(side, fingers[0])][0], b.fingers[(side, fingers[-1])][0]
        out[side] = _frames(p.heads[:, mid] - wrist, p.heads[:, first] - p.heads[:, last])
    return out


def chest_frame(p):
    """(F, 3, 3) chest frame: chest → neck base (a line fixed in the chest bone; the head
    nods on its own), across the upper arm heads (right → left). A chest whose neck and
    clavicles all start on its own head (CMU's zero-length Spine1) has no line of its own:
    any point further up turns with the neck (39° of nodding in CMU's walk), so its frame
    is the chest bone's own world rotation (columns: its axis first)."""
    b = p.body
    chest = b.spine[-1]
    base = (b.neck or [b.head])[0]
    if np.linalg.norm(p.rest_heads[base] - p.rest_heads[chest]) < 1e-3:
        return p.rot[:, chest][..., [1, 2, 0]]
    across = p.heads[:, b.limbs[("L", "upper_arm")][0]] - p.heads[:, b.limbs[("R", "upper_arm")][0]]
    return _frames(p.heads[:, base] - p.heads[:, chest], across)


def rotation_jumps(p):
    """Per bone, the world rotation angle (deg) between adjacent frames (F-1, N)."""
    rel = np.swapaxes(p.rot[:-1], -1, -2) @ p.rot[1:]
    cos = (np.trace(rel, axis1=-2, axis2=-1) - 1) / 2
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def jump_excess(src, tgt, pairs, girdles=None, ratio=0.55):
    """{"jump_excess_deg": the largest amount (deg) by which a mapped target bone's world
    rotation changes between adjacent frames more than the source's own does, "jump_worst":
    that bone}. A target bone stands for its source bone and the source joints it spans
    down to the source bones of its nearest mapped children (a target without metacarpals
    or with 2-joint fingers carries those joints' motion): the source's own jump is the
    largest of theirs. pairs: {target name: source name}. girdles: {target shoulder name:
    source upper arm name} for shoulders raised with the arm by the scapulohumeral rhythm
    (the source's clavicle does not move): such a shoulder may also turn by `ratio` (the
    top of the rhythm's 0.3–0.55 band) times the upper arm's own jump, which is the rhythm
    itself (a dancer's arm rising 20° a frame raises the girdle 5–8° a frame)."""
    js, jt = rotation_jumps(src), rotation_jumps(tgt)
    si = {n: i for i, n in enumerate(src.names)}
    ti = {n: i for i, n in enumerate(tgt.names)}
    s_parent = {i: (si.get(b.parent.name) if b.parent else None) for i, b in enumerate(src.bones)}
    t_parent = {i: (ti.get(b.parent.name) if b.parent else None) for i, b in enumerate(tgt.bones)}
    mapped = {ti[t]: si[s] for t, s in pairs.items()}
    spans = {t: {s} for t, s in mapped.items()}
    for c, sc in mapped.items():
        a = t_parent[c]
        while a is not None and a not in mapped:
            a = t_parent[a]
        if a is None:
            continue
        j = s_parent[sc]
        path = []
        while j is not None and j != mapped[a]:
            path.append(j)
            j = s_parent[j]
        if j is not None:
            spans[a] |= set(path)
    own = {t: js[:, sorted(span)].max(axis=1) for t, span in spans.items()}
    for t, arm in (girdles or {}).items():
        if ti[t] in own:
            own[ti[t]] = own[ti[t]] + ratio * js[:, si[arm]]
    excess = {tgt.names[t]: float((jt[:, t] - own[t]).max()) for t in spans}
    worst = max(excess, key=excess.get)
    return {"jump_excess_deg": excess[worst], "jump_worst": worst}


def rhythm_girdles(src, tgt, pairs):
    """{target shoulder name: source upper arm name} for the target shoulders the
    scapulohumeral rhythm raises (the source's clavicle of that side does not move;
    girdle_moves), for jump_excess. pairs: {target name: source name}."""
    out = {}
    for side in skeleton.SIDES:
        sh, ua = (tgt.body.limbs.get((side, part), [None])[0] for part in ("shoulder", "upper_arm"))
        if sh is not None and ua is not None and tgt.names[ua] in pairs and not girdle_moves(src, side):
            out[tgt.names[sh]] = pairs[tgt.names[ua]]
    return out


def head_above_hips(p):
    """Per frame, the head's height above the hips (m), world Z (F,)."""
    return p.heads[:, p.body.head, 2] - p.heads[:, p.body.hips, 2]


def floor_height(p):
    """The rest floor: the lowest rest head or tail (m)."""
    return float(min(p.rest_heads[:, 2].min(), p.rest_tails[:, 2].min()))


def ankles(p, side, rest=False):
    """Ankle points (F, 3), or (3,) at rest: the foot's head, or the shin's tail for a leg
    without a foot bone."""
    b = p.body
    ft = b.limbs.get((side, "foot"), [None])[0]
    heads, tails = (p.rest_heads, p.rest_tails) if rest else (p.heads, p.tails)
    return heads[..., ft, :] if ft is not None else tails[..., b.limbs[(side, "shin")][0], :]


def foot_floor(p, side):
    """A target's rest floor under one foot (m): the lowest rest head or tail of the foot
    and the bones below it; the whole skeleton's without a foot bone."""
    b = p.body
    if (side, "foot") not in b.limbs:
        return floor_height(p)
    bones = foot_bones(p, side)
    return float(min(p.rest_heads[bones, 2].min(), p.rest_tails[bones, 2].min()))


def _lowest(src, side):
    """Height (F,) of a source foot's lowest point (foot and toe heads and tails)."""
    b = src.body
    bones = [b.limbs[(side, p)][0] for p in ("foot", "toe") if (side, p) in b.limbs]
    return np.concatenate([src.heads[:, bones, 2], src.tails[:, bones, 2]], axis=1).min(axis=1)


def contact_height(src, side):
    """A source foot's floor (m): the 5th percentile of its lowest point's height."""
    return float(np.percentile(_lowest(src, side), 5))


def standing_leg(p, side, floor=None, planted_masks=None):
    """Standing leg length (m): hip joint → knee → ankle plus the ankle's height above the
    sole; a target from its rest pose (the sole on `floor`, m), a source from its motion:
    bone lengths (medians over the frames) and the ankle's height above the foot's own
    lowest point, median over the frames where a foot is planted (planted_masks {side:
    bool (F,)}: this foot's, else both feet's; every frame without any), since a foot on
    its toes lifts the ankle without lengthening the leg."""
    b = p.body
    th, sh = b.limbs[(side, "thigh")][0], b.limbs[(side, "shin")][0]
    if floor is not None:
        a = ankles(p, side, rest=True)
        return float(np.linalg.norm(p.rest_heads[sh] - p.rest_heads[th]) + np.linalg.norm(a - p.rest_heads[sh])
                     + a[2] - floor)
    a = ankles(p, side)
    bones = np.median(np.linalg.norm(p.heads[:, sh] - p.heads[:, th], axis=1) + np.linalg.norm(a - p.heads[:, sh], axis=1))
    masks = {s: m for s, m in (planted_masks or {}).items() if m.any()}
    above = {s: ankles(p, s)[:, 2] - _lowest(p, s) for s in skeleton.SIDES}
    if side in masks:
        height = above[side][masks[side]]
    elif masks:
        height = np.concatenate([above[s][m] for s, m in masks.items()])
    else:
        height = above[side]
    return float(bones + np.median(height))


def root_error(src, tgt, fps):
    """Largest distance (m) of the target's hip joints (the thigh heads' midpoint, wherever
    a rig puts its hips bone) from the source's, scaled by the ratio of the standing leg
    lengths about its first frame, each skeleton on the floor its feet stand on:
    k · (h(t) − [h_x(0), h_y(0), f_s]) + [h′_x, h′_y, f_t], h′ the target's rest hip joints.
    The source's floor f_s is that of its feet that are ever planted (`planted`, 0.25 m/s,
    within 2 cm; a dancer's foot that only touches down on its toes does not set it), all
    feet's when none is; fps: frames per second of the sampled frames."""
    sides = skeleton.SIDES
    masks = {s: planted(src, s, 0.25, fps, 0.02) for s in sides}
    standing = [s for s in sides if masks[s].any()] or list(sides)
    floor_s = np.mean([contact_height(src, s) for s in standing])
    floor_t = {s: foot_floor(tgt, s) for s in sides}
    k = np.mean([standing_leg(tgt, s, floor_t[s]) for s in sides]) / \
        np.mean([standing_leg(src, s, planted_masks=masks) for s in sides])
    p, rest_t = hip_joints(src), hip_joints(tgt, rest=True)
    expected = k * (p - [p[0, 0], p[0, 1], floor_s]) + [rest_t[0], rest_t[1], np.mean(list(floor_t.values()))]
    return float(np.linalg.norm(hip_joints(tgt) - expected, axis=1).max())


def hip_joints(p, rest=False):
    """Midpoint of the two thigh heads (F, 3), or (3,) at rest: the hip joints' centre."""
    thighs = [p.body.limbs[(side, "thigh")][0] for side in skeleton.SIDES]
    return (p.rest_heads if rest else p.heads)[..., thighs, :].mean(axis=-2)


def planted(src, side, speed, fps, floor_tol):
    """Frames (bool (F,)) where the source foot of `side` is planted: its lowest point
    moves slower than `speed` (m/s) and lies within floor_tol (m) of the source floor, for
    three frames in a row at least."""
    b = src.body
    bones = [b.limbs[(side, p)][0] for p in ("foot", "toe") if (side, p) in b.limbs]
    if not bones:
        return None
    pts = np.concatenate([src.heads[:, bones], src.tails[:, bones]], axis=1)    # (F, k, 3)
    low = pts[np.arange(len(pts)), np.argmin(pts[..., 2], axis=1)]
    floor = np.percentile(pts[..., 2].min(axis=1), 5)
    v = np.zeros(len(pts))
    v[1:] = np.linalg.norm(np.diff(low[:, :2], axis=0), axis=1) * fps
    v[0] = v[1] if len(v) > 1 else 0.0
    mask = (v < speed) & (low[:, 2] < floor + floor_tol)
    run = np.convolve(mask, np.ones(3), "same") >= 3        # inside a run of three
    return mask & (run | np.roll(run, 1) | np.roll(run, -1))


def detached_foot(p, side):
    """A foot outside the leg chain (an IK foot hanging from the root, as the robot's
    Foot.L), found from rest geometry alone: the deforming bone in no chain of the body
    whose head lies on `side` of the hips, below the shin's head by at least half the
    thigh's length and within 2 thigh lengths of it, nearest to it (a knee pole target
    sits in front of the knee, not below it); None when there is none."""
    b = p.body
    th, sh = b.limbs[(side, "thigh")][0], b.limbs[(side, "shin")][0]
    thigh = np.linalg.norm(p.rest_heads[sh] - p.rest_heads[th])
    lateral = p.rest_heads[th] - p.rest_heads[b.limbs[("R" if side == "L" else "L", "thigh")][0]]
    hips = hip_joints(p, rest=True)
    chained = {i for chain in list(b.limbs.values()) + list(b.fingers.values()) for i in chain}
    chained |= set(b.spine) | set(b.neck) | {b.hips, b.head}
    best = None
    for i, bone in enumerate(p.bones):
        d = p.rest_heads[i] - p.rest_heads[sh]
        dist = float(np.linalg.norm(d))
        if (i in chained or not bone.use_deform or (p.rest_heads[i] - hips) @ lateral <= 0
                or -d[2] < 0.5 * thigh or dist > 2.0 * thigh):
            continue
        if best is None or dist < best[0]:
            best = (dist, i)
    return None if best is None else best[1]


def foot_of(p, side):
    """The foot bone of `side`: the leg chain's, else a detached one (detached_foot)."""
    chain = p.body.limbs.get((side, "foot"))
    return chain[0] if chain else detached_foot(p, side)


def foot_bones(p, side):
    """The foot bone of `side` (foot_of) and every bone below it (toes, heel)."""
    foot = foot_of(p, side)
    out = [i for i, b in enumerate(p.bones) if b == p.bones[foot] or p.bones[foot] in b.parent_recursive]
    return out


def foot_slide_and_height(tgt, side, mask):
    """Over runs of planted frames: the largest horizontal slide (m) of the target foot's
    contact point and the largest distance (m) of the foot's lowest point (foot, toes,
    heel) from the target's floor, where those bones rest in the rest pose. The contact
    point is the one head or tail of those bones lowest on average over the run, followed
    as it moves (a flat foot's lowest point jumps between its toe joints without the foot
    moving)."""
    bones = foot_bones(tgt, side)
    pts = np.concatenate([tgt.heads[:, bones], tgt.tails[:, bones]], axis=1)
    low = pts[..., 2].min(axis=1)
    floor = float(min(tgt.rest_heads[bones, 2].min(), tgt.rest_tails[bones, 2].min()))
    slide, height = 0.0, 0.0
    for start, stop in posing.runs(mask):
        run = pts[start:stop]
        contact = run[:, int(np.argmin(run[..., 2].mean(axis=0)))]
        slide = max(slide, float(np.linalg.norm(contact[:, :2] - contact[0, :2], axis=1).max()))
        height = max(height, float(np.abs(low[start:stop] - floor).max()))
    return slide, height


def elevation(p, bone_a, bone_b, chest):
    """Angle (deg, F) between the direction bone_a → bone_b heads and the chest's down
    axis: 0 for an arm hanging, 90 straight out to the side or forward."""
    d = _unit(p.heads[:, bone_b] - p.heads[:, bone_a])
    down = -chest[..., 0]
    return np.degrees(np.arccos(np.clip(np.sum(d * down, axis=-1), -1.0, 1.0)))


def girdle_moves(p, side, still=3.0):
    """True when the shoulder bone of `side` turns more than `still` degrees relative to its
    parent over the clip (a source with its own clavicle motion)."""
    b = p.body
    if (side, "shoulder") not in b.limbs:
        return False
    sh = b.limbs[(side, "shoulder")][0]
    parent = next((i for i, bone in enumerate(p.bones) if bone == p.bones[sh].parent), None)
    rel = np.swapaxes(p.rot[:, parent], -1, -2) @ p.rot[:, sh] if parent is not None else p.rot[:, sh]
    turn = np.swapaxes(rel[:1], -1, -2) @ rel
    cos = (np.trace(turn, axis1=-2, axis2=-1) - 1) / 2
    return bool(np.degrees(np.arccos(np.clip(cos, -1.0, 1.0))).max() > still)


def clavicle_rhythm(p, side, chest, threshold=30.0):
    """Least-squares slope of shoulder-girdle elevation increase over arm elevation increase
    for frames whose arm elevation (relative to the chest) exceeds threshold (deg); None
    when too few such frames or too little range (< 10°)."""
    b = p.body
    if (side, "shoulder") not in b.limbs:
        return None
    sh, ua, fo = (b.limbs[(side, part)][0] for part in ("shoulder", "upper_arm", "forearm"))
    arm = elevation(p, ua, fo, chest)
    girdle = elevation(p, sh, ua, chest)
    m = arm > threshold
    if m.sum() < 5 or np.ptp(arm[m]) < 10.0:
        return None
    return float(np.polyfit(arm[m], girdle[m], 1)[0])


def owning_bones(mesh_ob, least=0.0):
    """Per vertex of a mesh that moves with an armature the name of the bone that owns it:
    the vertex group of largest weight above `least` (None where there is none), or the
    parent bone of a bone-parented mesh."""
    if mesh_ob.parent_type == 'BONE':
        return [mesh_ob.parent_bone] * len(mesh_ob.data.vertices)
    names = [g.name for g in mesh_ob.vertex_groups]
    out = []
    for v in mesh_ob.data.vertices:
        best = max(v.groups, key=lambda g: g.weight, default=None)
        out.append(names[best.group] if best is not None and best.weight > least else None)
    return out


def retarget_clip(rt, clip, target, frames=None, report=None):
    """Retarget the mocap file `clip` onto the armature `target` with the automatic map
    (rt: the retarget api module), its first `frames` frames (all: None). Returns (source
    Poses, target Poses, transfer.Result with .warnings (list of str), fps of the sampled
    frames). Raises what rt.retarget raises."""
    source, _action, src_fps, _cleanup = rt.source_clip(str(clip))
    first, last = source.animation_data.action.frame_range
    if frames is not None:
        last = min(last, first + frames - 1)
    bone_map = rt.auto_map(source, target)
    warnings = []

    def note(level, msg):
        if level == "WARNING":
            warnings.append(msg)
        if report is not None:
            report(level, msg)
    result = rt.retarget(source, target, bone_map, source_fps=src_fps, frame_range=(first, last), report=note)
    result.warnings = warnings
    scene = bpy.context.scene          # the keys (and the sampled frames) are at the scene's rate
    return (Poses(source, result.source_frames, from_motion=True), Poses(target, result.frames), result,
            scene.render.fps / scene.render.fps_base)


def _wrap(deg):
    return (np.asarray(deg) + 180.0) % 360.0 - 180.0


def _line_yaw(p, part):
    """Per frame, the horizontal direction (deg about world Z) of the line from the right
    `part`'s head to the left one's (F,)."""
    d = p.heads[:, p.body.limbs[("L", part)][0]] - p.heads[:, p.body.limbs[("R", part)][0]]
    return np.degrees(np.arctan2(d[:, 1], d[:, 0]))


def hip_shoulder_yaw(p):
    """Per frame, the yaw (deg, F) of the shoulder line (upper arm heads, right → left)
    relative to the hip line (thigh heads), about world Z: 0 for a square stance, ±180
    for a pelvis turned around against the chest."""
    return _wrap(_line_yaw(p, "upper_arm") - _line_yaw(p, "thigh"))


def yaw_error(src, tgt):
    """Largest difference (deg) over the frames between the target's and the source's
    hip–shoulder yaw (hip_shoulder_yaw)."""
    return float(np.abs(_wrap(hip_shoulder_yaw(tgt) - hip_shoulder_yaw(src))).max())


def _twists(p, bones):
    """Per frame and bone, the twist (deg, (F, k)) of each bone about its own axis (Y)
    relative to its parent, from the rest pose: the swing–twist split of the local change."""
    parents = [p.names.index(p.bones[i].parent.name) if p.bones[i].parent else None for i in bones]
    out = np.empty((len(p.rot), len(bones)))
    for k, (i, j) in enumerate(zip(bones, parents)):
        if j is None:
            rel, rel0 = p.rot[:, i], p.rest_rot[i]
        else:
            rel = np.swapaxes(p.rot[:, j], -1, -2) @ p.rot[:, i]
            rel0 = p.rest_rot[j].T @ p.rest_rot[i]
        m = rel0.T @ rel                                            # (F, 3, 3) in the rest frame
        out[:, k] = np.degrees(2.0 * np.arctan2(m[:, 0, 2] - m[:, 2, 0], 1.0 + np.trace(m, axis1=-2, axis2=-1)))
    return _wrap(out)


def twist_excess(src, tgt, pairs):
    """{"twist_excess_deg": the largest amount (deg) by which a mapped target spine, neck or
    head bone twists about its own axis (relative to its parent, from rest) more than its
    source bone does on the same frame, "twist_worst": that bone}. pairs: {target name:
    source name}."""
    b = tgt.body
    bones = [i for i in list(b.spine) + list(b.neck) + ([b.head] if b.head is not None else [])
             if tgt.names[i] in pairs]
    source = [src.names.index(pairs[tgt.names[i]]) for i in bones]
    excess = (np.abs(_twists(tgt, bones)) - np.abs(_twists(src, source))).max(axis=0)
    k = int(np.argmax(excess))
    return {"twist_excess_deg": float(excess[k]), "twist_worst": tgt.names[bones[k]]}


def foot_angles(p, side):
    """Per frame, the pitch and roll (deg, (F,) each) of the foot of `side` relative to its
    rest: pitch, the ankle → foot end line's angle above the horizontal minus the rest's;
    roll, the angle above the horizontal of the foot's rest lateral line (horizontal,
    square to that rest line) as the foot bone carries it."""
    ft, end = p.body.limbs[(side, "foot")][0], foot_end(p.body, side)
    aim_rest = _unit(p.rest_tails[end] - p.rest_heads[ft])
    lateral = _unit(np.cross(aim_rest, [0.0, 0.0, 1.0]))
    aim = _unit(p.tails[:, end] - p.heads[:, ft])
    carried = np.einsum("fij,j->fi", p.rot[:, ft] @ p.rest_rot[ft].T, lateral)
    pitch = np.arcsin(np.clip(aim[:, 2], -1.0, 1.0)) - np.arcsin(np.clip(aim_rest[2], -1.0, 1.0))
    return np.degrees(pitch), np.degrees(np.arcsin(np.clip(carried[:, 2], -1.0, 1.0)))


def foot_pitch_within(src, tgt, tol=20.0, rest=False):
    """Smallest fraction over the feet of frames on which the target foot follows the
    source's within `tol` degrees, None without feet on both. By default the pitch (the
    ankle → foot end line's angle above the horizontal) after the constant difference of
    the two skeletons' feet (the median over the frames) is removed, which holds whatever
    the source's rest pose; with rest (a source whose rest pose stands on flat feet) pitch
    and roll each relative to its own skeleton's rest (foot_angles), so a foot tilted by
    a constant is caught too."""
    fractions = []
    for side in skeleton.SIDES:
        if (side, "foot") not in src.body.limbs or (side, "foot") not in tgt.body.limbs:
            continue
        (pitch_s, roll_s), (pitch_t, roll_t) = foot_angles(src, side), foot_angles(tgt, side)
        if rest:
            ok = (np.abs(pitch_t - pitch_s) <= tol) & (np.abs(roll_t - roll_s) <= tol)
        else:
            err = pitch_t - pitch_s
            ok = np.abs(err - np.median(err)) <= tol
        fractions.append(float(np.mean(ok)))
    return min(fractions) if fractions else None


def sides_named_crossed(pairs):
    """(target, source) pairs of a bone map {target: source} whose names both carry a side
    (bonemap.split_side) and say different ones: a left bone driven by a right one."""
    from solver.retarget import bonemap
    return [(t, s) for t, s in pairs.items()
            if None not in (bonemap.split_side(t)[0], bonemap.split_side(s)[0])
            and bonemap.split_side(t)[0] != bonemap.split_side(s)[0]]

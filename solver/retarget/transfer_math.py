"""Retargeting math on arrays (numpy only, no bpy): rest and posed matrices of a source and a
target skeleton in, the target's local rotation and hips location keys out.

Notation (all world space, i.e. armature object transform included; rotations are 3×3
matrices, arrays are float64):
  S_b(t)   posed world rotation of source bone b at frame t          (F, 3, 3)
  S_b,ref  source reference rotation (its rest pose, or its first frame when the rest is not
           a usable human pose: bones along their local X, up axis different from the motion)
  T_b      target rest world rotation (bone.matrix_local with the object's rotation) (3, 3)
  Q_b(t)   world "delta" applied to the target bone: posed world rotation = Q_b(t) · T_b

The rest-relative transfer, R_t(t) = R_s(t) · R_s,rest⁻¹ · R_t,rest, is Q_b = S_b · S_b,ref⁻¹
when both rest poses coincide. When they differ (A-pose vs T-pose, bone-axis rests), each
bone is first aligned by an orthonormal frame built from *directions between joint heads*,
never from bone axes, so bone rolls cannot change the result:

  F = [a, n, a × n]   a = unit direction from the bone's head to the head(s) of its next
                      mapped bone(s), n = a reference direction (body forward; body
                      lateral for feet; body up where the aim is nearly forward) made
                      orthogonal to a. Body axes: up = hips → head (world Z for a standing
                      body), lateral = right → left upper arm, forward = lateral × up.
  A_b = F_t · F_s,ref⁻¹                 (source reference frame → target rest frame)
  Q_ref,b(t) = S_b(t) · S_b,ref⁻¹ · A_b⁻¹

An A-pose target differs from a T-pose one by a rotation W of each arm about the forward
axis, which leaves n unchanged: F_t′ = W · F_t, so Q′ = Q · W⁻¹ and the posed world
rotation Q′ · T′ = Q · W⁻¹ · W · T is the same; a roll R about the bone's own axis only
changes T into T · R, which moves no joint.

Then, so that the *directions* between mapped joints follow the source exactly even when the
source has extra joints in between (the direction spans several source bones):
  - one mapped child:   Q_b = swing(Q_ref,b · a_t → a_s(t)) · Q_ref,b
                        (the smallest rotation that puts the aim onto the source's aim
                        keeps the twist from the source's own rotation);
  - ≥ 2 mapped children in different directions (hips, chest, hand): aligned at rest by
    the rotation that best maps the source's reference directions onto the target's rest
    ones (Wahba's problem, SVD: B = Σ d_t,i d_ref,iᵀ = U Σ Vᵀ, A = U diag(1, 1, det(U Vᵀ)) Vᵀ),
    then the source's own rotation change Q_ref,b — its twist, continuous as the source's
    is, never a per-frame fit that can flip half a turn — swung so the main line (spine,
    neck, hand, middle finger) is exact. The other children (thighs, clavicles, other
    finger bases) keep the constant offset by which the two skeletons place them
    differently; a child whose source head sits on its parent's is aimed at by its tail;
  - no mapped child (head, finger tips): Q_ref,b with the parent's alignment A.
A mapped child counts for bone b when its source bone hangs below b's source bone.

Local pose rotations follow down the hierarchy (parents first). With L the armature-space
rest matrices (bone.matrix_local), the posed armature matrix of bone b is
  M_b = M_p · L_p⁻¹ · L_b · B_b          (B_b = pose_bone.matrix_basis)
so, with world rotations W = R_obj · M (rotation parts) and W_b = Q_b · T_b:
  B_b,rot = (T_p⁻¹ · T_b)⁻¹ · W_p⁻¹ · W_b      (root bone: B_b,rot = T_b⁻¹ · W_b)
(the object rotation cancels because T = R_obj · L_rot). Unmapped bones keep B = identity,
W_b = W_p · T_p⁻¹ · T_b. Quaternions are made hemisphere-continuous over frames.

Root motion (root_motion): the target's hip joints (the midpoint of its thigh heads)
follow the source's,
  h′(t) = k · (h(t) − [h_x(0), h_y(0), f_s]) + [h′_x, h′_y, f_t],  k = L_t / L_s
with L the standing leg length (thigh + shin + the ankle's height above the sole), f the
floor the feet stand on (source_feet, target_feet); the hip joints, not the hips bone, are
scaled, since where a rig puts its hips bone says nothing about how high it stands. When
either skeleton has no legs (an upper-body signer), the hips head follows the source's
scaled by the hips → chest lengths from the target's rest hips. The location key of the
bone carrying the translation (the hips, a Biped's Bip01) is solved from
  head_b = L_b,rot · t_B + head_local_b   (parents of the hips at rest)
for the shift the rotated pose still lacks. The pelvis is aligned by the two standing
poses' body frames and each foot by ankle → toe tip, levelled on the frames the source's
foot stands flat (_level_foot); planted feet are held on the target's floor (_plant_feet), and one
source bone spanning several target bones shares its rotation over them (_share).
Bones outside the mapped hierarchy (IK targets and poles hanging from a root) follow the
nearest mapped bone of their side rigidly: M_b(t) = M_anchor(t) · L_anchor⁻¹ · L_b.

Units: metres, radians; frames are Blender frames (floats where subframes are sampled).
"""
import numpy as np
from scipy.spatial.transform import Rotation

from ..core import kinematics, posing, quat
from . import bonemap
from ..core import skeleton


class RetargetError(ValueError):
    """A bone map the transfer cannot use (hips or chest unmapped, no measurable height)."""


# ---------------------------------------------------------------------------------------
# small numpy rotation kit (batched over leading axes)

def _unit(v, eps=1e-12):
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, eps)


def _swing(a, b):
    """Rotation matrices (…, 3, 3) taking unit vectors a onto unit vectors b (…, 3), about a × b."""
    a, b = np.broadcast_arrays(a, b)
    v = np.cross(a, b)
    c = np.sum(a * b, axis=-1)
    vx = np.zeros(a.shape[:-1] + (3, 3))
    vx[..., 0, 1], vx[..., 0, 2] = -v[..., 2], v[..., 1]
    vx[..., 1, 0], vx[..., 1, 2] = v[..., 2], -v[..., 0]
    vx[..., 2, 0], vx[..., 2, 1] = -v[..., 1], v[..., 0]
    eye = np.broadcast_to(np.eye(3), vx.shape)
    # Rodrigues with 1/(1+c); antiparallel vectors (c → −1) get a half turn about any normal
    k = 1.0 / np.maximum(1.0 + c, 1e-9)
    r = eye + vx + (vx @ vx) * k[..., None, None]
    flip = c < -1.0 + 1e-9
    if np.any(flip):
        axis = np.cross(a[flip], [1.0, 0.0, 0.0])
        bad = np.linalg.norm(axis, axis=-1) < 1e-6
        axis[bad] = np.cross(a[flip][bad], [0.0, 1.0, 0.0])
        axis = _unit(axis)
        r[flip] = 2.0 * axis[..., :, None] * axis[..., None, :] - np.eye(3)
    return r


def _wahba(d_t, d_s):
    """Rotations (F, 3, 3) best mapping directions d_t (k, 3) onto d_s (F, k, 3) (SVD)."""
    b = np.einsum("fki,kj->fij", d_s, d_t)
    u, _s, vt = np.linalg.svd(b)
    det = np.linalg.det(u @ vt)
    d = np.ones(det.shape + (3,))
    d[..., 2] = det
    return (u * d[..., None, :]) @ vt


def _frame(aim, ref):
    """Orthonormal frames [a, n, a × n] as columns (…, 3, 3) from an aim and a reference."""
    a = _unit(aim)
    n = _unit(ref - np.sum(ref * a, axis=-1, keepdims=True) * a)
    return np.stack([a, n, np.cross(a, n)], axis=-1)


def _rot(m):
    """Rotation parts (…, 3, 3) of (…, 4, 4) matrices with uniform scale removed."""
    r = np.asarray(m)[..., :3, :3]
    return r / np.linalg.norm(r, axis=-2, keepdims=True)


# ---------------------------------------------------------------------------------------
# body axes (reference directions for the alignment frames)

PELVIS_LATERAL = ("thigh", "upper_arm", "shoulder")


def _axes(body, heads, lateral_from=("upper_arm", "thigh", "shoulder")):
    """(forward, lateral, up) unit vectors (3,) of a body in a pose given by heads (N, 3);
    lateral from the first pair of limbs in lateral_from (right → left head) both sides
    have."""
    up = None
    top = body.head if body.head is not None else (body.spine[-1] if body.spine else None)
    if top is not None:
        up = heads[top] - heads[body.hips]
    lat = None
    for part in lateral_from:
        left, right = body.limbs.get(("L", part)), body.limbs.get(("R", part))
        if left and right:
            lat = heads[left[0]] - heads[right[0]]
            break
    if up is None or lat is None or np.linalg.norm(up) < 1e-9 or np.linalg.norm(lat) < 1e-9:
        return np.array([0.0, -1.0, 0.0]), np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    up = _unit(up)
    if up[2] > 0.85:
        # a standing body: forward and lateral in the floor plane, so a rest pose that only
        # lowers the arms (A-pose) about the forward axis keeps the same reference frames
        up = np.array([0.0, 0.0, 1.0])
    lat = _unit(lat - np.dot(lat, up) * up)
    return np.cross(lat, up), lat, up


def _facing_turn(body_t, rest_t):
    """(3, 3) rotation about the world's Z (up) axis taking the world's -Y (the forward
    Blender's importers give a capture) to the target's forward in its rest pose, from the
    hip line of its rest heads rest_t (Nt, 3); the identity without a body analysis or
    when that rest is no standing pose (its up over 25° from Z)."""
    if body_t is None:
        return np.eye(3)
    fwd, _lat, up = _axes(body_t, rest_t, PELVIS_LATERAL)
    if up[2] < 0.9:
        return np.eye(3)
    angle = np.arctan2(fwd[1], fwd[0]) + 0.5 * np.pi
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _reference_kind(body):
    """bone index → 'lateral' for feet and toes (they point forward), else 'forward'."""
    kind = {}
    for side in bonemap.SIDES:
        for part in ("foot", "toe"):
            for i in body.limbs.get((side, part), []):
                kind[i] = "lateral"
    return kind


def _has_legs(body):
    return body is not None and all((side, "thigh") in body.limbs for side in bonemap.SIDES)


def _body_frame(axes):
    """(3, 3) body frame [forward, lateral, up] as columns from _axes' dict."""
    return np.stack([axes["forward"], axes["lateral"], axes["up"]], axis=-1)


def _foot_end(body, side):
    """The last bone of a foot (its toe chain's end, else the foot bone itself), or None."""
    chain = body.limbs.get((side, "toe"), []) + body.anatomy.segments.get((side, "toe"), [])
    return (chain or body.limbs.get((side, "foot"), [None]))[-1]


def _foot_tips(body_t, body_s, t_of, tails_t):
    """{target foot bone: (its foot's end point (3,), the source's foot-end bone)} for each
    target foot driven by a source foot; an end point is the tail of the foot's last bone
    (tails_t (N, 3): the target's rest tails)."""
    out = {}
    for side in bonemap.SIDES:
        ft = body_t.limbs.get((side, "foot"), [None])[0]
        s_side = next((k[0] for k, v in body_s.limbs.items() if k[1] == "foot" and ft in t_of
                       and v[0] == t_of[ft]), None)
        if ft is None or s_side is None:
            continue
        out[ft] = (tails_t[_foot_end(body_t, side)], _foot_end(body_s, s_side))
    return out


def _primary_children(body):
    """Bones that continue their parent's main line at a branching bone: the spine and neck
    (over the legs and arms), the hand(s) (over a thumb on the forearm, as on the robot), the
    middle finger (over the other fingers), by preference.
    """
    out = set(body.spine) | set(body.neck) | ({body.head} if body.head is not None else set())
    for side in bonemap.SIDES:
        out |= set(body.limbs.get((side, "hand"), []))
        for finger in ("middle", "ring", "index", "pinky"):
            chain = body.fingers.get((side, finger))
            if chain:
                out.add(chain[0])
                if (side, finger) in body.meta:
                    out.add(body.meta[(side, finger)])
                break
    return out


def _usable_rest(body, rest_heads):
    """True when a source rest pose is a standing human pose in Z-up (spine up, legs down)."""
    _fwd, _lat, up = _axes(body, rest_heads)
    if up[2] < 0.9:
        return False
    for side in bonemap.SIDES:
        thigh, foot = body.limbs.get((side, "thigh")), body.limbs.get((side, "foot"))
        if thigh and foot:
            leg = _unit(rest_heads[foot[0]] - rest_heads[thigh[0]])
            if leg[2] > -0.8:
                return False
    return True


# ---------------------------------------------------------------------------------------
# the transfer

def solve(sk_s, rest_s_world, mats, tails, sk_t, mo_t, rest_t_arm, tails_t, pairs, target_name,
          fps, shoulder_rhythm=True, plant_feet=True, first_frame=0):
    """Local quaternion and hips location keys for the target (see the module docstring).

    sk_s: source bonemap.Skeleton (world rest heads and tails, a few posed frames of heads,
    m); rest_s_world
    (Ns, 4, 4) source rest matrices in world space; mats: source posed world matrices
    (F, Ns, 4, 4); tails (F, Ns, 3) m; sk_t: target Skeleton (world rest heads); mo_t
    (4, 4) target object matrix; rest_t_arm (Nt, 4, 4) target armature-space rest
    matrices (Bone.matrix_local); tails_t (Nt, 3) target world rest tails; pairs:
    [(target name, source name)]; target_name: for messages; fps: frames per second of the
    output frames; shoulder_rhythm: drive unmoving source clavicles by the scapulohumeral
    rhythm (_girdle_rhythm); plant_feet: hold planted feet on the target's floor
    (_plant_feet); first_frame: the scene frame of the first output frame (messages name
    scene frames).
    Returns dict: rot {bone name: (F, 4)}, loc {bone name: (F, 3)}, root_path (F, 3), scale,
    warnings (list of str).
    Raises RetargetError when the hips (or, without legs, the chest) are not mapped or no
    hips height can be measured, and for an impossible result (_refuse).
    """
    t_of = {sk_t.index[t]: sk_s.index[s] for t, s in pairs}
    n_frames = mats.shape[0]

    rest_t = mo_t @ rest_t_arm                            # (Nt, 4, 4) world rest
    T = _rot(rest_t)
    h_t = rest_t[:, :3, 3]

    try:
        body_t = bonemap.analyse(sk_t)
        body_s = bonemap.analyse(sk_s)
    except bonemap.BoneMapError:
        body_t = body_s = None
    usable = body_s is not None and _usable_rest(body_s, rest_s_world[:, :3, 3])
    # the source's world turned so that its forward is the target's: a character turned in
    # the scene keeps facing where it was turned
    turn = np.eye(4)
    turn[:3, :3] = _facing_turn(body_t, h_t)
    mats, rest_s_world = turn @ mats, turn @ rest_s_world
    tails, rest_tails_s = tails @ turn[:3, :3].T, sk_s.tails @ turn[:3, :3].T
    P = mats[..., :3, 3]
    S = _rot(mats)
    notes = []
    if usable:
        S_ref, P_ref, tails_ref = _rot(rest_s_world), rest_s_world[:, :3, 3], rest_tails_s
        bent = _bent_rest(body_s, P_ref)
        if bent:
            # a posed rest (an FBX written without a bind pose keeps the pose it was
            # exported in) turns every bone by its rest's roll: twists cannot be known
            notes.append(f"the source's rest pose is no neutral pose ({', '.join(f'{j} bent {d:.0f}°' for j, d in bent)}): "
                         f"the twist of arm, leg and finger bones about their length is taken relative to it "
                         f"and may be off by a constant — a clip whose rest is a T- or A-pose retargets exactly")
    else:
        S_ref, P_ref, tails_ref = S[0], P[0], tails[0]
    if body_t is not None:
        ax_t = dict(zip(("forward", "lateral", "up"), _axes(body_t, h_t)))
        ax_s = dict(zip(("forward", "lateral", "up"), _axes(body_s, P_ref)))
        kind = _reference_kind(body_t)
    else:
        ax_t = ax_s = {"forward": np.array([0.0, -1.0, 0.0]), "lateral": np.array([1.0, 0.0, 0.0]),
                       "up": np.array([0.0, 0.0, 1.0])}
        kind = {}

    # nearest mapped target descendants whose source bones hang below the same source bone;
    # a child whose source head sits on its parent's (CMU's LowerBack on the Hips) is aimed
    # at by its tail, the next joint along
    order = sk_t.order()
    kids = {b: [] for b in t_of}
    end_s, end_ref = {}, {}
    tailed = set()
    for c in t_of:
        a = next((x for x in sk_t.ancestors(c) if x in t_of), None)
        if a is None or not sk_s.is_descendant(t_of[c], t_of[a]) or np.linalg.norm(h_t[c] - h_t[a]) <= 1e-6:
            continue
        sc, sa = t_of[c], t_of[a]
        if np.linalg.norm(P_ref[sc] - P_ref[sa]) > 1e-6:
            end_s[c], end_ref[c] = P[:, sc], P_ref[sc]
        elif np.linalg.norm(tails_ref[sc] - P_ref[sa]) > 1e-6:
            end_s[c], end_ref[c] = tails[:, sc], tails_ref[sc]
            tailed.add(c)
        else:
            continue
        kids[a].append(c)

    # a leg ending at its shin with an IK foot (the robot's): the shin aims at that foot as
    # the source's shin aims at its ankle, so the foot the shin carries lands near the
    # source's
    legs = body_t is not None and body_s is not None and _has_legs(body_t) and _has_legs(body_s)
    ik_feet = detached_feet(sk_t, body_t, h_t) if legs else {}
    for side, ft in ik_feet.items():
        sh, sf = body_t.limbs[(side, "shin")][0], body_s.limbs.get((side, "foot"), [None])[0]
        if sh in kids and not kids[sh] and sf is not None and sk_s.is_descendant(sf, t_of[sh]):
            kids[sh].append(ft)
            end_s[ft], end_ref[ft] = P[:, sf], P_ref[sf]

    primary = _primary_children(body_t) if body_t is not None else set()
    # the pelvis and feet rules below take the target's rest for a standing pose (the
    # pelvis level, the feet flat): a rest that is no human pose keeps direction transfer
    standing = body_s is not None and _usable_rest(body_t, h_t)
    tips = _foot_tips(body_t, body_s, t_of, tails_t) if standing else {}
    feet_s = source_feet(body_s, P, tails, fps, detached_feet(sk_s, body_s, P[0])) if legs else {}
    Q, A = {}, {}
    for b in order:
        if b not in t_of:
            continue
        s = t_of[b]
        ks = kids[b]
        ref = ax_t["lateral" if kind.get(b) == "lateral" else "forward"]
        ref_s = ax_s["lateral" if kind.get(b) == "lateral" else "forward"]
        if standing and b == body_t.hips:
            # the pelvis: aligned by the body frames of the two standing poses, then the
            # source's own rotation change; no child is made exact, since where the first
            # spine joint sits on the pelvis differs between skeletons (MakeHuman's root
            # lies behind the spine, 8 cm from it) and forcing that line would tilt the
            # pelvis and lift or sink the hip joints
            # by the hip line: a reference pose (the first frame, when the source's rest is
            # no standing pose) may twist the shoulders against the hips, and that twist
            # would turn the whole clip (a dance: 23 deg)
            A[b] = np.stack(_axes(body_t, h_t, PELVIS_LATERAL), axis=-1) @ \
                np.stack(_axes(body_s, P_ref, PELVIS_LATERAL), axis=-1).T
            Q[b] = S[:, s] @ S_ref[s].T @ A[b].T
            continue
        if b in tips:
            # a foot: aligned by ankle → foot end (the toe tip) and the body's lateral axis,
            # then the source's own rotation change; the joint between foot and toe is no
            # common landmark (a BVH "foot" may end 4 cm below the ankle, the ball of the
            # foot elsewhere), so a flat source foot stays a flat target foot
            tip_t, s_end = tips[b]
            A[b] = _frame(tip_t - h_t[b], ax_t["lateral"]) @ \
                _frame(tails_ref[s_end] - P_ref[s], ax_s["lateral"]).T
            Q[b] = S[:, s] @ S_ref[s].T @ A[b].T
            continue
        if ks:
            d_t = _unit(h_t[ks] - h_t[b])                                   # (k, 3)
            d_ref = _unit(np.array([end_ref[c] for c in ks]) - P_ref[s])       # (k, 3)
            d_s = _unit(np.stack([end_s[c] for c in ks], axis=1) - P[:, s][:, None])  # (F, k, 3)
            spread = max((np.linalg.norm(np.cross(d_t[i], d_t[j]))
                          for i in range(len(ks)) for j in range(i + 1, len(ks))), default=0.0)
            if spread > 0.2:
                # aligned at rest by all children (Wahba), then the source's own rotation
                # change (its twist, continuous as the source's is) with the primary
                # child's direction made exact
                A[b] = _wahba(d_ref, d_t[None])[0]
                q_ref = S[:, s] @ S_ref[s].T @ A[b].T
                j = next((n for n, c in enumerate(ks) if c in primary), 0)
                # a primary child whose source head sits on this bone's (CMU's Neck on a
                # zero-length Spine1) is aimed at by its tail: that line turns with the
                # child (the neck nods), not with this bone, so this bone keeps the
                # source's own rotation change (swinging onto it put the neck's motion,
                # 39° of it and one 13° one-frame jump, into the chest)
                Q[b] = q_ref if ks[j] in tailed else _swing(_unit(q_ref @ d_t[j]), d_s[:, j]) @ q_ref
                continue
            aim_t, aim_ref, aim_s = _unit(d_t.mean(0)), _unit(d_ref.mean(0)), _unit(d_s.mean(1))
            if abs(np.dot(aim_t, ref)) > 0.95 or abs(np.dot(aim_ref, ref_s)) > 0.95:
                ref, ref_s = ax_t["up"], ax_s["up"]
            A[b] = _frame(aim_t, ref) @ _frame(aim_ref, ref_s).T
            q_ref = S[:, s] @ S_ref[s].T @ A[b].T
            Q[b] = _swing(_unit(q_ref @ aim_t), aim_s) @ q_ref
        else:
            parent = next((x for x in sk_t.ancestors(b) if x in A), None)
            A[b] = A[parent] if parent is not None else np.eye(3)
            Q[b] = S[:, s] @ S_ref[s].T @ A[b].T

    for b in tips:
        side = next(k[0] for k, v in body_t.limbs.items() if k[1] == "foot" and v[0] == b)
        if side in feet_s:
            _level_foot(sk_t, b, _foot_end(body_t, side), h_t, tails_t, feet_s[side]["standing"], ax_t, Q, t_of)

    if body_t is not None:
        _share(sk_t, body_t, Q, h_t)
    if shoulder_rhythm and body_t is not None:
        _girdle_rhythm(body_t, sk_s, t_of, Q, S, h_t)

    # world rotations down the hierarchy, then local basis rotations
    W = {}
    rot, basis_of = {}, {}
    for b in order:
        p = sk_t.parents[b]
        if b in Q:
            W[b] = Q[b] @ T[b]
        elif p >= 0:
            W[b] = W[p] @ (T[p].T @ T[b])
        else:
            W[b] = np.broadcast_to(T[b], (n_frames, 3, 3))
        if p >= 0:
            basis = (T[p].T @ T[b]).T @ np.swapaxes(W[p], -1, -2) @ W[b]
        else:
            basis = T[b].T @ W[b]
        basis_of[b] = basis
        rot[sk_t.names[b]] = quat.make_continuous(quat.from_matrix(basis))

    # root motion
    hips_t = body_t.hips if body_t is not None else order[0]
    hips_s = t_of.get(hips_t)
    if hips_s is None:
        raise RetargetError(f"the hips of '{target_name}' ({sk_t.names[hips_t]}) are not mapped")
    mover = hips_t
    if body_t is not None and body_t.anatomy.biped and body_t.anatomy.above_hips:
        # 3ds Max Biped: the root above the pelvis (Bip01) carries the translation
        mover = body_t.anatomy.above_hips[-1]
    rest_local = rest_t_arm[mover]
    zero = {mover: np.zeros((n_frames, 3))}
    posed = pose_matrices(sk_t, rest_t_arm, basis_of, zero)       # the root at its rest spot
    world = {b: mo_t @ m for b, m in posed.items()}
    if legs:
        # the hip joints (the thigh heads' midpoint) follow the source's, scaled by the
        # ratio of the standing leg lengths, each skeleton on the floor its planted feet
        # stand on (see root_motion)
        feet_t = target_feet(body_t, sk_t, h_t, tails_t)
        thighs_t = [body_t.limbs[(side, "thigh")][0] for side in bonemap.SIDES]
        goal, k = root_motion(body_s, P, feet_s, h_t[thighs_t].mean(0), feet_t)
        now = np.mean([world[b][:, :3, 3] for b in thighs_t], axis=0)
    else:
        # an upper body on either side: no floor to meet; scale by the hips → chest length
        # and start from the target's rest hips
        chest_t = body_t.spine[-1] if body_t is not None and body_t.spine else None
        if chest_t not in t_of:
            raise RetargetError(f"'{target_name}': without legs the chest must be mapped to "
                               f"scale the hips motion")
        height_t = float(np.linalg.norm(h_t[chest_t] - h_t[hips_t]))
        height_s = float(np.linalg.norm(P_ref[t_of[chest_t]] - P_ref[hips_s]))
        if height_s < 1e-6 or height_t < 1e-6:
            raise RetargetError("cannot measure the hips height of the source or the target")
        k = height_t / height_s
        goal = k * (P[:, hips_s] - P[0, hips_s]) + h_t[hips_t]
        now = world[hips_t][:, :3, 3]
    # translate the mover (parents at rest) by what the pose still lacks:
    # head = L_rot · t + head_local, so t = L_rotᵀ · (armature-space shift)
    shift = (goal - now) @ np.linalg.inv(mo_t[:3, :3]).T                 # armature space
    loc = {mover: shift @ _rot(rest_local)}
    root = world[hips_t][:, :3, 3] + (goal - now)                        # (F, 3) world
    if plant_feet and legs:
        plant_notes, drop = _plant_feet(target_name, sk_t, body_t, T, W, basis_of, loc, mover, feet_s,
                                        feet_t, k, fps, mo_t, rest_t_arm, tails_t, ik_feet, first_frame)
        notes += plant_notes
        root = root - np.outer(drop, [0.0, 0.0, 1.0])
        rot.update({sk_t.names[b]: quat.make_continuous(quat.from_matrix(basis_of[b]))
                    for side in bonemap.SIDES for part in ("thigh", "shin", "foot")
                    for b in body_t.limbs.get((side, part), [])[:1]})
    _follow_detached(sk_t, set(t_of), rest_t_arm, basis_of, loc,
                     {ft: body_t.limbs[(side, "shin")][0] for side, ft in ik_feet.items()})
    rot.update({sk_t.names[b]: quat.make_continuous(quat.from_matrix(basis_of[b])) for b in loc})
    if body_t is not None and body_s is not None:
        _refuse(target_name, sk_t, sk_s, body_t, body_s, t_of, basis_of, loc, P, S, _rot(rest_s_world), mo_t,
                rest_t_arm, first_frame)
        notes += _lying_source(body_s, P, target_name)
    return {"rot": rot, "loc": {sk_t.names[b]: v for b, v in loc.items()}, "root_path": root,
            "scale": k, "warnings": notes}



INVERTED = 45.0   # degrees the target's hips → head may fall below the source's (elevation) before refusing
TURNED = 30.0     # degrees the target's shoulder line may turn against its hip line beyond the source's
WRUNG = 45.0      # degrees a target spine, neck or head bone may twist about its own axis beyond its source bone


def _hip_shoulder_yaw(heads, body):
    """Per frame, the angle (deg, (F,)) about world Z from the hip line (thigh heads, right
    → left) to the shoulder line (upper arm heads); heads(bone) gives a bone's posed heads
    (F, 3). None without two thighs and two upper arms."""
    lines = []
    for part in ("thigh", "upper_arm"):
        if not all((side, part) in body.limbs for side in bonemap.SIDES):
            return None
        d = heads(body.limbs[("L", part)][0]) - heads(body.limbs[("R", part)][0])
        lines.append(np.arctan2(d[:, 1], d[:, 0]))
    return (np.degrees(lines[1] - lines[0]) + 180.0) % 360.0 - 180.0


def _twist(m):
    """Twist (deg, (…,)) about the bone's own axis (Y) of local rotations m (…, 3, 3), each
    relative to its rest: the angle of the swing–twist split's twist, in (−180°, 180°]."""
    return np.degrees(2.0 * np.arctan2(m[..., 0, 2] - m[..., 2, 0], 1.0 + np.trace(m, axis1=-2, axis2=-1)))


def _refuse(target_name, sk_t, sk_s, body_t, body_s, t_of, basis_of, loc, P, S, rest_s, mo, rest_arm, first_frame):
    """RetargetError for a result that cannot be right, before anything is written: a left
    limb driven by a right one (anatomical sides, each body's own, when both facings are
    known), or the target's head below its hips on a frame where its hips → head direction
    is more than INVERTED degrees lower (elevation from the world's horizontal plane, so
    whatever the facing) than the source's on that frame: a bow, the source's head a few
    centimetres above its hips, may put the target's just below its own; an inverted map
    puts it far below where the source stands upright; or the target's shoulder line
    turned against its hip line more than TURNED degrees beyond the source's on a frame
    (a torso turned around on its pelvis); or a mapped spine, neck or head bone of the
    target twisting about its own axis, relative to its nearest mapped ancestor and from
    rest, more than WRUNG degrees beyond its source bone's twist over the same span (from
    the source bone of that ancestor, or its own parent when it does not hang below it)
    on a frame (a wrung spine). S (F, Ns, 3, 3) and rest_s (Ns, 3, 3): the source's posed
    and rest world rotations; basis_of: target bone → (F, 3, 3) local rotations relative
    to its rest; first_frame: the scene frame of frame 0, for the messages."""
    a_s, a_t = body_s.anatomy, body_t.anatomy
    if "none" not in (a_s.facing_evidence, a_t.facing_evidence):
        crossed = skeleton.sides_crossed(a_s, a_t, list(t_of.items()))
        if crossed:
            shown = ", ".join(f"{sk_t.names[t]} ← {sk_s.names[s]}" for t, s in crossed[:4])
            raise RetargetError(f"the bone map drives {len(crossed)} left/right bone(s) of "
                                f"'{target_name}' with the other side of the source ({shown}"
                                f"{'…' if len(crossed) > 4 else ''}): refused, nothing written")
    posed = pose_matrices(sk_t, rest_arm, basis_of, loc)
    yaw_t = _hip_shoulder_yaw(lambda b: (mo @ posed[b])[:, :3, 3], body_t)
    yaw_s = _hip_shoulder_yaw(lambda b: P[:, b], body_s)
    if yaw_t is not None and yaw_s is not None:
        off = np.abs((yaw_t - yaw_s + 180.0) % 360.0 - 180.0)
        bad = np.nonzero(off > TURNED)[0]
        if len(bad):
            f = int(bad[np.argmax(off[bad])])
            raise RetargetError(f"'{target_name}' would turn its shoulders against its hips {off[f]:.0f}° "
                                f"beyond the source's on {len(bad)} frame(s) (worst: {first_frame + f}, the source's "
                                f"{yaw_s[f]:.0f}°, the target's {yaw_t[f]:.0f}°): refused, nothing "
                                f"written (check the bone map of the spine and the hips)")
    if body_t.head is not None and body_s.head is not None:
        up_t = (mo @ posed[body_t.head])[:, :3, 3] - (mo @ posed[body_t.hips])[:, :3, 3]
        up_s = P[:, body_s.head] - P[:, body_s.hips]
        elev_t, elev_s = (np.degrees(np.arcsin(np.clip(u[:, 2] / np.maximum(np.linalg.norm(u, axis=1), 1e-12),
                                                       -1.0, 1.0))) for u in (up_t, up_s))
        bad = np.nonzero((elev_t < 0) & (elev_s - elev_t > INVERTED))[0]
        if len(bad):
            f = int(bad[0])
            raise RetargetError(f"'{target_name}' would hold its head below its hips on {len(bad)} "
                                f"frame(s) (first: {first_frame + f}, hips → head {elev_t[f]:.0f}° from level where "
                                f"the source's is {elev_s[f]:.0f}°): refused, nothing written (check "
                                f"the bone map and the up axis)")
    # each trunk bone over the span from its nearest mapped ancestor, the source bone over
    # the same span (from the source bone of that ancestor when it hangs below it): a
    # source twist shared with an unmapped bone (CMU's Neck1 under the Neck) is the source's
    trunk = [b for b in list(body_t.spine) + list(body_t.neck) + [body_t.head] if b in t_of]
    if trunk:
        rest_t = _rot(rest_arm)
        spans = []
        for b in trunk:
            a = next((x for x in sk_t.ancestors(b) if x in t_of), sk_t.parents[b])
            s = t_of[b]
            spans.append((a, b, t_of[a] if a in t_of and sk_s.is_descendant(s, t_of[a]) else sk_s.parents[s], s))

        def local(rot, rest, a, b):
            return rest[b].T @ rot(b) if a < 0 else (rest[a].T @ rest[b]).T @ np.swapaxes(rot(a), -1, -2) @ rot(b)
        twist_t = np.stack([_twist(local(lambda i: _rot(posed[i]), rest_t, a, b)) for a, b, _sa, _s in spans], axis=1)
        twist_s = np.stack([_twist(local(lambda i: S[:, i], rest_s, sa, s)) for _a, _b, sa, s in spans], axis=1)
        excess = np.abs(twist_t) - np.abs(twist_s)                                   # (F, k)
        f, k = np.unravel_index(int(np.argmax(excess)), excess.shape)
        if excess[f, k] > WRUNG:
            raise RetargetError(f"'{target_name}' would twist {sk_t.names[trunk[k]]} about its own axis "
                                f"{excess[f, k]:.0f}° beyond the source's {sk_s.names[spans[k][3]]} on "
                                f"{int((excess > WRUNG).any(axis=1).sum())} frame(s) (worst: {first_frame + f}): refused, "
                                f"nothing written (check the bone map of the spine and the neck)")

BENT_REST = 30.0   # degrees an elbow or knee may bend in a rest pose taken as neutral


def _bent_rest(body, heads):
    """[(joint name, bend in degrees)] of the elbows and knees that bend more than
    BENT_REST in a pose given by heads (N, 3): upper arm → forearm and forearm → hand
    directions (thigh → shin → ankle)."""
    out = []
    for side in bonemap.SIDES:
        for joint, chain in (("elbow", ("upper_arm", "forearm", "hand")), ("knee", ("thigh", "shin", "foot"))):
            bones = [body.limbs.get((side, part), [None])[0] for part in chain]
            if None in bones:
                continue
            a, b, c = (heads[i] for i in bones)
            u, v = b - a, c - b
            if min(np.linalg.norm(u), np.linalg.norm(v)) < 1e-6:
                continue
            bend = float(np.degrees(np.arccos(np.clip(_unit(u) @ _unit(v), -1.0, 1.0))))
            if bend > BENT_REST:
                out.append((f"{joint}.{side}", bend))
    return out


def _lying_source(body_s, P, target_name):
    """[warning] when the source's head is not above its hips on most frames (P (F, N, 3)
    world heads; the median hips → head direction more than 60° from world Z): a capture
    imported with the wrong up axis lies on its back, and the target copies it."""
    if body_s.head is None:
        return []
    rise = P[:, body_s.head] - P[:, body_s.hips]
    upright = rise[:, 2] / np.maximum(np.linalg.norm(rise, axis=1), 1e-12)
    tilt = float(np.degrees(np.arccos(np.clip(np.median(upright), -1.0, 1.0))))
    if tilt <= 60.0:
        return []
    return [f"the source's head is not above its hips (hips → head {tilt:.0f}° from up, median over "
            f"the frames): it lies on its side or back, and so does '{target_name}' — import the "
            f"clip with SignSim's importer (it finds the up axis) or stand the source up"]


LIMB_PARTS = ("upper_arm", "forearm", "thigh", "shin")


def _share(sk, body, Q, heads):
    """Share one source bone's rotation over the target bones it spans: a mapped target
    bone a followed by unmapped in-line bones u1 … un before the next mapped bone c (a
    five-bone spine driven by a three-bone one, a forearm split for twist).

    Spine, neck and fingers: the rotation of a relative to its mapped parent p,
    R = Q_pᵀ Q_a, is spread over a, u1 … un in proportion to their lengths (bone i turns
    by R^(λ0+…+λi), rotation vector scaled; the last one by R, as the rigid chain did), so
    the bend and twist of the spine are shared between segments and the chain bends as an
    arc where the rigid one turned at a alone. Limbs (upper arm, forearm, thigh,
    shin): the joint stays where it is and only the twist of c relative to a about the
    rest line a → c (swing–twist decomposition) is spread over u1 … un, as the forearm's
    pronation is. Q (bone → (F, 3, 3) world rotation changes) is updated in place;
    heads (N, 3) world rest heads."""
    fixed = dict(Q)
    for c in sk.order():
        a = next((x for x in sk.ancestors(c) if x in fixed), None) if c in fixed else None
        between = sk.path(a, c)[:-1] if a is not None else []
        role = body.anatomy.roles.get(a)
        if not between or role is None:
            continue
        chain = [a] + between
        ends = chain[1:] + [c]
        seg = np.array([np.linalg.norm(heads[e] - heads[b]) for b, e in zip(chain, ends)])
        if seg.sum() < 1e-9:
            continue
        share = np.cumsum(seg) / seg.sum()
        line = _unit(heads[c] - heads[a])
        if role.part in LIMB_PARTS:
            q = Rotation.from_matrix(np.swapaxes(fixed[a], -1, -2) @ fixed[c]).as_quat()   # x, y, z, w
            twist = 2.0 * np.arctan2(q[:, :3] @ line, q[:, 3])
            twist = np.mod(twist + np.pi, 2 * np.pi) - np.pi
            for b, w in zip(between, share[:-1]):
                Q[b] = fixed[a] @ Rotation.from_rotvec(np.outer(twist * w, line)).as_matrix()
            continue
        if role.part not in ("spine", "neck", "head") + skeleton.FINGERS:
            continue
        p = next((x for x in sk.ancestors(a) if x in fixed), None)
        if p is None:
            continue
        turn = Rotation.from_matrix(np.swapaxes(fixed[p], -1, -2) @ fixed[a]).as_rotvec()  # (F, 3)
        Q.update({b: fixed[p] @ Rotation.from_rotvec(turn * w).as_matrix() for b, w in zip(chain, share)})


CLAVICLE_STILL = np.radians(3.0)   # a source clavicle turning less than this does not move


def _girdle_rhythm(body_t, sk_s, t_of, Q, S, h_t):
    """Raise the target's shoulder girdle with the arm (solver.core.posing.girdle_rise) where the
    source's clavicle does not move (or the source has none): Q (target bone → (F, 3, 3)
    world rotation changes) is updated in place for the shoulder bones."""
    chest = body_t.spine[-1] if body_t.spine else None
    line = [i for i in body_t.neck + ([body_t.head] if body_t.head is not None else [])
            if np.linalg.norm(h_t[i] - h_t[chest]) > 1e-6] if chest is not None else []
    if chest not in Q or not line:
        return
    up = _unit(Q[chest] @ _unit(h_t[line[0]] - h_t[chest]))                     # (F, 3)
    for side in bonemap.SIDES:
        sh = body_t.limbs.get((side, "shoulder"), [None])[0]
        ua = body_t.limbs.get((side, "upper_arm"), [None])[0]
        fo = body_t.limbs.get((side, "forearm"), [None])[0]
        if sh is None or ua not in Q or fo is None:
            continue
        if sh in t_of:
            s, p = t_of[sh], sk_s.parents[t_of[sh]]
            rel = np.swapaxes(S[:, p], -1, -2) @ S[:, s] if p >= 0 else S[:, s]
            turn = np.swapaxes(rel[:1], -1, -2) @ rel
            angle = np.arccos(np.clip((np.trace(turn, axis1=-2, axis2=-1) - 1) / 2, -1.0, 1.0))
            if angle.max() > CLAVICLE_STILL:
                continue                                   # the source's own girdle motion
        q_sh = Q.get(sh, Q[chest])
        arm = Q[ua] @ (h_t[fo] - h_t[ua])
        clav = q_sh @ (h_t[ua] - h_t[sh])
        Q[sh] = posing.girdle_rotation(clav, up, posing.girdle_rise(arm, up)) @ q_sh


PLANT_SPEED = 0.3     # m/s: a source foot slower than this, on its floor, is planted
PLANT_HEIGHT = 0.025  # m above the foot's floor
PLANT_RAMP = 0.2      # s over which the foot hold comes and goes
PLANT_REACH = 0.25    # the hold corrects a planted foot by this fraction of the standing leg at most
PLANT_LIFT_FREE = 0.01  # m: a planted source foot this close to its floor stands on the target's
PLANT_BEND = 0.01     # the hold stretches a leg to this fraction short of straight at most (knee ≈ 16°)
ROOT_DROP = 0.015     # m: the hips come down this much at most so that a planted foot reaches
FOOT_PITCH = np.radians(35.0)  # the hold turns a foot about its ankle this much at most
PITCH_STEP = np.radians(1.0)   # the resolution of that turn
PITCH_TOL = 0.002     # m: a planted foot this close to where it must stand is not turned
PLANT_MISS = 0.015    # m: a held foot further than this from where it must stand is reported
PLANT_TURN = np.radians(4.5)   # the hold's turn of a leg bone changes this much per frame at most
FOOT_FLOOR_SPREAD = 0.06  # m: a foot whose lowest points stay this close to the floor has its own
STAND_RISE = 0.04     # m: a planted foot whose ankle stands this much higher above its lowest point than
                      # when flat is on its toes (a 20 cm foot pitched about 12°), not standing flat;
                      # below it, the roll of a walking foot from heel to toes


def _leg_ends(body, side, heads, tails, ik_feet=None):
    """(thigh bone, ankle points) of one leg: the foot's head, an IK foot's head
    (ik_feet: {side: bone}, detached_feet: the robot's hang outside the leg), or the shin's
    tail; heads/tails (F, N, 3) or (N, 3)."""
    th, sh = body.limbs[(side, "thigh")][0], body.limbs[(side, "shin")][0]
    ft = body.limbs.get((side, "foot"), [None])[0]
    if ft is None:
        ft = (ik_feet or {}).get(side)
    return th, (heads[..., ft, :] if ft is not None else tails[..., sh, :])


def source_feet(body, P, tails, fps, ik_feet=None):
    """Where each source foot stands: {side: {"planted": bool (F,), "standing": bool (F,) the
    planted frames on which it stands flat, "floor": the height it
    stands on (m), "lift": (F,) its lowest point's height above that floor (m), "leg": the
    standing leg length: thigh + shin (medians over the frames) + the ankle's height above
    the foot's lowest point while it stands planted (m)}}.

    A foot's lowest point (F, 3) is the lowest head or tail of its foot and toe bones; its
    floor is the 5th percentile of that point's height when within FOOT_FLOOR_SPREAD of the
    whole skeleton's (a skeleton's two feet may end at different heights), else the whole
    skeleton's; planted: solver.core.posing.planted (slower than PLANT_SPEED, within
    PLANT_HEIGHT of that floor). A foot never planted (a dancer's leg that only touches
    down on its toes) stands on the floor of a planted one, and the ankle height is taken
    over the planted frames of both feet (median): a foot on its toes puts the ankle 7 cm
    higher above its lowest point, which is no longer leg (Rokoko's dance: 16 cm over all
    frames, 9.7 cm planted). Without any planted frame, the medians over all frames are
    used. A planted foot stands flat where its ankle is no more than STAND_RISE higher
    above its lowest point than the 5th percentile of that height over its planted frames
    (a foot on its toes, or rolling onto them, is planted but not flat). P (F, N, 3) posed heads, tails (F, N, 3), fps: frames per second; ik_feet
    {side: bone}: IK feet outside the legs (detached_feet), which stand for those feet (a
    leg ending at its shin high above the floor is no standing leg: the robot's clips
    lifted a character 1.3 m)."""
    lowest = np.minimum(P[..., 2].min(axis=1), tails[..., 2].min(axis=1))
    floor_all = float(np.percentile(lowest, 5))
    out, low_of = {}, {}
    for side in bonemap.SIDES:
        bones = [body.limbs[(side, p)][0] for p in ("foot", "toe") if (side, p) in body.limbs]
        if not bones:
            bones = [ik_feet[side]] if side in (ik_feet or {}) else body.limbs[(side, "shin")][:1]
        pts = np.concatenate([P[:, bones], tails[:, bones]], axis=1)             # (F, k, 3)
        low = low_of[side] = pts[np.arange(len(pts)), np.argmin(pts[..., 2], axis=1)]
        own = float(np.percentile(low[:, 2], 5))
        floor = own if own - floor_all < FOOT_FLOOR_SPREAD else floor_all
        out[side] = {"planted": posing.planted(low, fps, floor, PLANT_SPEED, PLANT_HEIGHT), "floor": floor}
    standing = [side for side in out if out[side]["planted"].any()]
    for side in out:
        if side not in standing and standing:
            out[side]["floor"] = float(np.mean([out[s]["floor"] for s in standing]))
            out[side]["planted"] = posing.planted(low_of[side], fps, out[side]["floor"], PLANT_SPEED, PLANT_HEIGHT)
    above = {}
    for side in out:
        th, ankle = _leg_ends(body, side, P, tails, ik_feet)
        sh = body.limbs[(side, "shin")][0]
        out[side]["lift"] = low_of[side][:, 2] - out[side]["floor"]
        out[side]["bones"] = float(np.median(np.linalg.norm(P[:, sh] - P[:, th], axis=1)
                                             + np.linalg.norm(ankle - P[:, sh], axis=1)))
        above[side] = ankle[:, 2] - low_of[side][:, 2]
    flat = np.concatenate([above[s][out[s]["planted"]] for s in standing]) if standing else None
    for side in out:
        mask = out[side]["planted"]
        height = above[side][mask] if mask.any() else (flat if flat is not None else above[side])
        out[side]["leg"] = out[side].pop("bones") + float(np.median(height))
        out[side]["standing"] = mask & (above[side] <= np.percentile(height, 5) + STAND_RISE)
    return out


def target_feet(body, sk, heads, tails):
    """Each target foot in the rest pose: {side: {"floor": the lowest rest head or tail of
    the foot and the bones below it (m), "bones": those bones, "leg": thigh + shin length
    + ankle height above that floor (m)}}; a leg without a foot ends at its shin's tail
    over the whole skeleton's floor. heads, tails: (N, 3) world rest points."""
    floor_all = float(min(heads[:, 2].min(), tails[:, 2].min()))
    out = {}
    for side in bonemap.SIDES:
        ft = body.limbs.get((side, "foot"), [None])[0]
        bones = sk.subtree(ft) if ft is not None else []
        floor = float(min(heads[bones, 2].min(), tails[bones, 2].min())) if bones else floor_all
        th, ankle = _leg_ends(body, side, heads, tails)
        sh = body.limbs[(side, "shin")][0]
        leg = np.linalg.norm(heads[sh] - heads[th]) + np.linalg.norm(ankle - heads[sh])
        out[side] = {"floor": floor, "bones": bones, "leg": float(leg + ankle[2] - floor)}
    return out


def root_motion(body_s, P, feet_s, hip_t, feet_t):
    """The target's hip-joint path (F, 3) and scale k: the midpoint of the source's thigh
    heads, scaled by k = L_t / L_s about its first frame dropped to the source's floor, set
    on the target's floor under its rest hip joints hip_t (3,):
        h′(t) = k · (h(t) − [h_x(0), h_y(0), f_s]) + [h′_x, h′_y, f_t]
    L: the standing leg length (thigh + shin + ankle height above the floor the foot stands
    on, mean of both legs; source_feet, target_feet), f: the mean floor under the feet.
    The hip joints, not the hips bone, are scaled: where a rig puts its hips bone (11 cm
    above the hip joints in CMU's skeleton, 7 cm below them in Blender's metarig) says
    nothing about how high the body stands."""
    thighs = [body_s.limbs[(side, "thigh")][0] for side in bonemap.SIDES]
    hip = P[:, thighs].mean(axis=1)
    leg_s = np.mean([f["leg"] for f in feet_s.values()])
    leg_t = np.mean([f["leg"] for f in feet_t.values()])
    if leg_s < 1e-6 or leg_t < 1e-6:
        raise RetargetError("cannot measure the leg length of the source or the target")
    k = leg_t / leg_s
    f_s = np.mean([f["floor"] for f in feet_s.values()])
    f_t = np.mean([f["floor"] for f in feet_t.values()])
    return k * (hip - [hip[0, 0], hip[0, 1], f_s]) + [hip_t[0], hip_t[1], f_t], float(k)


def _level_foot(sk, foot, end, heads, tails, mask, axes, Q, t_of):
    """Tilt a target foot (and its mapped toes) about the body's lateral axis by the one
    constant angle that makes its aim (ankle → the tail of its last bone `end`) as steep on
    the frames where the source's foot stands flat (mask (F,): source_feet's "standing",
    never the frames it stands on its toes) as in the target's rest pose: the target's rest
    foot stands flat, so the source's foot standing flat becomes that flat foot,
    whatever pose the source's reference frame caught it in. The posed aim is summed bone
    by bone down to `end`, each segment turned by its own bone (a toe bent up at the ball
    of the foot tilts the aim too: Rokoko's dance bends it 9°). heads, tails (N, 3): world
    rest points; Q (bone → (F, 3, 3) world rotation changes) is updated in place."""
    if not mask.any():
        return
    up, lat = axes["up"], axes["lateral"]
    chain = [foot] + (sk.path(foot, end) or [])
    ends = [heads[b] for b in chain[1:]] + [tails[chain[-1]]]
    segments = [(b, e - heads[b]) for b, e in zip(chain, ends)]
    turns, last = {}, Q[foot]
    for b, _seg in segments:               # an unmapped bone turns with its parent
        last = turns[b] = Q.get(b, last)
    aim = sum(seg for _b, seg in segments)
    rest = np.arcsin(np.clip(_unit(aim) @ up, -1.0, 1.0))
    c = np.eye(3)
    for _ in range(3):          # the posed foot also turns (heading): converge on the pitch
        v = _unit(sum(turns[b][mask] @ (c @ seg) for b, seg in segments))
        excess = float(np.mean(np.arcsin(np.clip(v @ up, -1.0, 1.0))) - rest)
        c = Rotation.from_rotvec(lat * excess).as_matrix() @ c
    for b in sk.subtree(foot):
        if b in Q and b in t_of:
            Q[b] = Q[b] @ c


def detached_feet(sk, body, heads):
    """IK feet: for each leg whose chain ends at the shin (no foot bone below it), the bone
    standing for its foot found from rest geometry, names ignored: a bone in no chain of
    the body and not above one (so no pole, root or body bone), not below the shin, whose
    head lies on the leg's side of the hips, below the shin's head by at least half the
    thigh's length and within two thigh lengths of it, nearest to it (a knee pole sits in
    front of the knee, not below it). sk: bonemap.Skeleton; body: bonemap.Body; heads:
    (N, 3) world rest heads (m, z up). Returns {side: bone index} ({} for legs with feet)."""
    chained = {i for chain in list(body.limbs.values()) + list(body.fingers.values()) for i in chain}
    chained |= set(body.spine) | set(body.neck) | {body.hips} | ({body.head} if body.head is not None else set())
    above = {a for b in chained for a in sk.ancestors(b)}
    out = {}
    for side in bonemap.SIDES:
        other = "R" if side == "L" else "L"
        if (side, "foot") in body.limbs or any((s_, part) not in body.limbs
                                               for s_ in (side, other) for part in ("thigh", "shin")):
            continue
        th, sh = body.limbs[(side, "thigh")][0], body.limbs[(side, "shin")][0]
        th_other = body.limbs[(other, "thigh")][0]
        thigh = float(np.linalg.norm(heads[sh] - heads[th]))
        lateral, hips = heads[th] - heads[th_other], 0.5 * (heads[th] + heads[th_other])
        below_shin = set(sk.subtree(sh))
        best = None
        for i in range(len(sk.names)):
            d = heads[i] - heads[sh]
            dist = float(np.linalg.norm(d))
            if (i in chained or i in above or i in below_shin or (heads[i] - hips) @ lateral <= 0
                    or -d[2] < 0.5 * thigh or dist > 2.0 * thigh):
                continue
            if best is None or dist < best[0]:
                best = (dist, i)
        if best is not None:
            out[side] = best[1]
    return out


def _plant_feet(target_name, sk_t, body_t, T, W, basis_of, loc, mover, feet_s, feet_t, k, fps,
                mo, rest_arm, tails_t, ik_feet, first_frame):
    """Where a source foot is planted (source_feet), the target foot stands on its floor
    (target_feet): per run of planted frames the foot's point lowest on average is held at
    one spot and its lowest point put on the floor (solver.core.posing.contact_holds; a source
    foot rising past PLANT_LIFT_FREE lifts the target's by as much, scaled by k), eased in
    and out over PLANT_RAMP (solver.core.posing.plant_corrections) and reached by a two-bone IK
    of thigh and shin that stretches a leg no further than PLANT_BEND short of straight;
    what the legs cannot reach the hips give (at most ROOT_DROP, eased) and the foot's
    pitch about the ankle takes (at most FOOT_PITCH, where the foot stands more than
    PITCH_TOL off), after which the legs put the held point back. Each leg's hold is
    rate-limited (solver.core.posing.rate_limited_weights): its turn of thigh, shin and foot
    changes by at most PLANT_TURN between frames, so no leg bone turns per frame more than
    transferred plus PLANT_TURN. A run needing more than PLANT_REACH of the leg is left as
    transferred and reported.
    A leg ending at its shin with an IK foot (ik_feet {side: bone}, detached_feet) is held
    by that foot, carried rigidly by the shin as _follow_detached carries it, on the floor
    under its rest head and tail; a leg with neither is not held, with a warning.
    W (world rotations), basis_of (local) and loc[mover] (the bone carrying the root
    translation) are updated in place. mo (4, 4), rest_arm (N, 4, 4), tails_t (N, 3): the
    target's object matrix, armature-space rest matrices and world rest tails;
    first_frame: the scene frame of frame 0, for the warnings. Returns
    (warnings (list of str), the hips' drop (F,) m)."""
    out = []
    tails_arm = (np.linalg.inv(mo) @ np.c_[tails_t, np.ones(len(tails_t))].T).T[:, :3]
    lengths = np.linalg.norm(tails_arm - rest_arm[:, :3, 3], axis=1)      # bone lengths
    ramp = max(2, int(round(PLANT_RAMP * fps)))
    ik = {ft: body_t.limbs[(side, "shin")][0] for side, ft in ik_feet.items()}      # IK foot -> shin
    for ft, sh in ik.items():
        W[ft] = W[sh] @ (T[sh].T @ T[ft])
    feet = dict(feet_t)
    for side, ft in ik_feet.items():
        bones = sk_t.subtree(ft)
        feet[side] = {"bones": bones, "floor": float(min((mo @ rest_arm[bones])[:, 2, 3].min(),
                                                         tails_t[bones, 2].min()))}

    def carried(posed):
        """posed with each IK foot carried rigidly by its shin, as at rest."""
        for ft, sh in ik.items():
            posed[ft] = posed[sh] @ np.linalg.inv(rest_arm[sh]) @ rest_arm[ft]
        return posed

    def holds(legs):
        """{side: (hip, knee, ankle, ankle goal) (F, 3) each} for the current pose."""
        posed = carried(pose_matrices(sk_t, rest_arm, basis_of, loc))
        got = {}
        for side, (th, sh, ft, mask, lift) in legs.items():
            toes = feet[side]["bones"]
            world = {b: mo @ posed[b] for b in {th, sh, *toes}}
            foot_pts = np.concatenate(
                [np.stack([world[b][:, :3, 3], world[b][:, :3, 3] + world[b][:, :3, 1] * lengths[b]], 1)
                 for b in toes], axis=1)                                          # (F, 2k, 3)
            ankle = world[ft][:, :3, 3]
            corr = posing.contact_holds(foot_pts, mask, feet[side]["floor"], lift)
            got[side] = (world[th][:, :3, 3], world[sh][:, :3, 3], ankle, corr)
        return got

    legs = {}
    for side in bonemap.SIDES:
        th, sh, ft = (body_t.limbs.get((side, p), [None])[0] for p in ("thigh", "shin", "foot"))
        ft = ik_feet.get(side, ft)
        if None in (th, sh, ft) or sk_t.parents[sh] != th or (ft not in ik and sk_t.parents[ft] != sh):
            if th is not None and sh is not None and feet_s[side]["planted"].any():
                out.append(f"the {side} foot of '{target_name}' is not held where the source's is planted: "
                           f"its leg has no foot bone below the shin and no detached (IK) foot bone was "
                           f"found at its end, so that foot may slide")
            continue
        if feet_s[side]["planted"].any():
            # a planted source foot rising off where it stands in that run (the heel at
            # lift-off) lifts the target's as much, scaled, past the first PLANT_LIFT_FREE;
            # the run's own lowest height is the floor, since a capture puts the same plant
            # of a walk cycle up to 2 cm apart (CMU's walk loop: 2.3 cm above the clip's
            # floor at its start, 0.7 cm at its end) and the target's floor is one
            rise = feet_s[side]["lift"].copy()
            for start, stop in posing.runs(feet_s[side]["planted"]):
                rise[start:stop] -= max(rise[start:stop].min(), 0.0)
            lift = k * np.maximum(rise - PLANT_LIFT_FREE, 0.0)
            legs[side] = (th, sh, ft, feet_s[side]["planted"].copy(), lift)
    for side, (_hip, _knee, _ankle, corr) in holds(legs).items():
        mask = legs[side][3]
        need = np.linalg.norm(corr, axis=1)
        for start, stop in posing.runs(mask):
            if need[start:stop].max() > PLANT_REACH * feet_t[side]["leg"]:
                out.append(f"planted {side} foot of '{target_name}' stays {need[start:stop].max() * 100:.1f} cm "
                           f"off its floor spot at frames {first_frame + start}–{first_frame + stop - 1} (legs or feet shaped "
                           f"unlike the source's): not forced")
                mask[start:stop] = False
    legs = {side: leg for side, leg in legs.items() if leg[3].any()}
    unheld = {b: W[b] for leg in legs.values() for b in leg[:3]}
    # where a leg cannot reach its hold (a foot on its toes at lift-off, shaped unlike the
    # source's), the hips come down by the shortfall, eased over PLANT_RAMP and at most
    # ROOT_DROP: the legs then reach without snapping straight
    short = np.zeros(len(next(iter(feet_s.values()))["planted"]))
    for side, (hip, knee, ankle, corr) in holds(legs).items():
        goal = ankle + posing.plant_corrections(corr, legs[side][3], ramp)
        reach = np.linalg.norm(knee - hip, axis=1) + np.linalg.norm(ankle - knee, axis=1)
        limit = np.maximum(reach * (1.0 - PLANT_BEND), np.linalg.norm(ankle - hip, axis=1))
        short = np.maximum(short, np.linalg.norm(goal - hip, axis=1) - limit)
    drop = np.minimum(posing.eased_max(np.maximum(short, 0.0), ramp), ROOT_DROP)
    if drop.any():
        world_down = np.outer(drop, [0.0, 0.0, -1.0])
        loc[mover] = loc[mover] + (world_down @ np.linalg.inv(mo[:3, :3]).T) @ _rot(rest_arm[mover])
    def leg_ik(side, hip, knee, ankle, corr):
        """Move one leg's ankle by the eased corrections corr (F, 3) (two-bone IK)."""
        th, sh, ft, mask, _lift = legs[side]
        goal = ankle + posing.plant_corrections(corr, mask, ramp)
        # the hold stretches a leg no straighter than PLANT_BEND short of its reach (or than
        # the transferred pose has it): near straight a knee turns fast for little reach,
        # and the foot's pitch (below) covers the rest
        reach = np.linalg.norm(knee - hip, axis=1) + np.linalg.norm(ankle - knee, axis=1)
        limit = np.maximum(reach * (1.0 - PLANT_BEND), np.linalg.norm(ankle - hip, axis=1))
        to_goal = goal - hip
        far = np.linalg.norm(to_goal, axis=1)
        goal = hip + to_goal * (np.minimum(far, limit) / np.maximum(far, 1e-9))[:, None]
        # the knee bends towards where the foot points
        heading = W[ft] @ T[ft].T @ T[ft][:, 1]
        d_up, d_low = posing.two_bone_ik(hip, knee, ankle, goal, knee + _unit(heading))
        W[th] = d_up @ W[th]
        W[sh] = d_low @ W[sh]
        rebase(th, sh, ft)

    def rebase(*bones):
        """Local rotations of bones from W; an IK foot's world rotation follows its shin."""
        for b in bones:
            if b in ik:
                W[b] = W[ik[b]] @ (T[ik[b]].T @ T[b])
                continue
            p = sk_t.parents[b]
            basis_of[b] = (T[p].T @ T[b]).T @ np.swapaxes(W[p], -1, -2) @ W[b]

    def rate_limit():
        """The hold's turn of each leg bone changes by at most PLANT_TURN between frames, so
        no bone turns more per frame than transferred plus PLANT_TURN (where a hold would
        come or go faster, as at a jump's take-off, it is taken in part there)."""
        for side, (th, sh, ft, _mask, _lift) in legs.items():
            turns = np.stack([Rotation.from_matrix(W[b] @ np.swapaxes(unheld[b], -1, -2)).as_rotvec()
                              for b in (th, sh, ft)])
            w = posing.rate_limited_weights(turns, PLANT_TURN)
            for b, turn in zip((th, sh, ft), turns):
                W[b] = Rotation.from_rotvec(turn * w[:, None]).as_matrix() @ unheld[b]
            rebase(th, sh, ft)

    for side, (hip, knee, ankle, corr) in holds(legs).items():
        leg_ik(side, hip, knee, ankle, corr)
    rate_limit()
    # what the legs could not reach (a foot on its toes whose ball sits nearer the ankle
    # than the source's): the foot turns toes-down about its ankle, by the smallest turn
    # (at most FOOT_PITCH, found by bisection, eased over PLANT_RAMP) that sets its lowest
    # point where the foot must stand
    posed = pose_matrices(sk_t, rest_arm, basis_of, loc)
    for side, (th, sh, ft, mask, lift) in legs.items():
        if ft in ik:            # an IK foot turns with its shin
            continue
        floor = feet_t[side]["floor"] + lift
        ankle = (mo @ posed[ft])[:, :3, 3]
        pts = np.concatenate([np.stack([(mo @ posed[b])[:, :3, 3], (mo @ posed[b])[:, :3, 3]
                                        + (mo @ posed[b])[:, :3, 1] * lengths[b]], 1)
                              for b in feet_t[side]["bones"]], axis=1) - ankle[:, None]
        heading = W[ft] @ T[ft].T @ T[ft][:, 1]
        lat = _unit(np.cross([0.0, 0.0, 1.0], heading))      # turning about it lowers the toes

        def gap(phi):
            """Lowest point above where it must stand, after a turn phi (F,) about lat."""
            turned = Rotation.from_rotvec(lat * phi[:, None]).as_matrix()
            return np.einsum("fij,fkj->fki", turned, pts)[..., 2].min(axis=1) + ankle[:, 2] - floor

        # gap(phi) need not fall steadily (a heel that stands lowest rises as the toes go
        # down), so the turns are tried on a grid of PITCH_STEP: the smallest that reaches,
        # else the one that comes nearest, and none where the foot already stands within
        # PITCH_TOL or no turn brings it nearer
        grid = np.arange(0.0, FOOT_PITCH + 1e-9, PITCH_STEP)
        gaps = np.stack([gap(np.full(len(mask), a)) for a in grid], axis=1)          # (F, G)
        first = np.where((gaps <= 0).any(axis=1), np.argmax(gaps <= 0, axis=1), np.argmin(gaps, axis=1))
        need = mask & (gaps[:, 0] > PITCH_TOL) & (gaps[np.arange(len(mask)), first] < gaps[:, 0])
        phi = np.where(need, grid[first], 0.0)
        phi = np.minimum(posing.eased_max(phi, ramp), FOOT_PITCH)
        if not phi.any():
            continue
        W[ft] = Rotation.from_rotvec(lat * phi[:, None]).as_matrix() @ W[ft]
        p = sk_t.parents[ft]
        basis_of[ft] = (T[p].T @ T[ft]).T @ np.swapaxes(W[p], -1, -2) @ W[ft]
    # the turn moved the held point: the legs put it back
    for side, (hip, knee, ankle, corr) in holds(legs).items():
        leg_ik(side, hip, knee, ankle, corr)
    rate_limit()
    # what the hold could not do is said: a foot still more than PLANT_MISS from where it
    # must stand (a leg too short for it, or a hold taken in part so that no bone jumps)
    for side, (_hip, _knee, _ankle, corr) in holds(legs).items():
        miss = np.linalg.norm(corr, axis=1)
        runs = posing.runs(legs[side][3])
        off = [(start, stop) for start, stop in runs if miss[start:stop].max() > PLANT_MISS]
        if off:
            listed = ", ".join(f"{first_frame + a}–{first_frame + b - 1}" for a, b in off[:4]) + (", …" if len(off) > 4 else "")
            out.append(f"planted {side} foot of '{target_name}' stays up to "
                       f"{max(miss[a:b].max() for a, b in off) * 100:.1f} cm from where it must stand "
                       f"in {len(off)} of its {len(runs)} planted runs (frames {listed}): its leg cannot "
                       f"reach (the source's legs or feet are shaped unlike the target's), or the hold "
                       f"is taken in part so that no leg bone turns more than "
                       f"{np.degrees(PLANT_TURN):.1f}° a frame beyond the source")
    return out, drop


def pose_matrices(sk, rest, basis, loc):
    """Posed armature-space matrices {bone index: (F, 4, 4)}: M_b = M_p · L_p⁻¹ · L_b · B_b
    (solver.core.kinematics.chain, over the skeleton's parents-first order). sk: Skeleton; rest:
    (N, 4, 4) armature-space rest matrices L; basis: bone index → (F, 3, 3) basis
    rotations (every bone); loc: bone index → (F, 3) basis locations (bones without one sit
    at their rest offset)."""
    order = sk.order()
    at = {b: k for k, b in enumerate(order)}
    n_frames = next(iter(basis.values())).shape[0]
    local = np.broadcast_to(np.eye(4), (n_frames, len(order), 4, 4)).copy()
    for k, b in enumerate(order):
        local[:, k, :3, :3] = basis[b]
        if b in loc:
            local[:, k, :3, 3] = loc[b]
    parents = [at[sk.parents[b]] if sk.parents[b] >= 0 else -1 for b in order]
    posed = kinematics.chain(parents, np.asarray(rest)[order], local)
    return {b: posed[:, k] for k, b in enumerate(order)}


def _follow_detached(sk, mapped, rest, basis, loc, anchors=None):
    """Bones outside the mapped hierarchy (IK targets and poles hanging from a root, like
    the robot's Foot.L and PoleTarget.L) follow the nearest mapped bone of their side
    rigidly, as in the rest pose, so a foot mesh parented to them stays on the leg and an
    IK setup, if the user adds one, agrees with the keyed pose.

    sk: target Skeleton; mapped: set of mapped bone indices; rest: armature-space rest
    matrices (N, 4, 4); basis: bone index → (F, 3, 3) basis rotations, updated in place;
    loc: bone index → (F, 3) basis locations, updated in place; anchors: {bone: the mapped
    bone it follows} where that is known from geometry (IK feet: their shin, see
    detached_feet).
    """
    under = set()
    for b in sk.order():
        p = sk.parents[b]
        if b in mapped or (p >= 0 and p in under):
            under.add(b)
    above = {a for b in mapped for a in sk.ancestors(b)}
    detached = [b for b in sk.order() if b not in under and b not in above]
    if not detached:
        return
    posed = pose_matrices(sk, rest, basis, loc)
    sides = [bonemap.split_side(n)[0] for n in sk.names]
    for b in detached:
        candidates = [m for m in mapped if sides[m] == sides[b]] or list(mapped)
        anchor = (anchors or {}).get(b)
        if anchor is None:
            anchor = min(candidates, key=lambda m: np.linalg.norm(rest[m][:3, 3] - rest[b][:3, 3]))
        target = posed[anchor] @ np.linalg.inv(rest[anchor]) @ rest[b]          # (F, 4, 4)
        p = sk.parents[b]
        parent = posed[p] @ np.linalg.inv(rest[p]) if p >= 0 else np.eye(4)
        local = np.linalg.inv(rest[b]) @ np.linalg.inv(parent) @ target
        basis[b] = local[:, :3, :3]
        loc[b] = local[:, :3, 3]
        posed[b] = target

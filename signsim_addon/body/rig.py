"""The user's rig as solver arrays: simulated bones, capsules, joint limits, face mesh.

`read_rig(armature)` turns an armature object into a `RigModel`: a solver SkeletonModel of
the simulated bones (default: clavicles, arms, hands, fingers, neck, head) hanging
from the chest, which follows the reference kinematically.
Body parts are found by solver/retarget/bonemap.py (names and chain topology), so any
humanoid convention works. Arrays leave this module; Blender objects do not.
"""
from dataclasses import dataclass, field, replace

import numpy as np

from ...solver.core import capsule_radii, quat
from ...solver.physics import joint_limits
from ...solver.core.body_volumes import part_side as body_side
from ...solver.core.model import BALL, HINGE, SkeletonModel
from ...solver.core.settings import GROUPS
from ...solver.retarget import bonemap
from ..errors import WARNING, SignSimError, from_solver, silent
from . import geometry

CAPSULE_PROP = "signsim_capsule_radius"  # per Bone, metres (sample_blends/make_samples.py)

_ARM_GROUP = {"shoulder": "clavicle", "upper_arm": "upper_arm", "forearm": "forearm", "hand": "wrist"}

# Default capsule radius by group when the rig has neither the property nor a skin, m.
DEFAULT_RADIUS = {"fingers": 0.008, "thumb": 0.009, "wrist": 0.022, "forearm": 0.035,
                  "upper_arm": 0.045, "clavicle": 0.04, "neck_head": 0.06}

# Anatomical defaults (rad) on the local rotation vector (x = curl, y = twist, z = spread),
# curl given for the palm side; after Kapandji, "The Physiology of the Joints", vol. 1.
_FINGER_LIMITS = {  # phalanx index → (curl lo, curl hi, twist, spread)
    0: (-0.35, 1.65, 0.20, 0.40),
    1: (-0.05, 1.90, 0.0, 0.0),
    2: (-0.10, 1.45, 0.0, 0.0),
}
# The thumb curls across the palm, not along its normal: its hinge ranges are symmetric.
_THUMB_LIMITS = {0: (-0.90, 0.90, 0.60, 0.90), 1: (-1.30, 1.30, 0.30, 0.60), 2: (-1.45, 1.45, 0.20, 0.40)}
_BALL_LIMITS = {"wrist": (1.40, 0.60, 1.40), "forearm": (2.70, 1.60, 0.40),
                "upper_arm": (np.pi, np.pi, np.pi), "clavicle": (0.60, 0.60, 0.60),
                "neck_head": (1.00, 1.20, 0.80)}  # symmetric (x, y, z) half-ranges


@dataclass(frozen=True)
class RigModel:
    """A rig read for the solver.

    model: SkeletonModel of the simulated bones (parents first); bone_names (n,) their
    names; base_bone: the chest, followed kinematically; chain_to_base: bone names from
    the root to the chest (posed by FK from the reference); fingertips: indices into
    bone_names of the last phalanx of every finger (tips at the capsule ends);
    face: (vertices (V,3) m in the head bone's frame, triangles (T,3), head index) or None;
    meshes: solver.core.body_volumes.BodyMesh volumes (face, torso, palms) in metres; parts (n,):
    body part label per simulated bone ("finger.L", "hand.R", "arm.L", "neck", "head");
    world_scale: metres per armature-space unit (object scale × scene unit scale);
    limits_widened, hinges_freed: what fit_to_reference changed (JSON-able records);
    warnings: list of str.
    skeleton: the whole armature as a solver.retarget.bonemap.Skeleton (skeleton_of);
    skin: the meshes that move with the armature as geometry.skin_weights reads them, each
    mesh object replaced by its name: read once here, so the body fields and the skin test
    reuse the same arrays instead of walking the meshes again.
    """
    model: SkeletonModel
    bone_names: tuple
    base_bone: str
    chain_to_base: tuple
    fingertips: np.ndarray
    face: tuple
    world_scale: float
    meshes: tuple = ()
    parts: tuple = ()
    limits_widened: tuple = ()
    hinges_freed: tuple = ()
    warnings: list = field(default_factory=list)
    skeleton: object = None
    skin: tuple = ()

    @property
    def skinned(self):
        """Names of the meshes the armature deforms (an Armature modifier), in skin's order."""
        return tuple(name for name, _v, _t, _sparse, bones in self.skin if isinstance(bones, list))


def skeleton_of(armature_data):
    """bonemap.Skeleton (names, parents, rest heads in m) of an Armature datablock."""
    bones = list(armature_data.bones)
    index = {b.name: i for i, b in enumerate(bones)}
    parents = [index[b.parent.name] if b.parent else -1 for b in bones]
    heads = [tuple(b.head_local) for b in bones]
    return bonemap.Skeleton([b.name for b in bones], parents, heads)


def _roles(body):
    """{bone index: (group, finger phalanx or None, finger name or None)} of simulated parts."""
    roles = {}
    for (side, part), bones in body.limbs.items():
        if part in _ARM_GROUP:
            for i in bones:
                roles[i] = (_ARM_GROUP[part], None, None)
    for (side, finger), bones in body.fingers.items():
        group = "thumb" if finger == "thumb" else "fingers"
        meta = body.meta.get((side, finger))
        if meta is not None:
            roles.setdefault(meta, ("wrist", None, None))
        for k, i in enumerate(bones):
            roles[i] = (group, k, finger)
    for i in list(body.neck) + ([body.head] if body.head is not None else []):
        roles[i] = ("neck_head", None, None)
    return roles


def read_rig(armature, simulate_parts=GROUPS, face_object=None, report=None, unit_scale=1.0) -> RigModel:
    """Read `armature` (bpy Object of type ARMATURE) into a RigModel.

    simulate_parts: the joint groups to simulate (subset of GROUPS). face_object: the mesh
    whose surface is the face for hand–face contact (default: a mesh parented to the head
    bone, else the head region of the skinned body, else none with a warning).
    unit_scale: the scene's unit scale (metres per Blender unit, UnitSettings.scale_length).
    Raises SignSimError for a non-armature, a non-uniform object scale, a rig without a
    chest, or without fingers.
    """
    if armature is None or armature.type != 'ARMATURE':
        raise SignSimError(f"'{getattr(armature, 'name', armature)}' is not an armature")
    warnings = []
    report = report or silent
    arm = armature.data
    sk = skeleton_of(arm)
    with from_solver():
        body = bonemap.analyse(sk)
    chest = body.spine[-1] if body.spine else body.hips
    if not body.fingers:
        raise SignSimError(f"armature '{armature.name}' has no finger bones: the physics pass "
                           "needs hands with fingers")
    roles = {i: r for i, r in _roles(body).items() if r[0] in simulate_parts}
    # Bones between the chest and a simulated bone are simulated too (one kinematic base).
    for i in list(roles):
        for a in sk.ancestors(i):
            if a == chest:
                break
            roles.setdefault(a, (roles[i][0], None, None))
        else:
            raise SignSimError(f"bone '{sk.names[i]}' does not hang from the chest '{sk.names[chest]}'")
    order = sorted(roles, key=lambda i: (len(sk.ancestors(i)), i))
    order = _parents_first(sk, order)
    pos = {i: k for k, i in enumerate(order)}

    bones = arm.bones
    rest = np.array([np.array(b.matrix_local) for b in bones])
    scale = object_scale(armature) * float(unit_scale)
    parents, offsets, rotations, types, radius, length, groups = [], [], [], [], [], [], []
    lower, upper = np.full((len(order), 3), -np.inf), np.full((len(order), 3), np.inf)
    defaulted = []
    palm_normals = _palm_normals(body, rest)
    seg_length = segment_lengths(arm)
    weights = geometry.skin_weights(armature, sk)  # read once: the radii and the body volumes
    skin = _skin_radii(armature, sk, seg_length, weights) if any(CAPSULE_PROP not in bones[i] for i in order) else {}
    for k, i in enumerate(order):
        p = sk.parents[i]
        parent_rest = rest[p] if p >= 0 else np.eye(4)
        rel = np.linalg.inv(parent_rest) @ rest[i]
        parents.append(pos.get(p, -1))
        offsets.append(rel[:3, 3] * scale)
        rotations.append(quat.from_matrix(rel[:3, :3]))
        group, phalanx, finger = roles[i]
        # Finger middle/distal joints are hinges about local X when the rig's bone roll puts
        # the curl there (the knuckle line, from the palm); the thumb's MCP and IP also swing.
        curl_axis = _curl_axis(rest[i], palm_normals.get(_side_of(body, i)))
        types.append(HINGE if phalanx in (1, 2) and group == "fingers" and curl_axis[0] == 0 else BALL)
        groups.append(group)
        length.append(seg_length[sk.names[i]] * scale)
        r = bones[i].get(CAPSULE_PROP) or skin.get(i)
        if r is None:
            r = DEFAULT_RADIUS[group] / scale
            defaulted.append(sk.names[i])
        radius.append(float(r) * scale)
        lo, hi = _limits(armature.pose.bones[sk.names[i]], group, phalanx, finger, curl_axis)
        lower[k], upper[k] = lo, hi
    if defaulted:
        warnings.append(f"no capsule radius from a skin for {len(defaulted)} bones of "
                        f"'{armature.name}' (e.g. '{defaulted[0]}'): default radii by bone kind")
    tips = np.array([pos[b[-1]] for b in body.fingers.values() if b and b[-1] in pos], dtype=np.intp)
    parts = tuple(_part(body, i, roles[i][0]) for i in order)
    meshes = geometry.body_meshes(armature, sk, body, order, rest, scale, chest,
                                       face_object if "neck_head" in simulate_parts else None,
                                       palm_normals, warnings, weights)
    face = next(((m.vertices, m.triangles, m.bone) for m in meshes if m.kind == "face"), None)
    # A volume's distance field is that part's surface: the neck and head capsules (fat
    # cylinders around the face) would push away fingertips that touch the chin, and the
    # hand's capsule would swallow the fingers of a fist; the palm volume stands for it.
    covered = {"face": ("neck", "head")}
    covered.update({m.kind: (f"hand.{m.side}",) for m in meshes if m.kind.startswith("palm")})
    off = {p for m in meshes for p in covered.get(m.kind, ())}
    collide = [p not in off for p in parts]
    # A forearm's capsule ends in a cap of its own radius past the wrist, inside the hand:
    # the fingers of that hand curling into a fist would hit it.
    no_contact = [(a, b) for a, g in enumerate(groups) if g == "forearm" for b, p in enumerate(parts)
                  if p.split(".")[0] in ("finger", "thumb") and body_side(parts[a]) == body_side(p)]
    model = SkeletonModel(parents=parents, rest_offsets=offsets, rest_rotations=rotations,
                          joint_types=types, capsule_radius=radius, capsule_length=length,
                          groups=groups, limit_lower=lower, limit_upper=upper, collide=collide,
                          names=[sk.names[i] for i in order], no_contact=no_contact)
    chain = [sk.names[a] for a in reversed(sk.ancestors(chest))] + [sk.names[chest]]
    for w in warnings:
        report(WARNING, w)
    meshes = tuple(replace(m, bone=pos[m.bone] if m.bone >= 0 else -1) for m in meshes)
    return RigModel(model=model, bone_names=tuple(sk.names[i] for i in order),
                    base_bone=sk.names[chest], chain_to_base=tuple(chain), fingertips=tips,
                    face=face, world_scale=scale, meshes=meshes, parts=parts, warnings=warnings,
                    skeleton=sk, skin=tuple((w[0].name,) + tuple(w[1:]) for w in weights))


def fit_to_reference(rig, rotations):
    """`rig` with joints that can follow the reference rotations (F, n, 4) exactly
    (solver.physics.joint_limits.fit_to_reference): limits widened to the reference's range plus a
    margin, hinges whose reference leaves their axis made balls. Each change is recorded
    (limits_widened, hinges_freed) for the metrics: an adaptation, not a fallback."""
    model, widened, freed = joint_limits.fit_to_reference(rig.model, rotations)
    names = rig.bone_names
    axes = "xyz"
    w = tuple({"bone": names[b], "axis": axes[a],
               "default_deg": [round(float(np.degrees(v)), 2) for v in before],
               "widened_deg": [round(float(np.degrees(v)), 2) for v in after]} for b, a, before, after in widened)
    f = tuple(names[b] for b in freed)
    return replace(rig, model=model, limits_widened=w, hinges_freed=f)


def object_scale(ob):
    """The uniform scale of `ob`'s world matrix. Raises SignSimError when it is not uniform
    (lengths along different axes would need different units)."""
    s = np.linalg.svd(np.array(ob.matrix_world)[:3, :3], compute_uv=False)
    if s.min() <= 0 or s.max() / s.min() > 1.0 + 1e-4:
        raise SignSimError(f"'{ob.name}' has a non-uniform scale ({', '.join(f'{v:.4g}' for v in s)}): "
                           "apply the scale (Ctrl+A › Scale) or make it equal on all axes")
    return float(np.cbrt(np.prod(s)))


def _part(body, i, group):
    """Body part label of bone i ("finger.L", "thumb.R", "hand.L", "arm.R", "neck", "head")."""
    for (side, finger), bones in body.fingers.items():
        if i in bones:
            return f"{'thumb' if finger == 'thumb' else 'finger'}.{side}"
    for (side, _f), m in body.meta.items():
        if i == m:
            return f"hand.{side}"
    for (side, part), bones in body.limbs.items():
        if i in bones:
            return f"{'hand' if part == 'hand' else 'arm'}.{side}"
    if i == body.head:
        return "head"
    return "neck" if group == "neck_head" else "arm"


def _parents_first(sk, order):
    chosen, out = set(order), []
    def visit(i):
        if i in out:
            return
        p = sk.parents[i]
        if p in chosen:
            visit(p)
        out.append(i)
    for i in order:
        visit(i)
    return out


def _side_of(body, i):
    for (side, _f), bones in body.fingers.items():
        if i in bones:
            return side
    return None


def _palm_normals(body, rest):
    """Per side, the unit normal on the palm side (the way fingers curl), armature space.

    From the hand's axis a (wrist → fingers) and b (pinky base → index base): n = ±a × b,
    + for the left hand and − for the right, whose thumb sits on the mirrored side.
    """
    out = {}
    for side in bonemap.SIDES:
        hand = body.limbs.get((side, "hand"))
        index, pinky = body.fingers.get((side, "index")), body.fingers.get((side, "pinky"))
        if not (hand and index and pinky):
            continue
        a = rest[hand[0]][:3, 1]
        b = rest[index[0]][:3, 3] - rest[pinky[0]][:3, 3]
        n = np.cross(a, b) * (1.0 if side == "L" else -1.0)
        if np.linalg.norm(n) > 1e-9:
            out[side] = n / np.linalg.norm(n)
    return out


HINGE_AXIS_TOLERANCE = np.radians(20.0)  # a curl axis this close to local X is a hinge about X


def _curl_axis(rest, palm_normal):
    """(local axis index 0 (X) or 2 (Z), sign ±1) of the bone's curl: the local axis nearest
    to y × n, n the palm normal in the bone's rest frame (rest (4, 4) armature space), so
    that +θ about it closes the bone towards the palm. Z when it is not within
    HINGE_AXIS_TOLERANCE of X; (0, 1) without a palm normal."""
    if palm_normal is None:
        return 0, 1.0
    u = np.cross([0.0, 1.0, 0.0], rest[:3, :3].T @ palm_normal)
    if np.linalg.norm(u) < 1e-9:
        return 0, 1.0
    u /= np.linalg.norm(u)
    k = 0 if abs(u[0]) >= np.cos(HINGE_AXIS_TOLERANCE) else 2
    return k, float(np.sign(u[k]) or 1.0)


def _limits(pose_bone, group, phalanx, finger, curl_axis):
    """(lower, upper) (3,) rad on the local rotation vector of one bone.

    A Limit Rotation constraint on the bone wins (its Euler bounds, taken per axis);
    otherwise anatomical defaults, the finger curl range on the local axis of curl_axis
    (_curl_axis: index and sign, so that the range closes towards the palm) and the
    spread range on the other of X and Z.
    """
    con = next((c for c in pose_bone.constraints if c.type == 'LIMIT_ROTATION' and c.enabled), None)
    lo, hi = np.full(3, -np.inf), np.full(3, np.inf)
    if con is not None:
        for k, ax in enumerate("xyz"):
            if getattr(con, f"use_limit_{ax}"):
                lo[k], hi[k] = getattr(con, f"min_{ax}"), getattr(con, f"max_{ax}")
        return lo, hi
    if phalanx is not None:
        c_lo, c_hi, twist, spread = (_THUMB_LIMITS if finger == "thumb" else _FINGER_LIMITS)[phalanx]
        k, sign = curl_axis
        other = 2 - k
        lo[k], hi[k] = sorted((sign * c_lo, sign * c_hi))
        lo[1], hi[1], lo[other], hi[other] = -twist, twist, -spread, spread
        return lo, hi
    half = np.array(_BALL_LIMITS[group])
    return -half, half


ALIGNED_CHILD_DEG = 20.0  # a child head this close to the bone's +Y axis continues its segment
DEGENERATE_LENGTH = 0.1  # a bone shorter than this fraction of its segment has a placeholder length (glTF: ~1 %)


def segment_lengths(arm):
    """{bone name: capsule length (armature units)}: Bone.length, unless the bone is a
    placeholder far shorter than the limb it stands for.

    Importers that do not know where a bone ends (glTF joints have no tail) give bones a
    token length (a few thousandths of the limb); a capsule that short is a sphere at
    the joint, and a radius from the skin around it swallows the whole limb. Then the
    segment runs to the farthest child head within ALIGNED_CHILD_DEG of the bone's +Y
    axis (its projection on +Y), and a leaf bone below such a parent gets the parent's
    segment scaled by their Bone.length ratio (at most 1). arm: bpy Armature data.
    """
    out = {}
    cos = np.cos(np.radians(ALIGNED_CHILD_DEG))
    for b in arm.bones:  # parents come before their children
        y = np.array(b.matrix_local)[:3, 1]
        along = [float(np.dot(np.array(c.head_local - b.head_local), y)) for c in b.children
                 if np.dot(np.array(c.head_local - b.head_local), y) >= cos * (c.head_local - b.head_local).length > 0]
        length = b.length
        if along and b.length < DEGENERATE_LENGTH * max(along):
            length = max(along)
        elif not b.children and b.parent is not None and out[b.parent.name] > b.parent.length \
                and b.length < DEGENERATE_LENGTH * out[b.parent.name]:
            length = out[b.parent.name] * min(1.0, b.length / b.parent.length)
        out[b.name] = length
    return out


def _skin_radii(armature, sk, seg_length, weights):
    """{bone index: capsule radius (armature units)} from the skinned meshes, if any
    (solver.core.capsule_radii: the skin vertices each bone dominates, rest pose, about the
    capsule axis of seg_length {bone name: length, armature units}); weights:
    geometry.skin_weights(armature, sk)."""
    out = {}
    for ob, co, _tris, sparse, bones in weights:
        if not isinstance(bones, list) or sparse is None:  # carried by a bone, or unweighted
            continue
        owner = capsule_radii.dominant_owner(len(co), *sparse)
        for g in ob.vertex_groups:
            pts = co[owner == g.index]
            if g.name in sk.index and sk.index[g.name] not in out and len(pts) >= 4:
                b = armature.data.bones[g.name]
                if seg_length[g.name] > 0:
                    tail = np.array(b.head_local) + np.array(b.matrix_local)[:3, 1] * seg_length[g.name]
                    out[sk.index[g.name]] = capsule_radii.radius_from_points(pts, b.head_local, tail)
    return out

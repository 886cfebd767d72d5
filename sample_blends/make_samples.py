"""Build SignSim's bundled sample scene from scratch, deterministically.

    /work/main/.venv/bin/python sample_blends/make_samples.py [--out DIR]

writes into DIR (default: this folder):
- signer.blend: armature object `Signer` (Blender's human metarig trimmed to the deform
  bones SignSim needs, 1.70 m, Z up, facing -Y), skinned body mesh `SignerBody` and
  closed head surface `SignerFace` (the face SDF source, parented to bone `head`);
  per-bone capsule radii in metres as the custom property `signsim_capsule_radius`
  on each Bone (armature data, rest state: `Signer.data.bones[name]`).
- fingerspelling.bvh: two-handed fingerspelling, 30 fps, 4.5 handshapes per second.
- chin_cheek.bvh: the dominant (right) index fingertip touches the chin, then the right cheek.

The clips are keyframed on `Signer` and written with Blender's own BVH exporter, so the
demo reads them exactly as a user's files. `digest(path)` summarizes signer.blend for the
regeneration test (a .blend is not byte-stable).
"""
import argparse
import hashlib
import json
import math
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
if __name__ == "__main__":
    # Blender's user folders must be isolated before the first `import bpy`.
    sys.path.insert(0, str(HERE.parent / "tools"))
    import devenv
    devenv.isolate_user_resources("signsim-samples-")

import bpy  # noqa: E402  (addon_utils, bmesh and mathutils import only after bpy)
import addon_utils  # noqa: E402
import bmesh  # noqa: E402
import numpy as np  # noqa: E402
from mathutils import Matrix, Quaternion, Vector  # noqa: E402

sys.path.insert(0, str(HERE.parent))  # the solver package: numpy only, shared with the add-on
from solver.core.capsule_radii import dominant_owner, radius_from_points  # noqa: E402
from solver.core.capsule_pairs import segment_closest_points  # noqa: E402
from signsim_addon import compat  # noqa: E402  (bpy only: the Blender-version differences)

HEIGHT = 1.70            # top of the head bone, m
FPS = 30
SIDES = ("L", "R")
FINGERS = ("thumb", "f_index", "f_middle", "f_ring", "f_pinky")
CAPSULE_PROP = "signsim_capsule_radius"
BODY_VOXEL = 0.004       # m; fingers 3-5 mm apart need this to stay separate
BODY_FACES = 40000       # triangles after decimation: keeps signer.blend small
SMOOTH = (0.5, 4)        # smoothing factor and iterations after the remesh
FACE_VOXEL = 0.003       # m; the face SDF source is finer than the skin

# spread of each finger chain in the rest pose, degrees about the palm normal
# (towards the pinky positive): the metarig's fingers lie 3 mm apart, and the voxel
# remesh would bridge them with strands of skin
REST_SPREAD = {"f_index": -12.0, "f_middle": -3.0, "f_ring": 6.0, "f_pinky": 15.0}


def bone_names():
    """The trimmed armature's bone names, parents before children."""
    names = ["spine", "spine.001", "spine.002", "spine.003", "neck", "head"]
    for s in SIDES:
        names += [f"shoulder.{s}", f"upper_arm.{s}", f"forearm.{s}", f"hand.{s}"]
        names += [f"{f}.0{i}.{s}" for f in FINGERS for i in (1, 2, 3)]
    for s in SIDES:
        names += [f"thigh.{s}", f"shin.{s}", f"foot.{s}", f"toe.{s}"]
    return names


# ---------------------------------------------------------------------------- rig

def build_armature():
    """Add Blender's human metarig, scale it to HEIGHT and trim it to `bone_names()`.

    The neck's two metarig bones (spine.004/.005) become one `neck`; spine.006 becomes
    `head`; fingers and thumb hang from `hand` (palm.* removed); finger chains are spread
    by REST_SPREAD. Returns the armature object `Signer`, in object mode.
    """
    addon_utils.enable("rigify", default_set=True)
    bpy.ops.object.armature_human_metarig_add()
    rig = bpy.context.object
    rig.name = rig.data.name = "Signer"
    bpy.ops.object.mode_set(mode='EDIT')
    eb = rig.data.edit_bones
    # moving a connected bone drags its parent's tail: transform them disconnected
    connected = {b.name for b in eb if b.use_connect}
    for b in eb:
        b.use_connect = False
    scale = HEIGHT / eb["spine.006"].tail.z
    for b in eb:
        b.transform(Matrix.Scale(scale, 4))
    eb["spine.004"].tail = eb["spine.005"].tail
    eb["spine.006"].parent = eb["spine.004"]
    eb["spine.004"].name = "neck"
    eb["spine.006"].name = "head"
    for s in SIDES:
        for f in FINGERS:
            eb[f"{f}.01.{s}"].parent = eb[f"hand.{s}"]
    keep = set(bone_names())
    for b in [b for b in eb if b.name not in keep]:
        eb.remove(b)
    for s in SIDES:
        _spread_rest_fingers(eb, s)
    for b in eb:
        b.use_connect = b.name in connected or b.name in ("neck", "head")
    bpy.ops.object.mode_set(mode='OBJECT')
    for bc in [bc for bc in rig.data.collections_all if not bc.bones and not bc.children]:
        rig.data.collections.remove(bc)   # the face rig's and Rigify's tweak/IK collections
    for pb in rig.pose.bones:
        pb.rotation_mode = 'QUATERNION'
    return rig


def _spread_rest_fingers(eb, side):
    """Rotate each finger chain about the palm normal through its knuckle (REST_SPREAD)."""
    hand = eb[f"hand.{side}"]
    across = eb[f"f_pinky.01.{side}"].head - eb[f"f_index.01.{side}"].head
    along = eb[f"f_middle.01.{side}"].head - hand.head
    normal = along.cross(across).normalized()   # +angle turns a finger towards the pinky
    for f, deg in REST_SPREAD.items():
        pivot = eb[f"{f}.01.{side}"].head.copy()
        m = Matrix.Translation(pivot) @ Matrix.Rotation(math.radians(deg), 4, normal) @ Matrix.Translation(-pivot)
        for i in (1, 2, 3):
            eb[f"{f}.0{i}.{side}"].transform(m)


# ---------------------------------------------------------------------------- solids

def _capsule(bm, a, b, r1, r2, segments=16):
    """Add a tapered capsule (radius r1 at a, r2 at b, metres) as separate closed shells."""
    a, b = Vector(a), Vector(b)
    d = b - a
    m = Matrix.Translation((a + b) / 2) @ d.to_track_quat('Z', 'Y').to_matrix().to_4x4()
    bmesh.ops.create_cone(bm, cap_ends=True, segments=segments, radius1=r1, radius2=r2,
                          depth=d.length, matrix=m)
    for p, r in ((a, r1), (b, r2)):
        bmesh.ops.create_uvsphere(bm, u_segments=segments, v_segments=segments // 2, radius=r,
                                  matrix=Matrix.Translation(p))


def _ellipsoid(bm, centre, radii, segments=24):
    """Add an axis-aligned ellipsoid (centre and semi-axes in metres)."""
    m = Matrix.Translation(centre) @ Matrix.Diagonal((*radii, 1.0))
    bmesh.ops.create_uvsphere(bm, u_segments=segments, v_segments=segments // 2, radius=1.0, matrix=m)


def head_solids(bm, rig):
    """Cranium, jaw, nose, chin, cheeks and ears around the head bone's head (metres)."""
    h = rig.data.bones["head"].head_local
    _ellipsoid(bm, h + Vector((0, 0.020, 0.075)), (0.075, 0.097, 0.098))   # cranium
    _ellipsoid(bm, h + Vector((0, -0.002, 0.012)), (0.064, 0.078, 0.075))  # jaw and face
    _ellipsoid(bm, h + Vector((0, -0.082, 0.045)), (0.010, 0.019, 0.021), 16)  # nose
    _ellipsoid(bm, h + Vector((0, -0.062, -0.042)), (0.024, 0.016, 0.017), 16)  # chin
    for x in (-1, 1):
        _ellipsoid(bm, h + Vector((0.040 * x, -0.055, 0.020)), (0.024, 0.015, 0.022), 16)  # cheek
        _ellipsoid(bm, h + Vector((0.074 * x, 0.010, 0.055)), (0.010, 0.018, 0.028), 12)  # ear


def body_solids(bm, rig):
    """Torso, neck, limbs, palms and fingers as capsules/ellipsoids along the bones (metres)."""
    B = rig.data.bones
    hl = lambda n: B[n].head_local  # noqa: E731
    tl = lambda n: B[n].tail_local  # noqa: E731
    _ellipsoid(bm, (0, 0.010, 0.925), (0.150, 0.100, 0.110))   # pelvis
    _ellipsoid(bm, (0, 0.012, 1.060), (0.130, 0.092, 0.120))   # abdomen
    _ellipsoid(bm, (0, 0.012, 1.225), (0.150, 0.102, 0.150))   # chest
    _capsule(bm, hl("neck") + Vector((0, 0, -0.03)), tl("neck") + Vector((0, 0, 0.02)), 0.052, 0.047)
    _capsule(bm, hl("upper_arm.L") - Vector((0.03, 0, 0.02)), hl("upper_arm.R") + Vector((0.03, 0, -0.02)),
             0.055, 0.055, 24)   # shoulder girdle
    for s in SIDES:
        _capsule(bm, hl(f"upper_arm.{s}"), tl(f"upper_arm.{s}"), 0.048, 0.037)
        _capsule(bm, hl(f"forearm.{s}"), tl(f"forearm.{s}"), 0.035, 0.024)
        wrist = hl(f"hand.{s}")
        for f, k in (("f_index", 1.0), ("f_middle", 1.03), ("f_ring", 0.96), ("f_pinky", 0.88)):
            _capsule(bm, wrist, hl(f"{f}.01.{s}"), 0.014, 0.011 * k, 12)   # metacarpal
            radii = (0.0091 * k, 0.0083 * k, 0.0076 * k, 0.0070 * k)
            _finger(bm, B, f, s, radii)
        _capsule(bm, wrist, hl(f"thumb.01.{s}"), 0.016, 0.016, 12)
        _capsule(bm, hl(f"thumb.01.{s}"), tl(f"thumb.01.{s}"), 0.016, 0.0115, 12)   # thenar
        _finger(bm, B, "thumb", s, (0.0115, 0.0105, 0.0095, 0.0085), first=2)
        _capsule(bm, hl(f"thigh.{s}") + Vector((0, 0, 0.03)), tl(f"thigh.{s}"), 0.085, 0.055)
        _capsule(bm, hl(f"shin.{s}"), tl(f"shin.{s}"), 0.052, 0.036)
        _capsule(bm, hl(f"foot.{s}"), tl(f"foot.{s}") + Vector((0, 0, 0.010)), 0.036, 0.026)
        _capsule(bm, hl(f"foot.{s}") + Vector((0, 0.035, -0.045)), tl(f"foot.{s}") + Vector((0, 0, 0.010)),
                 0.028, 0.026)   # heel to ball
        _capsule(bm, tl(f"foot.{s}") + Vector((0, 0, 0.010)), tl(f"toe.{s}") + Vector((0, 0.015, 0.008)),
                 0.026, 0.018)


def _finger(bm, B, finger, side, radii, first=1):
    """Capsules along one finger's bones; the last one stops short so the skin ends at the tail."""
    joints = [B[f"{finger}.0{i}.{side}"].head_local for i in range(first, 4)]
    tip = B[f"{finger}.03.{side}"].tail_local
    d = (tip - joints[-1]).normalized()
    joints.append(tip - d * radii[-1])
    for i in range(len(joints) - 1):
        _capsule(bm, joints[i], joints[i + 1], radii[i + 4 - len(joints)], radii[i + 5 - len(joints)], 12)


def remeshed(name, build, voxel, faces=None):
    """Mesh object `name` from the solids `build(bm)` adds, voxel-remeshed into one closed skin.

    voxel: remesh voxel size in m. A light smoothing rounds off the creases where solids
    meet. faces: if given, decimate (collapse) to about that many triangles; the curvy
    hands keep their detail, flat regions lose it.
    """
    bm = bmesh.new()
    build(bm)
    me = bpy.data.meshes.new(name + "_solids")
    bm.to_mesh(me)
    bm.free()
    ob = bpy.data.objects.new(name, me)
    bpy.context.scene.collection.objects.link(ob)
    rm = ob.modifiers.new("remesh", 'REMESH')
    rm.mode = 'VOXEL'
    rm.voxel_size = voxel
    sm = ob.modifiers.new("smooth", 'SMOOTH')
    sm.factor, sm.iterations = SMOOTH
    if faces:
        dg = bpy.context.evaluated_depsgraph_get()
        quads = len(ob.evaluated_get(dg).data.polygons)
        dec = ob.modifiers.new("decimate", 'DECIMATE')
        dec.ratio = min(1.0, faces / (2 * quads))
    dg = bpy.context.evaluated_depsgraph_get()
    result = bpy.data.meshes.new_from_object(ob.evaluated_get(dg))
    result.name = name
    ob.modifiers.clear()
    ob.data = result
    bpy.data.meshes.remove(me)
    return ob


# ---------------------------------------------------------------------------- kinematics

class Kinematics:
    """Forward kinematics of the rest armature in armature space (metres).

    A pose is a dict bone name -> local rotation Quaternion (missing = identity); bones
    only rotate, as in Blender: M[b] = M[parent] @ rest[parent]^-1 @ rest[b] @ R(q_b).
    """

    def __init__(self, rig):
        bones = rig.data.bones
        self.names = bone_names()
        self.parent = {n: bones[n].parent.name if bones[n].parent else None for n in self.names}
        self.rest = {n: bones[n].matrix_local.copy() for n in self.names}
        self.length = {n: bones[n].length for n in self.names}
        self.radius = {n: bones[n].get(CAPSULE_PROP, 0.0) for n in self.names}
        self.offset = {n: self.rest[p].inverted() @ self.rest[n] for n, p in self.parent.items() if p}

    def matrices(self, pose, only=None):
        """Armature-space 4x4 matrices of the bones in `only` (and their ancestors), or all."""
        need = set(self.names) if only is None else self._with_ancestors(only)
        out = {}
        for n in self.names:
            if n not in need:
                continue
            p = self.parent[n]
            m = out[p] @ self.offset[n] if p else self.rest[n]
            q = pose.get(n)
            out[n] = m @ q.to_matrix().to_4x4() if q is not None else m
        return out

    def tail(self, mats, name):
        """Armature-space position (m) of a bone's tail, given the posed matrices."""
        return mats[name] @ Vector((0.0, self.length[name], 0.0))

    def _with_ancestors(self, names):
        need = set()
        for n in names:
            while n and n not in need:
                need.add(n)
                n = self.parent[n]
        return need


def _rotvec_quat(v, mirror=1.0):
    """Quaternion of rotation vector v (radians, bone-local); mirror flips Y and Z for .R bones."""
    v = Vector((v[0], mirror * v[1], mirror * v[2]))
    angle = v.length
    return Quaternion(v / angle, angle) if angle > 1e-12 else Quaternion()


def _mirror(side):
    """The metarig's .R bones mirror .L: rotations about local Y and Z flip sign."""
    return 1.0 if side == "L" else -1.0


ALL_TIPS = [f"{f}.03.{s}" for s in SIDES for f in FINGERS]   # residuals may need any fingertip


def solve_chain(kin, pose, dofs, residuals, x0=None):
    """Least-squares pose of some bones (scipy's trust-region solver, deterministic).

    dofs: list of (bone, side, lower, upper) with 3-vectors of bounds in degrees of a
    bone-local rotation vector (Y and Z mirrored for .R). residuals(mats) -> list of
    floats, already scaled. Returns a copy of `pose` updated with the solved bones.
    """
    from scipy.optimize import least_squares
    lo = np.radians(np.concatenate([d[2] for d in dofs]))
    hi = np.radians(np.concatenate([d[3] for d in dofs]))
    # start off the bounds: the trust-region solver stalls on a variable sitting at one
    margin = 0.05 * (hi - lo)
    x0 = np.clip(np.zeros(len(lo)) if x0 is None else x0, lo + margin, hi - margin)
    names = [d[0] for d in dofs]

    def pose_of(x):
        p = dict(pose)
        for i, (n, side, _, _) in enumerate(dofs):
            p[n] = _rotvec_quat(x[3 * i:3 * i + 3], _mirror(side))
        return p

    def f(x):
        mats = kin.matrices(pose_of(x), only=list(names) + ALL_TIPS)
        return np.concatenate([residuals(mats), 0.05 * x])   # mild pull to the rest pose

    def jac(x):
        # mathutils is single precision: forward differences need steps of ~1e-3 rad
        # (least_squares' own steps at x = 0 are ~1e-8 whatever diff_step says)
        f0 = f(x)
        return np.stack([(f(x + h) - f0) / 1e-3 for h in np.eye(len(x)) * 1e-3], axis=1)

    sol = least_squares(f, x0, jac=jac, bounds=(lo, hi), xtol=1e-8, ftol=1e-8, max_nfev=200)
    return pose_of(sol.x), sol.x


# ---------------------------------------------------------------------------- handshapes

# Fingers (index, middle, ring, pinky): (MCP flexion, PIP flexion, spread towards the
# pinky) in degrees; spread 0 is the metarig's fingers side by side (REST_SPREAD is
# undone); the DIP joint follows 2/3 of the PIP, as tendons couple them.
# Thumb: where its tip goes (see thumb_target); the thumb is solved to reach it.
FIST = (85, 100, 0)
STRAIGHT = (0, 0, 0)
HANDSHAPES = {
    "A": ((FIST,) * 4, "side"),
    "B": (((0, 0, -1), (0, 0, 0), (0, 0, 1), (0, 0, 2)), "across"),
    "C": (((30, 40, -4), (30, 40, 0), (30, 40, 3), (30, 40, 6)), "c"),
    "D": ((STRAIGHT, (60, 85, 0), (62, 85, 0), (65, 85, 0)), "tip:f_middle"),
    "E": (((50, 100, 0), (50, 100, 0), (50, 100, 0), (50, 100, 0)), "under"),
    "F": (((45, 70, 0), (0, 0, 3), (0, 0, 8), (0, 0, 14)), "tip:f_index"),
    "I": ((FIST, FIST, FIST, (0, 0, 6)), "over"),
    "L": ((STRAIGHT, FIST, FIST, FIST), "out"),
    "O": (((40, 60, -2), (42, 60, 0), (44, 60, 2), (46, 60, 4)), "tip:f_index"),
    "S": ((FIST,) * 4, "over"),
    "U": (((0, 0, 1), (0, 0, -1), FIST, FIST), "over_ring"),
    "V": (((0, 0, -10), (0, 0, 8), FIST, FIST), "over_ring"),
    "W": (((0, 0, -12), (0, 0, 0), (0, 0, 11), FIST), "tip:f_pinky"),
    "Y": ((FIST, FIST, FIST, (0, 0, 20)), "out"),
    "relaxed": (((15, 20, -6), (18, 22, -1), (22, 25, 3), (25, 28, 8)), "rest"),
}


def palm_axes(kin, side):
    """Hand-rest unit vectors (along the hand, across towards the pinky, out of the palm)."""
    r = kin.rest
    across = (r[f"f_pinky.01.{side}"].translation - r[f"f_index.01.{side}"].translation).normalized()
    along = (r[f"f_middle.01.{side}"].translation - r[f"hand.{side}"].translation).normalized()
    palm = along.cross(across).normalized() * -_mirror(side)   # the side fingers curl to
    return along, across, palm


def finger_pose(side, fingers):
    """Local rotations of the four fingers' bones from a HANDSHAPES finger tuple."""
    m = _mirror(side)
    pose = {}
    for f, (mcp, pip, spread) in zip(FINGERS[1:], fingers):
        # curl is +X on both sides; spread towards the pinky is -Z (.L) / +Z (.R)
        pose[f"{f}.01.{side}"] = (Quaternion((0, 0, 1), math.radians(-m * (spread - REST_SPREAD[f])))
                                  @ Quaternion((1, 0, 0), math.radians(mcp)))
        pose[f"{f}.02.{side}"] = Quaternion((1, 0, 0), math.radians(pip))
        pose[f"{f}.03.{side}"] = Quaternion((1, 0, 0), math.radians(pip * 2 / 3))
    return pose


def thumb_target(kin, mats, side, where):
    """Armature-space goal of the thumb tip (hand in its rest placement), metres."""
    along, across, palm = palm_axes(kin, side)
    head = lambda n: mats[f"{n}.{side}"].translation   # noqa: E731
    tip = lambda f: kin.tail(mats, f"{f}.03.{side}")   # noqa: E731
    # Touching tips sit one radius sum apart (capsule surfaces meet), plus 0.5 mm.
    touch = lambda f: palm * (kin.radius[f"thumb.03.{side}"] + kin.radius[f"{f}.03.{side}"] + 0.0005)  # noqa: E731
    if where.startswith("tip:"):
        return tip(where[4:]) + touch(where[4:])
    return {
        "side": head("f_index.02") - across * 0.016 + palm * 0.010,
        "across": head("f_ring.01") + palm * 0.020 - along * 0.015,
        "c": tip("f_index") + palm * 0.012 - along * 0.050,
        "under": (tip("f_index") + tip("f_middle")) / 2 + touch("f_middle"),
        "over": head("f_middle.03") + palm * 0.014,
        "over_ring": head("f_ring.03") + palm * 0.014,
        "out": head("f_index.01") - across * 0.055 - along * 0.005,
    }[where]


# thumb.01, .02, .03: (lower, upper) rotation-vector bounds in degrees; the two distal
# joints are nearly hinges, the base (carpometacarpal) joint is a saddle
THUMB_DOFS = ((-30, -40, -60), (60, 40, 60)), ((-20, -5, -10), (70, 5, 60)), ((-20, -5, -10), (70, 5, 60))


def handshape_pose(kin, side, name):
    """Local rotations of all finger and thumb bones of one hand for a HANDSHAPES entry."""
    fingers, thumb = HANDSHAPES[name]
    pose = finger_pose(side, fingers)
    if thumb == "rest":
        pose.update({f"thumb.0{i}.{side}": Quaternion() for i in (1, 2, 3)})
        return pose
    mats = kin.matrices(pose, only=[f"{f}.03.{side}" for f in FINGERS])
    goal = thumb_target(kin, mats, side, thumb)
    dofs = [(f"thumb.0{i}.{side}", side, lo, hi) for i, (lo, hi) in zip((1, 2, 3), THUMB_DOFS)]
    solved, _ = solve_chain(kin, pose, dofs, lambda m: list((kin.tail(m, f"thumb.03.{side}") - goal) / 0.001))
    return uncurl_into_contact(kin, solved, side)


MAX_HAND_DEPTH = 0.0015  # m: a keyframed hand touches itself; it does not sink into itself


def _hand_overlaps(kin, pose, side, radii):
    """(depth m, bone to uncurl) of the deepest overlap of a curled finger or the thumb with
    the palm, or of the thumb with a finger, in the posed hand."""
    mats = kin.matrices(pose, only=[f"{f}.03.{side}" for f in FINGERS])
    seg = {n: (np.array(mats[n].translation), np.array(kin.tail(mats, n))) for n in mats}
    hand = f"hand.{side}"
    pairs = [(hand, f"{f}.0{k}.{side}") for f in FINGERS for k in (2, 3)]
    pairs += [(f"thumb.0{k}.{side}", f"{f}.0{j}.{side}") for k in (2, 3) for f in FINGERS[1:] for j in (1, 2, 3)]
    pairs += [(f"thumb.01.{side}", f"{f}.0{j}.{side}") for f in FINGERS[1:] for j in (2, 3)]
    worst = (0.0, None)
    for a, b in pairs:
        c1, c2 = segment_closest_points(*seg[a], *seg[b])
        depth = radii[a] + radii[b] - float(np.linalg.norm(c1 - c2))
        if depth > worst[0]:
            worst = (depth, b if a == hand else a)
    return worst


def _thumb_crosses(kin, a, b, side, steps=16):
    """True when slerping hand pose a → b drives a finger into the thumb or the palm."""
    radii = {n: kin.radius[n] for n in kin.names}
    for k in range(1, steps):
        pose = {n: a[n].slerp(b[n], k / steps) for n in a}
        depth, bone = _hand_overlaps(kin, pose, side, radii)
        if depth > MAX_HAND_DEPTH:
            return True
    return False


def uncurl_into_contact(kin, pose, side):
    """Open the offending finger or thumb in 3 % steps until no part of the hand sinks more
    than MAX_HAND_DEPTH into another (capsules with the bones' radii): the sample clips are
    what a careful animator keys, so the physics pass has millimetres to clean, not centimetres."""
    radii = {n: kin.radius[n] for n in kin.names}
    pose = dict(pose)
    for _ in range(200):
        depth, bone = _hand_overlaps(kin, pose, side, radii)
        if depth <= MAX_HAND_DEPTH:
            break
        chain = bone.rsplit(".", 2)[0]
        for k in (1, 2, 3):
            name = f"{chain}.0{k}.{side}"
            if name in pose:
                pose[name] = Quaternion().slerp(pose[name], 0.97)
    return _side_by_side(kin, pose, side, radii)


def _neighbour_depth(kin, pose, side, radii, a, b):
    """Deepest overlap (m) between the phalanges of neighbouring fingers a and b."""
    mats = kin.matrices(pose, only=[f"{a}.03.{side}", f"{b}.03.{side}"])
    seg = {n: (np.array(mats[n].translation), np.array(kin.tail(mats, n))) for n in mats}
    depth = 0.0
    for j in (1, 2, 3):
        for k in (1, 2, 3):
            u, v = f"{a}.0{j}.{side}", f"{b}.0{k}.{side}"
            c1, c2 = segment_closest_points(*seg[u], *seg[v])
            depth = max(depth, radii[u] + radii[v] - float(np.linalg.norm(c1 - c2)))
    return depth


def _side_by_side(kin, pose, side, radii):
    """Spread neighbouring fingers in 0.5° steps (about the knuckle's local Z, whichever way
    opens the gap) until they touch rather than overlap by more than MAX_HAND_DEPTH."""
    step = math.radians(0.5)
    for a, b in zip(FINGERS[1:], FINGERS[2:]):
        knuckle = f"{b}.01.{side}"
        if knuckle not in pose:
            continue
        for _ in range(40):
            depth = _neighbour_depth(kin, pose, side, radii, a, b)
            if depth <= MAX_HAND_DEPTH:
                break
            trials = [pose[knuckle] @ Quaternion((0, 0, 1), sign * step) for sign in (1.0, -1.0)]
            pose[knuckle] = min(trials, key=lambda q: _neighbour_depth(kin, {**pose, knuckle: q},
                                                                         side, radii, a, b))
    return pose


# ---------------------------------------------------------------------------- arms

ARM_DOFS = {   # bone-local rotation-vector bounds in degrees (Y, Z mirrored for .R)
    "shoulder": ((-8, -8, -12), (8, 8, 12)),
    "upper_arm": ((-120, -120, -120), (120, 120, 120)),
    "forearm": ((0, -90, -3), (150, 90, 3)),     # elbow flexion about X, pronation about Y
    "hand": ((-70, -15, -35), (70, 15, 35)),
}


def solve_arm(kin, side, hand_pose, goals, x0=None):
    """Arm pose (shoulder to hand) reaching `goals`, with the fingers in `hand_pose`.

    goals: dict with 'elbow' (m, a soft hint) and any of 'wrist' (m), 'tip' (m, index
    fingertip), 'along' (unit vector wrist to knuckles), 'palm' (unit vector out of the
    palm), 'finger' (unit vector of the index's last bone); all in armature space.
    x0: solver start (rotation vectors, radians). Returns (pose, x).
    """
    along0, _, palm0 = palm_axes(kin, side)
    rest_hand = kin.rest[f"hand.{side}"].to_3x3().inverted()
    along_l, palm_l = rest_hand @ along0, rest_hand @ palm0
    tip = f"f_index.03.{side}"

    def residuals(m):
        r = []
        hand = m[f"hand.{side}"]
        if "wrist" in goals:
            r += list((hand.translation - goals["wrist"]) / 0.002)
        if "tip" in goals:
            r += list((kin.tail(m, tip) - goals["tip"]) / 0.0003)
        if "along" in goals:
            r += list((hand.to_3x3() @ along_l - goals["along"]) / 0.05)
        if "palm" in goals:
            r += list((hand.to_3x3() @ palm_l - goals["palm"]) / 0.08)
        if "finger" in goals:
            r += list((m[tip].to_3x3() @ Vector((0, 1, 0)) - goals["finger"]) / 0.15)
        r += list((m[f"forearm.{side}"].translation - goals["elbow"]) / 0.04)
        return r

    dofs = [(f"{b}.{side}", side, lo, hi) for b, (lo, hi) in ARM_DOFS.items()]
    return solve_chain(kin, hand_pose, dofs, residuals, x0)


def min_jerk(s):
    """Minimum-jerk blend weight for s in [0, 1]: zero velocity and acceleration at both ends."""
    return s * s * s * (10.0 - 15.0 * s + 6.0 * s * s)


class Track:
    """Keyed poses of some bones; between keys a minimum-jerk slerp, before/after a hold.

    A key may carry a `via` pose (some bones): on the way into that key those bones are
    pulled towards it by 16 w²(1 − w)², full at mid-transition and still at both keys,
    so the motion detours without stopping.
    """

    def __init__(self):
        self.keys = []   # (time in s, pose dict, via pose dict or None)

    def key(self, t, pose, via=None):
        self.keys.append((t, pose, via))
        return self

    def sample(self, t):
        """The pose at time t (s)."""
        k = self.keys
        if t <= k[0][0]:
            return k[0][1]
        for (t0, p0, _), (t1, p1, via) in zip(k, k[1:]):
            if t <= t1:
                w = min_jerk((t - t0) / (t1 - t0)) if t1 > t0 else 1.0
                pose = {n: p0[n].slerp(p1[n], w) for n in p0}
                if via:
                    pull = 16.0 * w * w * (1.0 - w) ** 2
                    pose.update({n: pose[n].slerp(q, pull) for n, q in via.items()})
                return pose
        return k[-1][1]


def write_action(rig, name, tracks, frames, kin):
    """A new action on `rig` with a quaternion key on every bone at frames 1..frames (30 fps).

    Keys are LINEAR (every frame is keyed); quaternion signs are kept continuous. Each
    frame's hands are opened into contact (uncurl_into_contact): interpolating between
    two handshapes must not pass the thumb through the fingers, as no real hand can.
    """
    names = bone_names()
    q = np.zeros((frames, len(names), 4))
    q[:, :, 0] = 1.0
    for f in range(frames):
        pose = {}
        for tr in tracks:
            pose.update(tr.sample(f / FPS))
        for side in SIDES:
            pose = uncurl_into_contact(kin, pose, side)
        for j, n in enumerate(names):
            if n in pose:
                q[f, j] = tuple(pose[n])
    flip = np.cumprod(np.where(np.sum(q[1:] * q[:-1], axis=2) < 0, -1.0, 1.0), axis=0)
    q[1:] *= flip[:, :, None]
    action = bpy.data.actions.new(name)
    slot = action.slots.new(id_type='OBJECT', name=rig.name)
    bag = compat.ensure_channelbag(action, slot)
    x = np.arange(1, frames + 1, dtype=float)
    linear = [bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value] * frames
    for j, n in enumerate(names):
        for i in range(4):
            fc = compat.new_fcurve(bag, f'pose.bones["{n}"].rotation_quaternion', i, n)
            fc.keyframe_points.add(frames)
            fc.keyframe_points.foreach_set("co", np.column_stack([x, q[:, j, i]]).ravel())
            fc.keyframe_points.foreach_set("interpolation", linear)
            fc.update()
    ad = rig.animation_data or rig.animation_data_create()
    ad.action = action
    if ad.action_slot_handle != slot.handle:   # re-assigning the same slot crashes 5.0.1
        ad.action_slot = slot
    return action


# ---------------------------------------------------------------------------- clips

SPELLED = "WILDSAVOYBLUECAFES"   # "Wild Savoy Blue Cafes": no letter repeats its neighbour
RATE = 4.5                        # handshapes per second
HOLD = 0.35                       # fraction of each letter's slot held still
BASE_LETTERS = {0, 4, 9, 13}      # first letter of each word: the other hand shows a flat base
UP = Vector((0, 0, 1))


def _arm_goals(side, wrist, along, palm):
    """solve_arm goals for a wrist position (m) and hand directions, elbow down and out."""
    x = 1.0 if side == "L" else -1.0
    return {"wrist": Vector(wrist), "along": Vector(along).normalized(), "palm": Vector(palm).normalized(),
            "elbow": Vector((0.28 * x, -0.03, 1.08))}


def left_hold_track(kin, shapes, keys):
    """The non-dominant (left) hand resting in front of the chest, palm up, for `keys`."""
    relaxed = handshape_pose(kin, "L", "relaxed")
    arm0, _ = solve_arm(kin, "L", relaxed, _arm_goals("L", (0.11, -0.23, 1.06), (-0.8, -0.5, 0.2), (0.1, -0.2, 1)))
    arm1, _ = solve_arm(kin, "L", relaxed, _arm_goals("L", (0.12, -0.22, 1.07), (-0.8, -0.5, 0.25), (0.1, -0.2, 1)))
    arm = Track().key(keys[0], _arm_only(arm0)).key(keys[-1], _arm_only(arm1))
    hand = Track()
    for t, shape in shapes:
        hand.key(t, handshape_pose(kin, "L", shape))
    return arm, hand


def fingerspelling_tracks(kin):
    """Tracks and length (frames) of the fingerspelling clip: SPELLED at RATE letters per second.

    The right (dominant) hand spells ASL-style handshapes from HANDSHAPES, drifting 3 cm
    outwards over the word; the left hand rests palm up and flattens into a base (B) on
    the first letter of each word. Each letter is held for HOLD of its slot, with
    minimum-jerk transitions in between.
    """
    t0, slot = 0.3, 1.0 / RATE
    times = [t0 + i * slot for i in range(len(SPELLED))]
    length = round((times[-1] + 0.4) * FPS) + 1
    right = Track()
    shape_of = {letter: handshape_pose(kin, "R", letter) for letter in sorted(set(SPELLED))}
    relaxed = handshape_pose(kin, "R", "relaxed")
    thumb_out = {n: q for n, q in relaxed.items() if n.startswith("thumb.")}
    for i, (t, letter) in enumerate(zip(times, SPELLED)):
        # A real thumb swings around the fingers, not through them: detour via the relaxed thumb.
        crosses = i and _thumb_crosses(kin, shape_of[SPELLED[i - 1]], shape_of[letter], "R")
        right.key(t - HOLD * slot / 2, shape_of[letter], via=thumb_out if crosses else None)
        right.key(t + HOLD * slot / 2, shape_of[letter])
    start, _ = solve_arm(kin, "R", relaxed, _arm_goals("R", (-0.15, -0.25, 1.28), (0.05, -0.2, 1), (0.15, -1, 0.15)))
    end, _ = solve_arm(kin, "R", relaxed, _arm_goals("R", (-0.18, -0.24, 1.29), (0.0, -0.2, 1), (0.1, -1, 0.15)))
    arm_r = Track().key(0.0, _arm_only(start)).key(length / FPS, _arm_only(end))
    shapes = []
    for i, t in enumerate(times):
        shape = "B" if i in BASE_LETTERS else "relaxed"
        shapes += [(t - HOLD * slot / 2, shape), (t + HOLD * slot / 2, shape)]
    arm_l, hand_l = left_hold_track(kin, shapes, [0.0, length / FPS])
    return [arm_r, right, arm_l, hand_l], length


def _arm_only(pose):
    """The shoulder-to-hand part of a pose (solve_arm returns the fingers too)."""
    return {k: v for k, v in pose.items() if not k.startswith(("thumb", "f_"))}


def face_point(face_tree, origin, direction, lift=0.0):
    """Where a ray from `origin` along `direction` meets the face, moved `lift` m along its normal.

    Returns (point, outward unit normal)."""
    hit, normal, _, _ = face_tree.ray_cast(Vector(origin), Vector(direction).normalized())
    if hit is None:
        raise RuntimeError(f"ray from {origin} misses the face")
    return hit + normal * lift, normal


TOUCH_GAP = 0.001   # m between the index fingertip (bone tail) and the face surface at contact


def chin_cheek_tracks(kin, face_tree):
    """Tracks and length (frames) of the chin-cheek clip (3 s).

    The right index fingertip (tail of f_index.03.R, where the skin's tip is) touches
    the chin, lifts, touches the right cheek and returns; arm poses are solved so the
    tip stops TOUCH_GAP outside the face surface with the finger pointing into it.
    """
    h = kin.rest["head"].translation
    chin, n_chin = face_point(face_tree, h + Vector((0, -0.3, -0.045)), Vector((0, 1, 0)), TOUCH_GAP)
    cheek, n_cheek = face_point(face_tree, h + Vector((-0.25, -0.25, 0.02)), Vector((0.9, 1, 0)), TOUCH_GAP)
    lifted = (chin + cheek) / 2 + (n_chin + n_cheek).normalized() * 0.035
    relaxed = handshape_pose(kin, "R", "relaxed")
    point = handshape_pose(kin, "R", "D")
    neutral, x_neutral = solve_arm(kin, "R", relaxed,
                                   _arm_goals("R", (-0.14, -0.22, 1.10), (0.4, -0.4, 1), (0.8, -0.4, 0.2)))
    elbow = Vector((-0.24, -0.02, 1.12))

    def reach(tip, finger_dir, x0):
        return solve_arm(kin, "R", point, {"tip": tip, "finger": finger_dir.normalized(), "elbow": elbow}, x0)

    at_chin, x = reach(chin, -n_chin + UP * 0.8, x_neutral)
    near_chin, _ = reach(chin + n_chin * 0.02, -n_chin + UP * 0.8, x)
    up, x = reach(lifted, -(n_chin + n_cheek) + UP * 0.8, x)
    at_cheek, x = reach(cheek, -n_cheek + UP * 0.5, x)
    off_cheek, _ = reach(cheek + n_cheek * 0.02, -n_cheek + UP * 0.5, x)
    arm = Track()
    for t, p in ((0.25, neutral), (0.75, near_chin), (0.9, at_chin), (1.2, at_chin), (1.45, up),
                 (1.7, at_cheek), (2.05, at_cheek), (2.2, off_cheek), (2.8, neutral)):
        arm.key(t, _arm_only(p))
    hand = Track().key(0.25, relaxed).key(0.7, point).key(2.2, point).key(2.75, relaxed)
    arm_l, hand_l = left_hold_track(kin, [(0.0, "relaxed")], [0.0, 3.0])
    return [arm, hand, arm_l, hand_l], 3 * FPS + 1


def export_bvh(rig, path, frames):
    """Write the rig's current action, frames 1..frames, with Blender's BVH exporter."""
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = FPS, 1.0
    scene.frame_start, scene.frame_end = 1, frames
    for ob in bpy.context.view_layer.objects:
        ob.select_set(ob == rig)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.export_anim.bvh(filepath=str(path), frame_start=1, frame_end=frames,
                            rotate_mode='ZXY', root_transform_only=True)


# ---------------------------------------------------------------------------- scene

def capsule_radii(rig, body):
    """Per-bone capsule radius (m) from the skin vertices each bone dominates (weight > 0.5):
    solver.core.capsule_radii.radius_from_points, the same rule the bake uses for rigs without it."""
    sparse = [(v.index, g.group, g.weight) for v in body.data.vertices for g in v.groups]
    owner = dominant_owner(len(body.data.vertices), *zip(*sparse))
    co = np.array([v.co for v in body.data.vertices])
    radii = {}
    for g in body.vertex_groups:
        b = rig.data.bones[g.name]
        radii[g.name] = radius_from_points(co[owner == g.index], b.head_local, b.tail_local)
    return radii


def bind(rig, body, face):
    """Skin `body` to `rig` with automatic weights; hang `face` on bone `head` unchanged."""
    for ob in bpy.context.view_layer.objects:
        ob.select_set(ob in (rig, body))
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.parent_set(type='ARMATURE_AUTO')
    head = rig.data.bones["head"]
    face.parent = rig
    face.parent_type = 'BONE'
    face.parent_bone = "head"
    face.matrix_parent_inverse = (rig.matrix_world @ head.matrix_local
                                  @ Matrix.Translation((0, head.length, 0))).inverted()
    face.display_type = 'WIRE'    # it doubles the skin's head: keep the skin visible
    face.hide_render = True


def face_tree(face):
    """BVH tree of the face mesh in armature space (the face hangs on the head at rest)."""
    from mathutils.bvhtree import BVHTree
    m = face.matrix_world
    return BVHTree.FromPolygons([m @ v.co for v in face.data.vertices], [tuple(p.vertices) for p in face.data.polygons])


def tip_gap(rig, tree, frames):
    """Smallest distance (m) of the right index fingertip to the face over frames 1..frames,
    as Blender evaluates the rig's action."""
    best = math.inf
    for f in range(1, frames + 1):
        bpy.context.scene.frame_set(f)
        tip = rig.matrix_world @ rig.pose.bones["f_index.03.R"].tail
        best = min(best, (tree.find_nearest(tip)[0] - tip).length)
    return best


def build(out):
    """Build signer.blend, fingerspelling.bvh and chin_cheek.bvh into folder `out`.

    Leaves Blender with an empty file and Rigify as enabled as it was before.
    Returns a dict of what was made (file names, frames, contact gap in m).
    """
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    had_rigify = addon_utils.check("rigify")[1]
    bpy.ops.wm.read_homefile(use_empty=True)
    rig = build_armature()
    body = remeshed("SignerBody", lambda bm: (body_solids(bm, rig), head_solids(bm, rig)), BODY_VOXEL, BODY_FACES)
    face = remeshed("SignerFace", lambda bm: head_solids(bm, rig), FACE_VOXEL)
    bind(rig, body, face)
    for name, r in capsule_radii(rig, body).items():
        rig.data.bones[name][CAPSULE_PROP] = round(r, 5)
    kin = Kinematics(rig)
    tree = face_tree(face)
    report = {}
    for clip, (tracks, frames) in (("fingerspelling", fingerspelling_tracks(kin)),
                                   ("chin_cheek", chin_cheek_tracks(kin, tree))):
        action = write_action(rig, clip, tracks, frames, kin)
        export_bvh(rig, out / f"{clip}.bvh", frames)
        report[clip] = {"frames": frames}
        if clip == "chin_cheek":
            report[clip]["tip_gap_m"] = tip_gap(rig, tree, frames)
        rig.animation_data.action = None
        bpy.data.actions.remove(action)
    for pb in rig.pose.bones:
        pb.rotation_quaternion = (1, 0, 0, 0)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 250
    scene.frame_set(1)
    bpy.ops.wm.save_as_mainfile(filepath=str(out / "signer.blend"), compress=True)
    report["signer.blend"] = {"bones": len(rig.data.bones), "body_vertices": len(body.data.vertices),
                              "face_vertices": len(face.data.vertices)}
    bpy.ops.wm.read_homefile(use_empty=True)
    if not had_rigify:
        addon_utils.disable("rigify", default_set=True)
        # Rigify 5.0.1 leaves its load_post handler behind, which then fails on every file load
        for h in [h for h in bpy.app.handlers.load_post if h.__module__.startswith("rigify")]:
            bpy.app.handlers.load_post.remove(h)
    return report


def digest(path):
    """Semantic summary of a signer.blend for comparing regenerations (a .blend is not byte-stable).

    Opens `path` (replacing the current file). Bone names, parents, rest matrices (1e-5 m),
    capsule radii (1e-5 m), and per mesh the vertex count, a SHA-256 of the vertex
    coordinates (1e-5 m) and of the vertex-group weights (1e-4).
    """
    bpy.ops.wm.open_mainfile(filepath=str(path))
    rnd = lambda a, d: np.round(np.asarray(a, dtype=float), d) + 0.0   # noqa: E731  (+0.0: no -0.0)
    sha = lambda a: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()   # noqa: E731
    rig = bpy.data.objects["Signer"]
    out = {"bones": {b.name: {"parent": b.parent.name if b.parent else None,
                              "matrix": rnd(b.matrix_local, 5).tolist(),
                              CAPSULE_PROP: round(b.get(CAPSULE_PROP, -1.0), 5)} for b in rig.data.bones},
           "meshes": {}}
    for ob in sorted((o for o in bpy.data.objects if o.type == 'MESH'), key=lambda o: o.name):
        me = ob.data
        co = np.zeros(len(me.vertices) * 3)
        me.vertices.foreach_get("co", co)
        names = sorted(g.name for g in ob.vertex_groups)
        col = {ob.vertex_groups[n].index: i for i, n in enumerate(names)}
        w = np.zeros((len(me.vertices), len(names)))
        for v in me.vertices:
            for g in v.groups:
                w[v.index, col[g.group]] = g.weight
        out["meshes"][ob.name] = {"vertices": len(me.vertices), "faces": len(me.polygons),
                                  "parent": ob.parent.name if ob.parent else None,
                                  "groups": names, "coords_sha256": sha(rnd(co, 5)),
                                  "weights_sha256": sha(rnd(w, 4))}
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(HERE), help="output folder (default: sample_blends/)")
    args = parser.parse_args(argv)
    print(json.dumps(build(args.out), indent=1))


if __name__ == "__main__":
    main()

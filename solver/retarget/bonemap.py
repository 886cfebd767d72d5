"""Automatic bone maps between two humanoid skeletons: geometry first, names second.

Pure Python + numpy (no bpy): a skeleton is given as bone names, parent indices, rest
heads (and, when known, rest tails and a few posed frames of heads), so the same code
serves armatures, BVH hierarchies and tests.

How a skeleton is read (`analyse`): solver.core.skeleton finds the body from its geometry —
hips where the legs and the spine meet, the chest where the arms leave, the up axis from
the feet to the head, the facing from the feet (knees, face), anatomical left from the
facing, chains proximal → distal with their joint counts, metacarpals, IK/pole/twist/end
bones as helpers. Bone names enter through `classify` (below): they settle what geometry
leaves open (which finger, a Biped `Pelvis` above the bone the thighs hang from, the elbow
of a twist-split arm) and raise the confidence of roles they agree with; names that
contradict the geometry lose (with a warning). Supported name conventions: Blender/Rigify
metarig, generated Rigify, Mixamo, CMU/cgspeed, MotionBuilder/HumanIK, Perception
Neuron/Rokoko, 3ds Max Biped, Unreal, DAZ/Poser, MakeHuman, SMPL/SMPL-X (joint-named:
`L_Shoulder` is the upper arm when a collar exists, `L_Knee` the shin, `L_Foot` the toe).

How two skeletons are paired (`auto_map`): role by role (solver.core.skeleton.pair): anatomical
sides on both, chains of different length (spine 3 vs 6 bones, 2-joint vs 3-joint
fingers) map their ends and spread the rest one-to-one; the transfer shares the rotation
over the bones left between. Several target bones for one part (the robot's three palm
bones) all map to the one source bone. Confidence of a pair = the lower of both roles':
1.0 when the geometry found the role and the name agrees, 0.8 from geometry alone, 0.6
when the name contradicts the geometry, 0.5 when the sides are a guess. The map carries
the warnings of both analyses (shape alone, a guessed facing, contradicting names).
"""
import json
import re

import numpy as np

from ..core import skeleton


class BoneMapError(ValueError):
    """A skeleton or preset a bone map cannot be made from; one line."""


FINGERS = ("thumb", "index", "middle", "ring", "pinky")
SIDES = ("L", "R")
ARM = ("shoulder", "upper_arm", "forearm", "hand")
LEG = ("thigh", "shin", "foot", "toe")


# ---------------------------------------------------------------------------------------
# names

_PREFIX = re.compile(r"^(?:DEF|ORG)[-_.]|^Bip0*1\s+|^Bip0*1_", re.IGNORECASE)
_SUFFIX_SIDE = re.compile(r"(?:[._\-\s])(l|r|left|right)$", re.IGNORECASE)
_PREFIX_WORD_SIDE = re.compile(r"^(left|right)(?=[_\-.\s]?[a-z])", re.IGNORECASE)
_PREFIX_LETTER_SIDE = re.compile(r"^([lLrR])(?:[_\-.\s]|(?=[A-Z]))")

_FINGER_WORDS = {"thumb": "thumb", "index": "index", "middle": "middle", "mid": "middle",
                 "ring": "ring", "pinky": "pinky", "pinkie": "pinky", "little": "pinky",
                 "small": "pinky", "fingers": "middle"}


def split_side(name):
    """(side, rest) for a bone name: side 'L', 'R' or None; rest without the side token.

    Namespaces (`mixamorig:`), `DEF-`/`ORG-` and `Bip01 ` are removed first.
    """
    core = name.rsplit(":", 1)[-1]
    core = _PREFIX.sub("", core).strip()
    side = None
    m = _SUFFIX_SIDE.search(core)
    if m:
        side, core = m.group(1)[0].upper(), core[:m.start()]
    else:
        m = _PREFIX_WORD_SIDE.match(core)
        if m:
            side, core = m.group(1)[0].upper(), core[m.end():]
        else:
            m = _PREFIX_LETTER_SIDE.match(core)
            if m and len(core) > 2:
                side, core = m.group(1).upper(), core[m.end():]
    return side, core


def normalise(name):
    """(side, token) with token lower case, separators '_' (e.g. 'f_index_01', 'upperarm01')."""
    side, core = split_side(name)
    token = re.sub(r"[\s.\-:]+", "_", core).strip("_").lower()
    return side, token


def classify(name, joint_named=False):
    """The body part a bone name stands for, or None.

    Returns (part, side, number): part is one of 'hips', 'spine', 'neck', 'head', ARM, LEG,
    'palm', 'wrist' (the hand, or the joint above SMPL's hand end), or a finger name;
    number is the phalanx (1-based, 0 = metacarpal, None when the name carries none) or the
    repeat number of a body part ('upperarm02' → 2).
    joint_named: the skeleton names joints (SMPL: collar/shoulder/elbow/wrist,
    hip/knee/ankle/foot) rather than bones.
    """
    side, t = normalise(name)
    flat = t.replace("_", "")
    if any(w in flat for w in ("twist", "roll", "end", "ik", "pole", "target", "nub",
                                "eye", "jaw", "tongue", "breast", "heel")):
        return None
    # MakeHuman 'finger2_1' (1 = thumb … 5 = pinky), Biped 'finger0', 'finger01' (0 = thumb)
    m = re.fullmatch(r"finger(\d)_(\d)", t)
    if m and side and 1 <= int(m.group(1)) <= 5:
        return FINGERS[int(m.group(1)) - 1], side, int(m.group(2))
    m = re.fullmatch(r"finger(\d)(\d?)", flat)
    if m and side and int(m.group(1)) <= 4:
        return FINGERS[int(m.group(1))], side, 1 + int(m.group(2) or 0)
    m = re.fullmatch(r"metacarpal(\d)", flat)
    if m and side and 1 <= int(m.group(1)) <= 4:
        return FINGERS[int(m.group(1))], side, 0
    if flat in ("fingerbase",) and side:
        return "middle", side, 0
    m = re.fullmatch(r"(?:f|hand|inhand)?(thumb|index|middle|mid|ring|pinky|pinkie|little|small|fingers)"
                     r"(?:finger)?(metacarpal|\d*)", flat)
    if m and side:
        finger = _FINGER_WORDS[m.group(1)]
        if flat.startswith("inhand") or m.group(2) == "metacarpal":
            return finger, side, 0
        return finger, side, int(m.group(2)) if m.group(2) else None
    m = re.fullmatch(r"([a-z]+?)(\d*)", flat)
    if not m:
        return None
    word, num = m.group(1), int(m.group(2)) if m.group(2) else None
    if side is None:
        if word in ("hips", "hip", "pelvis"):
            return "hips", None, num
        if word.startswith(("spine", "abdomen", "chest", "torso", "back", "waist")) \
                or word in ("lowerback", "upperchest", "belly"):
            return "spine", None, num          # DAZ abdomenLower, chestUpper, …
        if word.startswith("neck"):
            return "neck", None, num
        if word == "head":
            return "head", None, num
        return None
    table = {
        "clavicle": "shoulder", "collar": "shoulder", "collarbone": "shoulder",
        "shoulder": "upper_arm" if joint_named else "shoulder",
        "shldr": "upper_arm", "upperarm": "upper_arm", "uparm": "upper_arm", "arm": "upper_arm",
        "forearm": "forearm", "lowerarm": "forearm", "elbow": "forearm", "lowarm": "forearm",
        "hand": "hand", "wrist": "wrist", "palm": "palm",
        "thigh": "thigh", "upleg": "thigh", "upperleg": "thigh", "hip": "thigh" if joint_named else None,
        "shin": "shin", "leg": "shin", "lowerleg": "shin", "calf": "shin", "knee": "shin",
        "foot": "toe" if joint_named else "foot", "ankle": "foot",
        "toe": "toe", "toes": "toe", "toebase": "toe", "ball": "toe", "forefoot": "toe",
    }
    part = table.get(word)
    if part is None:
        return None
    return part, side, num


def _is_joint_named(names):
    words = {normalise(n)[1].replace("_", "").rstrip("0123456789") for n in names}
    return bool(words & {"collar", "knee", "elbow", "ankle"})


# ---------------------------------------------------------------------------------------
# hierarchy

class Skeleton(skeleton.Tree):
    """Bone names, parent indices (-1 for roots) and rest heads (N, 3) in metres (any
    frame); optionally rest tails (N, 3) and posed heads (F, N, 3) of a few frames of the
    skeleton's motion (a mocap rest may be no human pose: the frames then decide). The tree
    walks (order, ancestors, path, subtree) are solver.core.skeleton.Tree's."""

    def __init__(self, names, parents, heads, tails=None, poses=None):
        super().__init__(parents)
        self.names = list(names)
        self.heads = np.asarray(heads, dtype=float).reshape(len(self.names), 3)
        self.tails = None if tails is None else np.asarray(tails, dtype=float).reshape(len(self.names), 3)
        self.poses = None if poses is None else np.asarray(poses, dtype=float).reshape(-1, len(self.names), 3)
        self.index = {n: i for i, n in enumerate(self.names)}


class Body:
    """What `analyse` found: part → bone indices, with a confidence per bone.

    Attributes: hips (int), spine (list, hips excluded, chest last), neck (list), head
    (int or None), limbs[(side, part)] → list of bone indices (several for the robot's
    palms), fingers[(side, finger)] → list of phalanx bone indices (metacarpals excluded),
    meta[(side, finger)] → the metacarpal next to the finger, conf[bone index] →
    confidence, anatomy: the solver.core.skeleton.Anatomy it came from (up, forward, left,
    helpers, warnings).
    """

    def __init__(self, anatomy):
        an = self.anatomy = anatomy
        self.hips, self.spine, self.neck, self.head = an.hips, list(an.spine), list(an.neck), an.head
        self.limbs = {k: list(v) for k, v in an.limbs.items()}
        self.fingers = {k: list(v) for k, v in an.fingers.items()}
        self.meta = {k: v[-1] for k, v in an.metacarpals.items()}
        self.conf = {i: r.confidence for i, r in an.roles.items() if r.part != "helper"}


def analyse(sk):
    """Read a Skeleton sk into a Body (solver.core.skeleton.analyse with this module's name
    conventions). Raises BoneMapError when no bone joins a spine to two legs nor two arms
    to a neck (no hips: not a humanoid).
    """
    joint_named = _is_joint_named(sk.names)
    try:
        an = skeleton.analyse(sk.names, sk.parents, sk.heads, sk.tails, sk.poses,
                             classify=lambda name: classify(name, joint_named))
    except ValueError as ex:
        raise BoneMapError(f"no hips found: {ex}") from None
    return Body(an)


# ---------------------------------------------------------------------------------------
# pairing

class BoneMap:
    """target bone → (source bone, confidence), plus the target bones left unmapped.

    pairs: list of (target, source, confidence) in target hierarchy order.
    unmapped_target: names of target bones no source bone drives.
    warnings: what the map is unsure of (found from the shape alone, sides guessed, …).
    """

    def __init__(self, pairs, unmapped_target=(), source_armature="", warnings=()):
        self.pairs = [(t, s, float(c)) for t, s, c in pairs]
        self.unmapped_target = list(unmapped_target)
        self.source_armature = source_armature
        self.warnings = list(warnings)

    def as_dict(self):
        """{target: source}"""
        return {t: s for t, s, _c in self.pairs}

    def confidence(self):
        """{target: confidence}"""
        return {t: round(c, 3) for t, _s, c in self.pairs}

    def to_json(self):
        return json.dumps({"format": "signsim-bonemap", "version": 1,
                           "source_armature": self.source_armature,
                           "pairs": [{"target": t, "source": s, "confidence": c}
                                     for t, s, c in self.pairs]}, indent=1)

    @classmethod
    def from_json(cls, text, origin="preset"):
        """Parse a bone map from JSON: a preset written by to_json, a plain
        {"target bone": "source bone"} object, or the whole `retarget --json` output (its
        "bone_map" and "confidence"). Raises BoneMapError naming what is wrong."""
        def bad(why):
            return BoneMapError(f"{origin}: not a bone map: {why} (expected a SignSim preset, "
                                '{"target bone": "source bone", ...} or the output of retarget --json)')
        try:
            data = json.loads(text)
        except ValueError as ex:
            raise bad(f"not JSON ({ex})") from None
        if not isinstance(data, dict):
            raise bad(f"a JSON {type(data).__name__}, not an object")
        if "pairs" in data:
            pairs = data["pairs"]
            if not isinstance(pairs, list) or not all(
                    isinstance(p, dict) and isinstance(p.get("target"), str)
                    and isinstance(p.get("source"), str)
                    and isinstance(p.get("confidence", 1.0), (int, float)) for p in pairs):
                raise bad('"pairs" must be a list of {"target": name, "source": name} objects')
            return cls([(p["target"], p["source"], p.get("confidence", 1.0)) for p in pairs],
                       source_armature=str(data.get("source_armature", "")))
        mapping = data.get("bone_map", data)
        confidence = data.get("confidence", {}) if "bone_map" in data else {}
        if (not isinstance(mapping, dict) or not mapping
                or not all(isinstance(k, str) and isinstance(v, str) for k, v in mapping.items())):
            raise bad("no target → source bone names")
        if not isinstance(confidence, dict):
            confidence = {}
        return cls([(t, s, confidence.get(t, 1.0)) for t, s in mapping.items()])


def auto_map(source, target):
    """Pair two Skeletons role by role. Returns a BoneMap (target bone → source bone) with
    the warnings of both analyses. Raises BoneMapError (from analyse) when either skeleton
    is not a humanoid.
    """
    bs, bt = analyse(source), analyse(target)
    pairs = skeleton.pair(bs.anatomy, bt.anatomy)
    order = {i: k for k, i in enumerate(target.order())}
    pairs.sort(key=lambda p: order[p[0]])
    mapped = {p[0] for p in pairs}
    unmapped = [target.names[i] for i in target.order() if i not in mapped]
    warnings = skeleton.map_warnings(bs.anatomy, bt.anatomy, "source", "target")
    return BoneMap([(target.names[t], source.names[s], c) for t, s, c in pairs], unmapped,
                   warnings=warnings)


def coverage(bone_map, target):
    """Body parts of the target the map drives: sorted list of 'hips', 'spine', 'neck',
    'head', 'upper_arm.L', …, 'index.L', … (a finger counts when any of its bones is mapped).
    """
    body = analyse(target)
    mapped = {target.index[t] for t in bone_map.as_dict() if t in target.index}
    out = set()
    if body.hips in mapped:
        out.add("hips")
    if mapped & set(body.spine):
        out.add("spine")
    if mapped & set(body.neck):
        out.add("neck")
    if body.head in mapped:
        out.add("head")
    for (side, part), bones in body.limbs.items():
        if mapped & set(bones):
            out.add(f"{part}.{side}")
    for (side, finger), bones in body.fingers.items():
        if mapped & set(bones):
            out.add(f"{finger}.{side}")
    return sorted(out)


_MIRROR = ((".L", ".R"), ("_L", "_R"), ("_l", "_r"), (".l", ".r"), ("Left", "Right"),
           ("left", "right"), (" L ", " R "), ("L_", "R_"))


def mirror_name(name):
    """The right-side name of a left-side bone name (`upper_arm.L` → `upper_arm.R`,
    `mixamorig:LeftArm` → `mixamorig:RightArm`, `lShldr` → `rShldr`), or None."""
    for left, right in _MIRROR:
        if left in name:
            k = name.rfind(left)
            return name[:k] + right + name[k + len(left):]
    base = name.rsplit(":", 1)
    core = base[-1]
    if len(core) > 2 and core[0] in "lL" and core[1].isupper():
        mirrored = ("r" if core[0] == "l" else "R") + core[1:]
        return mirrored if len(base) == 1 else base[0] + ":" + mirrored
    return None


def mirror_pairs(pairs, target_names, source_names):
    """Copy left-side pairs to the right side: for (target, source, conf) whose target and
    source both have a right-side twin present in the skeletons, the twin pair replaces any
    right-side pair of that target. Returns the new list of pairs.
    """
    tset, sset = set(target_names), set(source_names)
    by_target = {t: (t, s, c) for t, s, c in pairs}
    for t, s, c in pairs:
        if split_side(t)[0] != "L":
            continue
        mt, ms = mirror_name(t), mirror_name(s)
        if mt in tset and ms in sset:
            by_target[mt] = (mt, ms, c)
    order = {n: k for k, n in enumerate(target_names)}
    return sorted(by_target.values(), key=lambda p: order.get(p[0], len(order)))

"""Automatic bone maps between two humanoid skeletons: name conventions plus chain topology.

Pure Python + numpy (no bpy): a skeleton is given as bone names, parent indices and rest
head positions, so the same code serves armatures, BVH hierarchies and tests.

How a skeleton is read (`analyse`):
1. Every name is normalised (namespace such as `mixamorig:`, `DEF-`/`ORG-`, `Bip01 `,
   side tokens `.L`, `_l`, `Left…`, `L_`, `l…` (DAZ), `L…` (CMU) removed, lower case) and
   classified into a body part with a side and, for fingers, a phalanx number. Supported
   conventions: Blender/Rigify metarig, generated Rigify, Mixamo, CMU/cgspeed,
   MotionBuilder/HumanIK, Perception Neuron/Rokoko, 3ds Max Biped, Unreal, DAZ/Poser,
   MakeHuman, SMPL/SMPL-X (joint-named: `L_Shoulder` is the upper arm when a collar
   exists, `L_Knee` the shin, `L_Foot` the toe).
2. The hierarchy decides what names cannot: the hips are the top-most bone with three
   branches at least two bones deep (spine + two legs), the chest is where the two arms
   branch, the spine and neck are the paths between hips, chest and head. A name that
   contradicts the hierarchy (a "Hips" bone that is not above the legs, an IK "Foot"
   target outside the leg chain) is dropped. Parts without a usable name are inferred
   from the chains (lower confidence); unnamed fingers are ordered by position.

How two skeletons are paired (`auto_map`): part by part; chains of different length
(spine 3 vs 6 bones, neck 1 vs 2, 2-joint vs 3-joint fingers) map their ends and spread
the rest one-to-one, leaving surplus bones unmapped (they then follow their parent
rigidly). Bones a skeleton has twice for one part (the robot's three palm bones for one
hand) all map to the one source bone. Confidence of a pair = min of both sides': 1.0 for
a name matched by convention and confirmed by the hierarchy, 0.8 for a part found by
topology, 0.7 for spine/neck bones spread over chains of different length.
"""
import json
import re

import numpy as np


class BoneMapError(ValueError):
    """A skeleton or preset a bone map cannot be made from; one line."""


FINGERS = ("thumb", "index", "middle", "ring", "pinky")
SIDES = ("L", "R")
ARM = ("shoulder", "upper_arm", "forearm", "hand")
LEG = ("thigh", "shin", "foot", "toe")

CONF_NAME = 1.0
CONF_TOPOLOGY = 0.8
CONF_SPREAD = 0.7


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

class Skeleton:
    """Bone names, parent indices (-1 for roots) and rest heads (N, 3) in metres (any frame)."""

    def __init__(self, names, parents, heads):
        self.names = list(names)
        self.parents = [int(p) for p in parents]
        self.heads = np.asarray(heads, dtype=float).reshape(len(self.names), 3)
        self.index = {n: i for i, n in enumerate(self.names)}
        self.children = [[] for _ in self.names]
        for i, p in enumerate(self.parents):
            if p >= 0:
                self.children[p].append(i)
        self.size = [1] * len(self.names)   # subtree sizes
        self.depth = [1] * len(self.names)  # longest chain below, counting the bone
        for i in reversed(self.order()):
            for c in self.children[i]:
                self.size[i] += self.size[c]
                self.depth[i] = max(self.depth[i], 1 + self.depth[c])

    def order(self):
        """Bone indices, parents before children (breadth first from the roots)."""
        order = [i for i, p in enumerate(self.parents) if p < 0]
        k = 0
        while k < len(order):
            order.extend(self.children[order[k]])
            k += 1
        return order

    def ancestors(self, i):
        """Indices above bone i, nearest first."""
        out = []
        while self.parents[i] >= 0:
            i = self.parents[i]
            out.append(i)
        return out

    def is_descendant(self, i, of):
        return of in self.ancestors(i)

    def path(self, top, bottom):
        """Bones from top (exclusive) down to bottom (inclusive); None if not below top."""
        out = [bottom]
        for a in self.ancestors(bottom):
            if a == top:
                return out[::-1]
            out.append(a)
        return None

    def main_chain(self, i):
        """Bones from i down while each has exactly one child; the last one has none or
        fans out (a hand into fingers, a head into face bones)."""
        chain = [i]
        while len(self.children[i]) == 1:
            i = self.children[i][0]
            chain.append(i)
        return chain

    def branches(self, i, min_depth=2):
        """Children of i whose chains are at least min_depth bones deep (a leg, not a stub)."""
        return [c for c in self.children[i] if self.depth[c] >= min_depth]


class Body:
    """What `analyse` found: part → bone indices, with a confidence per bone.

    Attributes: hips (int), spine (list, hips excluded, chest last), neck (list), head
    (int or None), limbs[(side, part)] → list of bone indices (several for the robot's
    palms), fingers[(side, finger)] → list of phalanx bone indices (metacarpals excluded),
    meta[(side, finger)] → metacarpal index, conf[bone index] → confidence.
    """

    def __init__(self):
        self.hips = None
        self.spine = []
        self.neck = []
        self.head = None
        self.limbs = {}
        self.fingers = {}
        self.meta = {}
        self.conf = {}



class _Names:
    """Name classifications of one skeleton: (part, side) → [(number, bone index)]."""

    def __init__(self, sk):
        self.sk = sk
        joint_named = _is_joint_named(sk.names)
        self.hits = {}
        for i, n in enumerate(sk.names):
            c = classify(n, joint_named)
            if c:
                self.hits.setdefault((c[0], c[1]), []).append((c[2], i))
        for side in SIDES:
            # a wrist is the hand; a 'hand' below it is then SMPL's hand end (no fingers)
            wrist = self.hits.pop(("wrist", side), None)
            if wrist:
                self.hits[("hand", side)] = wrist

    def find(self, part, side, below=None):
        """Bones named (part, side), below bone `below` if given, lowest number first."""
        hits = sorted(self.hits.get((part, side), []), key=lambda t: (t[0] is not None, t[0] or 0))
        return [i for _n, i in hits if below is None or self.sk.is_descendant(i, below)]

    def numbered(self, part, side):
        return self.hits.get((part, side), [])

    def has(self, part, side, i):
        return any(j == i for _n, j in self.hits.get((part, side), []))


def analyse(skeleton):
    """Read a Skeleton into a Body (an upper body without legs is read from its root).

    Raises BoneMapError when no bone splits into a spine and two legs (no hips) nor into two
    arms and a neck (no chest).
    """
    sk = skeleton
    names = _Names(sk)
    body = Body()

    # hips: where the named thighs and an upper arm meet (a root, IK targets or a 'Hips'
    # bone above or below it do not matter), else the top-most bone with three branches
    # at least two bones deep (spine and two legs)
    named_limbs = [names.find(part, side) for part, side in
                   (("thigh", "L"), ("thigh", "R"), ("upper_arm", "L"))]
    hips = None
    if all(named_limbs):
        hips = _common_ancestor(sk, [hits[0] for hits in named_limbs])
    legless = False
    if hips is None:
        candidates = [i for i in range(len(sk.names)) if len(sk.branches(i)) >= 3]
        arms = [names.find("upper_arm", side) for side in SIDES]
        if all(arms):
            # the chest also splits three ways (arms and neck): not a hips candidate
            chest = _common_ancestor(sk, [hits[0] for hits in arms])
            candidates = [i for i in candidates if chest is None or not _within(sk, i, chest)]
        if candidates:
            hips = max(candidates, key=lambda i: sk.size[i])
        else:
            # an upper body without legs (common for signing avatars): the biggest root
            legless = True
            hips = max((i for i, p in enumerate(sk.parents) if p < 0), key=lambda i: sk.size[i])
    no_hips = BoneMapError(f"no hips found: no bone splits into a spine and two legs, nor "
                           f"into two arms and a neck ({len(sk.names)} bones: "
                           f"{', '.join(sk.names[:5])}…)")
    if not sk.children[hips]:
        raise no_hips
    body.hips = hips
    body.conf[hips] = CONF_NAME if names.has("hips", None, hips) else CONF_TOPOLOGY
    spine_root = max(sk.branches(hips, 1), key=lambda c: sk.size[c])
    if all(named_limbs):
        spine_root = next(c for c in sk.children[hips] if _within(sk, named_limbs[2][0], c))

    # the chest is where the arms of both sides branch off
    arm_tops = {}
    for side in SIDES:
        for part in ARM:
            hit = names.find(part, side, hips)
            if hit and sk.is_descendant(hit[0], spine_root) or hit and hit[0] == spine_root:
                arm_tops[side] = hit[0]
                break
    chest = None
    if len(arm_tops) == 2:
        left_line = [arm_tops["L"]] + sk.ancestors(arm_tops["L"])
        chest = next((a for a in sk.ancestors(arm_tops["R"]) if a in left_line), None)
        if chest == hips or chest is None or not (chest == spine_root or sk.is_descendant(chest, spine_root)):
            chest = None
    if chest is None:
        chest = next((i for i in [spine_root] + _descend(sk, spine_root)
                      if len(sk.branches(i, 1)) >= 3), None)
    if chest is None:
        if legless:
            raise no_hips
        raise BoneMapError("no chest found: no bone above the hips branches into two arms and a neck")
    body.spine = sk.path(hips, chest)
    for i in body.spine:
        named = names.has("spine", None, i) or names.has("hips", None, i)
        body.conf[i] = CONF_NAME if named else CONF_TOPOLOGY

    # arm branches of the chest: by side names, else the two mirrored subtrees
    chest_branches = sk.children[chest]
    side_of = {}
    for c in chest_branches:
        for side, top in arm_tops.items():
            if top == c or sk.is_descendant(top, c):
                side_of[c] = side
    if len(set(side_of.values())) < 2:
        pair = _mirrored_pair(sk, chest_branches)
        if pair:
            left, right = sorted(pair, key=lambda c: -sk.heads[c][0])
            side_of = {left: "L", right: "R"}
    rest = [c for c in chest_branches if c not in side_of]
    head_named = names.find("head", None, chest)
    if head_named:
        body.head = head_named[0]
    elif rest:
        body.head = sk.main_chain(max(rest, key=lambda c: sk.size[c]))[-1]
    if body.head is not None:
        body.conf[body.head] = CONF_NAME if head_named else CONF_TOPOLOGY
        body.neck = (sk.path(chest, body.head) or [body.head])[:-1]
        for i in body.neck:
            body.conf[i] = CONF_NAME if names.has("neck", None, i) else CONF_TOPOLOGY

    for branch, side in side_of.items():
        _read_arm(sk, body, names, branch, side)
    legs = [c for c in sk.branches(hips) if c != spine_root]
    for side in SIDES:
        _read_leg(sk, body, names, hips, legs, side)
    return body


def _common_ancestor(sk, bones):
    """The lowest bone above all of `bones` (not one of them), or None."""
    lines = [set(sk.ancestors(b)) for b in bones]
    return next((a for a in sk.ancestors(bones[0]) if all(a in line for line in lines)), None)


def _descend(sk, i):
    out, queue = [], list(sk.children[i])
    while queue:
        j = queue.pop(0)
        out.append(j)
        queue.extend(sk.children[j])
    return out


def _mirrored_pair(sk, roots):
    """The two roots whose subtrees have the same size and depth (largest such), or None."""
    best = None
    for a, ra in enumerate(roots):
        for rb in roots[a + 1:]:
            if sk.size[ra] == sk.size[rb] and sk.depth[ra] == sk.depth[rb] and sk.depth[ra] >= 2:
                if best is None or sk.size[ra] > best[0]:
                    best = (sk.size[ra], (ra, rb))
    return best[1] if best else None


def _within(sk, i, top):
    return i == top or sk.is_descendant(i, top)


def _read_arm(sk, body, names, branch, side):
    """Shoulder, upper arm, forearm, hand(s) and fingers of one arm branch of the chest."""
    found, prev = {}, None
    for part in ARM:
        hits = [i for i in names.find(part, side) if _within(sk, i, branch)
                and (prev is None or sk.is_descendant(i, prev))]
        if hits:
            found[part] = hits[0]
            prev = hits[0]
    palms = [i for i in names.find("palm", side) if _within(sk, i, branch)]
    hands = [found["hand"]] if "hand" in found else palms   # robot: palms, no hand bone
    if not hands or not {"upper_arm", "forearm"} <= set(found):
        chain = sk.main_chain(branch)       # the arm down to its first fan-out: the hand
        if len(chain) >= 3:
            for part, i in zip(ARM[-len(chain[-4:]):], chain[-4:]):
                if part not in found and i not in found.values():
                    found[part] = i
                    body.conf[i] = CONF_TOPOLOGY
            if not hands:
                hands = [found["hand"]]
    for part, i in found.items():
        if part != "hand":
            body.limbs[(side, part)] = [i]
            body.conf.setdefault(i, CONF_NAME)
    if not hands:
        return
    body.limbs[(side, "hand")] = hands
    for h in hands:
        body.conf.setdefault(h, CONF_NAME)
    _read_fingers(sk, body, names, side, hands, found.get("forearm", hands[0]))


def _read_fingers(sk, body, names, side, hands, top):
    for finger in FINGERS:
        hits = [(n, i) for n, i in names.numbered(finger, side) if sk.is_descendant(i, top)]
        if not hits:
            continue
        numbers = {n for n, _ in hits}
        phalanges = []
        for n, i in hits:
            if n == 0 or (n is None and 1 in numbers):
                body.meta[(side, finger)] = i       # metacarpal (Rokoko InHand…, pybvh HandRing)
            else:
                phalanges.append(i)
        phalanges.sort(key=lambda i: len(sk.ancestors(i)))
        chain = phalanges[:1]
        for i in phalanges[1:]:
            if sk.is_descendant(i, chain[-1]) and len(chain) < 3:
                chain.append(i)
        if chain:
            body.fingers[(side, finger)] = chain
            for i in chain:
                body.conf[i] = CONF_NAME
    if any(k[0] == side for k in body.fingers):
        return
    # unnamed fingers: the hand's child chains; the thumb's base is the most separate one,
    # the others follow by distance from the thumb (index nearest)
    roots = list(sk.children[hands[0]])
    if len(roots) < 4:
        return
    bases = np.array([sk.heads[c] for c in roots])
    spread = [np.linalg.norm(bases[k] - np.delete(bases, k, 0).mean(0)) for k in range(len(roots))]
    thumb = int(np.argmax(spread))
    others = sorted((k for k in range(len(roots)) if k != thumb),
                    key=lambda k: np.linalg.norm(bases[k] - bases[thumb]))
    for finger, k in [("thumb", thumb)] + list(zip(FINGERS[1:], others)):
        chain = sk.main_chain(roots[k])[:3]
        body.fingers[(side, finger)] = chain
        for i in chain:
            body.conf[i] = CONF_TOPOLOGY


def _read_leg(sk, body, names, hips, legs, side):
    found, prev = {}, hips
    for part in LEG:
        hits = names.find(part, side, prev)
        if hits:
            found[part] = hits[0]
            prev = hits[0]
    if "thigh" not in found and len(legs) == 2:
        left, right = sorted(legs, key=lambda c: -sk.heads[sk.main_chain(c)[-1]][0])
        chain = sk.main_chain(left if side == "L" else right)
        if len(chain) >= 5:
            chain = chain[1:]          # a hip stub first (CMU LHipJoint, MakeHuman pelvis.L)
        for part, i in zip(LEG, chain):
            found.setdefault(part, i)
            body.conf[i] = CONF_TOPOLOGY
    for part, i in found.items():
        body.limbs[(side, part)] = [i]
        body.conf.setdefault(i, CONF_NAME)


# ---------------------------------------------------------------------------------------
# pairing

def _spread(targets, sources, anchor="first"):
    """One-to-one pairs of two ordered chains (lists of bone indices, root first).

    Both ends are matched and the longer chain is thinned evenly; a chain of one bone
    pairs with the `anchor` end ('first' or 'last') of the other.
    """
    n, m = len(targets), len(sources)
    if n == 0 or m == 0:
        return []
    if n == 1 or m == 1:
        k = 0 if anchor == "first" else -1
        return [(targets[k], sources[k])]
    if n <= m:
        return [(targets[k], sources[round(k * (m - 1) / (n - 1))]) for k in range(n)]
    return [(targets[round(k * (n - 1) / (m - 1))], sources[k]) for k in range(m)]


class BoneMap:
    """target bone → (source bone, confidence), plus the target bones left unmapped.

    pairs: list of (target, source, confidence) in target hierarchy order.
    unmapped_target: names of target bones no source bone drives.
    """

    def __init__(self, pairs, unmapped_target=(), source_armature=""):
        self.pairs = [(t, s, float(c)) for t, s, c in pairs]
        self.unmapped_target = list(unmapped_target)
        self.source_armature = source_armature

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
        """Parse a preset written by to_json. Raises BoneMapError on a malformed file."""
        try:
            data = json.loads(text)
            pairs = [(p["target"], p["source"], p.get("confidence", 1.0)) for p in data["pairs"]]
        except (ValueError, KeyError, TypeError) as ex:
            raise BoneMapError(f"{origin}: not a SignSim bone map preset ({ex})") from None
        return cls(pairs, source_armature=data.get("source_armature", ""))


def auto_map(source, target):
    """Pair two Skeletons part by part. Returns a BoneMap (target bone → source bone).

    Raises BoneMapError (from analyse) when either skeleton has no hips or chest.
    """
    bs, bt = analyse(source), analyse(target)
    pairs = []   # (target index, source index, confidence)

    def add(ti, si, conf=None):
        c = min(bt.conf.get(ti, CONF_TOPOLOGY), bs.conf.get(si, CONF_TOPOLOGY))
        pairs.append((ti, si, c if conf is None else min(c, conf)))

    add(bt.hips, bs.hips)
    for chain_t, chain_s, anchor in ((bt.spine, bs.spine, "last"), (bt.neck, bs.neck, "first")):
        exact = len(chain_t) == len(chain_s)
        for ti, si in _spread(chain_t, chain_s, anchor):
            add(ti, si, None if exact else CONF_SPREAD)
    if bt.head is not None and bs.head is not None:
        add(bt.head, bs.head)
    for side in SIDES:
        for part in ARM + LEG:
            ts, ss = bt.limbs.get((side, part)), bs.limbs.get((side, part))
            if ts and ss:
                for ti in ts:
                    add(ti, ss[0])
        for finger in FINGERS:
            ft, fs = bt.fingers.get((side, finger)), bs.fingers.get((side, finger))
            if ft and fs:
                for ti, si in _spread(ft, fs):
                    add(ti, si)
            mt, ms = bt.meta.get((side, finger)), bs.meta.get((side, finger))
            if mt is not None and ms is not None:
                add(mt, ms)
    order = {i: k for k, i in enumerate(target.order())}
    pairs.sort(key=lambda p: order[p[0]])
    mapped = {p[0] for p in pairs}
    unmapped = [target.names[i] for i in target.order() if i not in mapped]
    return BoneMap([(target.names[t], source.names[s], c) for t, s, c in pairs], unmapped)


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

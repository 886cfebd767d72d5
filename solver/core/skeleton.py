"""What a humanoid skeleton is, read from its geometry and topology first, its names second.

A skeleton is given as bone names, parent indices and joint positions: rest heads (N, 3)
and, optionally, posed heads over a few frames (F, N, 3) — any up axis, any unit, any
facing. `analyse` finds:

- the junctions: the hips are the top-most bone where three long branches meet (two legs
  and the spine); the chest is the first bone in the spine branch where two long branches
  (the arms) leave; a branch is long when it reaches farther than a fraction of the body
  size (fingers, toes, face and breast bones do not); a bone the arms leave that carries
  the head straight and sits as high as the arms' first bones is the neck, the bone below
  it the chest (a 3ds Max Biped hangs its clavicles from the neck);
- the up axis: from the two leg ends (the chains that end lowest) to the head chain;
- the facing: the feet point forward (ankle → toe, across the up axis); without feet, the
  knees bend forward, the face sits in front of the head; names only when geometry has
  nothing to say (a warning then);
- anatomical left = up × forward, and each limb's side from where it lies along it — never
  from its name; names that disagree are reported, not obeyed;
- every chain ordered proximal → distal: spine (hips excluded, chest last), neck, head,
  shoulder girdle, upper arm, forearm, hand(s), fingers with their joint counts and
  metacarpals, hip stub, thigh, shin, foot, toe;
- helpers left alone: IK targets and poles (outside the body tree or named so), twist and
  roll bones (collinear leaves on a limb bone, or named so), end/tip bones.

Names enter through an optional `classify(name) → (part, side, number) | None` (the bone
map's name conventions); they break ties the geometry leaves open (which finger, where a
twist-split arm has its elbow, a Biped `Pelvis` above the bone the thighs hang from) and
raise the confidence of roles they agree with.

Units: positions in any length unit (only ratios to the body size are used); directions
are unit vectors in the input frame. Sources: the anatomy of the human skeleton (limb
proportions, the feet pointing forward, the knees bending forward) as in any anatomy text;
Wahba-style fits are not needed here.
"""
import math
import re

import numpy as np

FINGERS = ("thumb", "index", "middle", "ring", "pinky")
SIDES = ("L", "R")

LONG_BRANCH = 0.06    # a limb branch reaches farther than this fraction of the body size
COINCIDENT = 0.01     # joints closer than this fraction of the body size are one point
CONF_NAMED = 1.0      # geometry found the role and the name agrees
CONF_TOPOLOGY = 0.8   # geometry found the role, no name says anything about it
CONF_CONFLICT = 0.6   # geometry found the role, the name says otherwise
CONF_GUESSED = 0.5    # no geometric evidence: a guess (the facing from nothing, …)
OVERWHELMING = 0.9    # share of frames on which the geometry must contradict names to win
NECK_BORNE = 0.1      # a bone carrying the head and the arms this close below the arm roots
                      # (fraction of their height above the hips) is a neck, not a chest

_HELPER_NAME = re.compile(r"ik|pole|target|twist|roll|ctrl|control|mch|helper|nub|_end$|end$"
                          r"|\bend\b|site|top_?end|headtop", re.IGNORECASE)


class Role:
    """One bone's role: part ('hips', 'spine', 'neck', 'head', 'root', 'shoulder',
    'upper_arm', 'forearm', 'hand', 'thigh', 'shin', 'foot', 'toe', 'hip_stub',
    'segment' (an extra in-line limb bone), a finger name, 'metacarpal', 'helper'),
    side ('L', 'R' or None), number (position in its chain, 1-based, or None),
    confidence in [0, 1] and reasons (list of short strings)."""

    __slots__ = ("part", "side", "number", "confidence", "reasons")

    def __init__(self, part, side=None, number=None, confidence=CONF_TOPOLOGY, reasons=()):
        self.part, self.side, self.number = part, side, number
        self.confidence, self.reasons = float(confidence), list(reasons)

    def __repr__(self):
        return (f"Role({self.part!r}, {self.side!r}, {self.number!r}, "
                f"{self.confidence:.2f}, {self.reasons!r})")


class Anatomy:
    """The result of `analyse`.

    up, forward, left: (3,) unit vectors in the input frame (left = up × forward).
    up_evidence, facing_evidence: what they were found from ('legs and head', 'hips and
    head', 'feet', 'knees', 'face', 'names', 'none').
    hips: bone index; above_hips: bones above the hips, nearest first (a Biped `Bip01`,
    a static `joint_Root`); spine: bones from the hips (excluded) to the chest (last);
    neck: bones between chest and head; head: bone index or None.
    limbs[(side, part)]: bone indices (several only for hands made of palm bones);
    segments[(side, part)]: extra in-line bones of that limb part (twist splits), in order.
    fingers[(side, finger)]: phalanges proximal → distal; metacarpals[(side, finger)]:
    bone indices between hand and first phalanx.
    helpers: {bone: note}; roles: {bone: Role}; warnings: list of str.
    legless: True for an upper body without legs. biped: True when the hips are a bone
    named as the pelvis just above the leg junction (3ds Max Biped: Bip01 Pelvis under a
    Bip01 root that carries the translation).
    """

    def __init__(self):
        self.up = self.forward = self.left = None
        self.up_evidence = self.facing_evidence = "none"
        self.hips = None
        self.above_hips, self.spine, self.neck = [], [], []
        self.head = None
        self.limbs, self.segments, self.fingers, self.metacarpals = {}, {}, {}, {}
        self.helpers, self.roles, self.warnings = {}, {}, []
        self.legless = False
        self.biped = False

    def finger_joints(self):
        """{(side, finger): number of phalanges}."""
        return {k: len(v) for k, v in self.fingers.items()}

    def topology_only(self):
        """True when no name confirmed any body role (everything from geometry alone)."""
        body = [r for r in self.roles.values() if r.part not in ("helper", "root")]
        return bool(body) and not any("name agrees" in " ".join(r.reasons) for r in body)


class Tree:
    """Parent links of a skeleton: children, breadth-first order, subtree sizes and depths.

    parents: N parent indices (-1 for roots); excluded: bones left out (they and their
    subtrees are not anybody's children).
    """

    def __init__(self, parents, excluded=()):
        n = len(parents)
        self.parents = [int(p) for p in parents]
        self.children = [[] for _ in range(n)]
        for i, p in enumerate(self.parents):
            if p >= 0 and i not in excluded:
                self.children[p].append(i)
        self._order = [i for i, p in enumerate(self.parents) if p < 0 and i not in excluded]
        k = 0
        while k < len(self._order):
            self._order.extend(self.children[self._order[k]])
            k += 1
        self.size = [1] * n                 # subtree sizes
        self.depth = [1] * n                # longest chain below, counting the bone
        for i in reversed(self._order):
            for c in self.children[i]:
                self.size[i] += self.size[c]
                self.depth[i] = max(self.depth[i], 1 + self.depth[c])

    def order(self):
        """Bone indices, parents before children (breadth first from the roots)."""
        return list(self._order)

    def subtree(self, i):
        """Bone i and every bone below it."""
        out, stack = [], [i]
        while stack:
            j = stack.pop()
            out.append(j)
            stack.extend(self.children[j])
        return out

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


def _unit(v):
    v = np.asarray(v, dtype=float)
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, 1e-12)


def analyse(names, parents, heads, tails=None, poses=None, classify=None):
    """Read a humanoid skeleton.

    names: N bone names; parents: N parent indices (-1 for roots); heads: (N, 3) rest
    heads; tails: (N, 3) rest tails or None; poses: (F, N, 3) posed heads or None (when
    given, the posed frames decide the up axis and facing: a rest pose may be no human
    pose at all); classify: optional name classifier, name → (part, side, number) or None.
    Returns an Anatomy. Raises ValueError when no bone joins a spine to two legs nor two
    arms to a neck (not a humanoid).
    """
    names = list(names)
    n = len(names)
    heads = np.asarray(heads, dtype=float).reshape(n, 3)
    X = heads[None] if poses is None else np.asarray(poses, dtype=float).reshape(-1, n, 3)
    tails = None if tails is None else np.asarray(tails, dtype=float).reshape(n, 3)
    cls = [classify(nm) if classify else None for nm in names]
    an = Anatomy()

    # helper bones by name are kept out of the body tree (and out of its geometry)
    named_helpers = {i for i, nm in enumerate(names)
                     if _HELPER_NAME.search(nm.rsplit(":", 1)[-1]) and cls[i] is None}
    tree = Tree(parents, named_helpers)
    for i in named_helpers:
        an.helpers[i] = "helper by name (IK target, pole, twist or end bone): left alone"
    size = float(np.median([np.linalg.norm(np.ptp(x[tree.order()], axis=0)) for x in X]))
    if not math.isfinite(size) or size <= 0:
        raise ValueError("the skeleton has no extent")
    # leaves reach to their tails (the robot's shins end at the ankle) when the rest is used
    ends = X if tails is None or poses is not None else np.concatenate([X, tails[None]])
    reach = _reaches(tree, ends, size)

    def long_(i):   # limb-like branches: two bones at least, reaching far
        return [c for c in tree.children[i] if reach[c] >= LONG_BRANCH and tree.depth[c] >= 2]

    junctions = [i for i in tree.order() if len(long_(i)) >= 2]
    hips, chest = _junctions(tree, junctions, long_, reach)
    if hips is None and chest is None:
        raise ValueError(f"not a humanoid skeleton: no bone joins a spine to two legs nor two "
                         f"arms to a neck ({n} bones: {', '.join(names[:4])}…)")
    an.legless = hips is None
    # ---- the chest's branches: two arms, one neck
    arms, neck_root = [], None
    if chest is not None:
        arm_cands = long_(chest)
        arms = list(_mirror_pair(tree, reach, arm_cands) or [])
        rest = [c for c in tree.children[chest] if c not in arms]
        if rest:
            neck_root = max(rest, key=lambda c: (tree.depth[c], reach[c]))
    if hips is None:    # an upper body: the hips are the root of the chest's line
        line = [chest] + tree.ancestors(chest)
        hips = line[-1]
    # ---- legs
    legs = []
    if not an.legless:
        spine_branch = next(c for c in tree.children[hips]
                            if c == chest or chest in tree.subtree(c)) if chest is not None else None
        leg_cands = [c for c in long_(hips) if c != spine_branch]
        legs = list(_mirror_pair(tree, reach, leg_cands) or [])
        if len(legs) < 2:
            an.legless = True
            legs = []

    # ---- head
    head = None
    if neck_root is not None:
        chain = _main_chain(tree, reach, neck_root)
        named_head = [i for i in chain if cls[i] and cls[i][0] == "head"]
        # the head: named so, else where the neck chain fans out (face, eyes), else its end
        fan = next((i for i in chain if len(tree.children[i]) >= 2), chain[-1])
        head = named_head[0] if named_head else fan
        if not named_head and head == chain[-1] and len(chain) >= 2:
            # a last leaf much farther from its parent than the neck bones are apart is the
            # top of the skull (an end bone), not the head joint at the skull base
            line = [chest] + chain
            seg = np.median(np.linalg.norm(np.diff(X[:, line], axis=1), axis=-1), axis=0)
            if seg[-1] > 1.4 * seg[-2]:
                head = chain[-2]
        for i in chain[chain.index(head) + 1:]:
            an.helpers[i] = "above the head (end bone): left alone"

    # ---- up axis
    top = head if head is not None else (neck_root if neck_root is not None else chest)
    if legs:
        ends = [_lowest_end(tree, X, leg, top) for leg in legs]
        ups = _unit(X[:, top] - 0.5 * (X[:, ends[0]] + X[:, ends[1]]))
        an.up_evidence = "legs and head"
    else:
        ups = _unit(X[:, top] - X[:, hips])
        an.up_evidence = "hips and head"
    an.up = _unit(ups.mean(axis=0))
    if np.mean(ups @ an.up) < 0.9:
        an.warnings.append("the up axis varies over the frames given (the body lies or "
                           "turns over): taken as their mean")

    # ---- the Biped convention: a bone named pelvis/hips above the leg junction is the hips
    biped = False
    for a in tree.ancestors(hips):
        if cls[a] and cls[a][0] == "hips" and len(long_(a)) == 1 and \
                np.linalg.norm(X[0, a] - X[0, hips]) < 0.15 * size:
            hips, biped = a, True
            break
    an.hips = hips
    an.above_hips = tree.ancestors(hips)
    an.biped = biped
    an.spine = tree.path(hips, chest) if chest is not None else []
    an.head = head
    an.neck = (tree.path(chest, head) or [head])[:-1] if head is not None else []
    neck_borne = head is not None and not an.neck and len(an.spine) >= 2 and arms and \
        _at_shoulders(X, an.up, hips, chest, arms)
    if neck_borne:
        # the arms leave a bone that carries the head straight and sits as high as they do
        # (3ds Max Biped hangs the clavicles from its neck): by function that bone is the
        # neck, the one below it the chest
        an.spine, an.neck = an.spine[:-1], an.spine[-1:]
        chest = an.spine[-1]

    # ---- facing and sides
    leg_chains = {leg: _leg_chain(tree, X, reach, leg, an.up, size, tails, cls) for leg in legs}
    ankles = [c["foot"][0] for c in leg_chains.values() if c.get("foot")]
    if len(ankles) == 2:
        # the toes reach forward: the head stands over the ankles, not over the leg ends
        an.up = _unit(_unit(X[:, top] - 0.5 * (X[:, ankles[0]] + X[:, ankles[1]])).mean(axis=0))
    fwd, fwd_frames, evidence = _facing(tree, X, an.up, leg_chains, head, size, tails)
    arm_chains = {}
    for arm in arms:
        arm_chains[arm] = _arm_chain(tree, X, reach, arm, size, cls)
    if fwd is None:
        fwd = _facing_from_names(X, an.up, cls, arms, legs, tree)
        evidence = "names" if fwd is not None else "none"
    if fwd is None:
        # nothing says where the front is: keep the input's own convention (-Y forward for a
        # Z-up body, as Blender's) projected across the up axis
        guess = np.array([0.0, -1.0, 0.0]) if abs(an.up[1]) < 0.9 else np.array([0.0, 0.0, 1.0])
        fwd = guess
        an.warnings.append("the facing could not be found from the feet, knees, face or names: "
                           "left and right are a guess")
    an.forward = _unit(fwd - (fwd @ an.up) * an.up)
    an.left = np.cross(an.up, an.forward)
    an.facing_evidence = evidence
    side_conf = CONF_TOPOLOGY if evidence not in ("names", "none") else CONF_GUESSED

    if fwd_frames is None:
        fwd_frames = np.broadcast_to(an.forward, (len(X), 3))
    left_frames = np.cross(an.up, fwd_frames)

    def sides_of(pair, chains, what):
        """{limb: side} of two limbs: the geometry per frame (which limb lies to the
        body's left on that frame, in that frame's facing, so a body turning during the
        clip keeps its sides); names that give the two limbs opposite sides win unless
        the geometry says the other way on at least OVERWHELMING of the frames. Either
        way a disagreement is warned about, naming the evidence that won."""
        if len(pair) < 2:
            return {}
        a, b = pair
        lat = X[:, chains[a]] - X[:, chains[b]]
        a_left = float(np.mean(np.sum(lat * left_frames, axis=-1) > 0))
        geometry = {a: "L", b: "R"} if a_left > 0.5 else {a: "R", b: "L"}
        named = {}
        for limb in pair:
            s = {cls[i][1] for i in tree.subtree(limb) if cls[i] and cls[i][1]}
            if len(s) == 1:
                named[limb] = s.pop()
        if len(named) < 2 or named[a] == named[b] or named == geometry:
            return geometry
        against = a_left if named[a] == "R" else 1.0 - a_left
        if evidence != "none" and against >= OVERWHELMING:
            an.warnings.append(f"the {what}' names say the other side than the geometry on "
                               f"{against:.0%} of the frames ({evidence}): sides taken from the geometry")
            return geometry
        if evidence != "none":
            an.warnings.append(f"the {what}' names and the geometry ({evidence}, the other side on "
                               f"{against:.0%} of the frames) disagree: sides taken from the names")
        return named

    arm_side = sides_of(arms, {a: arm_chains[a]["hand"][0] for a in arms}, "arms")
    leg_side = sides_of(legs, {g: leg_chains[g]["end"] for g in legs}, "legs")

    # ---- roles
    def role(i, part, side=None, number=None, why=()):
        reasons = list(why)
        conf = side_conf if side else CONF_TOPOLOGY
        c = cls[i]
        if c is not None:
            same_part = c[0] == part or (part in FINGERS and c[0] in FINGERS) or \
                (part == "metacarpal" and c[0] in FINGERS) or \
                (part == "segment" and c[0] in ("upper_arm", "forearm", "thigh", "shin")) or \
                (part in ("hips", "spine") and c[0] in ("hips", "spine"))
            if same_part and (c[1] == side or side is None):
                conf = CONF_NAMED
                reasons.append(f"name agrees ({names[i]})")
            elif same_part and c[1] is not None and side is not None:
                conf = CONF_CONFLICT
                reasons.append(f"name says side {c[1]} ({names[i]}): geometry wins")
            elif c[0] != part:
                conf = min(conf, CONF_TOPOLOGY)
                reasons.append(f"name suggests {c[0]} ({names[i]})")
        an.roles[i] = Role(part, side, number, conf, reasons)

    role(hips, "hips", why=["named pelvis just above where the legs and the spine meet (Biped)"
                            if biped else "where the legs and the spine meet" if not an.legless
                            else "root of the spine (no legs)"])
    for i in an.above_hips:
        an.roles[i] = Role("root", None, None, CONF_TOPOLOGY, ["above the hips"])
    for k, i in enumerate(an.spine):
        role(i, "spine", number=k + 1, why=["between hips and chest" if i != chest
                                            else "chest: where the arms branch"])
    for k, i in enumerate(an.neck):
        role(i, "neck", number=k + 1, why=["carries the head, the arms leave it at the shoulders"
                                           if neck_borne else "between chest and head"])
    if head is not None:
        role(head, "head", why=["end of the neck chain"])
    for arm, chain in arm_chains.items():
        side = arm_side.get(arm)
        _arm_roles(an, tree, chain, side, role, X, size, cls, heads)
    for leg, chain in leg_chains.items():
        side = leg_side.get(leg)
        for part in ("hip_stub", "thigh", "shin", "foot", "toe"):
            for k, i in enumerate(chain.get(part, [])):
                role(i, part if k == 0 or part == "hip_stub" else "segment", side,
                     why=[f"leg chain ({part})", f"side from the facing ({evidence})"])
            bones = chain.get(part, [])
            if bones and part != "hip_stub":
                an.limbs[(side, part)] = bones[:1]
                if len(bones) > 1:
                    an.segments[(side, part)] = bones[1:]
    # everything else outside the body: helpers (the robot's IK feet and knee poles)
    body = {i for i, r in an.roles.items() if r.part != "root"}
    for i in range(n):
        if i in an.roles or i in an.helpers:
            continue
        if not any(a in body for a in tree.ancestors(i)) or i in named_helpers:
            an.helpers[i] = "outside the body tree (IK target, pole or control): left alone"
    for i, note in an.helpers.items():
        an.roles.setdefault(i, Role("helper", None, None, CONF_TOPOLOGY, [note]))
    _check_names(an, names, cls)
    return an


# ---------------------------------------------------------------------------------------
# geometry of branches

def _reaches(tree, X, size):
    """Per bone: the largest distance (fraction of size) from its parent's head to any
    point of its subtree, median over the frames of X (F, N, 3) (max over X's last frame
    too when it holds the rest tails)."""
    n = len(tree.parents)
    out = [0.0] * n
    for i in tree.order():
        p = tree.parents[i]
        if p < 0:
            continue
        sub = tree.subtree(i)
        d = np.linalg.norm(X[:, sub] - X[0, p][None, None], axis=-1).max(axis=1)
        out[i] = float(np.max(d) if len(X) == 2 else np.median(d)) / size
    return out


def _mirror_pair(tree, reach, cands):
    """The pair of candidates that are alike (reach, size, depth) and reach farthest: a
    pair of limbs, or None."""
    best = None
    for a_i, a in enumerate(cands):
        for b in cands[a_i + 1:]:
            mismatch = (abs(reach[a] - reach[b]) / max(reach[a], reach[b], 1e-9)
                        + abs(tree.size[a] - tree.size[b]) / max(tree.size[a], tree.size[b])
                        + abs(tree.depth[a] - tree.depth[b]) / max(tree.depth[a], tree.depth[b])) / 3
            score = (1.0 - mismatch) * (min(reach[a], reach[b]) + 1e-3)
            if best is None or score > best[0]:
                best = (score, (a, b))
    return best[1] if best else None


def _alike(tree, reach, a, b):
    """Two branches a pair of limbs could be: similar reach and bone count."""
    return min(reach[a], reach[b]) >= 0.6 * max(reach[a], reach[b]) and \
        min(tree.size[a], tree.size[b]) >= 0.75 * max(tree.size[a], tree.size[b])


def _junctions(tree, junctions, long_, reach):
    """(hips, chest) among bones with ≥ 2 long branches; hips None for an upper body.

    The hips: the top-most junction with a branch holding another junction (the spine,
    with the chest) and two other branches alike (the legs); the chest: the top-most
    junction in that branch. Without such a bone, the top-most junction is the chest.
    """
    for j in junctions:            # breadth-first: top-most first
        branches = long_(j)
        if len(branches) < 3:
            continue
        for spine in branches:
            inner = set(tree.subtree(spine))
            below = [k for k in junctions if k in inner]
            pair = _mirror_pair(tree, reach, [c for c in branches if c != spine])
            if below and pair and _alike(tree, reach, *pair):
                return j, min(below, key=lambda k: len(tree.ancestors(k)))
    return None, (junctions[0] if junctions else None)


def _at_shoulders(X, up, hips, chest, arms):
    """True when the head of the bone `chest` lies within NECK_BORNE of the hips → arm
    roots height below the heads of the arm branches' first bones `arms` (or above them),
    measured along `up` over the frames of X (F, N, 3): a neck the arms hang from, where a
    chest sits well below the shoulders."""
    def height(i):
        return float(np.median((X[:, i] - X[:, hips]) @ up))
    shoulders = np.mean([height(a) for a in arms])
    return height(chest) >= shoulders - NECK_BORNE * shoulders


def _main_chain(tree, reach, i):
    """Bones from i down, always into the child with the largest reach, to a leaf."""
    chain = [i]
    while tree.children[i]:
        i = max(tree.children[i], key=lambda c: (reach[c], tree.size[c]))
        chain.append(i)
    return chain


def _lowest_end(tree, X, branch, top):
    """The bone of a branch farthest from `top` (the foot end of a leg)."""
    sub = tree.subtree(branch)
    return max(sub, key=lambda i: float(np.median(np.linalg.norm(X[:, i] - X[:, top], axis=-1))))


def _distinct(X, chain, size):
    """The bones of a chain whose head is not on its predecessor's head (a joint of its own)."""
    out = []
    for i in chain:
        if not out or np.median(np.linalg.norm(X[:, i] - X[:, out[-1]], axis=-1)) > COINCIDENT * size:
            out.append(i)
    return out


def _arc(X, joints):
    """Arc length along a list of joints (median bone lengths over the frames), (len,)."""
    seg = np.median(np.linalg.norm(np.diff(X[:, joints], axis=1), axis=-1), axis=0)
    return np.concatenate([[0.0], np.cumsum(seg)])


def _bends(X, joints):
    """How much the bend angle (rad) at each inner joint of a list of joints changes over
    the frames of X (F, ·, 3): a real elbow or knee flexes, a twist split never does (0 for
    the ends and for a single frame)."""
    out = [0.0]
    for a, b, c in zip(joints, joints[1:], joints[2:]):
        u = _unit(X[:, b] - X[:, a])
        v = _unit(X[:, c] - X[:, b])
        out.append(float(np.ptp(np.arccos(np.clip(np.sum(u * v, axis=-1), -1, 1)))))
    return out + [0.0]


# ---------------------------------------------------------------------------------------
# legs

def _leg_chain(tree, X, reach, leg, up, size, tails, cls):
    """{'hip_stub', 'thigh', 'shin', 'foot', 'toe': bone lists, 'end': bone}: the bones of
    one leg branch, grouped by the joint they start at (extra bones of a split thigh or
    shin follow the first)."""
    chain = _main_chain(tree, reach, leg)
    out = {"end": chain[-1]}
    pts = X[:, chain]                                             # (F, m, 3)
    if tails is not None and len(X) == 1 and not tree.children[chain[-1]]:
        pts = np.concatenate([pts, tails[chain[-1]][None, None]], axis=1)   # the leaf's tail
    # heights above the chain's lowest point of each frame (median over the frames): a foot
    # lifted on many of the frames looked at still hangs at the chain's low end
    rise = pts @ up
    height = np.median(rise - rise.min(axis=1, keepdims=True), axis=0)
    low = float(height.min())
    # hip stub: a bone much shorter than the rest of the leg below it (CMU LHipJoint,
    # MakeHuman pelvis.L); a thigh is as long as the shin
    k = 0
    if len(chain) > 2 and not (cls[chain[0]] and cls[chain[0]][0] == "thigh"):
        seg = np.median(np.linalg.norm(pts[:, 1] - pts[:, 0], axis=-1))
        k = int(seg < 0.3 * float(height[1] - low))
    out["hip_stub"] = chain[:k]
    rest = list(range(k, len(chain)))
    joints = [j for j in _distinct(X, [chain[j] for j in rest], size)]
    idx = [chain.index(j) for j in joints]                  # positions in chain / pts
    n_pts = pts.shape[1]
    length = float(height[idx[0]] - low)
    # ankle: the first joint near the floor (a quarter of the leg's height)
    ankle = next((a for a in range(2, len(idx)) if height[idx[a]] - low < 0.25 * length), None)
    named = {}
    for a, j in enumerate(idx):
        if cls[chain[j]] and a > 0:
            named.setdefault(cls[chain[j]][0], a)
    # a joint named as the foot settles it when it is low enough to be one (a clip whose
    # foot is lifted on most of the frames looked at leaves the ankle high, its toe low)
    if named.get("foot", 0) >= 2 and height[idx[named["foot"]]] - low < 0.4 * length:
        ankle = named["foot"]
    if ankle is None:
        knee = named.get("shin", 1 if len(idx) > 1 else None)
        if len(idx) > 2 and "shin" not in named:
            pts_i = idx + ([n_pts - 1] if n_pts > len(chain) else [])
            knee = _pick_middle(pts, pts_i, 0, len(pts_i) - 1, list(range(1, len(idx))))
        groups = {"thigh": idx[:knee], "shin": idx[knee:] if knee is not None else []}
    else:
        inner = list(range(1, ankle))
        knee = named["shin"] if named.get("shin") in inner else _pick_middle(pts, idx, 0, ankle, inner)
        groups = {"thigh": idx[:knee], "shin": idx[knee:ankle], "foot": idx[ankle:ankle + 1],
                  "toe": idx[ankle + 1:ankle + 2]}
    # bones on the same point as a joint (zero-length offsets) go with that joint
    for part, js in groups.items():
        bones = []
        for j in js:
            stop = next((x for x in idx if x > j), len(chain))
            bones.extend(chain[j:stop] if part != "toe" else chain[j:j + 1])
        out[part] = bones
    return out


def _pick_middle(X, joints, first, last, inner):
    """The index in `joints` (indices into X's second axis, X (F, ·, 3)) of the elbow or
    knee among `inner`: where the chain bends most over the frames, else the joint nearest
    the middle of the arc length from joints[first] to joints[last]."""
    if not inner:
        return last
    bends = _bends(X, joints)
    best = max(inner, key=lambda j: bends[j])
    if bends[best] > math.radians(10):
        return best
    s = _arc(X, joints)
    mid = s[first] + 0.53 * (s[last] - s[first])     # the upper segment is a bit longer
    return min(inner, key=lambda j: abs(s[j] - mid))


# ---------------------------------------------------------------------------------------
# arms and hands

def _arm_chain(tree, X, reach, arm, size, cls):
    """{'upper': bones above the hand, 'hand': [hand bones], 'fan': fan-out bone,
    'fingers': [finger paths]} for one arm branch."""
    chain = [arm]
    i = arm
    while True:
        kids = [c for c in tree.children[i] if not _twist_leaf(tree, X, i, c, size)]
        if len(kids) != 1:
            break
        i = kids[0]
        chain.append(i)
    fan = chain[-1]
    kids = [c for c in tree.children[fan] if not _twist_leaf(tree, X, fan, c, size)]
    above = chain[:-1]
    hand = [fan]
    if kids and above:
        d_kids = np.median([np.linalg.norm(X[:, c] - X[:, fan], axis=-1).mean() for c in kids])
        # the forearm ends at the fan; a forearm split in line (for twist) counts whole
        start = len(above) - 1
        while start > 0 and _on_segment(X, above[start - 1], above[start], fan, size):
            start -= 1
        d_prev = np.linalg.norm(X[:, fan] - X[:, above[start]], axis=-1).mean()
        if d_kids > 0.6 * d_prev:
            # the fan-out bone is arm-long: a forearm whose children are the hand's palm
            # bones (those starting at the common wrist point) and fingers hanging from it
            wrist = np.median([X[:, c] for c in kids], axis=0)
            hand = [c for c in kids if np.median(np.linalg.norm(X[:, c] - wrist, axis=-1))
                    < 3 * COINCIDENT * size]
            if not hand:
                hand = [fan]
            else:
                above = chain
    twists = [c for b in chain for c in tree.children[b] if _twist_leaf(tree, X, b, c, size)]
    return {"upper": above, "hand": hand, "fan": fan, "kids": kids, "twists": twists}


FOREARM_TO_UPPER_ARM = 0.85   # forearm (elbow → wrist) over upper arm length, adult mean


def _arm_split(X, pts):
    """(upper arm, forearm) positions in pts, a list of distinct arm joints from the chest
    side to the wrist (last): the split whose forearm/upper-arm length ratio is nearest the
    human one, favouring a joint that bends in the frames as the elbow and a short first
    bone as a shoulder girdle."""
    n = len(pts) - 1                    # bones above the wrist
    if n <= 2:
        return 0, min(1, n - 1)
    s = _arc(X, pts)
    seg = np.diff(s)
    bends = _bends(X, pts)
    bent = max(bends[1:-1]) > math.radians(10)
    best = None
    for u in range(0, min(3, n - 1)):
        for e in range(u + 1, n):
            upper, fore = s[e] - s[u], s[n] - s[e]
            cost = abs(math.log(max(fore, 1e-9) / max(upper, 1e-9) / FOREARM_TO_UPPER_ARM))
            if u == 0 and seg[0] < 0.6 * seg[1]:
                cost += 1.0             # a short first bone is a clavicle
            if u > 0 and s[u] > upper:
                cost += 1.0             # a girdle longer than the upper arm is none
            if bent and bends[e] < math.radians(10):
                cost += 1.0             # the arm bends elsewhere
            if best is None or cost < best[0]:
                best = (cost, u, e)
    return best[1], best[2]


def _on_segment(X, a, p, b, size):
    """True when joint p lies between joints a and b on their line (first frame of X)."""
    ab = X[0, b] - X[0, a]
    t = float((X[0, p] - X[0, a]) @ ab) / max(float(ab @ ab), 1e-12)
    return 0.05 < t < 0.95 and np.linalg.norm(X[0, p] - (X[0, a] + t * ab)) < COINCIDENT * size


def _twist_leaf(tree, X, parent, child, size):
    """A leaf child lying on its parent's segment, along it: a twist/roll helper bone."""
    if tree.children[child]:
        return False
    others = [c for c in tree.children[parent] if c != child]
    if not others:
        return False
    nxt = max(others, key=lambda c: tree.size[c])
    return _on_segment(X, parent, child, nxt, size)


def _arm_roles(an, tree, chain, side, role, X, size, cls, rest):
    for t in chain["twists"]:
        an.helpers[t] = "twist bone along the limb: left alone (follows its parent)"
    above = chain["upper"]
    joints = _distinct(X, above, size)
    named = {cls[i][0]: i for i in reversed(above) if cls[i] and cls[i][0] in
             ("shoulder", "upper_arm", "forearm")}
    if "upper_arm" in named and "forearm" in named and named["upper_arm"] in joints \
            and named["forearm"] in joints:
        up_i, fo_i = joints.index(named["upper_arm"]), joints.index(named["forearm"])
        why = "arm chain (elbow from names)"
    else:
        up_i, fo_i = _arm_split(X, joints + [chain["hand"][0]])
        why = "arm chain (from geometry)"
    parts = {"shoulder": joints[:up_i], "upper_arm": joints[up_i:fo_i], "forearm": joints[fo_i:]}
    gaps = [i for i in above if i not in joints]
    if gaps:
        # zero-length bones (CMU's shoulder stubs): with the joint they sit on
        for i in gaps:
            prev = max((j for j in joints if above.index(j) < above.index(i)), default=None,
                       key=above.index)
            for part, js in parts.items():
                if prev in js:
                    js.insert(js.index(prev) + 1, i)
    for part, bones in parts.items():
        if not bones:
            continue
        for k, i in enumerate(bones):
            role(i, part if k == 0 else "segment", side, why=[why, "side from the facing"])
        an.limbs[(side, part)] = bones[:1]
        if len(bones) > 1:
            an.segments[(side, part)] = bones[1:]
        if part == "shoulder" and len(bones) > 1:
            an.limbs[(side, part)] = bones[:1]
    for h in chain["hand"]:
        role(h, "hand", side, why=["where the arm fans out into the fingers" if chain["kids"]
                                   else "end of the arm chain"])
    an.limbs[(side, "hand")] = list(chain["hand"])
    _finger_roles(an, tree, chain, side, role, X, size, cls, rest)


def _finger_roles(an, tree, chain, side, role, X, size, cls, rest):
    hand_bones = chain["hand"]
    # every path from a hand bone (or the forearm fan-out) to a leaf is one finger
    roots = [c for h in hand_bones for c in tree.children[h]] + \
        [c for c in chain["kids"] if c not in hand_bones and hand_bones != [chain["fan"]]]
    paths = []
    for r in roots:
        for leaf_path in _leaf_paths(tree, r):
            paths.append([b for b in leaf_path if b not in an.helpers])
    paths = [p for p in paths if p]
    if not paths:
        return
    wrist = np.median([X[:, h] for h in hand_bones], axis=0)          # (F, 3)
    count = {}
    for p in paths:
        for b in p:
            count[b] = count.get(b, 0) + 1
    fingers = [{"shared": [b for b in p if count[b] > 1], "phal": [b for b in p if count[b] == 1]}
               for p in paths]
    fingers = [f for f in fingers if f["phal"]]
    # which finger is which: in the rest pose when it shows a hand (motion curls fingers
    # and swings the thumb across the palm), else over the frames
    shape = rest[None]
    spread = [rest[f["phal"][-3:]].mean(axis=0) for f in fingers]
    if len(spread) < 2 or np.ptp(spread, axis=0).max() < COINCIDENT * size:
        shape = X
    names = _name_fingers(fingers, shape, cls)
    for f, name in zip(fingers, names):
        # metacarpals: named so, on the wrist point, or a first bone well inside the palm
        # (not the thumb's: its first bone is the thumb's own first joint in every rig)
        phal, meta = f["phal"], []
        # arc length from the wrist along the chain (m): each step's length per frame, then
        # its median over the frames, so the hand's travel through the world (one hand
        # moving, the other still) does not change it and both hands decide alike
        pts = np.concatenate([wrist[:, None], X[:, phal]], axis=1)           # (F, k + 1, 3)
        steps = np.median(np.linalg.norm(np.diff(pts, axis=1), axis=-1), axis=0)
        arc = np.concatenate([[0.0], np.cumsum(steps)])
        while len(phal) > 1:
            b, k = phal[0], len(meta)
            named = cls[b] and cls[b][0] in FINGERS and cls[b][2] == 0
            inside = len(phal) >= (4 if name == "thumb" else 3) and arc[k + 1] < 0.35 * arc[-1]
            if not (named or arc[k + 1] < COINCIDENT * size or inside):
                break
            meta.append(phal.pop(0))
        f["meta"] = meta
    for f, name in zip(fingers, names):
        if name is None or (side, name) in an.fingers:
            continue
        an.fingers[(side, name)] = f["phal"]
        for k, b in enumerate(f["phal"]):
            role(b, name, side, k + 1, why=["finger chain proximal → distal"])
        metas = [b for b in f["shared"] if b not in an.roles and name != "thumb"] + f["meta"]
        if metas:
            an.metacarpals[(side, name)] = metas
            for b in metas:
                role(b, "metacarpal", side, why=[f"between the hand and the {name}"])


def _leaf_paths(tree, r):
    """Every path from bone r down to a leaf, in tree order."""
    out, stack = [], [[r]]
    while stack:
        p = stack.pop()
        kids = tree.children[p[-1]]
        if not kids:
            out.append(p)
        for c in kids:
            stack.append(p + [c])
    return out


def _off_line(points, k):
    """How far point k lies off the line through the other points (their mean for fewer
    than two), relative to their own scatter about it: the thumb's base among knuckles."""
    others = np.delete(points, k, 0)
    c = others.mean(0)
    if len(others) < 2:
        return float(np.linalg.norm(points[k] - c))
    d = np.linalg.svd(others - c)[2][0]
    resid = lambda v: np.linalg.norm(v - np.outer(v @ d, d), axis=-1)  # noqa: E731
    return float(resid((points[k] - c)[None])[0] / (resid(others - c).mean() + 1e-3 * np.ptp(others)))


def _name_fingers(fingers, X, cls):
    """Finger names for each finger dict: from names where they say, else the thumb is the
    chain whose base sits farthest from the others', the rest ordered from it."""
    out = [None] * len(fingers)
    used = set()
    for k, f in enumerate(fingers):
        votes = [cls[b][0] for b in f["phal"] if cls[b] and cls[b][0] in FINGERS]
        if votes:
            name = max(set(votes), key=votes.count)
            if name not in used:
                out[k] = name
                used.add(name)
    free = [k for k in range(len(fingers)) if out[k] is None]
    if not free:
        return out
    # where each finger chain lies on average (bases alone: metacarpals all start at the wrist)
    # (its last three bones: a metacarpal, still part of the chain here, sits in the palm)
    base = np.array([X[:, f["phal"][-3:]].mean(axis=(0, 1)) for f in fingers])
    if "thumb" not in used and len(fingers) >= 2:
        # off the knuckle line; of two chains (a thumb and one block of fingers, as CMU's)
        # the one with fewer bones
        cand = max(free, key=lambda k: _off_line(base, k)) if len(fingers) > 2 else \
            min(free, key=lambda k: (len(fingers[k]["phal"]), k))
        out[cand] = "thumb"
        used.add("thumb")
        free.remove(cand)
    thumb = out.index("thumb") if "thumb" in out else None
    rest = [f for f in FINGERS[1:] if f not in used]
    if len(free) == 1 and "middle" in rest and len(fingers) <= 2:
        out[free[0]] = "middle"         # one block for all fingers (CMU)
        return out
    if len(free) >= 2:
        # along the knuckle line, starting at the end nearer the thumb
        c = base[free].mean(0)
        d = np.linalg.svd(base[free] - c)[2][0]
        proj = {k: float((base[k] - c) @ d) for k in free}
        free.sort(key=proj.get)
        if thumb is not None:
            # the index is the end finger nearer the thumb (whole chains: the thumb's base
            # may sit anywhere along the palm)
            t = base[thumb]
            if np.linalg.norm(base[free[-1]] - t) < np.linalg.norm(base[free[0]] - t):
                free.reverse()
    for k, name in zip(free, rest):
        out[k] = name
    return out


# ---------------------------------------------------------------------------------------
# facing

def _facing(tree, X, up, leg_chains, head, size, tails):
    """(forward (3,) or None, per-frame forward (F, 3) or None, evidence): the feet, else
    the knees, else the face. The forward is the median over the frames; the per-frame
    forward follows a body that turns during the clip (unit vectors; frames where the
    evidence is too weak to say take the median's)."""
    def found(v, per, weak, evidence):
        per = per - (per @ up)[:, None] * up
        fwd = _unit(v)
        strong = np.linalg.norm(per, axis=-1) > weak
        return fwd, np.where(strong[:, None], _unit(per), fwd), evidence

    feet, feet_f = [], []
    for chain in leg_chains.values():
        foot, toe = chain.get("foot"), chain.get("toe")
        if foot and toe:
            v = X[:, toe[0]] - X[:, foot[0]]
            feet.append(np.median(v, axis=0))
            feet_f.append(v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12))
    if len(feet) == 2:
        f = np.sum([_unit(v - (v @ up) * up) for v in feet], axis=0)
        if np.linalg.norm(f) > 1.0:
            # per frame: each foot's direction, weighted by how level it lies (a foot on
            # its toes says little about the facing)
            return found(f, np.sum(feet_f, axis=0), 0.5, "feet")
    knees = []
    for chain in leg_chains.values():
        thigh, shin = chain.get("thigh"), chain.get("shin")
        if not (thigh and shin):
            continue
        hip, knee = X[:, thigh[0]], X[:, shin[0]]
        if chain.get("foot"):
            ankle = X[:, chain["foot"][0]]
        elif tails is not None and len(X) == 1:
            ankle = tails[shin[-1]][None]
        else:
            continue
        line = _unit(ankle - hip)
        knees.append(knee - hip - np.sum((knee - hip) * line, axis=-1, keepdims=True) * line)
    if len(knees) == 2:
        per = np.sum(knees, axis=0)
        k = per.mean(axis=0)
        k = k - (k @ up) * up
        if np.linalg.norm(k) > 0.01 * size:
            return found(k, per, 0.01 * size, "knees")
    if head is not None:
        face = tree.subtree(head)[1:]
        if len(face) >= 3:
            per = X[:, face].mean(axis=1) - X[:, head]
            v = np.median(per, axis=0)
            v = v - (v @ up) * up
            if np.linalg.norm(v) > 0.01 * size:
                return found(v, per, 0.01 * size, "face")
    return None, None, "none"


def _facing_from_names(X, up, cls, arms, legs, tree):
    """Forward from named left/right limbs (left × up), or None."""
    for pair in (arms, legs):
        if len(pair) < 2:
            continue
        side = {}
        for b in pair:
            s = [cls[i][1] for i in tree.subtree(b) if cls[i] and cls[i][1]]
            if s and len(set(s)) == 1:
                side[b] = s[0]
        if len(set(side.values())) == 2:
            left = next(b for b in pair if side[b] == "L")
            right = next(b for b in pair if side[b] == "R")
            lat = np.median(X[:, left] - X[:, right], axis=0)
            return np.cross(lat, up)
    return None


def _check_names(an, names, cls):
    wrong = [names[i] for i, r in an.roles.items() if "geometry wins" in " ".join(r.reasons)]
    if wrong:
        an.warnings.append(f"{len(wrong)} bone names say the other side than the geometry "
                           f"(e.g. {', '.join(wrong[:3])}): sides taken from the geometry")


# ---------------------------------------------------------------------------------------
# pairing two bodies

def spread(targets, sources, anchor="first"):
    """One-to-one pairs (target, source) of two ordered chains (bone indices, proximal
    first): both ends are matched and the longer chain is thinned evenly, so a 2-joint
    chain onto a 3-joint one maps joint 1 and the last; a chain of one bone pairs with the
    `anchor` end ('first' or 'last') of the other."""
    n, m = len(targets), len(sources)
    if n == 0 or m == 0:
        return []
    if n == 1 or m == 1:
        k = 0 if anchor == "first" else -1
        return [(targets[k], sources[k])]
    if n <= m:
        return [(targets[k], sources[round(k * (m - 1) / (n - 1))]) for k in range(n)]
    return [(targets[round(k * (n - 1) / (m - 1))], sources[k]) for k in range(m)]


def pair(source, target):
    """Pair two Anatomy results role by role: list of (target bone, source bone,
    confidence), confidence = the lower of the two roles'. Sides are anatomical on both
    (found from each body's own facing), so a left limb always drives a left limb; chains
    of different length map their ends (`spread`); several target hand bones (palms) all
    follow the one source hand; helpers and extra in-line bones stay unmapped.
    """
    out = []

    def add(t, s):
        out.append((t, s, min(target.roles[t].confidence, source.roles[s].confidence)))

    add(target.hips, source.hips)
    for chain_t, chain_s, anchor in ((target.spine, source.spine, "last"),
                                     (target.neck, source.neck, "first")):
        for t, s in spread(chain_t, chain_s, anchor):
            add(t, s)
    if target.head is not None and source.head is not None:
        add(target.head, source.head)
    for side in SIDES:
        for part in ("shoulder", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe"):
            ts, ss = target.limbs.get((side, part)), source.limbs.get((side, part))
            if ts and ss:
                for t in ts:
                    add(t, ss[0])
        for f in FINGERS:
            ft, fs = target.fingers.get((side, f)), source.fingers.get((side, f))
            if ft and fs:
                # every target joint is driven: a one-bone source finger (CMU) drives the
                # whole target finger as one piece
                for t, s in (spread(ft, fs) if len(fs) > 1 else [(t, fs[0]) for t in ft]):
                    add(t, s)
            mt, ms = target.metacarpals.get((side, f)), source.metacarpals.get((side, f))
            if mt and ms:
                add(mt[-1], ms[-1])
    return out


def map_warnings(source, target, source_name="source", target_name="target"):
    """Warnings (list of str) a bone map between two Anatomy results must carry: a body read
    from its shape alone, a facing (so left and right) or up axis that is a guess, names
    that contradict the geometry."""
    out = []
    for an, label in ((source, source_name), (target, target_name)):
        if an.topology_only():
            out.append(f"'{label}': bone map from the skeleton's shape alone (no bone name "
                       f"confirmed a role)")
        out.extend(f"'{label}': {w}" for w in an.warnings)
    return out


def sides_crossed(source, target, pairs):
    """Target bones whose anatomical side differs from their source bone's: list of
    (target, source) — a map like this drives the left arm with the right one."""
    bad = []
    for t, s, *_ in pairs:
        rt, rs = target.roles.get(t), source.roles.get(s)
        if rt and rs and rt.side and rs.side and rt.side != rs.side:
            bad.append((t, s))
    return bad

"""A synthetic humanoid skeleton for the skeleton-analysis tests, in any pose, frame and
naming convention.

Built in Blender's convention (Z up, facing -Y, anatomical left at +X, metres), then turned
by a rotation and scaled, so a test knows the true up, facing and sides. Joint names follow
a convention ('blender', 'biped', 'none' = Node_<n>, 'swapped' = Blender names with L and R
exchanged); `true_role[i]` is (part, side, number) for every bone whatever its name.
"""
import numpy as np
from scipy.spatial.transform import Rotation

FINGER_Y = {"thumb": -0.035, "index": -0.025, "middle": -0.008, "ring": 0.008, "pinky": 0.024}
PHALANX = {2: (0.045, 0.035), 3: (0.045, 0.028, 0.022), 4: (0.045, 0.028, 0.022, 0.015)}


class Humanoid:
    """names, parents, heads (N, 3), tails (N, 3), true_role {i: (part, side, number)},
    up, forward, left (3,); pose(local_rotvecs) → posed heads (N, 3)."""

    def __init__(self, finger_joints=3, metacarpals=False, biped=False, ik_helpers=False,
                 twist=False, head_end=False, legs=True, split_arm=False):
        self.names, self.parents, self.heads, self.true_role = [], [], [], {}

        def add(name, parent, pos, role):
            self.names.append(name)
            self.parents.append(parent)
            self.heads.append(np.array(pos, dtype=float))
            self.true_role[len(self.names) - 1] = role
            return len(self.names) - 1

        root = add("Bip01", -1, (0, 0, 1.0), ("root", None, None)) if biped else -1
        hips = add("spine" if not biped else "Bip01 Pelvis", root, (0, 0, 1.0), ("hips", None, None))
        spine = [hips]
        for k, z in enumerate((1.1, 1.25, 1.38)):
            name = f"spine.{k + 1:03d}" if not biped else ("Bip01 Spine" + ("" if k == 0 else str(k)))
            spine.append(add(name, spine[-1], (0, 0, z), ("spine", None, k + 1)))
        neck = add("spine.004" if not biped else "Bip01 Neck", spine[-1], (0, 0, 1.5), ("neck", None, 1))
        head = add("spine.005" if not biped else "Bip01 Head", neck, (0, 0, 1.6), ("head", None, None))
        if head_end:
            add("HeadTop_End", head, (0, 0, 1.78), ("helper", None, None))
        for side, s in (("L", 1.0), ("R", -1.0)):
            bn = (lambda part: f"{part}.{side}") if not biped else \
                (lambda part: f"Bip01 {side} {part}")
            sh = add(bn("shoulder" if not biped else "Clavicle"), spine[-1], (s * 0.03, 0, 1.45),
                     ("shoulder", side, None))
            up = add(bn("upper_arm" if not biped else "UpperArm"), sh, (s * 0.18, 0, 1.45),
                     ("upper_arm", side, None))
            if split_arm:
                up = add(bn("upper_arm_split"), up, (s * 0.32, 0, 1.45), ("segment", side, None))
            fo = add(bn("forearm" if not biped else "Forearm"), up, (s * 0.46, 0, 1.45),
                     ("forearm", side, None))
            hand = add(bn("hand" if not biped else "Hand"), fo, (s * 0.70, 0, 1.45), ("hand", side, None))
            if twist:
                add(bn("forearm_twist"), fo, (s * 0.58, 0, 1.45), ("helper", None, None))
            for f, y in FINGER_Y.items():
                parent = hand
                x = s * 0.79 if f != "thumb" else s * 0.73
                if metacarpals and f != "thumb":
                    parent = add(bn(f"meta_{f}") if not biped else f"Bip01 {side} Meta{f}", hand,
                                 (s * 0.72, y * 0.6, 1.45), ("metacarpal", side, None))
                z = 1.45 if f != "thumb" else 1.43
                lengths = PHALANX[finger_joints if f != "thumb" else 3]
                for k, length in enumerate(lengths):
                    yy = y if f != "thumb" else y - 0.02 * k     # the thumb points forward
                    name = bn(f"f_{f}.{k + 1:02d}") if not biped else \
                        f"Bip01 {side} Finger{list(FINGER_Y).index(f)}{'' if k == 0 else k}"
                    parent = add(name, parent, (x, yy, z), (f, side, k + 1))
                    x += s * length
            if legs:
                th = add(bn("thigh"), hips if not biped else spine[1], (s * 0.1, 0, 0.95), ("thigh", side, None))
                sn = add(bn("shin"), th, (s * 0.1, -0.01, 0.52), ("shin", side, None))
                ft = add(bn("foot"), sn, (s * 0.1, 0.0, 0.08), ("foot", side, None))
                add(bn("toe"), ft, (s * 0.1, -0.13, 0.02), ("toe", side, None))
                if ik_helpers:
                    add(f"IK_foot.{side}", root if root >= 0 else -1, (s * 0.1, 0.0, 0.08), ("helper", None, None))
                    add(f"knee_pole.{side}", root if root >= 0 else -1, (s * 0.1, -0.5, 0.52), ("helper", None, None))
        self.heads = np.array(self.heads)
        self.tails = self.heads.copy()
        for i in range(len(self.names)):
            kids = [c for c, p in enumerate(self.parents) if p == i]
            if kids:
                self.tails[i] = self.heads[kids[-1]]
            else:
                p = self.parents[i]
                d = self.heads[i] - self.heads[p] if p >= 0 else np.array([0, 0, 0.1])
                self.tails[i] = self.heads[i] + 0.5 * d if np.linalg.norm(d) > 1e-9 else self.heads[i] + [0, 0, 0.05]
        self.up, self.forward, self.left = np.array([0, 0, 1.0]), np.array([0, -1.0, 0]), np.array([1.0, 0, 0])

    def pose(self, rotvecs):
        """Posed heads (N, 3): rotvecs {bone index: rotation vector (3,) in rad, world axes at
        rest} applied as local rotations down the hierarchy."""
        n = len(self.names)
        world_r = [None] * n
        out = np.zeros((n, 3))
        for i in range(n):
            p = self.parents[i]
            local = Rotation.from_rotvec(rotvecs.get(i, np.zeros(3)))
            if p < 0:
                world_r[i] = local
                out[i] = self.heads[i]
            else:
                world_r[i] = world_r[p] * local
                out[i] = out[p] + world_r[p].apply(self.heads[i] - self.heads[p])
        return out

    def index(self, part, side=None, number=None):
        return next(i for i, r in self.true_role.items() if r == (part, side, number))

    def walk(self, frames, rng):
        """(frames, N, 3) posed heads: elbows and knees bending, arms swinging."""
        out = []
        for _ in range(frames):
            rv = {}
            for side, s in (("L", 1.0), ("R", -1.0)):
                rv[self.index("forearm", side)] = [0, 0, s * rng.uniform(0.2, 1.5)]
                rv[self.index("upper_arm", side)] = [0, s * rng.uniform(0.3, 1.0), 0]
                if ("thigh", side, None) in self.true_role.values():
                    rv[self.index("thigh", side)] = [rng.uniform(-0.5, 0.5), 0, 0]
                    rv[self.index("shin", side)] = [rng.uniform(-1.2, 0.0), 0, 0]
            out.append(self.pose(rv))
        return np.array(out)

    def renamed(self, convention):
        """Names in another convention: 'none' (Node_<n>) or 'swapped' (L ↔ R)."""
        if convention == "none":
            return [f"Node_{k}" for k in range(len(self.names))]
        if convention == "swapped":
            return [n.replace(".L", ".#").replace(".R", ".L").replace(".#", ".R") for n in self.names]
        raise ValueError(convention)


def transform(points, rotation, scale=1.0, offset=(0.0, 0.0, 0.0)):
    """points (..., 3) turned by a scipy Rotation, scaled and moved."""
    return scale * rotation.apply(np.asarray(points).reshape(-1, 3)).reshape(np.shape(points)) + offset


def classify(name):
    """A small name classifier in the shape the bone map's has: (part, side, number) or None."""
    import re
    side = None
    m = re.search(r"\.(L|R)$", name) or re.search(r"Bip01 (L|R) ", name)
    if m:
        side = m.group(1)
    core = re.sub(r"\.(L|R)$|^Bip01 (L |R )?", "", name).lower()
    if core in ("pelvis",):
        return ("hips", None, None)
    for word, part in (("clavicle", "shoulder"), ("shoulder", "shoulder"), ("upper_arm", "upper_arm"),
                       ("upperarm", "upper_arm"), ("forearm", "forearm"), ("hand", "hand"),
                       ("thigh", "thigh"), ("shin", "shin"), ("foot", "foot"), ("toe", "toe")):
        if core == word:
            return (part, side, None)
    m = re.fullmatch(r"f_(\w+)\.(\d+)", core)
    if m and m.group(1) in FINGER_Y:
        return (m.group(1), side, int(m.group(2)))
    if core.startswith("spine"):
        return ("spine", None, None)
    if core == "head":
        return ("head", None, None)
    return None

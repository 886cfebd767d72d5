"""Skeleton understanding from geometry: up axis, facing, sides, chains, fingers, helpers.

Every case is a synthetic humanoid whose true roles are known, turned to a random frame
and scale; the analysis must find the same body whatever the names say.
"""

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from humanoid import Humanoid, classify, transform

from solver.core import skeleton


def _angle(a, b):
    """Angle in degrees between unit vectors."""
    return float(np.degrees(np.arccos(np.clip(a @ b, -1.0, 1.0))))


def _turned(h, seed, scale=1.0, poses=None):
    rot = Rotation.random(random_state=seed)
    heads = transform(h.heads, rot, scale)
    tails = transform(h.tails, rot, scale)
    posed = None if poses is None else transform(poses, rot, scale)
    return rot, heads, tails, posed


def _roles_match(h, an):
    """Bone indices whose found role differs from the true one (helpers: both helpers)."""
    wrong = []
    for i, (part, side, number) in h.true_role.items():
        r = an.roles.get(i)
        if r is None:
            wrong.append((h.names[i], "no role"))
        elif part == "helper" or r.part == "helper":
            if part != r.part:
                wrong.append((h.names[i], r.part))
        elif (r.part, r.side) != (part, side) or (part in skeleton.FINGERS and r.number != number):
            wrong.append((h.names[i], (r.part, r.side, r.number)))
    return wrong


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("convention", ["blender", "none", "swapped"])
def test_any_frame_any_names_gives_the_true_body(seed, convention):
    h = Humanoid()
    rot, heads, tails, _ = _turned(h, seed, scale=[1.0, 100.0, 0.01][seed % 3])
    names = h.names if convention == "blender" else h.renamed(convention)
    an = skeleton.analyse(names, h.parents, heads, tails, classify=classify)
    assert _angle(an.up, rot.apply(h.up)) < 1e-3
    assert _angle(an.forward, rot.apply(h.forward)) < 1e-3
    assert _angle(an.left, rot.apply(h.left)) < 1e-3
    assert an.facing_evidence == "feet"
    assert _roles_match(h, an) == []
    assert an.topology_only() == (convention == "none")
    if convention == "swapped":
        assert any("other side" in w for w in an.warnings)
        assert all(an.roles[i].confidence < 1.0 for i in an.limbs[("L", "hand")])
    else:
        assert an.warnings == []


def test_upside_down_rest_with_motion_frames():
    """Generated BVH clips stand head down in their file axes: the frames decide."""
    h = Humanoid()
    rng = np.random.default_rng(3)
    flip = Rotation.from_euler("x", 180, degrees=True)
    poses = transform(h.walk(8, rng), flip)
    an = skeleton.analyse(h.names, h.parents, transform(h.heads, flip), poses=poses)
    assert an.up @ np.array([0, 0, -1.0]) > 0.99
    assert an.left @ np.array([1.0, 0, 0]) > 0.99      # a half turn keeps the body's handedness
    assert an.head == h.index("head") and an.hips == h.index("hips")


@pytest.mark.parametrize("joints", [2, 3, 4])
@pytest.mark.parametrize("metacarpals", [False, True])
def test_fingers_proximal_to_distal_with_their_joint_count(joints, metacarpals):
    h = Humanoid(finger_joints=joints, metacarpals=metacarpals)
    _rot, heads, tails, _ = _turned(h, 11)
    an = skeleton.analyse(h.renamed("none"), h.parents, heads, tails)
    for side in ("L", "R"):
        for f in skeleton.FINGERS:
            want = [h.index(f, side, k + 1) for k in range(joints if f != "thumb" else 3)]
            assert an.fingers[(side, f)] == want
            if metacarpals and f != "thumb":
                assert an.metacarpals[(side, f)] == [h.parents[want[0]]]
            else:
                assert (side, f) not in an.metacarpals
    assert an.finger_joints()[("L", "index")] == joints


def test_biped_root_above_the_pelvis_and_thighs_on_the_spine():
    """3ds Max Biped: Bip01 carries the body, Bip01 Pelvis is the hips, the thighs hang
    from Bip01 Spine."""
    h = Humanoid(biped=True, ik_helpers=True)
    an = skeleton.analyse(h.names, h.parents, h.heads, h.tails, classify=classify)
    assert an.hips == h.names.index("Bip01 Pelvis")
    assert an.above_hips == [h.names.index("Bip01")]
    assert an.spine[0] == h.names.index("Bip01 Spine")
    assert an.limbs[("L", "thigh")] == [h.names.index("Bip01 L thigh")]
    assert _roles_match(h, an) == []
    notes = {h.names[i]: note for i, note in an.helpers.items()}
    assert set(notes) == {"IK_foot.L", "IK_foot.R", "knee_pole.L", "knee_pole.R"}


@pytest.mark.parametrize("convention", ["biped", "none"])
def test_clavicles_on_the_neck_leave_it_the_neck(convention):
    """A Biped as 3ds Max exports it hangs the clavicles from Bip01 Neck: that bone carries
    the head and sits as high as the clavicles, so it is still the neck and Bip01 Spine2
    the chest, with or without names; a chest well below the shoulders stays the chest."""
    h = Humanoid(biped=True)
    names, cls = (h.names, classify) if convention == "biped" else (h.renamed("none"), None)
    plain = skeleton.analyse(names, h.parents, h.heads, h.tails, classify=cls)
    neck, chest = h.names.index("Bip01 Neck"), h.names.index("Bip01 Spine2")
    assert plain.neck == [neck] and plain.spine[-1] == chest
    for side in ("L", "R"):
        h.parents[h.names.index(f"Bip01 {side} Clavicle")] = neck
    an = skeleton.analyse(names, h.parents, h.heads, h.tails, classify=cls)
    assert an.neck == [neck] and an.spine == plain.spine and an.head == plain.head
    assert an.roles[neck].part == "neck" and an.roles[chest].part == "spine"
    for side in ("L", "R"):
        assert an.limbs[(side, "shoulder")] == [h.names.index(f"Bip01 {side} Clavicle")]


def test_helpers_are_recognised_and_left_alone():
    h = Humanoid(twist=True, head_end=True, ik_helpers=True)
    an = skeleton.analyse(h.renamed("none"), h.parents, h.heads, h.tails)
    helpers = {i for i, (part, _s, _n) in h.true_role.items() if part == "helper"}
    assert set(an.helpers) == helpers
    assert an.head == h.index("head")
    assert an.limbs[("L", "hand")] == [h.index("hand", "L")]


def test_elbow_of_a_split_arm_from_motion():
    """An upper arm cut in two in-line bones: in a still rest the split is found by the
    limb proportions, in motion by where the arm bends."""
    h = Humanoid(split_arm=True)
    rng = np.random.default_rng(5)
    for poses in (None, h.walk(6, rng)):
        an = skeleton.analyse(h.renamed("none"), h.parents, h.heads, h.tails, poses=poses)
        for side in ("L", "R"):
            assert an.limbs[(side, "forearm")] == [h.index("forearm", side)]
            assert an.limbs[(side, "upper_arm")] == [h.index("upper_arm", side)]
            assert an.segments[(side, "upper_arm")] == [h.index("segment", side)]


def test_upper_body_without_legs():
    h = Humanoid(legs=False)
    an = skeleton.analyse(h.renamed("none"), h.parents, h.heads, h.tails)
    assert an.legless and an.hips == h.index("hips")
    assert an.up @ h.up > 0.99 and an.up_evidence == "hips and head"
    assert an.limbs[("L", "hand")] == [h.index("hand", "L")]
    # no feet, knees or face: the sides are a guess and say so
    assert an.facing_evidence == "none" and any("guess" in w for w in an.warnings)


def test_a_chain_is_not_a_humanoid():
    with pytest.raises(ValueError, match="not a humanoid"):
        skeleton.analyse(["a", "b", "c"], [-1, 0, 1], [(0, 0, 0), (0, 0, 1), (0, 0, 2)])


def test_chains_of_different_length_map_their_ends():
    assert skeleton.spread([0, 1, 2], [10, 11, 12, 13, 14, 15]) == [(0, 10), (1, 12), (2, 15)]
    assert skeleton.spread([0, 1], [10, 11, 12]) == [(0, 10), (1, 12)]
    assert skeleton.spread([0, 1, 2, 3], [10, 11]) == [(0, 10), (3, 11)]
    assert skeleton.spread([0], [10, 11, 12], "last") == [(0, 12)]


@pytest.mark.parametrize("target_joints", [2, 3, 4])
def test_pairs_follow_anatomy_not_names(target_joints):
    """A source named with L and R exchanged onto an unnamed target: every pair joins the
    same anatomical side and part; every target finger joint is driven (2-joint fingers
    from 3-joint ones map joint 1 and the last)."""
    src_h, tgt_h = Humanoid(), Humanoid(finger_joints=target_joints, biped=True)
    src = skeleton.analyse(src_h.renamed("swapped"), src_h.parents, src_h.heads, src_h.tails,
                           classify=classify)
    _rot, heads, tails, _ = _turned(tgt_h, 4)
    tgt = skeleton.analyse(tgt_h.renamed("none"), tgt_h.parents, heads, tails)
    pairs = skeleton.pair(src, tgt)
    assert skeleton.sides_crossed(src, tgt, pairs) == []
    for t, s, conf in pairs:
        pt, ps = tgt_h.true_role[t], src_h.true_role[s]
        assert pt[:2] == ps[:2] or {pt[0], ps[0]} <= {"hips", "spine"}
        assert 0.0 < conf < 1.0
    mapped = {t for t, _s, _c in pairs}
    if target_joints == 2:
        for side in ("L", "R"):
            assert set(tgt.fingers[(side, "index")]) <= mapped
    warnings = skeleton.map_warnings(src, tgt)
    assert any("shape alone" in w for w in warnings) and any("other side" in w for w in warnings)
    # a map that crosses sides is seen as such
    crossed = [(t, s if src.roles[s].side is None else
                next(i for i, r in src.roles.items() if (r.part, r.number) == (src.roles[s].part, src.roles[s].number)
                     and r.side not in (None, src.roles[s].side)), c) for t, s, c in pairs]
    assert len(skeleton.sides_crossed(src, tgt, crossed)) > 20


def test_biped_flag_only_for_a_named_pelvis_above_the_junction():
    assert skeleton.analyse(*_biped_args()).biped
    h = Humanoid()
    assert not skeleton.analyse(h.names, h.parents, h.heads, h.tails, classify=classify).biped


def _biped_args():
    h = Humanoid(biped=True)
    return h.names, h.parents, h.heads, h.tails, None, classify


def _true_sides(h, an):
    """Bones whose found side differs from the true one (arm and leg chains)."""
    return [h.names[i] for i, r in an.roles.items()
            if r.side is not None and r.side != h.true_role.get(i, (None, None))[1]]


def _lineage(h, i):
    """Bone i and its ancestors."""
    out = [i]
    while h.parents[out[-1]] >= 0:
        out.append(h.parents[out[-1]])
    return out


def test_sides_of_a_body_turning_during_the_clip():
    """A walk facing 60° away, then turning a half turn (a dancer's turn), its names
    right: every limb keeps its side, and nothing is warned about the sides (each frame
    is read in its own facing, not against one facing of the whole clip)."""
    h = Humanoid()
    rng = np.random.default_rng(5)
    yaw = 60.0 + 180.0 * np.clip((np.linspace(0.0, 1.0, 12) - 0.3) / 0.4, 0.0, 1.0)
    poses = np.array([transform(p, Rotation.from_euler("z", a, degrees=True))
                      for p, a in zip(h.walk(12, rng), yaw)])
    an = skeleton.analyse(h.names, h.parents, h.heads, h.tails, poses, classify=classify)
    assert _true_sides(h, an) == []
    assert not [w for w in an.warnings if "side" in w], an.warnings


def test_names_win_unless_the_geometry_overwhelms_them():
    """Names saying the other side on every frame lose to the geometry; hands (and
    fingers) crossed over on 7 of 12 frames do not outvote right names: either way a warning says which won."""
    h = Humanoid()
    rng = np.random.default_rng(6)
    poses = h.walk(12, rng)
    an = skeleton.analyse(h.renamed("swapped"), h.parents, h.heads, h.tails, poses, classify=classify)
    assert _true_sides(h, an) == []
    assert any("sides taken from the geometry" in w for w in an.warnings), an.warnings
    hands = [i for i in range(len(h.names)) if {h.index("hand", "L"), h.index("hand", "R")} & set(_lineage(h, i))]
    hips = poses[:, h.index("hips")]
    crossed = poses.copy()
    for f in range(7):
        lateral = (crossed[f, hands] - hips[f]) @ h.left
        crossed[f, hands] -= 2.0 * lateral[:, None] * h.left
    an = skeleton.analyse(h.names, h.parents, h.heads, h.tails, crossed, classify=classify)
    assert _true_sides(h, an) == []
    assert any("arms' names and the geometry" in w and "sides taken from the names" in w
               for w in an.warnings), an.warnings

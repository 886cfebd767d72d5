"""Skeleton understanding on every shared file, in the file's own axes and units.

BVH files are read as their text says (no import repair), so a Y-up, decimetre or
upside-down file is seen as it is; characters are read from Blender's glTF import. The
truth is judged from the joints the file's own convention names (its head and its feet,
its left hand), never from the analysis' own intermediate values.
"""
import pathlib

import numpy as np
import pytest

from retarget_rigs import target_rig

from solver import skeleton

CLIPS = sorted(p.name for d in ("mocap", "generated")
               for p in (pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / d).glob("*.bvh"))
# per naming convention: (head, left foot, left hand) joint names
TRUTH = {"animdrawings": ("Head", "LeftFoot", "LeftHand"), "bandai": ("Head", "Foot_L", "Hand_L"),
         "bvhpython": ("mixamorig:Head", "mixamorig:LeftFoot", "mixamorig:LeftHand"),
         "cmu": ("Head", "LeftFoot", "LeftHand"), "makehuman": ("head", "foot.L", "wrist.L"),
         "pybvh": ("Head", "LeftFoot", "LeftHand"), "clap": ("spine.006", "foot.L", "hand.L"),
         "fingerspell": ("spine.006", "foot.L", "hand.L")}


def _classifier(addon, names):
    bm = addon.signsim_addon.retarget.bonemap
    joint_named = bm._is_joint_named(names)
    return lambda name: bm.classify(name, joint_named)


def _bvh_skeleton(addon, path, frames=16):
    bvh = addon.signsim_addon.library.bvh
    data = bvh.read(str(path))
    rest = np.zeros((len(data.names), 3))
    for j, p in enumerate(data.parents):
        rest[j] = data.offsets[j] + (rest[p] if p >= 0 else 0.0)
    rows = np.unique(np.linspace(0, data.rows - 1, min(frames, data.rows)).astype(int))
    return data.names, data.parents, rest, bvh.joint_positions(data, rows)


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("names", ["file", "none"])
def test_bvh_body_in_file_axes(addon, shared_data, clip, names):
    """Up from the feet to the head, left from the facing, whatever the file's axes and
    whether or not its joints have names."""
    path = next(shared_data.glob(f"*/{clip}"))
    joint_names, parents, rest, poses = _bvh_skeleton(addon, path)
    head, foot, hand = (joint_names.index(n) for n in TRUTH[clip.split("_")[0]])
    use = joint_names if names == "file" else [f"Node_{k}" for k in range(len(joint_names))]
    an = skeleton.analyse(use, parents, rest, poses=poses,
                          classify=_classifier(addon, use) if names == "file" else None)
    hips_to_head = poses[:, head] - poses[:, an.hips]
    feet = poses[:, foot] - poses[:, an.hips]
    # the head above the hips on every frame, the feet below them (a dancer may kick one
    # foot up: the median frame)
    assert np.all(hips_to_head @ an.up > 0.5 * np.linalg.norm(hips_to_head, axis=1))
    assert np.median(feet @ an.up / np.linalg.norm(feet, axis=1)) < -0.8
    assert an.head == head
    # the file's left hand is the anatomical left (these files name their sides right)
    assert an.limbs[("L", "hand")] == [hand]
    assert an.facing_evidence == "feet"
    assert an.finger_joints() == {} or max(an.finger_joints().values()) <= 4
    if names == "file":
        assert not [w for w in an.warnings if "other side" in w]
        assert not an.topology_only()
    else:
        assert an.topology_only()
        named = skeleton.analyse(joint_names, parents, rest, poses=poses,
                                 classify=_classifier(addon, joint_names))
        # the same body from the shape alone, fingers told apart by geometry
        assert (an.hips, an.spine, an.neck, an.limbs) == (named.hips, named.spine, named.neck, named.limbs)
        assert an.fingers == named.fingers


@pytest.mark.parametrize("rig", ["signer", "godot", "robot"])
def test_characters(addon, shared_data, rig):
    ob = target_rig(shared_data, rig)
    bones = ob.data.bones
    names = [b.name for b in bones]
    parents = [names.index(b.parent.name) if b.parent else -1 for b in bones]
    heads = np.array([ob.matrix_world @ b.head_local for b in bones])
    tails = np.array([ob.matrix_world @ b.tail_local for b in bones])
    an = skeleton.analyse(names, parents, heads, tails, classify=_classifier(addon, names))
    assert an.up @ np.array([0.0, 0.0, 1.0]) > 0.99
    hand_l = {"signer": "hand.L", "godot": "hand.L", "robot": "Palm2.L"}[rig]
    assert names.index(hand_l) in an.limbs[("L", "hand")]
    if rig == "robot":
        # two-joint fingers, IK feet and knee poles outside the body tree
        assert set(an.finger_joints().values()) == {2}
        assert {names[i] for i in an.helpers} >= {"Foot.L", "Foot.R", "PoleTarget.L", "PoleTarget.R"}
        assert an.facing_evidence == "names"
    else:
        assert set(an.finger_joints().values()) == {3}
        assert an.facing_evidence == "feet"
        # the same body from geometry alone (every bone renamed Node_<n>)
        blind = skeleton.analyse([f"Node_{k}" for k in range(len(names))], parents, heads, tails)
        assert (blind.hips, blind.spine, blind.neck, blind.head) == (an.hips, an.spine, an.neck, an.head)
        assert blind.limbs == an.limbs and blind.fingers == an.fingers
        assert np.allclose(blind.left, an.left)

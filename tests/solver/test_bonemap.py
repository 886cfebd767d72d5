"""Bone names of every supported convention, topology maps, presets and mirroring (no bpy)."""
import json

import pytest

from solver.retarget import bonemap

NAMES = [  # (name, joint_named skeleton, expected (part, side, number))
    # Blender / Rigify metarig, generated Rigify
    ("upper_arm.L", False, ("upper_arm", "L", None)), ("f_index.01.L", False, ("index", "L", 1)),
    ("thumb.03.R", False, ("thumb", "R", 3)), ("spine.003", False, ("spine", None, 3)),
    ("DEF-forearm.R", False, ("forearm", "R", None)), ("ORG-f_middle.02.R", False, ("middle", "R", 2)),
    # Mixamo
    ("mixamorig:LeftArm", False, ("upper_arm", "L", None)), ("mixamorig:Hips", False, ("hips", None, None)),
    ("mixamorig:RightHandPinky3", False, ("pinky", "R", 3)),
    ("mixamorig:LeftShoulder", False, ("shoulder", "L", None)),
    # CMU / cgspeed
    ("LeftUpLeg", False, ("thigh", "L", None)), ("LHipJoint", False, None),
    ("LFingers", False, ("middle", "L", None)), ("RThumb", False, ("thumb", "R", None)),
    ("LowerBack", False, ("spine", None, None)), ("RightFingerBase", False, ("middle", "R", 0)),
    # MotionBuilder / HumanIK, Perception Neuron / Rokoko
    ("LeftHandIndex1", False, ("index", "L", 1)), ("LeftToeBase", False, ("toe", "L", None)),
    ("LeftInHandIndex", False, ("index", "L", 0)), ("RightHandMiddle2", False, ("middle", "R", 2)),
    # 3ds Max Biped
    ("Bip01 L UpperArm", False, ("upper_arm", "L", None)), ("Bip01 L Finger0", False, ("thumb", "L", 1)),
    ("Bip01 R Finger12", False, ("index", "R", 3)), ("Bip01 L Calf", False, ("shin", "L", None)),
    ("Bip01 Pelvis", False, ("hips", None, None)), ("Bip01", False, None),
    # Unreal
    ("upperarm_l", False, ("upper_arm", "L", None)), ("index_01_l", False, ("index", "L", 1)),
    ("calf_r", False, ("shin", "R", None)), ("ball_l", False, ("toe", "L", None)),
    ("clavicle_l", False, ("shoulder", "L", None)), ("upperarm_twist_01_l", False, None),
    ("index_metacarpal_l", False, ("index", "L", 0)),
    # DAZ / Poser
    ("lShldr", True, ("upper_arm", "L", None)), ("rThumb1", True, ("thumb", "R", 1)),
    ("lForeArm", True, ("forearm", "L", None)), ("lCollar", True, ("shoulder", "L", None)),
    ("lHand", True, ("hand", "L", None)), ("abdomenLower", True, ("spine", None, None)),
    # MakeHuman
    ("upperarm01.L", False, ("upper_arm", "L", 1)), ("upperarm02.L", False, ("upper_arm", "L", 2)),
    ("finger2-1.L", False, ("index", "L", 1)), ("finger1-3.R", False, ("thumb", "R", 3)),
    ("metacarpal1.L", False, ("index", "L", 0)), ("wrist.L", False, ("wrist", "L", None)),
    ("shoulder01.L", False, ("shoulder", "L", 1)),
    # SMPL / SMPL-X (joint names)
    ("L_Shoulder", True, ("upper_arm", "L", None)), ("L_Collar", True, ("shoulder", "L", None)),
    ("L_Elbow", True, ("forearm", "L", None)), ("R_Knee", True, ("shin", "R", None)),
    ("L_Ankle", True, ("foot", "L", None)), ("L_Foot", True, ("toe", "L", None)),
    ("Pelvis", True, ("hips", None, None)), ("left_index1", True, ("index", "L", 1)),
    ("right_thumb3", True, ("thumb", "R", 3)),
    # the robot's non-standard names and IK bones
    ("Palm2.L", False, ("palm", "L", 2)), ("PoleTarget.L", False, None),
]


@pytest.fixture
def bm():
    return bonemap


@pytest.mark.parametrize("name,joint_named,expected", NAMES)
def test_names_of_every_convention(bm, name, joint_named, expected):
    assert bm.classify(name, joint_named) == expected


def _chain_skeleton(bm, names):
    return bm.Skeleton(names, [-1] + list(range(len(names) - 1)), [(0, 0, i) for i in range(len(names))])


def test_a_skeleton_without_hips_is_one_clear_error(bm):
    with pytest.raises(bm.BoneMapError, match="no hips"):
        bm.auto_map(_chain_skeleton(bm, ["a", "b", "c"]), _chain_skeleton(bm, ["x", "y", "z"]))


def test_preset_round_trip_and_mirror(bm):
    err = bm.BoneMapError
    m = bm.BoneMap([("upper_arm.L", "LeftArm", 1.0), ("hand.L", "LeftHand", 0.8)],
                   ["hand.R"], "Source")
    back = bm.BoneMap.from_json(m.to_json())
    assert back.pairs == m.pairs and back.source_armature == "Source"
    assert json.loads(m.to_json())["format"] == "signsim-bonemap"
    for bad in ('{"pairs": [{"source": "x"}]}', '[]', '{"pairs": [["LeftArm", "upper_arm.L"]]}',
                '{"bone_map": {}}', 'not json'):
        with pytest.raises(err, match="not a bone map: .*expected a SignSim preset"):
            bm.BoneMap.from_json(bad)
    # what `retarget --json` prints is a bone map too: its "bone_map" and "confidence"
    printed = json.dumps({"armature": "Signer", "bone_map": m.as_dict(), "confidence": m.confidence()})
    assert bm.BoneMap.from_json(printed).pairs == m.pairs
    assert bm.BoneMap.from_json(json.dumps(m.as_dict())).pairs == [(t, s, 1.0) for t, s, _c in m.pairs]
    mirrored = bm.mirror_pairs(m.pairs, ["upper_arm.L", "upper_arm.R", "hand.L", "hand.R"],
                               ["LeftArm", "RightArm", "LeftHand", "RightHand"])
    assert ("upper_arm.R", "RightArm", 1.0) in mirrored and ("hand.R", "RightHand", 0.8) in mirrored
    assert bm.mirror_name("mixamorig:LeftArm") == "mixamorig:RightArm"
    assert bm.mirror_name("lShldr") == "rShldr" and bm.mirror_name("upperarm_l") == "upperarm_r"
    assert bm.mirror_name("Bip01 L Finger0") == "Bip01 R Finger0"

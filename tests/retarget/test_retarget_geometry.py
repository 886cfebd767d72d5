"""Every shared clip onto five rigs, judged by geometry only (see retarget_measure).

Targets: the bundled signer, the CC0 base mesh, the robot (two-joint fingers, IK feet),
the base mesh with every bone renamed Node_<n>, and the base mesh renamed to 3ds Max Biped
names with a `Bip01` root above `Bip01 Pelvis` and the thighs on `Bip01 Spine` (both
copies made here). The rigs are built once per session into a .blend each test appends
from. Every frame of every clip is measured. The suite runs 7 of the 45 pairs (SUITE);
all 45 run with SIGNSIM_SWEEP=1:
bench/bench_retarget_geometry.py.
"""
import json
import os
import pathlib

import bpy
import pytest

import retarget_measure as rm
from retarget_rigs import biped, character, numbered, signer

DATA = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"
CLIPS = sorted(str(p.relative_to(DATA)) for d in ("mocap", "generated") for p in (DATA / d).glob("*.bvh"))
RIGS = ("signer", "godot", "robot", "godot_nodes", "godot_biped")

@pytest.fixture(scope="session")
def rig_file(tmp_path_factory, addon):
    """A .blend holding the five target armatures (objects named as RIGS)."""
    bpy.ops.wm.read_homefile(use_empty=True)
    made = {"signer": signer(), "godot": character(DATA, "godot"), "robot": character(DATA, "robot")}
    for key, change in (("godot_nodes", None), ("godot_biped", biped)):
        ob = character(DATA, "godot")
        if change is None:
            numbered(ob)
        else:
            change(ob)
        made[key] = ob
    for key, ob in made.items():
        ob.name = key
    path = tmp_path_factory.mktemp("rigs") / "rigs.blend"
    bpy.data.libraries.write(str(path), set(made.values()), fake_user=True)
    return path


def load_rig(path, key):
    with bpy.data.libraries.load(str(path)) as (_src, dst):
        dst.objects = [key]
    ob = dst.objects[0]
    bpy.context.collection.objects.link(ob)
    for child in [o for o in bpy.data.objects if o.parent == ob]:
        bpy.context.collection.objects.link(child)
    return ob


def run(addon, rig_file, clip, rig):
    return rm.retarget_clip(addon.signsim_addon.retarget.api, DATA / clip, load_rig(rig_file, rig))


def measure(src, tgt, result, fps):
    """Every Done-when number of one source × target pair (dict)."""
    m = {}
    m["head_minus_hips_min"] = float(rm.head_above_hips(tgt).min())
    cos = rm.chain_cosines(src, tgt)
    m["chain_cos_min"] = min(cos.values())
    m["chain_cos_worst"] = min(cos, key=cos.get)
    # left follows left: the target's geometric left arm follows the source's geometric left
    m["left_arm_cos"] = min(c for (name, _k), c in cos.items() if name in ("arm.L", "arm.R"))
    ps, pt = rm.palm_frames(src), rm.palm_frames(tgt)
    palm = [float(rm.offset_angles(ps[s], pt[s]).mean()) for s in ps if s in pt]
    m["palm_deg"] = max(palm) if palm else None
    m["chest_deg"] = float(rm.offset_angles(rm.chest_frame(src), rm.chest_frame(tgt)).max())
    pairs = result.bone_map.as_dict()
    m.update(rm.jump_excess(src, tgt, pairs, rm.rhythm_girdles(src, tgt, pairs)))
    m["root_err"] = rm.root_error(src, tgt, fps)
    sides = ("L", "R")
    masks = {s: rm.planted(src, s, 0.25, fps, 0.02) for s in sides}
    # feet on the leg chain, and feet hanging outside it (the robot's IK feet, found from
    # geometry by rm.detached_foot), measured alike and reported apart
    for key, on_chain in (("foot", True), ("ik_foot", False)):
        slide = height = 0.0
        for side in sides:
            if rm.foot_of(tgt, side) is None or ((side, "foot") in tgt.body.limbs) != on_chain:
                continue
            if masks[side].any():
                s_, h_ = rm.foot_slide_and_height(tgt, side, masks[side])
                slide, height = max(slide, s_), max(height, h_)
        m[f"{key}_slide"], m[f"{key}_height"] = slide, height
    chest = rm.chest_frame(tgt)
    rhythm = [rm.clavicle_rhythm(tgt, s, chest) for s in ("L", "R") if not rm.girdle_moves(src, s)]
    m["rhythm"] = [r for r in rhythm if r is not None]
    return m


PAIRS = [(c, r) for c in CLIPS for r in RIGS]
# The suite measures CMU's walk (planted feet, a moving root) on each of the five rigs and
# fingerspelling (every finger joint) on the signer and the robot; every clip x rig pair
# (PAIRS) runs with SIGNSIM_SWEEP=1, as `bench/bench_retarget_geometry.py` does (same
# checks, exit 1 on a failure).
SUITE = [("mocap/cmu_01_01_cgspeed__fairmotion.bvh", r) for r in RIGS] + \
    [("generated/fingerspell_80.bvh", "signer"), ("generated/fingerspell_80.bvh", "robot")]
CASES = PAIRS if os.environ.get("SIGNSIM_SWEEP") else [p for p in PAIRS if p in SUITE]


@pytest.mark.slow
@pytest.mark.parametrize("clip,rig", CASES)
def test_geometry(addon, rig_file, clip, rig):
    """The Done-when points of the skeleton-understanding retarget, pair by pair."""
    src, tgt, result, fps = run(addon, rig_file, clip, rig)
    m = measure(src, tgt, result, fps)
    if os.environ.get("SIGNSIM_MEASURE_LOG"):     # a table of the numbers, for reports
        with open(os.environ["SIGNSIM_MEASURE_LOG"], "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"clip": clip, "rig": rig, **m, "warnings": result.warnings},
                                default=str) + "\n")
    assert m["head_minus_hips_min"] > 0
    # every chain, the arms and legs by anatomical side, follows the source's directions
    assert m["chain_cos_min"] >= 0.98, m["chain_cos_worst"]
    assert m["palm_deg"] is None or m["palm_deg"] <= 1.5
    assert m["chest_deg"] <= 5.0
    assert m["jump_excess_deg"] <= 5.0, m["jump_worst"]
    assert m["root_err"] <= 0.02
    for ratio in m["rhythm"]:
        assert 0.3 <= ratio <= 0.55
    # planted source feet: the target's contact point slides 2 cm at most and its lowest
    # point stands on the target's floor within 1.5 cm
    assert m["foot_slide"] <= 0.02 and m["foot_height"] <= 0.015
    if rig == "godot_biped":      # the Biped root carries the translation, the pelvis turns
        assert "Bip01" in result.keys["loc"] and "Bip01 Pelvis" not in result.keys["loc"]
        assert result.bone_map.as_dict()["Bip01 Pelvis"] == src.names[src.body.hips]
    if rig == "robot":            # two-joint fingers: every joint of a finger the source has
        assert {rm.foot_of(tgt, s) for s in ("L", "R")} == {tgt.names.index(f"Foot.{s}") for s in ("L", "R")}
        assert set(tgt.body.finger_joints().values()) == {2}
        fingers = [i for key, f in tgt.body.fingers.items() if key in src.body.fingers for i in f]
        assert {tgt.names[i] for i in fingers} <= set(result.bone_map.as_dict())
        assert len(fingers) == 2 * len(set(tgt.body.fingers) & set(src.body.fingers))


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="the robot's IK feet (Foot.L/R, found from geometry) are held "
                   "where its legs reach, but CMU's right leg is 3.7 % longer than its left and the "
                   "robot's legs are equal: the right foot misses its floor spot in 14 of 22 planted "
                   "runs (CMU walk: slide 11.3 cm, 10.4 cm off the floor), said in a warning (test below)")
def test_robot_ik_feet_planted(addon, rig_file):
    """The robot's detached feet, found from geometry, stand where the source's planted."""
    src, tgt, result, fps = run(addon, rig_file, "mocap/cmu_01_01_cgspeed__fairmotion.bvh", "robot")
    m = measure(src, tgt, result, fps)
    assert m["ik_foot_slide"] <= 0.02 and m["ik_foot_height"] <= 0.015


@pytest.mark.slow
def test_robot_ik_feet_held_or_said(addon, rig_file):
    """Each detached foot that slides more than 2 cm or stands more than 1.5 cm off its
    floor where the source's is planted is named in a warning; none is silent."""
    src, tgt, result, fps = run(addon, rig_file, "mocap/cmu_01_01_cgspeed__fairmotion.bvh", "robot")
    for side in ("L", "R"):
        assert (side, "foot") not in tgt.body.limbs and rm.foot_of(tgt, side) is not None
        slide, height = rm.foot_slide_and_height(tgt, side, rm.planted(src, side, 0.25, fps, 0.02))
        if slide > 0.02 or height > 0.015:
            assert any(w.startswith(f"planted {side} foot of 'robot'") for w in result.warnings), \
                (side, slide, height, result.warnings)

"""Contact-preserving retargeting, measured on the target's evaluated skin.

Clips: the bundled chin_cheek.bvh (index fingertip on the chin, then the cheek), the
shared clap_fast.bvh (palms meeting) and a thumb–index pinch made here on the signer's
own skeleton and written with Blender's BVH exporter. Targets: the bundled signer, the
CC0 base mesh, the robot, and copies of the signer whose upper arms and forearms are
0.85× and 1.15× as long (made here: bones moved, skin re-bound in the new rest pose).

Every number comes from Blender: the skin meshes evaluated at each frame (Armature
modifier, bone parents) and mathutils.bvhtree for distances, never the solver's own
volumes; the fingertips and rotations from the pose bones.
"""
import json
import math
import os
import pathlib

import bpy
import numpy as np
import pytest
from mathutils import Matrix
from scipy.optimize import minimize

import retarget_measure as rm
from retarget_rigs import character
from contact_measure import Skin, measure_contact, signer_with_skin

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
CLIPS = {"chin_cheek": ROOT / "sample_blends" / "chin_cheek.bvh",
         "clap": DATA / "generated" / "clap_fast.bvh"}
RIGS = ("signer", "godot", "robot", "signer_arms_0.85", "signer_arms_1.15")
FPS = 30
PINCH_GAP = 0.0125   # m between the thumb and index tips (bone tails) held in the pinch


def scaled_arms(k):
    """The signer with upper arms and forearms k times as long: the forearm and hand moved
    out along the arm in the pose, the skin's deformed shape applied, that pose applied as
    the rest pose and the skin bound again (same vertex groups)."""
    ob = signer_with_skin()
    skins = [c for c in ob.children if any(m.type == 'ARMATURE' for m in c.modifiers)]
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    for s in ("L", "R"):
        for b in (f"forearm.{s}", f"hand.{s}"):
            ob.data.edit_bones[b].use_connect = False
    bpy.ops.object.mode_set(mode='OBJECT')
    bones = ob.data.bones
    for s in ("L", "R"):
        for bone, along in ((f"forearm.{s}", f"upper_arm.{s}"), (f"hand.{s}", f"forearm.{s}")):
            d = (k - 1.0) * (bones[along].tail_local - bones[along].head_local)
            ob.pose.bones[bone].location = bones[bone].matrix_local.to_3x3().inverted() @ d
    bpy.context.view_layer.update()
    for skin in skins:
        bpy.context.view_layer.objects.active = skin
        name = next(m.name for m in skin.modifiers if m.type == 'ARMATURE')
        bpy.ops.object.modifier_apply(modifier=name)
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='POSE')
    bpy.ops.pose.select_all(action='SELECT')
    bpy.ops.pose.armature_apply(selected=False)
    bpy.ops.object.mode_set(mode='OBJECT')
    for skin in skins:
        skin.modifiers.new("Armature", 'ARMATURE').object = ob
    ob.name = f"signer_arms_{k}"
    return ob


def make_rig(key):
    if key == "signer":
        return signer_with_skin()
    if key.startswith("signer_arms_"):
        return scaled_arms(float(key.rsplit("_", 1)[1]))
    return character(DATA, key)


@pytest.fixture(scope="session")
def pinch_clip(tmp_path_factory, addon):
    """A 2 s BVH clip on the signer's skeleton: the right thumb and index close until
    their tips (bone tails) are PINCH_GAP apart (their skin pads touching), hold, open."""
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.context.scene.render.fps = FPS
    ob = signer_with_skin()
    for c in list(ob.children):
        bpy.data.objects.remove(c)
    index = [f"f_index.0{j}.R" for j in (1, 2, 3)]
    thumb = [f"thumb.0{j}.R" for j in (1, 2, 3)]
    for pb in ob.pose.bones:
        pb.rotation_mode = 'QUATERNION'

    def pose(x):
        for j, b in enumerate(index):
            ob.pose.bones[b].rotation_quaternion = Matrix.Rotation(x[0] * (1.0 if j else 0.6), 4, 'X').to_quaternion()
        ob.pose.bones[thumb[0]].rotation_quaternion = (Matrix.Rotation(x[1], 4, 'X') @
                                                       Matrix.Rotation(x[2], 4, 'Z')).to_quaternion()
        for b in thumb[1:]:
            ob.pose.bones[b].rotation_quaternion = Matrix.Rotation(x[3], 4, 'X').to_quaternion()
        bpy.context.view_layer.update()
        mw = ob.matrix_world
        return (mw @ ob.pose.bones[index[-1]].tail) - (mw @ ob.pose.bones[thumb[-1]].tail)

    best = minimize(lambda x: (pose(x).length - PINCH_GAP) ** 2 * 1e6 + 1e-4 * float(np.dot(x, x)),
                    np.array([0.6, 0.3, 0.0, 0.3]), method="Nelder-Mead",
                    options={"xatol": 1e-5, "fatol": 1e-12, "maxiter": 4000})
    assert abs(pose(best.x).length - PINCH_GAP) < 5e-4
    ad = ob.animation_data_create()
    ad.action = bpy.data.actions.new("pinch")
    for frame, weight in ((1, 0.0), (15, 0.0), (25, 1.0), (45, 1.0), (55, 0.0), (61, 0.0)):
        pose(best.x * weight)
        for b in index + thumb:
            ob.pose.bones[b].keyframe_insert("rotation_quaternion", frame=frame)
    bpy.context.view_layer.objects.active = ob
    out = tmp_path_factory.mktemp("pinch") / "pinch.bvh"
    bpy.ops.export_anim.bvh(filepath=str(out), frame_start=1, frame_end=61, root_transform_only=True)
    return out


def fingertip_jerk(poses, fps):
    """Mean squared jerk (m²/s⁶) of every fingertip (distal bone tails) over the clip."""
    tips = [bones[-1] for bones in poses.body.fingers.values() if bones]
    x = poses.tails[:, tips]
    j = np.diff(x, n=3, axis=0) * fps ** 3
    return float(np.mean(np.sum(j * j, axis=-1)))


def rotation_deviation_deg(a, b):
    """Per frame and bone, the angle (deg) between two Poses' world rotations (F, N)."""
    rel = np.swapaxes(a.rot, -1, -2) @ b.rot
    cos = (np.trace(rel, axis1=-2, axis2=-1) - 1.0) / 2.0
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def run(addon, clip_path, rig):
    """Plain and contact-preserving retargets of one clip onto one rig: (contacts, Poses
    plain, Poses kept, frames, skin)."""
    rt = addon.signsim_addon.retarget.api
    bpy.context.scene.render.fps = FPS
    target = make_rig(rig)
    src = rt.source_clip(str(clip_path))
    bone_map = rt.auto_map(src.armature, target)
    plain = rt.retarget(src.armature, target, bone_map, source_fps=src.fps, action_name="plain")
    p_plain = rm.Poses(target, plain.frames)
    kept = rt.retarget(src.armature, target, bone_map, source_fps=src.fps, action_name="kept")
    found = rt.contact_pass.preserve(src.armature, target, kept)
    assert json.loads(kept.action[rt.contact_pass.CONTACTS_PROP])      # stored for the bake
    contacts = json.loads(kept.action[rt.contact_pass.CONTACTS_PROP])
    assert [c["parts"] for c in contacts] == [c["parts"] for c in found]
    p_kept = rm.Poses(target, kept.frames)
    return contacts, p_plain, p_kept, kept.frames, Skin(target)


EXPECTED = {"chin_cheek": {("index_R", "chin"), ("index_R", "cheek_R")},
            "clap": {("palm_L", "palm_R")},
            "pinch": {("thumb_R", "index_R")}}


# Where the contract is not met yet (each an xfail that must fail: a pass is reported):
NOT_YET = {
    ("chin_cheek", "robot"): "the robot's chin and cheek are reached only through its own head: "
                             "the contacts are refused and left as retargeted",
    ("pinch", "robot"): "the robot's two-joint thumb does not reach its index pad: refused",
    ("pinch", "godot"): "the base mesh's coarse fingertips deform with the middle phalanx: the "
                        "rigid pad the solver moves is up to 10 mm off the evaluated skin",
}
for _rig in RIGS:
    NOT_YET[("clap", _rig)] = ("clap_fast's hands pass through each other at speed: holding them on "
                               "the skin takes corrections that change too fast to smooth (the smoothed "
                               "ones end 5–12 mm inside), so the contacts are refused")


# The suite runs one case per clip on the signer, the two other shapes of rig on a cheap
# clip and a refused case of each kind; the whole clip x rig sweep (15 cases) runs with
# SIGNSIM_SWEEP=1, as `bench/bench_contacts.py --skin` does (same checks, exit 1 on a failure).
SUITE = {("chin_cheek", "signer"), ("chin_cheek", "godot"), ("chin_cheek", "robot"),
         ("pinch", "signer"), ("pinch", "signer_arms_0.85"), ("pinch", "godot"), ("pinch", "robot"),
         ("clap", "godot")}
CASES = [(clip, rig) for clip in ("chin_cheek", "clap", "pinch") for rig in RIGS
         if os.environ.get("SIGNSIM_SWEEP") or (clip, rig) in SUITE]


@pytest.mark.slow
@pytest.mark.parametrize("clip,rig", CASES, ids=[f"{c}-{r}" for c, r in CASES])
def test_contacts_kept_on_the_skin(addon, pinch_clip, clip, rig, request):
    if (clip, rig) in NOT_YET:
        request.applymarker(pytest.mark.xfail(reason=NOT_YET[(clip, rig)], strict=True))
    path = pinch_clip if clip == "pinch" else CLIPS[clip]
    if not path.is_file():
        pytest.skip(f"{path} not found")
    contacts, p_plain, p_kept, frames, skin = run(addon, path, rig)
    assert {tuple(c["parts"]) for c in contacts} == EXPECTED[clip]
    worst = {"gap": 0.0, "pen": 0.0, "spot": 0.0}
    for c in contacts:
        assert "bones" in c, c.get("skipped")
        for frame in range(int(c["frames"][0]), int(c["frames"][1]) + 1):
            gap, pen, spot = measure_contact(skin, c, frame)
            worst = {"gap": max(worst["gap"], gap), "pen": max(worst["pen"], pen), "spot": max(worst["spot"], spot)}
    away = np.ones(len(frames), bool)
    for c in contacts:
        away &= ~((frames >= c["influence"][0]) & (frames <= c["influence"][1]))
    deviation = rotation_deviation_deg(p_plain, p_kept)[away].max() if away.any() else 0.0
    jerk = fingertip_jerk(p_kept, FPS) / fingertip_jerk(p_plain, FPS)
    print(json.dumps({"clip": clip, "rig": rig, "contacts": len(contacts), "gap_mm": 1e3 * worst["gap"],
                      "penetration_mm": 1e3 * worst["pen"], "spot_error_mm": 1e3 * worst["spot"],
                      "off_contact_deg": float(deviation), "jerk_ratio": jerk}))
    assert worst["gap"] <= 0.002
    assert worst["pen"] <= 0.001
    assert worst["spot"] <= 0.005
    assert deviation <= 0.5
    assert jerk <= 1.1

"""Bakes that must keep the reference or say why not: a character's own clip and a
simulation that diverges (RobotExpressive from the shared data, its bones glTF placeholders)."""
import bpy
import numpy as np
import pytest

from retarget_rigs import character

FINGER_PARTS = ("finger", "thumb")


@pytest.fixture
def robot(shared_data):
    ob = character(shared_data, "robot")
    ob.animation_data_create()
    ob.animation_data.action = bpy.data.actions["Wave"]
    return ob


def _world_error(addon, job, rotations):
    ref = job.reference
    return addon.solver.physics.guard.world_error_deg(job.rig.model, ref.rotations, rotations,
                                             ref.base_positions, ref.base_rotations)


def test_placeholder_bone_lengths_become_the_limb_segment(addon, robot):
    """glTF joints have no tail: the importer gives the robot's bones ~1 % of the limb.
    Capsules run to the child joint instead, so a skin radius is a limb's, not the
    whole forearm around one joint."""
    job = addon.signsim_addon.bake.job.prepare(bpy.context.scene, robot, preset="default")
    names, model = job.rig.bone_names, job.rig.model
    bones = robot.data.bones
    scale = job.rig.world_scale
    for bone, child in (("LowerArm.R", "Palm2.R"), ("UpperArm.L", "LowerArm.L"), ("Index.R", "Index2.R")):
        i = names.index(bone)
        segment = (bones[child].head_local - bones[bone].head_local).length * scale
        assert bones[bone].length * scale < 0.05 * segment  # the placeholder
        assert model.capsule_length[i] == pytest.approx(segment, rel=1e-6)
        assert model.capsule_radius[i] < model.capsule_length[i]
    # a leaf gets its parent's segment (equal Bone.lengths here)
    assert model.capsule_length[names.index("Index2.R")] == pytest.approx(
        model.capsule_length[names.index("Index.R")], rel=1e-6)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="open: the palm volume bends the robot's fingers up to 35° off its own "
                   "Wave (their spheres overlap the palm on every frame) and the contact explains it, unwarned")
def test_the_robots_own_wave_is_kept_or_its_change_is_said(addon, robot):
    """The artist's clip, no retarget: the fingers stay within 10° of it, or a warning
    says that bones moved more than that (never a silent change of the handshape)."""
    bake = addon.signsim_addon.bake.job
    job = bake.prepare(bpy.context.scene, robot, preset="default")
    solved = bake.solve(job)
    m = solved.metrics
    err = _world_error(addon, job, solved.rotations)
    fingers = [k for k, p in enumerate(job.rig.parts) if p.split(".")[0] in FINGER_PARTS]
    if err[:, fingers].max() >= 10.0:
        assert any("more than 10°" in w or "diverged" in w for w in m["warnings"]), (err[:, fingers].max(),
                                                                                   m["warnings"])
    assert m["held_overlap_mm"].get("finger–palm") is None  # the palm volume is the skin's


@pytest.mark.slow
def test_a_diverging_arm_follows_the_reference_counted_and_warned(addon, robot):
    """Without PD gains the right arm falls under gravity, far from the reference: the
    guard passes it (and the hand it carries) through from the reference where it is
    more than CONTACT_MAX_DEG off, counts the frames as fallbacks and names the bones;
    no bone ends more than CONTACT_MAX_DEG off, and the arm's frames between
    DIVERGED_DEG and it are said."""
    bake = addon.signsim_addon.bake.job
    guard = addon.solver.physics.guard
    physics = robot.signsim.physics
    for group in ("upper_arm", "forearm"):
        setattr(physics, f"{group}_frequency", 0.0)
    job = bake.prepare(bpy.context.scene, robot)
    solved = bake.solve(job)
    m = solved.metrics
    said = [w for w in m["warnings"] if "diverged" in w or "strayed" in w]
    assert any("UpperArm" in w or "LowerArm" in w for w in said), said
    assert any("diverged" in w for w in said)
    assert m["baked"]["fallbacks"] > 0
    err = _world_error(addon, job, solved.rotations)
    names = job.rig.bone_names
    for bone in ("UpperArm.R", "LowerArm.R"):  # falling, its hand touching nothing in the reference
        assert err[:, names.index(bone)].max() <= guard.CONTACT_MAX_DEG + 1.0, bone
    arm = err[:, names.index("UpperArm.R")]
    if arm.max() > guard.DIVERGED_DEG:
        assert any("strayed" in w and "Arm" in w for w in m["warnings"]), m["warnings"]
    assert np.all(np.isfinite(solved.rotations))

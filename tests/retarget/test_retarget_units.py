"""The retarget does not depend on the rig's units: the CC0 base mesh in metres and the
same character as a centimetre rig (data 100× larger, shrunk back by the armature's
object scale or by the scene's unit scale 0.01) get the same motion — every bone's
rotation (pose bones' world matrices) and the root's path, 100× larger in the
centimetre data."""
import pathlib

import bpy
import numpy as np
import pytest

from retarget_rigs import centimetre_rig

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
CMU = DATA / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh"


def _retarget(rt, variant):
    ob = centimetre_rig(DATA, variant)
    bpy.context.scene.render.fps = 30
    with rt.source_clip(str(CMU)) as src:
        res = rt.retarget(src.armature, ob, rt.auto_map(src.armature, ob), source_fps=src.fps,
                          frame_range=(200, 600), action_name="units")
    rot, root = [], []
    for f in res.frames:
        bpy.context.scene.frame_set(int(f))
        m = np.array([np.array(ob.matrix_world @ pb.matrix) for pb in ob.pose.bones])
        r = m[:, :3, :3] / np.linalg.norm(m[:, :3, :3], axis=1, keepdims=True)
        rot.append(r)
        root.append(np.array(ob.pose.bones[0].head))
    return np.array(rot), np.array(root)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ("object", "units"))
def test_a_centimetre_rig_gets_the_same_motion(addon, variant):
    rt = addon.signsim_addon.retarget.api
    rot_m, root_m = _retarget(rt, "metres")
    rot_c, root_c = _retarget(rt, variant)
    # angle between the world rotations of every bone at every frame
    rel = np.einsum("fbji,fbjk->fbik", rot_m, rot_c)
    angle = np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))
    print(f"\nworst bone rotation difference {angle.max():.3f}°")
    assert angle.max() < 0.5          # the scene's unit scale turns no bone
    np.testing.assert_allclose(root_c, 100.0 * root_m, atol=1e-3 * 100 * np.abs(root_m).max())


def _world_heads(rt, ob, placement):
    """World heads (F, N, 3) of ob's bones retargeted from CMU with ob's object at
    placement (a 4x4 Matrix, or None for as imported)."""
    if placement is not None:
        ob.matrix_world = placement @ ob.matrix_world
        bpy.context.view_layer.update()
    bpy.context.scene.render.fps = 30
    with rt.source_clip(str(CMU)) as src:
        res = rt.retarget(src.armature, ob, rt.auto_map(src.armature, ob), source_fps=src.fps,
                          frame_range=(200, 320), action_name="placed")
    heads = []
    for f in res.frames:
        bpy.context.scene.frame_set(int(f))
        heads.append([np.array(ob.matrix_world @ pb.head) for pb in ob.pose.bones])
    return np.array(heads)


@pytest.mark.slow
def test_a_turned_and_moved_rig_gets_the_motion_in_its_own_frame(addon):
    """A character the animator turned to face the camera and moved keeps its placement:
    the motion is the as-imported one carried by the object's turn and offset, bone for
    bone (was: the hips keys turned it back to face world -Y, 0.54 m off)."""
    from mathutils import Matrix
    rt = addon.signsim_addon.retarget.api
    plain = _world_heads(rt, centimetre_rig(DATA, "metres"), None)
    placement = Matrix.Translation((2.0, -1.0, 0.25)) @ Matrix.Rotation(np.radians(90.0), 4, 'Z')
    placed = _world_heads(rt, centimetre_rig(DATA, "metres"), placement)
    m = np.array(placement)
    expected = plain @ m[:3, :3].T + m[:3, 3]
    err = np.linalg.norm(placed - expected, axis=-1)
    print(f"\nlargest bone head difference {1000 * err.max():.4f} mm")
    assert err.max() < 1e-4


@pytest.mark.slow
def test_the_hip_line_keeps_the_sources_heading(addon):
    """Rokoko's dance (its rest is no standing pose, so its first frame is the reference,
    with the shoulders twisted against the hips) onto the base mesh: the target's hip line,
    measured in the target's own facing frame, turns with the source's on every frame (the
    pelvis follows the hip line, not the shoulder line)."""
    import retarget_measure as rm
    rt = addon.signsim_addon.retarget.api
    ob = centimetre_rig(DATA, "metres")
    bpy.context.scene.render.fps = 24
    with rt.source_clip(str(DATA / "mocap" / "animdrawings_rokoko_jesse_dance.bvh")) as src:
        res = rt.retarget(src.armature, ob, rt.auto_map(src.armature, ob), source_fps=src.fps,
                          frame_range=(1, 1000))
        poses_s = rm.Poses(src.armature, res.source_frames, from_motion=True)
    poses_t = rm.Poses(ob, res.frames)

    def heading(p):
        lat = (p.heads[:, p.body.limbs[("L", "thigh")][0]] - p.heads[:, p.body.limbs[("R", "thigh")][0]])
        return np.degrees(np.arctan2(lat[:, 1], lat[:, 0]))
    diff = (heading(poses_t) - heading(poses_s) + 180.0) % 360.0 - 180.0
    print(f"\nhip-line heading target - source: {diff.min():.2f} .. {diff.max():.2f}°")
    assert np.abs(diff).max() < 3.0

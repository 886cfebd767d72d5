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


@pytest.mark.parametrize("variant", ("object", "units"))
def test_a_centimetre_rig_gets_the_same_motion(addon, variant):
    rt = addon.signsim_addon.retarget.api
    rot_m, root_m = _retarget(rt, "metres")
    rot_c, root_c = _retarget(rt, variant)
    # angle between the world rotations of every bone at every frame
    rel = np.einsum("fbji,fbjk->fbik", rot_m, rot_c)
    angle = np.degrees(np.arccos(np.clip((np.trace(rel, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))
    print(f"\nworst bone rotation difference {angle.max():.3f}°")
    assert angle.max() < 0.5          # was 10–14° at the feet with the scene's unit scale
    np.testing.assert_allclose(root_c, 100.0 * root_m, atol=1e-3 * 100 * np.abs(root_m).max())

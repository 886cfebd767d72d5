"""The physics pass on characters SignSim has never seen: body volumes from the skin,
metres whatever the scale, warnings for every fallback.

Motion is made here by keying the target rig's own bones (no retargeting involved).
Penetrations are checked against an exact mesh test: distance from the bones' sample
spheres to the evaluated skin (mathutils.bvhtree.BVHTree) of the touched body part.
"""
import json
import pathlib
import sys

import bpy
import numpy as np
import pytest
from mathutils import Matrix, Quaternion, Vector
from mathutils.bvhtree import BVHTree

sys.path.insert(0, str(pathlib.Path(__file__).parent))  # --import-mode=importlib: helpers
from retarget_rigs import character  # noqa: E402


@pytest.fixture
def mods(addon):
    a = addon.signsim_addon
    return a.bake, a.body_geometry, a.errors.SignSimError


def key_pose(ob, poses, action_name="drive"):
    """Key `poses` ([{bone: (w, x, y, z) local rotation}] one per frame, from frame 1) on ob."""
    ob.animation_data_create()
    action = bpy.data.actions.new(action_name)
    ob.animation_data.action = action
    for f, pose in enumerate(poses, start=1):
        for pb in ob.pose.bones:
            pb.rotation_mode = 'QUATERNION'
            pb.rotation_quaternion = pose.get(pb.name, (1, 0, 0, 0))
            pb.keyframe_insert("rotation_quaternion", frame=f)
    return action


def test_smoke(mods, shared_data):
    bake, geo, _ = mods
    ob = character(shared_data, "godot")
    q = Quaternion((1, 0, 0), 0.3)
    poses = [{"f_index.02.R": Quaternion((1, 0, 0), 0.05 * k)} for k in range(20)]
    action = key_pose(ob, poses)
    warnings = []
    job = bake.prepare(bpy.context.scene, ob, action, preset="default", report=warnings.append)
    print(warnings)
    print([(m.kind, m.bone, len(m.vertices), len(m.triangles)) for m in job.rig.meshes])
    import time
    t = time.time()
    solved = bake.solve(job)
    print("solve", time.time() - t)
    m = bake.public_metrics(solved.metrics)
    print(json.dumps({k: v for k, v in m["baked"].items()}, indent=0)[:2000])
    print({k: len(v) for k, v in solved.metrics["contact_pairs"].items()})


def test_profile(mods, shared_data):
    import cProfile, pstats
    bake, geo, _ = mods
    ob = character(shared_data, "godot")
    poses = [{"f_index.02.R": Quaternion((1, 0, 0), 0.05 * k)} for k in range(20)]
    action = key_pose(ob, poses)
    job = bake.prepare(bpy.context.scene, ob, action, preset="default")
    pr = cProfile.Profile()
    print(job.rig.model.capsule_radius, job.rig.bone_names)
    for m in job.rig.meshes:
        v = m.vertices
        print(m.kind, v.min(axis=0), v.max(axis=0))
        if m.kind.startswith("palm"):
            print(np.round(v, 3))
    for f in bake.body_fields(job.rig, 0.005, 0.02):
        print(f.mesh.kind, f.grid.values.shape, f.grid.spacing, f.grid.margin, len(f.bones), f.radius.max())

"""The bake reports penetration measured on the evaluated skin, beside its body model's.

chin_cheek on the signer: the body model (capsules and the face's distance field) says the
bake leaves ~0.1 mm in the face, while the baked index fingertip's skin sinks millimetres
into the closed face mesh. Checked here against an independent measure: the right hand's
finger vertices of the body mesh against the separate face mesh parented to the head.
"""
import pathlib

import bpy
import numpy as np
import pytest
from mathutils import Vector
from mathutils.bvhtree import BVHTree

from skin import evaluated_world_vertices

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
CHIN_CHEEK = ROOT / "sample_blends" / "chin_cheek.bvh"
SIGNER = ROOT / "sample_blends" / "signer.blend"
METHODS_AGREE_MM = 0.5  # the face mesh and the body mesh's own head skin lie this close


def _finger_vertices(mesh_ob, side="R"):
    """Vertices whose heaviest group is a finger or thumb bone of `side`."""
    names = {g.index for g in mesh_ob.vertex_groups
             if g.name.endswith(f".{side}") and g.name.startswith(("f_", "thumb"))}
    return [v.index for v in mesh_ob.data.vertices
            if v.groups and max(v.groups, key=lambda g: g.weight).group in names]


def _depth_in_face(body, face, fingers):
    """Deepest finger vertex (mm, ≥ 0) inside the closed face mesh at the current frame."""
    tree = BVHTree.FromPolygons(list(map(Vector, evaluated_world_vertices(face))),
                                [tuple(p.vertices) for p in face.data.polygons])
    deepest = 0.0
    for p in evaluated_world_vertices(body)[fingers]:
        p = Vector(p)
        loc, normal, _i, dist = tree.find_nearest(p)
        if loc is not None and (p - loc).dot(normal) < 0:
            deepest = max(deepest, dist)
    return 1e3 * deepest


@pytest.mark.slow
def test_skin_penetration_the_body_model_misses_is_reported(addon, tmp_path):
    api = addon.signsim_addon
    out = tmp_path / "chin_cheek.blend"
    rt = api.retarget.api.retarget_files(api.retarget.api.RetargetRequest(
        rig=str(SIGNER), out=str(out), clips=(str(CHIN_CHEEK),)))
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    armature = bpy.data.objects[rt["armature"]]
    scene = bpy.context.scene
    reference = armature.animation_data.action
    # the case needs a bake whose finger sinks into the face skin: tracking the reference
    # itself (the projected target keeps it out of the face)
    job = api.bake.api.prepare(scene, armature, preset="default", project=False)
    solved = api.bake.api.solve(job)
    baked = api.bake.api.write(scene, job, solved)
    m = solved.metrics
    body, face = bpy.data.objects["SignerBody"], bpy.data.objects["SignerFace"]
    fingers = _finger_vertices(body)
    measured = {}
    for side, action in (("reference", reference), ("baked", baked)):
        armature.animation_data.action = action
        depth = []
        for f in job.frames:
            scene.frame_set(int(f))
            depth.append(_depth_in_face(body, face, fingers))
        measured[side] = np.array(depth)
        by_frame = np.array(m[side]["per_frame_skin_penetration_mm_by_kind"]["hand–face"])
        assert by_frame.shape == measured[side].shape
        assert m[side]["skin_penetration_max_mm_by_kind"]["hand–face"] == pytest.approx(
            measured[side].max(), abs=METHODS_AGREE_MM), side
        assert m[side]["skin_penetration_max_mm"] >= m[side]["skin_penetration_max_mm_by_kind"]["hand–face"]
    # the case the body model misses: the baked finger sinks into the face skin
    assert measured["baked"].max() > 2.0 > m["baked"]["penetration_max_mm"] + 1.0
    assert any("hand–face" in w and "on the skin" in w for w in m["warnings"]), m["warnings"]
    # the written action carries the same record (the Metrics panel reads it)
    assert api.bake.metrics_report.parse(baked.signsim.bake_metrics)["baked"]["skin_penetration_max_mm"] == \
        pytest.approx(m["baked"]["skin_penetration_max_mm"])

"""The bake keeps the contacts the retarget preserved: a fingertip the retarget put on the
chin stays there, measured on the evaluated skin (not on the solver's body model)."""
import pathlib

import bpy
import numpy as np
import pytest
from mathutils import Vector
from mathutils.bvhtree import BVHTree

from skin import evaluated_world_vertices

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
CHIN_CHEEK = ROOT / "sample_blends" / "chin_cheek.bvh"
GAP_TOLERANCE = 0.0005  # m: the baked skin gap stays this close to the retarget's
# Fingertip jerk of the bake over the reference's (%, the bake's own metric) at most: the
# CC0 base mesh none; the bundled signer, where the reference's fingertip dives 13.5 mm
# into the cheek in the frames before the contact and the simulation bends the finger out
# of it, +10.
JERK_LIMIT_PERCENT = {"signer": 10.0, "godot": 0.0}


def _rig_blend(name, shared_data, tmp):
    """A .blend with the rig: the bundled signer, or the CC0 base mesh imported with Blender's glTF importer."""
    if name == "signer":
        return ROOT / "sample_blends" / "signer.blend"
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=str(shared_data / "characters" / "godot_male_base_mesh_cc0.glb"))
    out = tmp / "godot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(out))
    return out


def _owned_vertices(mesh_ob, bone):
    """Indices of mesh_ob's vertices whose largest vertex-group weight (> 0.5) is `bone`'s."""
    group = mesh_ob.vertex_groups.get(bone)
    if group is None:
        return []
    out = []
    for v in mesh_ob.data.vertices:
        best = max(v.groups, key=lambda g: g.weight, default=None)
        if best is not None and best.group == group.index and best.weight > 0.5:
            out.append(v.index)
    return out


def _skin_gap(armature, bone_a, bone_b):
    """Signed distance (m, negative inside) of bone_a's skin to bone_b's skin at the current
    frame: the least over bone_a's skin vertices of the distance to the nearest point of
    bone_b's skin triangles (a mesh parented to bone_b stands for its skin), signed by
    that triangle's normal."""
    meshes = [o for o in bpy.data.objects if o.type == 'MESH' and o.parent == armature]
    points = []
    verts, polys, offset = [], [], 0
    on_b = [o for o in meshes if o.parent_type == 'BONE' and o.parent_bone == bone_b]
    for o in meshes:
        if o.parent_type == 'BONE':
            continue
        world = evaluated_world_vertices(o)
        points.extend(world[_owned_vertices(o, bone_a)])
        if not on_b:
            keep = set(_owned_vertices(o, bone_b))
            verts.extend(map(Vector, world))
            polys.extend([[offset + v for v in p.vertices] for p in o.data.polygons
                          if all(v in keep for v in p.vertices)])
            offset += len(world)
    for o in on_b:
        verts.extend(map(Vector, evaluated_world_vertices(o)))
        polys.extend([[offset + v for v in p.vertices] for p in o.data.polygons])
        offset += len(o.data.vertices)
    tree = BVHTree.FromPolygons(verts, polys)
    best = np.inf
    for p in points:
        loc, normal, _i, dist = tree.find_nearest(Vector(p))
        signed = dist if (Vector(p) - loc).dot(normal) >= 0 else -dist
        best = min(best, signed)
    return best


@pytest.mark.slow
@pytest.mark.parametrize("rig", ("signer", "godot"))
def test_a_preserved_face_contact_stays_where_the_retarget_put_it(addon, shared_data, tmp_path, rig):
    """chin_cheek retargeted with contacts (on by default) and baked: every contact the
    retarget kept is listed in the bake's metrics, and on each of its frames the baked
    fingertip skin is within GAP_TOLERANCE of the face skin where the retarget left it
    (the physics pass neither lifts it off nor presses it in); getting there and leaving
    adds at most JERK_LIMIT_PERCENT fingertip jerk."""
    api = addon.signsim_addon
    out = tmp_path / "chin_cheek.blend"
    # at the rig file's rate (the CC0 base mesh's 24 fps): the limits below were set for that
    # input; at the clip's own 30 fps the godot bake raises fingertip jerk (docs/limits.md)
    rt = api.retarget.api.retarget_files(api.retarget.api.RetargetRequest(
        rig=str(_rig_blend(rig, shared_data, tmp_path)), out=str(out), clips=(str(CHIN_CHEEK),), fps="rig"))
    kept = [c for c in rt["contacts"] if "skipped" not in c]
    assert kept, rt["contacts"]
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    armature = bpy.data.objects[rt["armature"]]
    scene = bpy.context.scene
    job = api.bake.api.prepare(scene, armature)
    solved = api.bake.api.solve(job)
    honoured = solved.metrics["contacts_honoured"]
    assert [c["parts"] for c in honoured] == [c["parts"] for c in kept]
    assert solved.metrics["baked"]["jerk_change_percent"] <= JERK_LIMIT_PERCENT[rig]
    reference = armature.animation_data.action
    baked = api.bake.api.write(scene, job, solved)
    for c in honoured:
        bone_a, bone_b = c["bones"][0], (c["bones"][1:] or c["bones"])[0]
        for frame in range(int(c["frames"][0]), int(c["frames"][1]) + 1):
            gaps = []
            for action in (reference, baked):
                armature.animation_data.action = action
                scene.frame_set(frame)
                gaps.append(_skin_gap(armature, bone_a, bone_b))
            assert abs(gaps[1] - gaps[0]) <= GAP_TOLERANCE, (c["name"], frame, gaps)

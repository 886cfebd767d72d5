"""A thumb–index contact on the CC0 base mesh (the bundled fingerspelling clip), measured
on Blender's evaluated skin: the contact pass never pushes the thumb deeper into the
index than the plain retarget leaves it (beyond the 1 mm a kept contact may reach), and
what the JSON says of a kept contact is what the skin shows.

The skin of each finger's last two phalanges (vertices owned, by largest weight, by those
bones) is evaluated per frame (Armature modifier) and measured with mathutils.bvhtree.
"""
import json
import pathlib

import bpy
import numpy as np
import pytest
from mathutils import Vector
from mathutils.bvhtree import BVHTree

from retarget_rigs import character

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
CLIP = ROOT / "sample_blends" / "fingerspelling.bvh"
FPS = 30
NEAR = 0.005   # m: vertices farther than this from the other finger are not touching it


def _owned(ob, bones):
    """Indices of ob's vertices whose largest weight is one of `bones` (names)."""
    names = {g.index: g.name for g in ob.vertex_groups}
    out = []
    for v in ob.data.vertices:
        best = max(v.groups, key=lambda g: g.weight, default=None)
        if best is not None and names[best.group] in bones:
            out.append(v.index)
    return out


def least_distance(target, bones_a, bones_b, frames):
    """Per scene frame the least signed distance (m, negative inside) of the skin owned
    by bones_a to the skin owned by bones_b (signed by the nearest face's normal, for
    vertices within NEAR of it)."""
    ob = next(o for o in bpy.data.objects if o.type == 'MESH' and
              any(m.type == 'ARMATURE' and m.object == target for m in o.modifiers))
    ia, ib = _owned(ob, bones_a), set(_owned(ob, bones_b))
    polys = [list(p.vertices) for p in ob.data.polygons if all(v in ib for v in p.vertices)]
    out = []
    for f in frames:
        bpy.context.scene.frame_set(int(f))
        ev = ob.evaluated_get(bpy.context.evaluated_depsgraph_get())
        me = ev.to_mesh()
        co = [ob.matrix_world @ v.co for v in me.vertices]
        ev.to_mesh_clear()
        tree = BVHTree.FromPolygons(co, polys)
        best = NEAR
        for i in ia:
            loc, normal, _f, dist = tree.find_nearest(co[i], NEAR)
            if loc is not None:
                best = min(best, dist if (co[i] - loc).dot(normal) >= 0 else -dist)
        out.append(best)
    return np.array(out)


@pytest.mark.slow
def test_the_thumb_is_never_pushed_into_the_index(addon):
    rt = addon.signsim_addon.retarget.api
    bpy.context.scene.render.fps = FPS
    target = character(DATA, "godot")
    src = rt.source_clip(str(CLIP))
    bone_map = rt.auto_map(src.armature, target)
    plain = rt.retarget(src.armature, target, bone_map, source_fps=src.fps, action_name="plain")
    kept = rt.retarget(src.armature, target, bone_map, source_fps=src.fps, action_name="kept")
    rt.contact_pass.preserve(src.armature, target, kept)
    contacts = [c for c in json.loads(kept.action[rt.contact_pass.CONTACTS_PROP]) if c["kind"] == "finger"]
    assert any(c["parts"] == ["thumb_R", "index_R"] for c in contacts)
    thumb = {b.name for b in target.data.bones if b.name.startswith("thumb.0") and b.name.endswith(".R")}
    index = {b.name for b in target.data.bones if b.name.startswith("f_index.0") and b.name.endswith(".R")}
    thumb -= {min(thumb)}            # the last two phalanges, as the contact pass measures
    index -= {min(index)}
    for c in contacts:
        frames = np.arange(c["influence"][0], c["influence"][1] + 1)
        target.animation_data.action = kept.action
        target.animation_data.action_slot = kept.action.slots[0]
        with_pass = least_distance(target, thumb, index, frames)
        target.animation_data.action = plain.action
        target.animation_data.action_slot = plain.action.slots[0]
        without = least_distance(target, thumb, index, frames)
        deepest, deepest_plain = max(-with_pass.min(), 0.0), max(-without.min(), 0.0)
        print(json.dumps({"contact": c, "skin_penetration_mm": 1e3 * deepest,
                          "plain_skin_penetration_mm": 1e3 * deepest_plain}))
        assert deepest <= max(0.001, deepest_plain + 0.0005)
        if "skipped" not in c:
            assert c["penetration_mm"] == pytest.approx(1e3 * deepest, abs=0.3)

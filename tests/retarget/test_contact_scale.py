"""Contacts do not depend on the rig's units: the CC0 base mesh in metres, the same
character made 100× larger in its data with the scene's unit scale 0.01 (a centimetre
rig: the same size in metres), and the same character with the armature object scaled
0.01 (a 17 mm character) keep the same contacts with the same motion.

Every number comes from Blender: the pose bones' tails in the armature's space, the
contact list the retarget stores on the action.
"""
import json
import pathlib

import bpy
import numpy as np
import pytest

from retarget_rigs import character

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
CLIP = ROOT / "sample_blends" / "chin_cheek.bvh"
FPS = 30


def _godot(variant):
    """The base mesh's armature: 'm' as imported, 'cm' with armature and skin data 100×
    larger (scale applied) and the scene unit scale 0.01, 'objscale' with the armature
    object scaled 0.01. Returns (armature, metres of the character per armature unit
    after the object scale, as the metre rig's)."""
    ob = character(DATA, "godot")
    scene = bpy.context.scene
    if variant == "cm":
        for o in bpy.data.objects:
            o.select_set(o == ob or o.parent == ob)
        bpy.context.view_layer.objects.active = ob
        ob.scale = (100.0, 100.0, 100.0)
        bpy.context.view_layer.update()
        bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
        scene.unit_settings.scale_length = 0.01
        return ob, 0.01
    if variant == "objscale":
        ob.scale = (0.01, 0.01, 0.01)
        bpy.context.view_layer.update()
    return ob, 1.0


def _retarget(addon, variant, contacts=True):
    """(contacts stored on the action, pose bone tails (F, N, 3) in the character's metres
    in the armature's space, and the world length of one of those metres)."""
    rt = addon.signsim_addon.retarget.api
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.context.scene.render.fps = FPS
    target, per_unit = _godot(variant)
    src = rt.source_clip(str(CLIP))
    bone_map = rt.auto_map(src.armature, target)
    res = rt.retarget(src.armature, target, bone_map, source_fps=src.fps, action_name="kept")
    if contacts:
        rt.contact_pass.preserve(src.armature, target, res)
    tails = []
    for f in res.frames:
        bpy.context.scene.frame_set(int(f))
        tails.append([tuple(pb.tail) for pb in target.pose.bones])
    world = float(np.linalg.norm(np.array(target.matrix_world)[:3, 0])) * bpy.context.scene.unit_settings.scale_length
    found = json.loads(res.action.get(rt.contact_pass.CONTACTS_PROP, "[]")) if contacts else []
    return found, np.array(tails) * per_unit, world / per_unit


@pytest.mark.slow
@pytest.mark.parametrize("variant", ("cm", "objscale"))
def test_contacts_do_not_depend_on_the_rigs_units(addon, variant):
    ref, tails_ref, world_ref = _retarget(addon, "m")
    got, tails, world = _retarget(addon, variant)
    assert world_ref == pytest.approx(1.0)
    assert world == pytest.approx(1.0 if variant == "cm" else 0.01)
    key = [(c["parts"], c["frames"], "skipped" in c) for c in ref]
    assert [(c["parts"], c["frames"], "skipped" in c) for c in got] == key
    assert any(not s for _p, _f, s in key)          # the metre rig keeps a contact
    # the same motion (the character's metres), and the JSON's lengths are world
    # millimetres: the object scale shrinks them with the character
    err = np.linalg.norm(tails - tails_ref, axis=-1).max()
    print(json.dumps({"variant": variant, "max_tail_difference_mm": 1e3 * float(err),
                      "contacts": [[c["parts"], c.get("gap_mm"), c.get("penetration_mm"), c.get("spot_error_mm"),
                                    c.get("skipped")] for c in got]}))
    assert err <= 5e-4
    for a, b in zip(ref, got):
        for k in ("gap_mm", "penetration_mm", "spot_error_mm"):
            if k in a:
                assert b[k] == pytest.approx(a[k] * world, abs=0.05 * world + 1e-3), k

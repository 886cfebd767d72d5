"""Shared helpers of the retarget tests: target rigs and geometric measurements.

Measurements use only Blender's evaluated poses (heads of pose bones in world space), never
the retargeting code's own intermediate values.
"""
import pathlib

import addon_utils
import bpy
import numpy as np

CHARACTERS = {"godot": "godot_male_base_mesh_cc0.glb", "robot": "threejs_RobotExpressive.glb"}


SIGNER = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends" / "signer.blend"


def signer():
    """The bundled signer rig (armature `Signer` from sample_blends/signer.blend), or the
    stand-in below while that file is not in this tree."""
    if not SIGNER.is_file():
        return stand_in_signer()
    with bpy.data.libraries.load(str(SIGNER)) as (_src, dst):
        dst.objects = ["Signer"]
    ob = dst.objects[0]
    bpy.context.collection.objects.link(ob)
    return ob


def stand_in_signer():
    """Blender's human metarig without face, palm and breast bones (fingers hang from the
    hand), standing in for the signer rig until sample_blends/signer.blend is merged."""
    addon_utils.enable("rigify", default_set=True)
    bpy.ops.object.armature_human_metarig_add()
    ob = bpy.context.object
    bpy.ops.object.mode_set(mode='EDIT')
    bones = ob.data.edit_bones
    doomed = set()
    for b in bones:
        if b.parent is not None and b.parent.name == "spine.006":      # the face rig
            doomed |= {b.name} | {c.name for c in b.children_recursive}
        if b.name.startswith(("palm", "breast")):
            doomed.add(b.name)
    for b in bones:
        if b.parent is not None and b.parent.name.startswith("palm"):
            b.parent = b.parent.parent
    for name in doomed:
        bones.remove(bones[name])
    bpy.ops.object.mode_set(mode='OBJECT')
    ob.name = "Signer"
    return ob


def character(shared_data, key):
    """The armature of one of the shared glTF characters ('godot' or 'robot')."""
    before = set(bpy.data.objects)
    bpy.ops.import_scene.gltf(filepath=str(shared_data / "characters" / CHARACTERS[key]))
    return next(o for o in bpy.data.objects if o not in before and o.type == 'ARMATURE')


def target_rig(shared_data, key):
    """A fresh armature object in the current scene: 'signer', 'godot' or 'robot', or one
    of the CC0 base mesh's VARIANTS."""
    if key == "signer":
        return signer()
    if key in VARIANTS:
        return VARIANTS[key](shared_data)
    return character(shared_data, key)


def posed_heads(ob, frames):
    """World heads (F, N, 3) and tails (F, N, 3) of ob's pose bones at (sub)frames."""
    scene = bpy.context.scene
    heads = np.empty((len(frames), len(ob.pose.bones), 3))
    tails = np.empty_like(heads)
    for k, fr in enumerate(frames):
        scene.frame_set(int(np.floor(fr)), subframe=float(fr - np.floor(fr)))
        mw = ob.matrix_world
        heads[k] = [mw @ pb.head for pb in ob.pose.bones]
        tails[k] = [mw @ pb.tail for pb in ob.pose.bones]
    return heads, tails


def mapped_pairs(target, bone_map):
    """(parent, child) target bone pairs: child mapped, parent its nearest mapped ancestor.

    Returns (chain, branch): chain pairs are those whose parent has one mapped child,
    branch pairs those at bones with several (hips, chest, hand).
    """
    mapped = bone_map.as_dict()
    pairs = []
    for bone in target.data.bones:
        if bone.name not in mapped:
            continue
        parent = bone.parent
        while parent is not None and parent.name not in mapped:
            parent = parent.parent
        if parent is not None:
            pairs.append((parent.name, bone.name))
    count = {}
    for p, _c in pairs:
        count[p] = count.get(p, 0) + 1
    return ([pc for pc in pairs if count[pc[0]] == 1], [pc for pc in pairs if count[pc[0]] > 1])


def _directions(heads, i, j):
    d = heads[:, j] - heads[:, i]
    return d / np.linalg.norm(d, axis=1, keepdims=True)


def _frames(a, b):
    """Orthonormal frames (F, 3, 3) from two direction series (F, 3)."""
    n = b - np.sum(a * b, axis=1, keepdims=True) * a
    n /= np.linalg.norm(n, axis=1, keepdims=True)
    return np.stack([a, n, np.cross(a, n)], axis=-1)


def direction_cosines(source, target, bone_map, result, pairs):
    """Per (parent, child) pair: (strict, offset_free) mean cosines over the clip.

    strict: between the target's parent→child head direction and the source's (mapped
    bones). offset_free: how well the parent's frame spanned by this direction and a
    sibling's follows the source's same frame up to one constant rotation (the two
    skeletons place hips, shoulders and finger bases differently; that difference must stay
    constant in the body, not drift): the mean cosine of the angle between each frame's
    offset and the mean offset. Pairs whose source joints coincide (< 1 mm) are left out.
    """
    import retarget_measure
    hs, _ = posed_heads(source, result.source_frames)
    ht, _ = posed_heads(target, result.frames)
    ht = ht @ retarget_measure.rig_turn(target).T      # the target in its own facing frame
    si = {b.name: i for i, b in enumerate(source.data.bones)}
    ti = {b.name: i for i, b in enumerate(target.data.bones)}
    mapped = bone_map.as_dict()
    siblings = {}
    for p, c in pairs:
        siblings.setdefault(p, []).append(c)
    out = {}
    for p, c in pairs:
        if np.linalg.norm(hs[0, si[mapped[c]]] - hs[0, si[mapped[p]]]) < 1e-3:
            continue
        ds = _directions(hs, si[mapped[p]], si[mapped[c]])
        dt = _directions(ht, ti[p], ti[c])
        strict = float(np.mean(np.sum(ds * dt, axis=1)))
        offset_free = strict
        others = [o for o in siblings[p] if o != c
                  and np.linalg.norm(hs[0, si[mapped[o]]] - hs[0, si[mapped[p]]]) > 1e-3]
        others = [o for o in others   # a sibling spanning a plane in both skeletons
                  if np.linalg.norm(np.cross(dt[0], _directions(ht, ti[p], ti[o])[0])) > 0.3
                  and np.linalg.norm(np.cross(ds[0], _directions(hs, si[mapped[p]], si[mapped[o]])[0])) > 0.3]
        if others:
            o = max(others, key=lambda o: np.linalg.norm(np.cross(dt[0], _directions(ht, ti[p], ti[o])[0])))
            fs = _frames(ds, _directions(hs, si[mapped[p]], si[mapped[o]]))
            ft = _frames(dt, _directions(ht, ti[p], ti[o]))
            offsets = np.swapaxes(fs, 1, 2) @ ft                       # (F, 3, 3)
            u, _s, vt = np.linalg.svd(offsets.sum(0))
            mean = u @ np.diag([1, 1, np.linalg.det(u @ vt)]) @ vt
            cos_angle = (np.trace(mean.T @ offsets, axis1=1, axis2=2) - 1) / 2
            offset_free = float(np.mean(cos_angle))
        out[(p, c)] = (strict, offset_free)
    return out


BIPED = {"spine": "Bip01 Pelvis", "spine.001": "Bip01 Spine", "spine.002": "Bip01 Spine1",
         "spine.003": "Bip01 Spine2", "spine.004": "Bip01 Neck", "spine.005": "Bip01 Head"}
for _s in ("L", "R"):
    BIPED.update({f"shoulder.{_s}": f"Bip01 {_s} Clavicle", f"upper_arm.{_s}": f"Bip01 {_s} UpperArm",
                  f"forearm.{_s}": f"Bip01 {_s} Forearm", f"hand.{_s}": f"Bip01 {_s} Hand",
                  f"thigh.{_s}": f"Bip01 {_s} Thigh", f"shin.{_s}": f"Bip01 {_s} Calf",
                  f"foot.{_s}": f"Bip01 {_s} Foot", f"toe.{_s}": f"Bip01 {_s} Toe0"})
    for _k, _f in enumerate(("thumb", "f_index", "f_middle", "f_ring", "f_pinky")):
        for _j in range(3):
            BIPED[f"{_f}.{_j + 1:02d}.{_s}"] = f"Bip01 {_s} Finger{_k}{'' if _j == 0 else _j}"


def rename(ob, names):
    """Rename every bone of armature object ob: names(old name) → new name."""
    for b in list(ob.data.bones):
        b.name = names(b.name)


def biped(ob, clavicles_on_neck=False):
    """Make the CC0 base mesh's armature ob a 3ds Max Biped in place: Biped names (BIPED), a
    Bip01 root under the pelvis' head, the thighs on Bip01 Spine; with clavicles_on_neck
    the clavicles hang from Bip01 Neck, where Biped puts them (each stays where it is)."""
    rename(ob, lambda n: BIPED.get(n, n))
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    eb = ob.data.edit_bones
    root = eb.new("Bip01")
    pelvis = eb["Bip01 Pelvis"]
    root.head = pelvis.head
    root.tail = pelvis.head + (pelvis.tail - pelvis.head) * 0.5
    pelvis.parent = root
    for s in ("L", "R"):
        eb[f"Bip01 {s} Thigh"].parent = eb["Bip01 Spine"]
        if clavicles_on_neck:
            eb[f"Bip01 {s} Clavicle"].use_connect = False
            eb[f"Bip01 {s} Clavicle"].parent = eb["Bip01 Neck"]
    bpy.ops.object.mode_set(mode='OBJECT')
    return ob


def in_centimetres(ob):
    """Make armature object ob and the objects parented to it 100× larger in their data
    (scale applied), then shrink them back by the armature object's scale 0.01: the same
    character in the world, its bones in centimetres (as 3ds Max and many FBX exports)."""
    for o in bpy.data.objects:
        o.select_set(o == ob or o.parent == ob)
    bpy.context.view_layer.objects.active = ob
    ob.scale = [100.0 * s for s in ob.scale]
    bpy.context.view_layer.update()
    bpy.ops.object.transform_apply(location=False, rotation=False, scale=True)
    ob.scale = (0.01, 0.01, 0.01)
    bpy.context.view_layer.update()
    return ob


def max_biped(shared_data):
    """The CC0 base mesh as a 3ds Max Biped exports it: Biped names and hierarchy with the
    clavicles on the neck (biped), bones in centimetres under an object scale of 0.01."""
    return in_centimetres(biped(character(shared_data, "godot"), clavicles_on_neck=True))


def numbered(ob):
    """Rename every bone of ob Node_<n> (n: its index), as a glTF with unnamed joints."""
    names = [b.name for b in ob.data.bones]
    rename(ob, lambda n: f"Node_{names.index(n)}")
    return ob


def facing_plus_x(ob):
    """Turn armature object ob 90° about the world's Z axis: a rig facing -Y faces +X."""
    ob.rotation_mode = 'XYZ'
    ob.rotation_euler[2] += np.pi / 2
    bpy.context.view_layer.update()
    return ob


# the CC0 base mesh built as other tools give a character: every bone renamed Node_<n>, in
# centimetres under an object scale of 0.01, a 3ds Max Biped with the clavicles on its
# neck, turned to face +X
VARIANTS = {"godot_nodes": lambda data: numbered(character(data, "godot")),
            "godot_cm": lambda data: in_centimetres(character(data, "godot")),
            "max_biped": max_biped,
            "godot_plus_x": lambda data: facing_plus_x(character(data, "godot"))}


def centimetre_rig(shared_data, variant):
    """In a new empty file: the CC0 base mesh ("metres": as imported), or made 100× larger
    in its data (armature and skin, scale applied), then
    shrunk back to its size in metres by the armature object's scale 0.01 ('object') or
    by the scene's unit scale 0.01 ('units'): the same character in the world."""
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=str(shared_data / "characters" / CHARACTERS["godot"]))
    ob = next(o for o in bpy.data.objects if o.type == 'ARMATURE')
    if variant == "metres":
        return ob
    in_centimetres(ob)
    if variant == "units":
        ob.scale = (1.0, 1.0, 1.0)
        bpy.context.scene.unit_settings.scale_length = 0.01
    bpy.context.view_layer.update()
    return ob

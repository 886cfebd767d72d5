"""Contacts measured on a rig's evaluated skin (Blender's meshes and mathutils.bvhtree,
never the solver's own volumes): the retarget's and compose's contact tests."""
import pathlib

import bpy
import numpy as np
from mathutils import Vector
from mathutils.bvhtree import BVHTree

import retarget_measure as rm
from skin import evaluated_world_vertices

SIGNER = pathlib.Path(__file__).resolve().parents[2] / "sample_blends" / "signer.blend"
PATCH = 0.001        # m: skin within this of the deepest point is the touching patch


def signer_with_skin():
    """The bundled signer with its skin and face meshes, linked to the scene."""
    with bpy.data.libraries.load(str(SIGNER)) as (src, dst):
        dst.objects = list(src.objects)
    for ob in dst.objects:
        bpy.context.collection.objects.link(ob)
    return next(o for o in dst.objects if o.type == 'ARMATURE')


def _skins(armature):
    return [o for o in bpy.data.objects if o.type == 'MESH' and o.parent == armature and
            (o.parent_type == 'BONE' or any(m.type == 'ARMATURE' and m.object == armature for m in o.modifiers))]


class Skin:
    """The target's meshes, evaluated per frame in world space (m)."""

    def __init__(self, armature):
        self.armature = armature
        self.meshes = [(o, rm.owning_bones(o, 0.5)) for o in _skins(armature)]

    def part(self, bone, whole_mesh_on_bone=False):
        """[(mesh, vertex indices, polygons as index lists)] of the skin owned by `bone`; with
        whole_mesh_on_bone, a mesh parented to that bone stands for it alone."""
        if whole_mesh_on_bone:
            on_bone = [o for o, _d in self.meshes if o.parent_type == 'BONE' and o.parent_bone == bone]
            if on_bone:
                o = on_bone[0]
                return [(o, list(range(len(o.data.vertices))), [list(p.vertices) for p in o.data.polygons])]
        out = []
        for o, dom in self.meshes:
            idx = [i for i, b in enumerate(dom) if b == bone]
            if idx:
                keep = set(idx)
                polys = [list(p.vertices) for p in o.data.polygons if all(v in keep for v in p.vertices)]
                out.append((o, idx, polys))
        return out


def measure_contact(skin, contact, frame):
    """(gap m, penetration m, spot error m) of one contact at one scene frame, on the
    evaluated skin: the least signed distance of part a's skin vertices to part b's skin
    (BVH tree nearest point, signed by the face normal), and the distance from the middle
    of the touching patch to the transferred spot."""
    bpy.context.scene.frame_set(frame)
    bone_a, bone_b = contact["bones"]
    pts = np.concatenate([evaluated_world_vertices(o)[idx] for o, idx, _p in skin.part(bone_a)])
    verts, polys, offset = [], [], 0
    for o, _idx, p in skin.part(bone_b, whole_mesh_on_bone=True):
        w = evaluated_world_vertices(o)
        verts.extend(map(Vector, w))
        polys.extend([[offset + v for v in poly] for poly in p])
        offset += len(w)
    tree = BVHTree.FromPolygons(verts, polys)
    sd, near = [], []
    for p in pts:
        loc, normal, _i, dist = tree.find_nearest(Vector(p))
        sd.append(dist if (Vector(p) - loc).dot(normal) >= 0 else -dist)
        near.append(loc)
    sd, near = np.array(sd), np.array(near)
    patch = sd <= sd.min() + PATCH
    point = near[patch].mean(axis=0)
    a = skin.armature
    k = int(round(frame - contact["frames"][0]))
    spot = a.matrix_world @ a.pose.bones[bone_b].matrix @ Vector(contact["spot_local"][k])
    return max(sd.min(), 0.0), max(-sd.min(), 0.0), float(np.linalg.norm(point - np.array(spot)))

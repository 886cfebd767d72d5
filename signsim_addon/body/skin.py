"""Penetration between body parts measured on the evaluated skin (not on the proxies).

The skinned mesh's vertices are split into regions by the bone that dominates their
weights (solver.core.capsule_radii.dominant_owner): one region per bone the solver moves, one for
everything else (spine, hips, legs: the torso). Two regions are tested against each
other unless the rest pose already makes them touch (neighbours along a limb share
skin at the joint, webbed fingers share skin). For each tested pair whose triangles
intersect (mathutils.bvhtree.BVHTree.overlap), the penetration depth is the largest
distance of one region's vertices inside the other's surface: nearest point on that
region's triangles (BVHTree.find_nearest) with the vertex behind its face normal.
Source: Blender API, mathutils.bvhtree.
"""
import numpy as np

import bpy
from mathutils import Vector
from mathutils.bvhtree import BVHTree

from ...solver.core import capsule_radii
from ...solver.core.body_volumes import pair_kind, part_category
from .. import compat
from ..errors import SignSimError

TORSO = -1
UNWEIGHTED = -2  # vertices no bone moves: never tested
REST_CLEARANCE = 0.002  # m: pairs closer than this in the rest pose count as touching there


_AXES = [Vector(d) for d in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1))]


def _crossings(tree, origin, direction, limit=64):
    """Number of surface crossings of the ray from origin along direction."""
    count, p = 0, origin
    while count < limit:
        hit, _n, _i, _d = tree.ray_cast(p, direction)
        if hit is None:
            return count
        count += 1
        p = hit + direction * 1e-6
    return count


class SkinTest:
    """Region-pair penetration test of the skin of armature `ob` for the bones of `rig`
    (body.rig.RigModel of `ob`; its skin record gives the meshes, triangles and weights).
    Tested are the pairs the body model separates: a hand part (finger, thumb, palm)
    against any other region, and the capsule pairs of rig.model.
    Raises SignSimError when `ob` has no skinned mesh."""

    def __init__(self, ob, rig):
        bone_names = rig.bone_names
        skins = [s for s in rig.skin if isinstance(s[4], list)]
        if not skins:
            raise SignSimError(f"armature '{ob.name}' has no skinned mesh to measure penetration on")
        self.ob = ob
        self.meshes = [bpy.data.objects[s[0]] for s in skins]
        self.bone_names = bone_names
        index = {n: k for k, n in enumerate(bone_names)}
        regions, tris, offset = [], [], 0
        for _name, v, t, sparse, bones in skins:
            # the heaviest group owns a vertex (a joint's skin split 50/50 still has one)
            owner = capsule_radii.dominant_owner(len(v), *sparse, min_weight=0.0) if sparse is not None else np.full(
                len(v), -1)
            group_region = np.array([TORSO if b is None else index.get(rig.skeleton.names[b], TORSO) for b in bones]
                                    + [UNWEIGHTED])
            regions.append(group_region[owner])
            tris.append(t + offset)
            offset += len(v)
        self.region = np.concatenate(regions)
        self.triangles = np.concatenate(tris)
        # a triangle belongs to the region of its first corner's majority: all corners agree
        # except along region borders, where either side is as good
        r = self.region[self.triangles]
        self.tri_region = np.where(r[:, 1] == r[:, 2], r[:, 1], r[:, 0])
        self.region_ids = np.unique(self.region[self.region != UNWEIGHTED])
        self._region_mesh = {}  # region: (its vertices (k,), its triangles as lists of local indices)
        for r in self.region_ids:
            used, local = np.unique(self.triangles[self.tri_region == r], return_inverse=True)
            self._region_mesh[r] = (used, local.reshape(-1, 3).tolist())
        hand = {k for k, p in enumerate(rig.parts) if part_category(p) == "hand"}
        model_pairs = {tuple(p) for p in rig.model.pairs.tolist()}
        parents = rig.model.parents

        def tested(a, b):  # a < b; TORSO is the kinematic base's region
            adjacent = (b >= 0 and parents[b] == a) or (a >= 0 and parents[a] == b)
            return not adjacent and (a in hand or b in hand or (a, b) in model_pairs)
        self.pairs = self._candidate_pairs(tested)

    def world_vertices(self):
        """Evaluated skin vertices (V, 3) m in world space (the current depsgraph)."""
        deps = bpy.context.evaluated_depsgraph_get()
        out = []
        for m in self.meshes:
            ev = m.evaluated_get(deps)
            me = ev.to_mesh()
            try:
                co = np.empty(len(me.vertices) * 3)
                me.vertices.foreach_get("co", co)
            finally:
                ev.to_mesh_clear()
            mw = np.array(ev.matrix_world)
            out.append(co.reshape(-1, 3) @ mw[:3, :3].T + mw[:3, 3])
        return np.concatenate(out) * float(bpy.context.scene.unit_settings.scale_length)

    def _candidate_pairs(self, tested):
        """Region pairs (a < b) accepted by tested(a, b) that do not touch in the rest pose."""
        arm = self.ob.data
        old = arm.pose_position
        arm.pose_position = 'REST'
        try:
            bpy.context.view_layer.update()
            v = self.world_vertices()
        finally:
            arm.pose_position = old
            bpy.context.view_layer.update()
        ids = self.region_ids
        all_pairs = [(a, b) for k, a in enumerate(ids) for b in ids[k + 1:] if tested(a, b)]
        touching = {p for p, d in self.depths(v, all_pairs, clearance=REST_CLEARANCE).items() if d is not None}
        return [p for p in all_pairs if p not in touching]

    def depths(self, vertices, pairs=None, clearance=0.0):
        """{(region a, region b): penetration depth m, or None when their skin does not
        intersect (nor come within `clearance` m)} for vertices (V, 3) m of the posed skin."""
        pairs = self.pairs if pairs is None else pairs
        trees, boxes = {}, {}
        for r in self.region_ids:
            used = self._region_mesh[r][0]
            if len(used) == 0:
                continue
            boxes[r] = (vertices[used].min(axis=0) - clearance, vertices[used].max(axis=0) + clearance)
        out = {}
        for a, b in pairs:
            if a not in boxes or b not in boxes or np.any(boxes[a][0] > boxes[b][1]) or np.any(boxes[b][0] > boxes[a][1]):
                out[(a, b)] = None
                continue
            for r in (a, b):
                if r not in trees:
                    used, tri = self._region_mesh[r]
                    trees[r] = BVHTree.FromPolygons(vertices[used].tolist(), tri, all_triangles=True,
                                                    epsilon=clearance)
            if not trees[a].overlap(trees[b]):
                out[(a, b)] = None
                continue
            out[(a, b)] = max(self._inside(vertices, a, trees[b], boxes[b]), self._inside(vertices, b, trees[a], boxes[a]))
        return out

    def _inside(self, vertices, region, tree, box):
        """Deepest vertex of `region` inside the surface of `tree` (m, ≥ 0): behind the
        nearest face and inside by ray parity (an odd number of crossings along at least
        four of the six axis directions: the region's surface is open where it meets
        its neighbours, so one ray may leave through a hole)."""
        v = vertices[self.region == region]
        v = v[np.all((v >= box[0]) & (v <= box[1]), axis=1)]
        deepest = 0.0
        for p in v:
            p = Vector(p)
            hit, normal, _i, dist = tree.find_nearest(p)
            if hit is None or dist <= deepest or (p - hit).dot(normal) >= 0.0:
                continue
            if sum(_crossings(tree, p, d) % 2 for d in _AXES) >= 4:
                deepest = dist
        return deepest

    def penetrating(self, vertices=None):
        """{(region a, region b): penetration depth m} of the tested pairs whose skin
        intersects, for the current evaluated skin (or vertices (V, 3) m)."""
        d = self.depths(self.world_vertices() if vertices is None else vertices)
        return {p: x for p, x in d.items() if x is not None}

    def region_mesh(self, r):
        """(vertex indices (k,) into the skin's vertices, triangles [[i, j, l], …] as
        indices into those k) of region r."""
        return self._region_mesh[r]

    def region_name(self, r):
        """The bone name of region r, or "torso"."""
        return "torso" if r == TORSO else self.bone_names[r]


def skin_penetration(scene, ob, action, slot, rig, frames, vertices=None, worst=None, pairs=None, test=None,
                     progress=None):
    """{frame: deepest skin penetration m} with `action` (its `slot`) shown on `ob` at
    each of `frames` (skin.SkinTest of `rig`, or `test` when given); with a dict
    `vertices`, also fills {frame: evaluated skin vertices (V, 3) m}, with a dict `worst`
    {frame: "bone–bone" of the deepest pair, or None}, with a dict `pairs` {frame:
    {(bone a, bone b): depth m}} of every penetrating pair (bone indices of rig, −1 for
    the torso's skin). progress: None or callable(fraction of the frames measured) after
    each frame. The armature's own action, slot and the scene frame are restored."""
    ad = ob.animation_data
    old_action, old_handle, old_frame = ad.action, compat.assigned_slot_handle(ob), scene.frame_current
    test = test or SkinTest(ob, rig)
    out = {}
    try:
        compat.assign_action(ob, action, slot)
        for i, f in enumerate(frames):
            scene.frame_set(int(f))
            v = test.world_vertices()
            hits = test.penetrating(v)
            deepest = max(hits, key=hits.get) if hits else None
            out[float(f)] = hits[deepest] if hits else 0.0
            if vertices is not None:
                vertices[float(f)] = v
            if worst is not None:
                worst[float(f)] = deepest and "–".join(test.region_name(r) for r in deepest)
            if pairs is not None:
                pairs[float(f)] = {(int(a), int(b)): x for (a, b), x in hits.items()}
            if progress is not None:
                progress((i + 1) / len(frames))
    finally:
        compat.restore_action(ob, old_action, old_handle)
        scene.frame_set(old_frame)
    return out


def skin_depths(scene, ob, action, slot, rig, frames, test, progress=None):
    """{contact kind: (F,) deepest skin penetration m per frame} with `action` (its
    `slot`) shown on `ob` at each of `frames` (F,) scene frames; `test`: a
    SkinTest of `rig` (body.rig.RigModel) on `ob`. Every kind any tested
    region pair has appears, 0 where that pair's skin does not intersect. progress: as
    skin_penetration's."""
    pairs = {}
    skin_penetration(scene, ob, action, slot, rig, frames, pairs=pairs, test=test, progress=progress)

    def part(r):
        return "torso" if r == TORSO else rig.parts[r]
    kinds = {p: pair_kind(part(p[0]), part(p[1])) for p in test.pairs}
    out = {k: np.zeros(len(frames)) for k in sorted(set(kinds.values()))}
    for f, frame in enumerate(frames):
        for p, depth in pairs[float(frame)].items():
            out[kinds[p]][f] = max(out[kinds[p]][f], depth)
    return out

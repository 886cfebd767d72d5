"""The character's skin as arrays for solver.core.body_volumes: rest-pose vertices, triangles and the
body region (face, torso, left or right hand) each vertex belongs to.

Two kinds of skin are read: meshes deformed by the armature (an Armature modifier; a
vertex belongs to the region whose bones' vertex groups weigh most on it) and meshes
parented to a bone (every vertex belongs to that bone's region: the robot's rigid parts).
Vertices are the mesh data in the rest (bind) pose, in armature space and armature units.
"""
import bpy
import numpy as np

from ...solver.core import body_volumes
from ...solver.retarget import bonemap

FACE, TORSO = "face", "torso"
REGIONS = (FACE, TORSO, "hand.L", "hand.R")


def bone_regions(sk, body):
    """{bone index: region index into REGIONS} of the bones whose skin makes a body volume.

    face: the head, its neck and every unlabelled bone below the head (jaw, eyes);
    torso: hips, spine and unlabelled bones hanging from them (pelvis, breast);
    hand.<side>: the hand bones and metacarpals.
    """
    labelled = set(body.neck) | ({body.head} if body.head is not None else set())
    for bones in list(body.limbs.values()) + list(body.fingers.values()):
        labelled |= set(bones)
    labelled |= set(body.meta.values())
    out = {}
    for i in body.neck + ([body.head] if body.head is not None else []):
        out[i] = 0
    for i in [body.hips] + list(body.spine):
        if i is not None:
            out[i] = 1
    for side in bonemap.SIDES:
        k = 2 + bonemap.SIDES.index(side)
        for i in body.limbs.get((side, "hand"), []):
            out[i] = k
        for (s, _f), m in body.meta.items():
            if s == side:
                out[m] = k
    for i in sk.order():  # parents first: unlabelled bones inherit their parent's region
        p = sk.parents[i]
        if i not in out and i not in labelled and p >= 0 and out.get(p) in (0, 1):
            out[i] = out[p]
    return out


def skinned_meshes(armature):
    """The mesh objects `armature` deforms (an Armature modifier pointing at it): its
    children first, in the order Blender lists them, then any others (a skinned mesh
    need not be parented to its armature)."""
    def skinned(ob):
        return ob.type == 'MESH' and any(m.type == 'ARMATURE' and m.object == armature for m in ob.modifiers)
    children = [ob for ob in armature.children_recursive if skinned(ob)]
    return children + [ob for ob in bpy.data.objects if skinned(ob) and ob not in children]


def skin_weights(armature, sk):
    """The meshes that move with `armature` (bpy Object), read once for skin_regions:
    [(mesh object; vertices (V, 3) armature units, rest pose; triangles (T, 3); sparse vertex-group
    weights (vertex (k,), group (k,), weight (k,)) or None; skeleton index of each vertex
    group's bone or None (G,); or, for a mesh parented to a bone, None and that bone's
    index)]. Reading weights vertex by vertex is the slow part on a dense character."""
    to_arm = np.linalg.inv(np.array(armature.matrix_world))
    out = []
    deformed = skinned_meshes(armature)
    children = [ob for ob in armature.children_recursive if ob.type == 'MESH']
    for ob in children + [ob for ob in deformed if ob not in children]:
        skinned = ob in deformed
        on_bone = ob.parent == armature and ob.parent_type == 'BONE' and ob.parent_bone in sk.index
        if not (skinned or on_bone):
            continue
        mesh = ob.data
        co, tris = mesh_arrays(mesh)
        if skinned:
            m = to_arm @ np.array(ob.matrix_world)
            sparse = [(v.index, g.group, g.weight) for v in mesh.vertices for g in v.groups]
            owner = (tuple(np.array(c) for c in zip(*sparse)) if sparse else None,
                     [sk.index.get(g.name) for g in ob.vertex_groups])
        else:
            m = to_arm @ rest_world(armature, ob)
            owner = (None, sk.index[ob.parent_bone])
        out.append((ob, co @ m[:3, :3].T + m[:3, 3], tris) + owner)
    return out


def skin_regions(armature, sk, regions, weights=None):
    """[(vertices (V, 3) armature units, triangles (T, 3), region (V,) int or −1)] of the
    meshes that move with `armature` (bpy Object), rest pose; regions: {skeleton index:
    region}; weights: skin_weights(armature, sk) when already read."""
    out = []
    for _ob, v, tris, sparse, bones in (weights if weights is not None else skin_weights(armature, sk)):
        if isinstance(bones, list):
            group_region = [regions.get(b, -1) for b in bones]
            region = (body_volumes.region_owner(len(v), *sparse, group_region)
                      if sparse is not None and group_region else np.full(len(v), -1))
        else:
            region = np.full(len(v), regions.get(bones, -1))
        out.append((v, tris, region))
    return out


def region_points(skins, region):
    """(vertices, triangles) of every skin's part in `region` (index into REGIONS), joined."""
    verts, tris, offset = [], [], 0
    for v, t, r in skins:
        sv, st = body_volumes.submesh(v, t, r == region)
        verts.append(sv)
        tris.append(st + offset)
        offset += len(sv)
    if not verts:
        return np.zeros((0, 3)), np.zeros((0, 3), np.intp)
    return np.concatenate(verts), np.concatenate(tris)


def rest_world(armature, ob):
    """World matrix of `ob` with its armature in the rest pose (no scene update).

    For a bone parent: armature.matrix_world · Bone.matrix_local · T(0, length, 0) ·
    matrix_parent_inverse · matrix_basis (bpy.types.Object.parent_type 'BONE').
    """
    basis = np.array(ob.matrix_parent_inverse) @ np.array(ob.matrix_basis)
    if ob.parent_type == 'BONE':
        bone = armature.data.bones[ob.parent_bone]
        tail = np.eye(4)
        tail[1, 3] = bone.length
        return np.array(armature.matrix_world) @ np.array(bone.matrix_local) @ tail @ basis
    return np.array(armature.matrix_world) @ basis


def _separate_face(armature, ob, head_rest):
    """(vertices (V, 3) in the head bone's rest frame, armature units; triangles (T, 3)) of mesh `ob`."""
    co, tris = mesh_arrays(ob.data)
    m = np.linalg.inv(np.array(armature.matrix_world) @ head_rest) @ rest_world(armature, ob)
    return co @ m[:3, :3].T + m[:3, 3], tris


def mesh_arrays(mesh):
    """(vertex positions (V, 3) in the mesh's own space, triangles (T, 3)) of a bpy Mesh."""
    mesh.calc_loop_triangles()
    co = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", co)
    tris = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", tris)
    return co.reshape(-1, 3), tris.reshape(-1, 3).astype(np.intp)


PALM_HALF_THICKNESS = 0.012  # m, when the rig has no hand skin: an adult palm is 2–3 cm thick
TORSO_SPACING_FACTOR = 2.0   # torso fields at twice the face's grid spacing: flatter, larger


def body_meshes(armature, sk, body, simulated, rest, scale, chest, face_object, palm_normals, warnings,
                weights=None):
    """solver.core.body_volumes.BodyMesh volumes of the rig, vertices in metres, bone = skeleton index
    (the caller maps it to the model's), −1 for the chest (the kinematic base).

    simulated: skeleton indices of the simulated bones; rest (N, 4, 4) Bone.matrix_local;
    scale: metres per armature unit; face_object: a mesh to use as the face, else a mesh
    parented to the head bone, else the head-and-neck region of the skin; palm_normals:
    {side: (3,) armature-space unit normal towards the palm}. A volume that cannot be
    built is left out with a warning (so is a default thickness for a palm without skin);
    weights: skin_weights(armature, sk) when the caller has read them.
    """
    regions = bone_regions(sk, body)
    skins = skin_regions(armature, sk, regions, weights)
    out = []

    def in_frame(verts, bone):
        m = np.linalg.inv(rest[bone])
        return (verts @ m[:3, :3].T + m[:3, 3]) * scale

    head = body.head
    if head is None or head not in simulated:
        warnings.append("the head is not simulated: no hand–face contact")
    else:
        ob = face_object or next((c for c in armature.children if c.type == 'MESH' and c.parent_type == 'BONE'
                                  and c.parent_bone == sk.names[head]), None)
        if ob is not None:
            v, t = _separate_face(armature, ob, rest[head])
            out.append(body_volumes.BodyMesh(FACE, head, None, v * scale, t))
        else:
            v, t = region_points(skins, 0)
            if len(t) >= 4:
                out.append(body_volumes.BodyMesh(FACE, head, None, in_frame(v, head), t))
            else:
                warnings.append(f"no face on '{armature.name}': no mesh parented to bone '{sk.names[head]}' "
                                "and no skin weighted to the head and neck: no hand–face contact")
    v, t = region_points(skins, 1)
    if len(t) >= 4:
        out.append(body_volumes.BodyMesh(TORSO, -1, None, in_frame(v, chest), t))
    else:
        warnings.append(f"no torso on '{armature.name}': no skin weighted to the spine bones: "
                        "no hand–torso contact")
    for side in bonemap.SIDES:
        hand = body.limbs.get((side, "hand"))
        if not hand or hand[0] not in simulated:
            continue
        v, t = region_points(skins, 2 + bonemap.SIDES.index(side))
        if len(t) >= 4:  # the hand's own skin, open at the wrist and the knuckles
            out.append(body_volumes.BodyMesh(f"palm.{side}", hand[0], side, in_frame(v, hand[0]), t))
            continue
        bases = [b[0] for (s, f), b in body.fingers.items() if s == side and b and f != "thumb"]
        normal = palm_normals.get(side)
        if len(bases) < 2 or normal is None:
            warnings.append(f"no palm for hand '{sk.names[hand[0]]}': no skin and fewer than two fingers to span")
            continue
        knuckles = in_frame(np.array([rest[b][:3, 3] for b in bases]), hand[0])
        normal = np.linalg.inv(rest[hand[0]])[:3, :3] @ normal
        warnings.append(f"no skin on hand '{sk.names[hand[0]]}': its palm is a box spanning the knuckles, "
                        f"{2e3 * PALM_HALF_THICKNESS:.0f} mm thick (default)")
        mesh = body_volumes.palm_box(knuckles, normal, None, PALM_HALF_THICKNESS)
        out.append(body_volumes.BodyMesh(f"palm.{side}", hand[0], side, *mesh))
    return out


"""The head's skin of a character as arrays for solver.softface.tissue, and fingertip paths.

The head is the skin the head bone and the bones below it (jaw, eyes) carry at all — a
chin or jaw line blended half with the neck is soft tissue over the jaw bone as much as
the cheek is — on the mesh deformed by the armature that the fingertips touch: vertices
in the head bone's rest frame, metres. Its rim (where it joins the neck) is held by solver.softface.tissue.build_face.
"""
from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from ...solver.softface import tissue
from ...solver.retarget import bonemap, contact_transfer
from ..body import geometry, rig
from ..errors import SignSimError, from_solver


@dataclass(frozen=True)
class HeadSkin:
    """The head patch of one mesh.

    mesh: object name; indices (k,) its vertex indices in the patch; vertices (k, 3) m in
    the head bone's rest frame; triangles (T, 3) into them; to_mesh (3, 3): a head-frame
    displacement in m → the mesh's own coordinates (shape-key offsets); head_bone: name;
    axes (3, 3): columns left, forward, up of the body in the head frame; scale: metres
    per armature unit.
    """
    mesh: str
    indices: np.ndarray
    vertices: np.ndarray
    triangles: np.ndarray
    to_mesh: np.ndarray
    head_bone: str
    axes: np.ndarray
    scale: float


def _anatomy(armature):
    sk = rig.skeleton_of(armature.data)
    with from_solver(f"'{armature.name}': "):
        body = bonemap.analyse(sk)
    if body.head is None:
        raise SignSimError(f"armature '{armature.name}' has no head bone: no soft face")
    return sk, body


NEAR = 0.03  # m: a fingertip sample this close to a mesh's head skin counts as touching it


def head_skin(armature, unit_scale=1.0, near=None):
    """HeadSkin of `armature` (bpy Object): among the meshes deformed by it (Armature
    modifier), the vertices with any vertex-group weight on the head bone and the bones
    below it (solver.softface.tissue.weight_share > 0), and the triangles among them — on the mesh with the most such
    vertices within NEAR of the points `near` (k, 3) m in the head bone's frame (the
    fingertips over the clip: a face split from the rest of the head is the one they
    touch), else with the most such vertices. Raises SignSimError without a head bone or
    without such skin."""
    sk, body = _anatomy(armature)
    head = body.head
    below = set(sk.subtree(head))
    rest = np.array(armature.data.bones[sk.names[head]].matrix_local)
    scale = rig.object_scale(armature) * float(unit_scale)
    to_arm = np.linalg.inv(np.array(armature.matrix_world))
    to_head = np.linalg.inv(rest)
    patches = []
    for ob, v, tris, sparse, bones in geometry.skin_weights(armature, sk):
        if not isinstance(bones, list) or sparse is None:  # a mesh carried by a bone, or unweighted
            continue
        keep = tissue.weight_share(len(v), *sparse, [b in below for b in bones]) > 0
        if keep.any():
            head_v = (v @ to_head[:3, :3].T + to_head[:3, 3]) * scale  # head frame, metres
            patches.append((ob, keep, tris, head_v))
    if not patches:
        raise SignSimError(f"no skin of '{armature.name}' is weighted to its head bone "
                           f"'{sk.names[head]}': no soft face")
    tree = cKDTree(np.asarray(near, float).reshape(-1, 3)) if near is not None and len(near) else None

    def touched(patch):
        return 0 if tree is None else int((tree.query(patch[3][patch[1]])[0] < NEAR).sum())
    ob, keep, tris, head_v = max(patches, key=lambda p: (touched(p), int(p[1].sum())))
    tris = tris[keep[tris].all(axis=1)]
    indices = np.unique(tris)
    if len(tris) < 4:
        raise SignSimError(f"the head skin of '{ob.name}' has {len(tris)} triangles: no soft face")
    local = to_head @ to_arm @ np.array(ob.matrix_world)  # mesh → head frame, armature units
    verts = head_v[indices]
    remap = np.full(len(head_v), -1)
    remap[indices] = np.arange(len(indices))
    an = body.anatomy
    axes = rest[:3, :3].T @ np.stack([an.left, an.forward, an.up], 1)
    return HeadSkin(ob.name, indices, verts, remap[tris], np.linalg.inv(local[:3, :3]) / scale,
                    sk.names[head], axes, scale)


def landmark(head, name):
    """The skin vertex position (3,) m (head frame) nearest the face landmark `name`
    (chin, mouth, nose, cheek_L, cheek_R, forehead; solver.retarget.contact_transfer.LANDMARKS)
    placed in this head's box (the reference face's box mapped onto the skin above the
    chin)."""
    anat = head.vertices @ head.axes
    box = contact_transfer.face_box_of(anat)
    u = contact_transfer.normalise(np.array(contact_transfer.LANDMARKS[name]), contact_transfer.reference_face_box())
    spot = contact_transfer.denormalise(u, box)
    return head.vertices[int(np.argmin(np.linalg.norm(anat - spot, axis=1)))]


def touch_spots(head, points, within=0.01):
    """{landmark name: skin vertex position (3,) m} where fingertip points (k, 3) m (head
    frame) come within `within` m of the skin: per nearest face landmark, the skin vertex
    nearest to that landmark's closest point."""
    tree = cKDTree(head.vertices)
    dist, nearest = tree.query(np.asarray(points, float).reshape(-1, 3))
    close = dist < within
    if not close.any():
        return {}
    names = [n for n in contact_transfer.LANDMARKS if n not in ("ear_L", "ear_R", "crown")]
    marks = np.array([landmark(head, n) for n in names])
    spot_vertex = nearest[close]
    label = np.argmin(np.linalg.norm(head.vertices[spot_vertex][:, None] - marks[None], axis=2), axis=1)
    out = {}
    for k in np.unique(label):
        mine = np.flatnonzero(label == k)
        out[names[k]] = head.vertices[spot_vertex[mine[np.argmin(dist[close][mine])]]]
    return out


def fingertip_paths(armature, frames, scene):
    """(tails (F, k, 3) m, pad radii (k,) m, heads (F, k, 3) m) of the distal finger bones
    in the head bone's frame over scene frames `frames` (F,) of the armature's current
    animation (the radius: the bone's capsule radius property, else an adult's pad).
    Restores the scene's frame."""
    sk, body = _anatomy(armature)
    tips = [sk.names[b[-1]] for b in body.fingers.values() if b]
    if not tips:
        raise SignSimError(f"armature '{armature.name}' has no finger bones: no fingertip can dent the face")
    head = sk.names[body.head]
    scale = rig.object_scale(armature) * float(scene.unit_settings.scale_length)  # metres per armature unit
    bones = armature.data.bones
    radii = np.array([float(bones[n].get(rig.CAPSULE_PROP) or contact_transfer.FINGER_RADIUS / scale) * scale
                      for n in tips])
    keep = scene.frame_current
    out = np.empty((2, len(frames), len(tips), 3))
    for f, frame in enumerate(frames):
        scene.frame_set(int(frame))
        m = np.linalg.inv(np.array(armature.pose.bones[head].matrix))
        for k, end in enumerate(("tail", "head")):
            p = np.array([tuple(getattr(armature.pose.bones[n], end)) for n in tips])
            out[k, f] = (p @ m[:3, :3].T + m[:3, 3]) * scale
    scene.frame_set(keep)
    return out[0], radii, out[1]

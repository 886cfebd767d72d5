"""The character's body volumes as distance fields, and the folder that caches their grids.

Every capability that tests a pose against the body (the bake, the resolve) samples the
same fields: one solver.core.body_volumes.BodyField per volume of the rig (body.rig.RigModel)
that some sample may touch, plus, for the resolve, the neck's skin. Grids are keyed by
their mesh and spacing in the extension's user folder (solver.core.grid_cache), so a
character's fields are built once per machine.
"""
import numpy as np

from ...solver.core import grid_cache
from ...solver.core.body_volumes import TORSO, BodyMesh, build_field, hand_plates
from ...solver.retarget import bonemap
from ..errors import from_solver
from . import geometry


def grid_cache_dir():
    """The extension's user folder for cached body distance fields (created), or None
    when Blender gives none. Main thread only (bpy)."""
    import bpy
    try:
        return bpy.utils.extension_path_user(__package__.split(".signsim_addon")[0], path="grids", create=True)
    except (ValueError, OSError):  # not running as an extension, or no writable user folder
        return None


def _field(rig, mesh, plates, spacing, margin, cache_dir):
    """build_field of one BodyMesh with its grid from the cache folder (or None: built)."""
    return build_field(rig.model, rig.parts, mesh, plates,
                       lambda *a: grid_cache.face_grid(*a, cache_dir=cache_dir), spacing, margin)


def body_fields(rig, spacing, margin, cache_dir=None, progress=None):
    """BodyField of every volume of `rig` (body.rig.RigModel) that some sample may touch.

    The hands are sampled as plates across their palm volumes; torso fields use a
    coarser grid (geometry.TORSO_SPACING_FACTOR × spacing m). margin m: how far beyond
    the surface each grid reaches. cache_dir: folder of cached grids, or None. progress:
    None or callable(fraction of the volumes done) after each volume.
    """
    plates = hand_plates(rig.model, rig.parts, rig.meshes)
    fields = []
    for i, mesh in enumerate(rig.meshes):
        h = spacing * (geometry.TORSO_SPACING_FACTOR if mesh.kind == TORSO else 1.0)
        f = _field(rig, mesh, plates, h, margin, cache_dir)
        if f is not None:
            fields.append(f)
        if progress is not None:
            progress((i + 1) / len(rig.meshes))
    return tuple(fields)


def neck_fields(ob, rig, spacing, margin, cache_dir=None):
    """The neck's skin of armature `ob` as a body volume (a 1-tuple of BodyField attached
    to the first neck bone of `rig`, a body.rig.RigModel of `ob`), or (): the bake's face
    volume is the face mesh when the rig has one, and its neck capsules are off, so without
    this a hand could pass through the neck. The skeleton and the skin are rig's, read
    once (rig.skeleton, rig.skin). Raises SignSimError when the skeleton cannot be analysed."""
    sk = rig.skeleton
    with from_solver():
        body = bonemap.analyse(sk)
    neck = [i for i in body.neck if sk.names[i] in rig.bone_names]
    if not neck:
        return ()
    v, t = geometry.region_points(geometry.skin_regions(ob, sk, {i: 0 for i in neck}, rig.skin), 0)
    if len(t) < 4:
        return ()
    to_bone = np.linalg.inv(np.array(ob.data.bones[sk.names[neck[0]]].matrix_local))
    mesh = BodyMesh(TORSO, rig.bone_names.index(sk.names[neck[0]]), None,
                    (v @ to_bone[:3, :3].T + to_bone[:3, 3]) * rig.world_scale, t)
    field = _field(rig, mesh, hand_plates(rig.model, rig.parts, rig.meshes),
                   spacing * geometry.TORSO_SPACING_FACTOR, margin, cache_dir)
    return () if field is None else (field,)

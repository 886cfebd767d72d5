"""Know every datablock an operation creates, and remove them all again.

Blender's importers create objects, armatures, actions, meshes, materials, images… and
leave half of them behind when they fail. `Tracker` snapshots every ID collection of
bpy.data (by session_uid) on entry; `created()` lists what is new, and on exit the new
IDs are removed — always (`keep=False`) or only when the block raised (`keep=True`).
`NameGuard` gives the library's datablocks their own names while they share bpy.data with
the open file: a file datablock holding a wanted name is parked under a temporary name and
renamed back at the end, so neither side keeps a '.001' suffix.
"""
import bpy
import numpy as np


def _id_collections():
    out = []
    for prop in bpy.types.BlendData.bl_rna.properties:
        if prop.type != 'COLLECTION':
            continue
        ft = prop.fixed_type
        if ft is not None and _is_id_type(ft):
            out.append(prop.identifier)
    return tuple(out)


def _is_id_type(rna):
    base = rna
    while base is not None:
        if base.identifier == "ID":
            return True
        base = base.base
    return False


_COLLECTIONS = None


def id_collections():
    global _COLLECTIONS
    if _COLLECTIONS is None:
        _COLLECTIONS = _id_collections()
    return _COLLECTIONS


def _uids(coll):
    # foreach_get reads every ID's session_uid in one call: a folder import keeps every
    # clip in bpy.data until the library is written, so a Python loop here would make
    # each file slower than the one before
    uids = np.empty(len(coll), dtype=np.int32)
    coll.foreach_get("session_uid", uids)
    return uids


def snapshot():
    """{collection name: session_uid array} of every ID in bpy.data."""
    out = {}
    for name in id_collections():
        coll = getattr(bpy.data, name, None)
        if coll is not None:
            out[name] = _uids(coll)
    return out


def new_ids(before):
    """The IDs in bpy.data that were not there at `before` (a snapshot())."""
    out = []
    for name in id_collections():
        coll = getattr(bpy.data, name, None)
        if coll is None:
            continue
        new = np.nonzero(~np.isin(_uids(coll), before.get(name, ())))[0]
        out.extend(coll[int(i)] for i in new)
    return out


def remove_ids(ids):
    ids = [i for i in ids if i is not None]
    if not ids:
        return
    # Shape keys and other embedded-ish IDs go with their owners; batch_remove skips none.
    try:
        bpy.data.batch_remove(ids)
    except (ReferenceError, RuntimeError):
        for i in ids:
            try:
                coll = getattr(bpy.data, _collection_of(i))
                coll.remove(i)
            except Exception:  # already gone with its owner
                pass


def _collection_of(id_):
    t = type(id_).__name__
    return {"Object": "objects", "Action": "actions", "Armature": "armatures"}.get(t, "")


class Tracker:
    """Context manager: removes every ID created inside the block (see module doc)."""

    def __init__(self, keep=False):
        self.keep = keep
        self.before = None

    def __enter__(self):
        self.before = snapshot()
        return self

    def created(self):
        return new_ids(self.before)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None and self.keep:
            return False
        remove_ids(self.created())
        return False


class NameGuard:
    """Give the library's datablocks the names they should have without renaming the open
    file's datablocks for good.

    `claim(id_, name)` names `id_`. Whoever else holds that name — a datablock of the open
    file, or one an import just made and has not claimed yet — is parked under a
    temporary name; the file's own datablocks get their names back on exit, after
    SignSim's are gone, so exit the guard last (`with NameGuard() as g, Tracker(): …`).
    Two claims of one name keep Blender's '.001' rule."""

    TYPES = {"Action": "actions", "Object": "objects", "Armature": "armatures"}

    def __init__(self):
        self.parked = []
        self.claimed = set()

    def __enter__(self):
        return self

    def claim(self, id_, name):
        coll = getattr(bpy.data, self.TYPES.get(type(id_).__name__, ""), None)
        other = coll.get(name) if coll is not None else None
        if other is not None and other != id_ and other.session_uid not in self.claimed \
                and other.library is None:
            self.parked.append((other, other.name))
            other.name = f"\u2063ssguard{len(self.parked):06d}"
        if id_.name != name:
            id_.name = name
        self.claimed.add(id_.session_uid)
        return id_.name

    def __exit__(self, exc_type, exc, tb):
        for id_, name in reversed(self.parked):
            try:
                id_.name = name
            except ReferenceError:
                pass
        return False


class SceneState:
    """Save and restore what importers change in the open scene: frame rate, frame range,
    current frame, active object, selection and mode. Importers run in Object Mode."""

    def __init__(self, context):
        self.context = context

    def __enter__(self):
        ctx = self.context
        scene, vl = ctx.scene, ctx.view_layer
        r = scene.render
        self.scene = scene
        self.values = (r.fps, r.fps_base, scene.frame_start, scene.frame_end,
                       scene.frame_current, scene.use_preview_range,
                       scene.frame_preview_start, scene.frame_preview_end)
        self.active = vl.objects.active
        self.selected = [o for o in vl.objects if o.select_get()]
        self.mode = None
        if ctx.mode != 'OBJECT' and self.active is not None:
            self.mode = self.active.mode
            bpy.ops.object.mode_set(mode='OBJECT')
        return self

    def __exit__(self, exc_type, exc, tb):
        scene = self.scene
        try:
            vl = bpy.context.view_layer
            if bpy.context.mode != 'OBJECT' and vl.objects.active is not None:
                bpy.ops.object.mode_set(mode='OBJECT')
        except (RuntimeError, ReferenceError):
            pass
        r = scene.render
        (r.fps, r.fps_base, scene.frame_start, scene.frame_end, frame,
         scene.use_preview_range, scene.frame_preview_start, scene.frame_preview_end) = self.values
        if scene.frame_current != frame:
            scene.frame_set(frame)
        vl = bpy.context.view_layer
        for o in vl.objects:
            o.select_set(False)
        for o in self.selected:
            try:
                o.select_set(True)
            except (ReferenceError, RuntimeError):
                pass
        try:
            vl.objects.active = self.active
        except ReferenceError:
            vl.objects.active = None
        if self.mode and self.active is not None and self.mode != 'OBJECT':
            try:
                bpy.ops.object.mode_set(mode=self.mode)
            except RuntimeError:
                pass
        return False

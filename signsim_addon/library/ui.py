"""What the library's operators and sidebar need beyond the library API: which library
file the scene uses, the sidebar's mirror of its clips, and the viewport preview."""
import math
import os

import bpy

from . import store
from .. import keys, preferences


def library_path(context, override=""):
    """The library .blend: an explicit path, else the scene's, else the preferences'."""
    path = override or context.scene.signsim.library_path
    if path:
        return os.path.abspath(bpy.path.abspath(os.path.expanduser(path)))
    return preferences.library_path(context)


def refresh_list(context, library_file=None, select=None):
    """Mirror the library's clips into Scene.signsim.clips (empty when no library yet)."""
    settings = context.scene.signsim
    library_file = library_file or library_path(context)
    records = store.list_clips(library_file) if os.path.isfile(library_file) else []
    current = select or (settings.clips[settings.clip_index].name
                         if 0 <= settings.clip_index < len(settings.clips) else None)
    settings.clips.clear()
    for rec in records:
        item = settings.clips.add()
        item.name = rec["name"]
        item.tags = ", ".join(rec["tags"])
        item.catalog = rec["catalog"]
        item.fps = rec["fps"]
        item.frames = rec["frames"]
        item.duration = rec["duration_s"]
        item.bones = rec["bones"]
        item.skeleton = rec["skeleton"]
        item.source = rec["source"]
        item.warnings = "\n".join(rec["warnings"])
    names = [r["name"] for r in records]
    settings.clip_index = names.index(current) if current in names else (0 if names else -1)
    return records


def item_record(item):
    """The list item as a clip record, for library.matches."""
    return {"name": item.name, "catalog": item.catalog, "source": item.source,
            "tags": [t.strip() for t in item.tags.split(",") if t.strip()],
            "duration_s": item.duration, "fps": item.fps, "skeleton": item.skeleton}


def active_item(context):
    settings = context.scene.signsim
    if 0 <= settings.clip_index < len(settings.clips):
        return settings.clips[settings.clip_index]
    return None


def clear_preview(context):
    """Remove the previous preview skeleton(s), their armature data and actions."""
    for ob in [o for o in bpy.data.objects if o.signsim.is_preview]:
        data = ob.data
        actions = set()
        if ob.animation_data:
            for track in ob.animation_data.nla_tracks:
                actions.update(s.action for s in track.strips if s.action)
        bpy.data.objects.remove(ob)
        if data is not None and data.users == 0:
            bpy.data.armatures.remove(data)
        for a in actions:
            if a.users == 0:
                bpy.data.actions.remove(a)


def preview_clip(context, library_file, name):
    """Append the clip and its skeleton, play it at its true speed in the scene.

    The scene's frame rate is never changed: an NLA strip scaled by scene fps / clip fps
    plays the clip at its real duration, and the preview range is set to the strip.
    Returns the preview object.
    """
    clear_preview(context)
    action, skel = store.load_clip(library_file, name)
    skel.signsim.is_preview = True
    skel.name = f"Preview: {name}"
    scene = context.scene
    scene.collection.objects.link(skel)
    ad = skel.animation_data_create()
    track = ad.nla_tracks.new()
    track.name = "SignSim preview"
    start = scene.frame_start
    strip = track.strips.new(name, start, action)
    if action.slots:
        strip.action_slot = action.slots[0]
    scene_fps = keys.scene_fps(scene)
    fps = action.signsim.fps or scene_fps
    strip.scale = scene_fps / fps
    scene.use_preview_range = True
    scene.frame_preview_start = int(strip.frame_start)
    scene.frame_preview_end = int(math.ceil(strip.frame_end))
    scene.frame_set(int(strip.frame_start))
    for o in context.view_layer.objects:
        o.select_set(False)
    skel.select_set(True)
    context.view_layer.objects.active = skel
    return skel

"""Motion library operators: import (file browser, folder), refresh, preview, rename,
retag, delete. Thin: read properties, call signsim_addon, report."""
import os

import bpy
from bpy_extras.io_utils import ImportHelper

from ..signsim_addon.library import api as library
from ..signsim_addon.errors import SignSimError, window_progress

rpt_ = bpy.app.translations.pgettext_rpt


def _clip_poll(cls, context):
    if library.ui.active_item(context) is None:
        cls.poll_message_set("Select a clip in the SignSim library list (refresh it first)")
        return False
    return True


class SIGNSIM_OT_import_clips(bpy.types.Operator, ImportHelper):
    """Import BVH, FBX or glTF motion files (or a whole folder) into the motion library"""
    bl_idname = "signsim.import_clips"
    bl_label = "Import Clips"
    bl_options = {'REGISTER'}

    filter_glob: bpy.props.StringProperty(default="*.bvh;*.fbx;*.glb;*.gltf", options={'HIDDEN'})
    files: bpy.props.CollectionProperty(type=bpy.types.OperatorFileListElement,
                                        options={'HIDDEN', 'SKIP_SAVE'})
    directory: bpy.props.StringProperty(subtype='DIR_PATH', options={'HIDDEN', 'SKIP_SAVE'})
    whole_folder: bpy.props.BoolProperty(
        name="Whole Folder", description="Import every motion file in the folder and its "
        "sub-folders instead of the selected files")
    tags: bpy.props.StringProperty(
        name="Tags", description="Comma-separated tags for every clip; facets as facet:value "
        "(style, body_part, complexity, handedness, gloss)")
    catalog: bpy.props.StringProperty(name="Catalog", description="Asset catalog path, "
                                      "e.g. signs/fingerspelling (empty: imported)")
    library_path: bpy.props.StringProperty(
        name="Library", subtype='FILE_PATH', options={'SKIP_SAVE'},
        description="Library .blend (empty: the scene's, else the preferences')")

    @classmethod
    def poll(cls, context):
        if context.mode != 'OBJECT':
            cls.poll_message_set("Switch to Object Mode to import clips")
            return False
        return True

    def execute(self, context):
        names = [f.name for f in self.files if f.name]
        if self.whole_folder or (not names and self.directory and not self.filepath):
            paths = [self.directory]
        elif names:
            paths = [os.path.join(self.directory, n) for n in names]
        else:
            paths = [self.filepath]
        lib = library.ui.library_path(context, self.library_path)
        try:
            with window_progress(context, rpt_("SignSim: importing")) as progress:
                result = library.import_paths(paths, lib, tags=self.tags, catalog=self.catalog or None,
                                              progress=progress)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        imported, failed = result["imported"], result["failed"]
        for f in (failed if imported else failed[1:]):
            self.report({'WARNING'}, f["error"])
        try:
            library.ui.refresh_list(context, lib, select=imported[-1]["name"] if imported else None)
        except SignSimError as ex:
            self.report({'WARNING'}, str(ex))
        if not imported:
            more = rpt_(" (and {} more failed file(s))").format(len(failed) - 1) if len(failed) > 1 else ""
            self.report({'ERROR'}, rpt_("No clip imported: {}{}").format(failed[0]['error'], more)
                        if failed else rpt_("No motion files found"))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Imported {} clip(s) into {}").format(len(imported), os.path.basename(lib))
                    + (rpt_(", {} file(s) failed").format(len(failed)) if failed else ""))
        return {'FINISHED'}


class SIGNSIM_OT_library_refresh(bpy.types.Operator):
    """Reload the clip list from the motion library file"""
    bl_idname = "signsim.library_refresh"
    bl_label = "Refresh Library"

    def execute(self, context):
        try:
            records = library.ui.refresh_list(context)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("{} clip(s) in the library").format(len(records)))
        return {'FINISHED'}


class SIGNSIM_OT_clip_preview(bpy.types.Operator):
    """Play the selected clip on its source skeleton in the viewport (at its true speed)"""
    bl_idname = "signsim.clip_preview"
    bl_label = "Preview Clip"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        if context.mode != 'OBJECT':
            cls.poll_message_set("Switch to Object Mode to preview a clip")
            return False
        return _clip_poll(cls, context)

    def execute(self, context):
        item = library.ui.active_item(context)
        try:
            skel = library.ui.preview_clip(context, library.ui.library_path(context), item.name)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        screen = context.screen
        if screen is not None and not screen.is_animation_playing:
            bpy.ops.screen.animation_play()
        self.report({'INFO'}, rpt_("Previewing '{}' on {}").format(item.name, skel.name))
        return {'FINISHED'}


class SIGNSIM_OT_clip_rename(bpy.types.Operator):
    """Rename the selected clip in the motion library"""
    bl_idname = "signsim.clip_rename"
    bl_label = "Rename Clip"

    new_name: bpy.props.StringProperty(name="Name")

    @classmethod
    def poll(cls, context):
        return _clip_poll(cls, context)

    def invoke(self, context, event):
        self.new_name = library.ui.active_item(context).name
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        item = library.ui.active_item(context)
        try:
            rec = library.edit_clip(library.ui.library_path(context), item.name,
                                    rename=self.new_name)
            library.ui.refresh_list(context, select=rec["name"])
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Renamed to '{}'").format(rec['name']))
        return {'FINISHED'}


class SIGNSIM_OT_clip_retag(bpy.types.Operator):
    """Replace the tags of the selected clip (comma-separated; facets as facet:value)"""
    bl_idname = "signsim.clip_retag"
    bl_label = "Edit Tags"

    tags: bpy.props.StringProperty(name="Tags")

    @classmethod
    def poll(cls, context):
        return _clip_poll(cls, context)

    def invoke(self, context, event):
        self.tags = library.ui.active_item(context).tags
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        item = library.ui.active_item(context)
        try:
            rec = library.edit_clip(library.ui.library_path(context), item.name, tags=self.tags)
            library.ui.refresh_list(context, select=rec["name"])
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Tags of '{}': {}").format(rec['name'], ', '.join(rec['tags']) or rpt_("none")))
        return {'FINISHED'}


class SIGNSIM_OT_clip_delete(bpy.types.Operator):
    """Delete the selected clip from the motion library (its skeleton goes with its last clip)"""
    bl_idname = "signsim.clip_delete"
    bl_label = "Delete Clip"

    @classmethod
    def poll(cls, context):
        return _clip_poll(cls, context)

    def invoke(self, context, event):
        return context.window_manager.invoke_confirm(self, event)

    def execute(self, context):
        item = library.ui.active_item(context)
        name = item.name
        try:
            library.edit_clip(library.ui.library_path(context), name, delete=True)
            library.ui.refresh_list(context)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Deleted '{}' from the library").format(name))
        return {'FINISHED'}


classes = (
    SIGNSIM_OT_import_clips,
    SIGNSIM_OT_library_refresh,
    SIGNSIM_OT_clip_preview,
    SIGNSIM_OT_clip_rename,
    SIGNSIM_OT_clip_retag,
    SIGNSIM_OT_clip_delete,
)

"""The Motion Library panel of the SignSim sidebar tab, and its clip list. Drawing only."""
import bpy

from ..signsim_addon.library import api as library
from .sidebar import SidebarPanel


class SIGNSIM_UL_clips(bpy.types.UIList):
    """Clips of the motion library, filtered by the panel's text and tag fields."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index):
        row = layout.row(align=True)
        row.label(text=item.name, icon='ACTION')
        sub = row.row()
        sub.alignment = 'RIGHT'
        sub.label(text=f"{item.duration:.1f}s {item.fps:g}fps")
        if item.warnings:
            sub.label(text="", icon='ERROR')

    def draw_filter(self, context, layout):
        pass  # the panel draws the filter fields (shared with the CLI's filters)

    def filter_items(self, context, data, propname):
        items = getattr(data, propname)
        s = context.scene.signsim
        tags = library.parse_tags(s.filter_tags)
        flags = [self.bitflag_filter_item
                 if library.matches(library.ui.item_record(it), text=s.filter_text,
                                    tags=tags, any_tag=s.filter_any) else 0
                 for it in items]
        return flags, []


class SIGNSIM_PT_library(SidebarPanel, bpy.types.Panel):
    bl_label = "Motion Library"

    def draw(self, context):
        layout = self.layout
        s = context.scene.signsim
        layout.prop(s, "library_path", text="", placeholder=library.ui.library_path(context))
        row = layout.row(align=True)
        row.operator("signsim.import_clips", icon='IMPORT')
        row.operator("signsim.library_refresh", text="", icon='FILE_REFRESH')
        col = layout.column(align=True)
        col.prop(s, "filter_text", text="", icon='VIEWZOOM')
        row = col.row(align=True)
        row.prop(s, "filter_tags", text="", icon='BOOKMARKS')
        row.prop(s, "filter_any", text="Any", toggle=True)
        row = layout.row()
        row.template_list("SIGNSIM_UL_clips", "", s, "clips", s, "clip_index", rows=6)
        col = row.column(align=True)
        col.operator("signsim.clip_preview", text="", icon='PLAY')
        col.operator("signsim.clip_rename", text="", icon='GREASEPENCIL')
        col.operator("signsim.clip_retag", text="", icon='BOOKMARKS')
        col.operator("signsim.clip_delete", text="", icon='TRASH')
        item = library.ui.active_item(context)
        if item is None:
            return
        box = layout.box()
        box.label(text=f"{item.frames} frames at {item.fps:g} fps = {item.duration:.2f} s")
        box.label(text=f"{item.bones} bones, skeleton {item.skeleton[:8]}")
        box.label(text=f"Catalog: {item.catalog}")
        if item.tags:
            box.label(text=f"Tags: {item.tags}")
        for w in item.warnings.split("\n"):
            if w:
                box.label(text=w, icon='ERROR')


classes = (SIGNSIM_UL_clips, SIGNSIM_PT_library)

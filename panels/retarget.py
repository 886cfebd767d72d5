"""Retarget panel: source armature, bone map list, map tools (drawing only)."""
import bpy

from .sidebar import SidebarPanel, armature_or_hint


class SIGNSIM_UL_bone_map(bpy.types.UIList):
    """One row per target bone: target ← source, with the pair's confidence."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_property, index):
        source = context.blend_data.objects.get(data.bone_map_source)
        row = layout.row(align=True)
        row.label(text=item.target, icon='BONE_DATA')
        if source is not None and source.type == 'ARMATURE':
            row.prop_search(item, "source", source.data, "bones", text="")
        else:
            row.prop(item, "source", text="")
        row.label(text=f"{item.confidence:.1f}" if item.source else "–")


class SIGNSIM_PT_retarget(SidebarPanel, bpy.types.Panel):
    bl_label = "Retarget"
    bl_idname = "SIGNSIM_PT_retarget"

    def draw(self, context):
        layout = self.layout
        ob = armature_or_hint(layout, context, "Select the target armature")
        if ob is None:
            return
        settings = ob.signsim
        layout.label(text=f"Target: {ob.name}", icon='OUTLINER_OB_ARMATURE')
        layout.prop_search(settings, "bone_map_source", context.blend_data, "objects", text="Source")
        row = layout.row(align=True)
        row.operator("signsim.bonemap_auto", icon='AUTO')
        row.operator("signsim.bonemap_mirror", text="Mirror L→R", icon='MOD_MIRROR')
        layout.template_list("SIGNSIM_UL_bone_map", "", settings, "bone_map", settings,
                             "bone_map_index", rows=6)
        row = layout.row(align=True)
        row.operator("signsim.bonemap_import", text="Load", icon='IMPORT')
        row.operator("signsim.bonemap_export", text="Save", icon='EXPORT')
        layout.operator("signsim.retarget", icon='ACTION')


classes = (SIGNSIM_UL_bone_map, SIGNSIM_PT_retarget)

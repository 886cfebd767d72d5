"""Compose panel: clips with their seams, layers, the last result (drawing only)."""
import bpy

from ..signsim_addon.compose import api as compose
from .sidebar import SidebarPanel, armature_or_hint


class SIGNSIM_UL_compose_clips(bpy.types.UIList):
    """One row per clip: the clip, and the seam into it (window, curve, last result)."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_property, index):
        row = layout.row(align=True)
        row.prop(item, "clip", text="", emboss=False, icon='ACTION')
        if index == 0:
            row.label(text="start")
            return
        row.prop(item, "window", text="")
        if item.suggested_window >= 0:
            row.label(text=f"≥{item.suggested_window}  D {item.velocity_jump:.1f}",
                      icon='ERROR' if item.flagged else 'CHECKMARK')


class SIGNSIM_UL_compose_layers(bpy.types.UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_property, index):
        row = layout.row(align=True)
        row.prop(item, "clip", text="", emboss=False, icon='NLA')
        row.prop(item, "weight", text="")


def _list(layout, settings, kind, listtype, collection, index):
    row = layout.row()
    row.template_list(listtype, "", settings, collection, settings, index, rows=3)
    col = row.column(align=True)
    op = col.operator("signsim.compose_list_edit", icon='ADD', text="")
    op.kind, op.remove = kind, False
    op = col.operator("signsim.compose_list_edit", icon='REMOVE', text="")
    op.kind, op.remove = kind, True


class SIGNSIM_PT_compose(SidebarPanel, bpy.types.Panel):
    bl_label = "Compose"
    bl_idname = "SIGNSIM_PT_compose"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        ob = armature_or_hint(layout, context, "Select the armature to compose onto")
        if ob is None:
            return
        settings = ob.signsim.compose
        _list(layout, settings, 'CLIP', "SIGNSIM_UL_compose_clips", "clips", "clip_index")
        if 0 <= settings.clip_index < len(settings.clips):
            item = settings.clips[settings.clip_index]
            col = layout.column(align=True)
            row = col.row(align=True)
            row.prop(item, "trim_in")
            row.prop(item, "trim_out")
            if settings.clip_index > 0:
                row = col.row(align=True)
                row.prop(item, "window")
                row.prop(item, "curve", text="")
                if item.suggested_window >= 0:
                    col.label(text=f"Suggested window: {item.suggested_window} frames")
                    col.label(text=f"Worst bones: {item.worst}", icon='ERROR' if item.flagged else 'BONE_DATA')
        layout.label(text="Layers")
        _list(layout, settings, 'LAYER', "SIGNSIM_UL_compose_layers", "layers", "layer_index")
        if 0 <= settings.layer_index < len(settings.layers):
            item = settings.layers[settings.layer_index]
            col = layout.column(align=True)
            col.prop(item, "bones")
            row = col.row(align=True)
            row.prop(item, "start")
            row.prop(item, "weight")
        row = layout.row(align=True)
        row.prop(settings, "threshold")
        row.prop(settings, "keep_height", toggle=True)
        row.prop(settings, "foot_lock", toggle=True)
        layout.operator("signsim.compose", icon='SEQ_STRIP_DUPLICATE')
        action = ob.animation_data.action if ob.animation_data else None
        if action is not None and action.signsim.compose_report:
            flagged = compose.flagged_seams(action)
            box = layout.box()
            box.label(text=f"{len(flagged)} flagged seam{'s' if len(flagged) != 1 else ''}",
                      icon='ERROR' if flagged else 'CHECKMARK')
            for seam in flagged:
                box.label(text=f"Seam {seam['index']} at frame {seam['frame']:g}: {'/'.join(seam['failures'])} "
                          f"(window {seam['window']}, suggested {seam['suggested']})")
                for w in seam["worst"]:
                    box.label(text=f"  {w['bone']}: {w['step_deg']:.0f}° in one frame (limit "
                              f"{w['step_limit_deg']:.0f}°), jump {w['jump']:.1f} of {w['jump_limit']:.1f} rad/s")


classes = (SIGNSIM_UL_compose_clips, SIGNSIM_UL_compose_layers, SIGNSIM_PT_compose)

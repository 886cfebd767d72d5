"""Bake and Metrics panels of the SignSim tab (drawing only)."""
import bpy

from ..signsim_addon.bake import api as bake
from ..signsim_addon.errors import SignSimError
from .sidebar import SidebarPanel, armature_or_hint

iface_ = bpy.app.translations.pgettext_iface
VERDICT_ICONS = {'BETTER': 'CHECKMARK', 'WORSE': 'ERROR', 'SAME': 'REMOVE', '': 'BLANK1'}


class SIGNSIM_PT_bake(SidebarPanel, bpy.types.Panel):
    bl_label = "Bake"
    bl_idname = "SIGNSIM_PT_bake"

    def draw(self, context):
        layout = self.layout
        ob = armature_or_hint(layout, context, "Select an armature")
        if ob is None:
            return
        p = ob.signsim.physics
        s = context.scene.signsim
        ad = ob.animation_data
        action = ad.action if ad else None
        if action is None:
            layout.label(text="The armature has no action to bake", icon='INFO')
        elif action.signsim.reference_action is not None:
            layout.label(text=iface_("Showing the bake '{}': switch to the reference to bake again")
                         .format(action.name), icon='ERROR', translate=False)
        else:
            layout.label(text=iface_("Reference: {}").format(action.name), icon='ACTION',
                         translate=False)
        col = layout.column(align=True)
        col.prop(s, "bake_use_range")
        sub = col.row(align=True)
        sub.active = s.bake_use_range
        sub.prop(s, "bake_frame_start")
        sub.prop(s, "bake_frame_end")
        layout.prop(p, "output_mode")
        layout.prop(p, "key_tolerance_deg", text="Key Reduction (°)")
        op = layout.operator("signsim.bake", icon='PHYSICS')
        if s.bake_use_range:
            op.frame_start, op.frame_end = s.bake_frame_start, s.bake_frame_end
        row = layout.row(align=True)
        row.operator("signsim.preview_toggle", icon='FILE_REFRESH')
        row.operator("signsim.reference_ghost", icon='GHOST_ENABLED')


class SIGNSIM_PT_metrics(SidebarPanel, bpy.types.Panel):
    bl_label = "Metrics"
    bl_idname = "SIGNSIM_PT_metrics"

    def draw(self, context):
        layout = self.layout
        ob = context.active_object
        action = bake.metrics_report.metrics_action(ob) if ob is not None else None
        if action is None:
            layout.label(text="Bake an armature to see its metrics", icon='INFO')
            return
        try:
            metrics = bake.metrics_report.parse(action.signsim.bake_metrics)
        except SignSimError as ex:
            layout.label(text=str(ex), icon='ERROR', translate=False)
            return
        layout.label(text=action.name, icon='ACTION', translate=False)
        box = layout.box()
        split = box.split(factor=0.45, align=True)
        names, before, after, marks = (split.column(align=True) for _ in range(4))
        names.label(text="Metric")
        before.label(text="Before")
        after.label(text="After")
        marks.label(text="")
        for r in bake.metrics_report.table_rows(metrics):
            names.label(text=r.label)
            before.label(text=r.text(r.before), translate=False)
            after.label(text=r.text(r.after), translate=False)
            marks.label(text="", icon=VERDICT_ICONS[r.verdict])
        _table(layout, "Projection (Target vs Reference)", bake.metrics_report.target_rows(metrics))
        _table(layout, "Tracking per Group (°)", [(bake.GROUP_LABELS.get(g, g), f"{value:.2f}")
                                                  for g, value in bake.metrics_report.group_rows(metrics)])
        warnings = metrics.get("warnings", ())
        if warnings:
            box = layout.box()
            for w in warnings:
                box.label(text=w, icon='ERROR', translate=False)
        row = layout.row(align=True)
        row.operator("signsim.metrics_worst_frame", icon='FRAME_NEXT')
        row = layout.row(align=True)
        row.operator("signsim.metrics_export_csv", text="CSV", icon='EXPORT')
        row.operator("signsim.metrics_export_json", text="JSON", icon='EXPORT')
        col = layout.column(align=True)
        row = col.row(align=True)
        row.label(text="Per-frame curves (Graph Editor):")
        row.operator("signsim.metrics_show_curves", text="", icon='GRAPH')
        for prop, _side, _key in bake.METRIC_CURVES:
            if prop in ob:
                col.prop(ob, f'["{prop}"]', text=prop)


def _table(layout, title, rows):
    """A box titled `title` with one (label, value) line per row; nothing without rows.
    Labels are translated, values are not."""
    if not rows:
        return
    box = layout.box()
    box.label(text=title)
    col = box.column(align=True)
    for label, text in rows:
        row = col.row()
        row.label(text=label)
        row.label(text=text, translate=False)


classes = (SIGNSIM_PT_bake, SIGNSIM_PT_metrics)

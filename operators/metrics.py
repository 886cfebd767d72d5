"""Thin operators of the Metrics panel: jump to the worst frame, export CSV / JSON."""
import bpy
from bpy_extras.io_utils import ExportHelper

from ..signsim_addon.bake import api as bake
from ..signsim_addon.errors import SignSimError
from .common import active_armature

rpt_ = bpy.app.translations.pgettext_rpt


def _baked_action(cls, context):
    ob = active_armature(context, cls, "Select a baked armature")
    if ob is None:
        return None
    action = bake.metrics_report.metrics_action(ob)
    if action is None:
        cls.poll_message_set("The armature has no physics bake with metrics")
    return action


class SIGNSIM_OT_metrics_worst_frame(bpy.types.Operator):
    """Go to the frame with the deepest penetration after the bake (mm)"""
    bl_idname = "signsim.metrics_worst_frame"
    bl_label = "Jump to Worst Frame"
    bl_options = {'REGISTER'}

    @classmethod
    def poll(cls, context):
        return _baked_action(cls, context) is not None

    def execute(self, context):
        action = bake.metrics_report.metrics_action(context.active_object)
        try:
            metrics, frames = bake.metrics_report.action_report(action)
            worst = bake.metrics_report.worst_frame(metrics, frames)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        if worst is None:
            self.report({'WARNING'}, rpt_("The bake has no per-frame penetration"))
            return {'CANCELLED'}
        frame, depth = worst
        context.scene.frame_set(int(round(frame)))
        self.report({'INFO'}, rpt_("Frame {}: penetration {:.2f} mm").format(int(round(frame)), depth))
        return {'FINISHED'}


class _Export(ExportHelper):
    @classmethod
    def poll(cls, context):
        return _baked_action(cls, context) is not None

    def invoke(self, context, event):
        action = bake.metrics_report.metrics_action(context.active_object)
        if action is not None and not self.filepath:
            self.filepath = bpy.path.clean_name(action.name) + "_metrics" + self.filename_ext
        return ExportHelper.invoke(self, context, event)

    def execute(self, context):
        action = bake.metrics_report.metrics_action(context.active_object)
        try:
            metrics, frames = bake.metrics_report.action_report(action)
            text = self.render(action, metrics, frames)
            with open(self.filepath, "w", encoding="utf-8", newline="") as f:
                f.write(text)
        except (SignSimError, OSError) as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Exported the metrics of '{}' to {}").format(action.name, self.filepath))
        return {'FINISHED'}


class SIGNSIM_OT_metrics_export_csv(_Export, bpy.types.Operator):
    """Save the bake's metrics as a CSV table (metric, unit, group, frame, reference, baked; units: mm, °, ms, s)"""
    bl_idname = "signsim.metrics_export_csv"
    bl_label = "Export Metrics CSV"
    bl_options = {'REGISTER'}
    filename_ext = ".csv"
    filter_glob: bpy.props.StringProperty(default="*.csv", options={'HIDDEN'})

    def render(self, action, metrics, frames):
        return bake.metrics_report.to_csv(metrics, frames)


class SIGNSIM_OT_metrics_export_json(_Export, bpy.types.Operator):
    """Save the bake's metrics, per-frame lists and settings as JSON (units in the key names)"""
    bl_idname = "signsim.metrics_export_json"
    bl_label = "Export Metrics JSON"
    bl_options = {'REGISTER'}
    filename_ext = ".json"
    filter_glob: bpy.props.StringProperty(default="*.json", options={'HIDDEN'})

    def render(self, action, metrics, frames):
        import json
        ref = action.signsim.reference_action
        settings = json.loads(action.signsim.bake_settings) if action.signsim.bake_settings else None
        return bake.metrics_report.to_json(metrics, frames, action.name, ref.name if ref else None, settings)


class SIGNSIM_OT_metrics_show_curves(bpy.types.Operator):
    """Plot the per-frame metrics (penetration in mm, tracking error in °) in the Graph Editor: """ \
        """only the metric curves of the armature, framed"""
    bl_idname = "signsim.metrics_show_curves"
    bl_label = "Show Metric Curves"
    bl_options = {'REGISTER'}

    @classmethod
    def poll(cls, context):
        if _baked_action(cls, context) is None:
            return False
        if bake.metrics_report.graph_editor(context.screen) is None:
            cls.poll_message_set("Open a Graph Editor to plot the per-frame metrics")
            return False
        return True

    def execute(self, context):
        try:
            n = bake.metrics_report.show_curves(context, context.active_object)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Showing {} metric curves").format(n))
        return {'FINISHED'}


classes = (SIGNSIM_OT_metrics_worst_frame, SIGNSIM_OT_metrics_show_curves, SIGNSIM_OT_metrics_export_csv,
           SIGNSIM_OT_metrics_export_json)

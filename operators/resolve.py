"""Thin operator of the Resolve panel: move the joints the least so that no body part is
inside another (signsim_addon.resolve.api)."""
import bpy

from ..signsim_addon.errors import SignSimError, operator_reporter, window_progress
from ..signsim_addon.resolve import api as resolve
from .common import active_armature

rpt_ = bpy.app.translations.pgettext_rpt

_MODES = [('FRAME', "Current Frame", "Resolve the pose at the current frame"),
          ('RANGE', "Frame Range", "Resolve every frame of the range, smoothly from frame to frame"),
          ('ASSET', "Pose Asset", "Resolve a pose-library asset of this file into a new asset")]


def _pose_assets(self, context):
    return [(a.name, a.name, "") for a in bpy.data.actions if a.asset_data is not None] or [
        ('NONE', "No pose assets in this file", "")]


class SIGNSIM_OT_resolve_collisions(bpy.types.Operator):
    """Move the joints the least so that no body part is inside another, into a new action '<action>.resolved' (the action itself is never changed)"""
    bl_idname = "signsim.resolve_collisions"
    bl_label = "Resolve Collisions"
    bl_options = {'REGISTER', 'UNDO'}

    mode: bpy.props.EnumProperty(name="Poses", items=_MODES, default='FRAME')
    margin_mm: bpy.props.FloatProperty(name="Margin (mm)", default=2.0, min=0.0, max=49.0,
                                       description="Clearance every pair of body parts keeps")
    frame_start: bpy.props.IntProperty(name="Start", default=1, description="First frame to resolve")
    frame_end: bpy.props.IntProperty(name="End", default=250, description="Last frame to resolve")
    asset: bpy.props.EnumProperty(name="Pose Asset", items=_pose_assets,
                                  description="The pose-library asset (an action of this file) to resolve")

    @classmethod
    def poll(cls, context):
        return active_armature(context, cls, "Select the armature whose poses to resolve") is not None

    def execute(self, context):
        ob, scene = context.active_object, context.scene
        action, frames, assign = None, None, True
        if self.mode == 'FRAME':
            frames = (scene.frame_current, scene.frame_current)
        elif self.mode == 'RANGE':
            frames = (self.frame_start, self.frame_end)
        else:
            action = bpy.data.actions.get(self.asset)
            if action is None or action.asset_data is None:
                self.report({'ERROR'}, rpt_("No pose asset to resolve"))
                return {'CANCELLED'}
            assign = False
        try:
            with window_progress(context, rpt_("SignSim: resolving")) as progress:
                res = resolve.resolve_action(scene, ob, action, frames, self.margin_mm * 1e-3, assign=assign,
                                             report=operator_reporter(self), progress=progress)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        s = res["summary"]
        self.report({'INFO'}, rpt_("'{}': {} of {} poses clear, max change {:.1f}°, penetration left {:.2f} mm").format(
            res["action"].name, s["resolved"], s["poses"], s["max_change_deg"], s["remaining_penetration_mm"]))
        return {'FINISHED'}


classes = (SIGNSIM_OT_resolve_collisions,)

"""Thin operator of the soft face: dent the head's skin under the fingertips of the
armature's current animation, as shape keys keyed per frame (signsim_addon.softface.api)."""
import bpy

from ..signsim_addon.errors import SignSimError, operator_reporter
from ..signsim_addon.softface import api as softface
from .common import armature_with_action

rpt_ = bpy.app.translations.pgettext_rpt


class SIGNSIM_OT_soft_face(bpy.types.Operator):
    """Simulate the face's skin under the fingertips over the scene's frame range: one shape key per mode on the character's mesh, its value keyed per frame (the armature's action is never changed)"""
    bl_idname = "signsim.soft_face"
    bl_label = "Soft Face"
    bl_options = {'REGISTER', 'UNDO'}

    modes: bpy.props.IntProperty(name="Modes", default=softface.SoftFaceSettings.modes, min=1, max=100,
                                 description="Number of force-dual modes (shape keys)")
    young: bpy.props.FloatProperty(name="Young's Modulus (Pa)", default=softface.SoftFaceSettings.young,
                                   min=100.0, max=1e7, description="Stiffness of the facial soft tissue")
    thickness_mm: bpy.props.FloatProperty(name="Thickness (mm)", default=1e3 * softface.SoftFaceSettings.thickness,
                                          min=1.0, max=50.0, description="Soft tissue between skin and skull")

    @classmethod
    def poll(cls, context):
        return armature_with_action(context, cls, "Select the armature whose fingertips touch its face",
                                    "The armature has no action whose fingertips could touch the face") is not None

    def execute(self, context):
        settings = softface.SoftFaceSettings(modes=self.modes, young=self.young, thickness=self.thickness_mm * 1e-3)
        try:
            res = softface.soft_face(context.scene, context.active_object, settings, report=operator_reporter(self))
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Soft face on '{}': {} shape keys, dent up to {:.2f} mm").format(
            res["mesh"], res["modes"], res["peak_displacement_mm"]))
        return {'FINISHED'}


classes = (SIGNSIM_OT_soft_face,)

"""Thin operators: read properties, call signsim_addon, report."""
import bpy

from ..signsim_addon.demo import api as demo
from ..signsim_addon.errors import SignSimError
from . import bake, compose, contacts, library, metrics, physics, resolve, retarget, softface

rpt_ = bpy.app.translations.pgettext_rpt


class SIGNSIM_OT_append_sample(bpy.types.Operator):
    """Append the bundled signer (armature with full hands, skinned body, closed face mesh)"""
    bl_idname = "signsim.append_sample"
    bl_label = "Add Sample Signer"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        if context.mode != 'OBJECT':
            cls.poll_message_set("Switch to Object Mode to add the sample signer")
            return False
        return True

    def execute(self, context):
        try:
            objects = demo.append_signer(context.scene)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Added {} sample objects").format(len(objects)))
        return {'FINISHED'}


classes = (SIGNSIM_OT_append_sample, *library.classes, *retarget.classes, *contacts.classes, *compose.classes,
           *bake.classes, *physics.classes, *metrics.classes, *resolve.classes, *softface.classes)

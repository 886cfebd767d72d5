"""Thin operators of the Contacts list: add a contact, remove one (switching one off is
its checkbox); Retarget applies the list."""
import bpy

from ..signsim_addon.retarget import api as retarget

rpt_ = bpy.app.translations.pgettext_rpt


def _target(context):
    ob = context.active_object
    return ob if ob is not None and ob.type == 'ARMATURE' else None


class SIGNSIM_OT_contact_add(bpy.types.Operator):
    """Add a contact for the next retarget: a part touching another over a frame range"""
    bl_idname = "signsim.contact_add"
    bl_label = "Add Contact"
    bl_options = {'REGISTER', 'UNDO'}

    part_a: bpy.props.StringProperty(name="Part", default="index_R",
                                     description="What touches: a fingertip (index_R, thumb_L, …) or a palm (palm_L)")
    part_b: bpy.props.StringProperty(name="Touches", default="chin",
                                     description="What it touches: a face region (chin, cheek_R, mouth, nose, "
                                     "forehead, ear_L), a palm or a fingertip")
    frame_start: bpy.props.IntProperty(name="Start", description="First frame of the contact")
    frame_end: bpy.props.IntProperty(name="End", description="Last frame of the contact")

    @classmethod
    def poll(cls, context):
        if _target(context) is None:
            cls.poll_message_set("Select the target armature")
            return False
        return True

    def invoke(self, context, event):
        self.frame_start = self.frame_end = context.scene.frame_current
        return context.window_manager.invoke_props_dialog(self)

    def execute(self, context):
        item = retarget.add_contact(_target(context), self.part_a, self.part_b, self.frame_start, self.frame_end)
        self.report({'INFO'}, rpt_("Added contact {} – {}, frames {}–{}: retarget again to apply").format(
            item.part_a, item.part_b, item.frame_start, item.frame_end))
        return {'FINISHED'}


class SIGNSIM_OT_contact_remove(bpy.types.Operator):
    """Remove the selected contact from the list"""
    bl_idname = "signsim.contact_remove"
    bl_label = "Remove Contact"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        ob = _target(context)
        return ob is not None and len(ob.signsim_contacts) > 0

    def execute(self, context):
        ob = _target(context)
        ob.signsim_contacts.remove(ob.signsim_contacts_index)
        ob.signsim_contacts_index = max(0, min(ob.signsim_contacts_index, len(ob.signsim_contacts) - 1))
        return {'FINISHED'}


classes = (SIGNSIM_OT_contact_add, SIGNSIM_OT_contact_remove)

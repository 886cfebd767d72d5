"""Contacts panel (under Retarget): the contacts the last retarget kept, each with a
checkbox to keep it next time, and the animator's own (drawing only)."""
import bpy

from .sidebar import SidebarPanel


class SIGNSIM_UL_contacts(bpy.types.UIList):
    """One row per contact: keep, part → part, frames."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_property, index):
        row = layout.row(align=True)
        row.prop(item, "enabled", text="")
        row.label(text=f"{item.part_a} – {item.part_b}", icon='ADD' if item.added else 'HAND')
        row.label(text=f"{item.frame_start}–{item.frame_end}")


class SIGNSIM_PT_contacts(SidebarPanel, bpy.types.Panel):
    bl_label = "Contacts"
    bl_idname = "SIGNSIM_PT_contacts"
    bl_parent_id = "SIGNSIM_PT_retarget"

    def draw(self, context):
        layout = self.layout
        ob = context.active_object
        if ob is None or ob.type != 'ARMATURE':
            layout.label(text="Select the target armature", icon='INFO')
            return
        layout.template_list("SIGNSIM_UL_contacts", "", ob, "signsim_contacts", ob, "signsim_contacts_index", rows=4)
        row = layout.row(align=True)
        row.operator("signsim.contact_add", icon='ADD')
        row.operator("signsim.contact_remove", icon='REMOVE')
        layout.label(text="Retarget again to apply", icon='INFO')


classes = (SIGNSIM_UL_contacts, SIGNSIM_PT_contacts)

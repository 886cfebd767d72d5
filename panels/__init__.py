"""Sidebar panels of the SignSim tab: drawing only."""
import bpy

from . import bake, compose, contacts, library, physics, retarget
from .sidebar import SidebarPanel


class SIGNSIM_PT_main(SidebarPanel, bpy.types.Panel):
    bl_label = "SignSim"
    bl_idname = "SIGNSIM_PT_main"

    def draw(self, context):
        self.layout.operator("signsim.append_sample", icon='OUTLINER_OB_ARMATURE')


classes = (SIGNSIM_PT_main, *library.classes, *retarget.classes, *contacts.classes, *compose.classes,
           *physics.classes, *bake.classes)

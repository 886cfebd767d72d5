"""Resolve panel of the SignSim tab (drawing only)."""
import bpy

from .sidebar import SidebarPanel, armature_or_hint


class SIGNSIM_PT_resolve(SidebarPanel, bpy.types.Panel):
    bl_label = "Resolve Collisions"
    bl_idname = "SIGNSIM_PT_resolve"
    bl_options = {'DEFAULT_CLOSED'}

    def draw(self, context):
        layout = self.layout
        if armature_or_hint(layout, context) is None:
            return
        scene = context.scene
        col = layout.column(align=True)
        col.operator("signsim.resolve_collisions", text="Current Frame", icon='ARMATURE_DATA').mode = 'FRAME'
        op = col.operator("signsim.resolve_collisions", text="Scene Frame Range", icon='ACTION')
        op.mode = 'RANGE'
        op.frame_start, op.frame_end = scene.frame_start, scene.frame_end
        col.operator("signsim.resolve_collisions", text="Pose Asset…", icon='ASSET_MANAGER').mode = 'ASSET'


classes = (SIGNSIM_PT_resolve,)

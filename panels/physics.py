"""Physics and Stiffness Schedule panels of the SignSim tab (drawing only)."""
import bpy

from ..signsim_addon.bake import api as bake
from .sidebar import SidebarPanel, armature_or_hint

iface_ = bpy.app.translations.pgettext_iface
MAX_ROWS = 12  # schedule keys listed in the panel


class SIGNSIM_MT_physics_presets(bpy.types.Menu):
    """Physics presets: soft, default, stiff and the user's own"""
    bl_label = bake.physics_presets.MENU_LABEL
    preset_subdir = bake.physics_presets.SUBDIR
    preset_operator = "script.execute_preset"
    draw = bpy.types.Menu.draw_preset


class SIGNSIM_PT_physics(SidebarPanel, bpy.types.Panel):
    bl_label = "Physics"
    bl_idname = "SIGNSIM_PT_physics"

    def draw(self, context):
        layout = self.layout
        ob = armature_or_hint(layout, context)
        if ob is None:
            return
        p = ob.signsim.physics
        row = layout.row(align=True)
        row.menu(bake.physics_presets.MENU, text=SIGNSIM_MT_physics_presets.bl_label)
        row.operator("signsim.physics_preset_add", text="", icon='ADD')
        row.operator("signsim.physics_preset_add", text="", icon='REMOVE').remove_active = True

        box = layout.box()
        box.label(text="Joint Groups", icon='BONE_DATA')
        grid = box.grid_flow(row_major=True, columns=3, even_columns=False, align=True)
        grid.label(text="Group")
        grid.label(text="Frequency (Hz)")
        grid.label(text="Damping (ζ)")
        simulated = set(p.simulate_parts)
        for g in bake.GROUPS:  # groups that only follow the reference are greyed out
            cells = [grid.row() for _ in range(3)]
            for cell in cells:
                cell.active = g in simulated
            cells[0].label(text=bake.GROUP_LABELS[g])
            cells[1].prop(p, f"{g}_frequency", text="")
            cells[2].prop(p, f"{g}_damping", text="")
        box.prop(p, "feedforward")

        box = layout.box()
        box.label(text="Contacts", icon='MOD_PHYSICS')
        col = box.column(align=True)
        col.prop(p, "contact_stiffness", text="Stiffness (N/m)")
        col.prop(p, "contact_damping", text="Damping (N·s/m)")
        col = box.column(align=True)
        col.prop(p, "use_schedule")
        sub = col.row()
        sub.active = p.use_schedule
        sub.prop(p, "target_depth_mm", text="Target Depth (mm)")
        box.prop(p, "face_object", icon='USER')
        box.prop(p, "project")

        box = layout.box()
        box.prop(p, "soft_face")
        col = box.column(align=True)
        col.active = p.soft_face
        col.prop(p, "face_modes", text="Modes")
        col.prop(p, "face_young", text="Young's Modulus (Pa)")
        col.prop(p, "face_thickness_mm", text="Thickness (mm)")

        box = layout.box()
        box.label(text="Solver", icon='PREFERENCES')
        box.prop(p, "max_substeps")
        box.label(text="Simulated Parts")
        box.column(align=True).prop(p, "simulate_parts", expand=True)


class SIGNSIM_PT_schedule(SidebarPanel, bpy.types.Panel):
    bl_label = "Stiffness Schedule"
    bl_idname = "SIGNSIM_PT_schedule"

    def draw(self, context):
        layout = self.layout
        ob = armature_or_hint(layout, context)
        if ob is None:
            return
        p = ob.signsim.physics
        layout.prop(p, "contact_multiplier")
        rows = bake.schedule.summary(ob)
        if rows is None:
            layout.label(text="Add an action to key a schedule", icon='INFO')
            return
        action = bake.schedule.target(ob)[0]
        if ob.animation_data.action is not action:
            layout.label(text=iface_("Keys go on the reference '{}'").format(action.name),
                         icon='INFO', translate=False)
        s = context.scene.signsim
        row = layout.row(align=True)
        row.prop(s, "schedule_frame_start")
        row.prop(s, "schedule_frame_end")
        row = layout.row(align=True)
        for phase, (label, value, _desc) in bake.schedule.PHASES.items():
            op = row.operator("signsim.schedule_phase", text=f"{iface_(label)} ×{value:g}",
                              translate=False)
            op.phase = phase
            op.frame_start = s.schedule_frame_start
            op.frame_end = s.schedule_frame_end
        layout.operator("signsim.schedule_auto", icon='AUTO')
        if rows:
            box = layout.box()
            col = box.column(align=True)
            for frame, value, phase in rows[:MAX_ROWS]:
                name = iface_(bake.schedule.PHASES[phase][0]) if phase else ""
                col.label(text=f"{frame:g}: ×{value:.2f} {name}", icon='KEYFRAME', translate=False)
            if len(rows) > MAX_ROWS:
                col.label(text=iface_("… {} more keys (Graph Editor)").format(len(rows) - MAX_ROWS),
                          translate=False)
            layout.operator("signsim.schedule_clear", icon='X')
        else:
            layout.label(text="No schedule: the multiplier is constant", icon='INFO')


classes = (SIGNSIM_MT_physics_presets, SIGNSIM_PT_physics, SIGNSIM_PT_schedule)

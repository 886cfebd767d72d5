"""Thin operators of the Physics and Stiffness Schedule panels: presets and schedule keys."""
import bpy
from bl_operators.presets import AddPresetBase

from ..signsim_addon import physics_presets, schedule
from ..signsim_addon.errors import SignSimError

rpt_ = bpy.app.translations.pgettext_rpt

_PHASE_ITEMS = [(p, label, f"{desc} (multiplier ×{value:g})")
                for p, (label, value, desc) in schedule.PHASES.items()]


def active_armature(cls, context, what="Select an armature"):
    """The active object if it is an armature, else None with the poll message set."""
    ob = context.active_object
    if ob is None or ob.type != 'ARMATURE':
        cls.poll_message_set(what)
        return None
    return ob


class SIGNSIM_OT_physics_preset_add(AddPresetBase, bpy.types.Operator):
    """Store the active armature's physics settings as a preset, or remove the chosen preset"""
    bl_idname = "signsim.physics_preset_add"
    bl_label = "Add Physics Preset"
    preset_menu = physics_presets.MENU
    preset_subdir = physics_presets.SUBDIR
    preset_defines = physics_presets.DEFINES
    preset_values = physics_presets.VALUES

    @classmethod
    def poll(cls, context):
        return active_armature(cls, context, "Select the armature whose physics settings to store") is not None


class SIGNSIM_OT_schedule_phase(bpy.types.Operator):
    """Key the contact stiffness multiplier over a frame range for one phase of the motion """ \
        """(hold ×1, transition ×0.5, contact ×2) on the reference action the next bake tracks"""
    bl_idname = "signsim.schedule_phase"
    bl_label = "Key Schedule Phase"
    bl_options = {'REGISTER', 'UNDO'}

    phase: bpy.props.EnumProperty(name="Phase", items=_PHASE_ITEMS, default='HOLD',
                                  description="Phase of the motion: sets the multiplier")
    frame_start: bpy.props.IntProperty(name="From", default=1,
                                       description="First frame of the phase (scene frame)")
    frame_end: bpy.props.IntProperty(name="To", default=10,
                                     description="Last frame of the phase (scene frame)")

    @classmethod
    def description(cls, context, properties):
        label, value, desc = schedule.PHASES[properties.phase]
        return (bpy.app.translations.pgettext_tip(desc)
                + f" (×{value:g}, {properties.frame_start}–{properties.frame_end})")

    @classmethod
    def poll(cls, context):
        ob = active_armature(cls, context, "Select the armature to key a schedule on")
        if ob is None:
            return False
        if ob.animation_data is None or ob.animation_data.action is None:
            cls.poll_message_set("The armature has no action to key the schedule on")
            return False
        return True

    def execute(self, context):
        try:
            action, curve = schedule.lay_phase(context.active_object, self.phase,
                                               self.frame_start, self.frame_end)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        label, value, _d = schedule.PHASES[self.phase]
        self.report({'INFO'}, rpt_("Keyed {} (×{:g}) on frames {}–{} of '{}'").format(
            rpt_(label), value, self.frame_start, self.frame_end, action.name))
        return {'FINISHED'}


class SIGNSIM_OT_schedule_clear(bpy.types.Operator):
    """Remove the contact stiffness schedule (the multiplier's F-curve) from the reference action"""
    bl_idname = "signsim.schedule_clear"
    bl_label = "Clear Schedule"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        ob = active_armature(cls, context, "Select the armature whose schedule to clear")
        if ob is None:
            return False
        if not schedule.summary(ob):
            cls.poll_message_set("The armature's action has no schedule keys")
            return False
        return True

    def execute(self, context):
        try:
            action = schedule.clear(context.active_object)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        if action is None:
            self.report({'WARNING'}, rpt_("There was no schedule to clear"))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Removed the schedule from '{}'").format(action.name))
        return {'FINISHED'}


classes = (SIGNSIM_OT_physics_preset_add, SIGNSIM_OT_schedule_phase, SIGNSIM_OT_schedule_clear)

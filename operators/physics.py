"""Thin operators of the Physics and Stiffness Schedule panels: presets and schedule keys."""
import bpy
from bl_operators.presets import AddPresetBase

from ..signsim_addon.bake import api as bake
from ..signsim_addon.errors import SignSimError
from .common import active_armature, armature_with_action

rpt_ = bpy.app.translations.pgettext_rpt

_PHASE_ITEMS = [(p, label, f"{desc} (multiplier ×{value:g})")
                for p, (label, value, desc) in bake.schedule.PHASES.items()]


class SIGNSIM_OT_physics_preset_add(AddPresetBase, bpy.types.Operator):
    """Store the active armature's physics settings as a preset, or remove the chosen preset"""
    bl_idname = "signsim.physics_preset_add"
    bl_label = "Add Physics Preset"
    preset_menu = bake.physics_presets.MENU
    preset_subdir = bake.physics_presets.SUBDIR
    preset_defines = bake.physics_presets.DEFINES
    preset_values = bake.physics_presets.VALUES

    @classmethod
    def poll(cls, context):
        return active_armature(context, cls, "Select the armature whose physics settings to store") is not None


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
        label, value, desc = bake.schedule.PHASES[properties.phase]
        return (bpy.app.translations.pgettext_tip(desc)
                + f" (×{value:g}, {properties.frame_start}–{properties.frame_end})")

    @classmethod
    def poll(cls, context):
        return armature_with_action(context, cls, "Select the armature to key a schedule on",
                                    "The armature has no action to key the schedule on") is not None

    def execute(self, context):
        try:
            action, curve = bake.schedule.lay_phase(context.active_object, self.phase,
                                               self.frame_start, self.frame_end)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        label, value, _d = bake.schedule.PHASES[self.phase]
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
        ob = active_armature(context, cls, "Select the armature whose schedule to clear")
        if ob is None:
            return False
        if not bake.schedule.summary(ob):
            cls.poll_message_set("The armature's action has no schedule keys")
            return False
        return True

    def execute(self, context):
        try:
            action = bake.schedule.clear(context.active_object)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        if action is None:
            self.report({'WARNING'}, rpt_("There was no schedule to clear"))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Removed the schedule from '{}'").format(action.name))
        return {'FINISHED'}


classes = (SIGNSIM_OT_physics_preset_add, SIGNSIM_OT_schedule_phase, SIGNSIM_OT_schedule_clear)


class SIGNSIM_OT_schedule_auto(bpy.types.Operator):
    """Lay down the whole schedule from the reference motion's phases: contact where the """ \
        """hands touch (×2), transition where fingertips move fast (×0.5), hold elsewhere (×1); """ \
        """replaces the schedule"""
    bl_idname = "signsim.schedule_auto"
    bl_label = "Schedule from Motion"
    bl_options = {'REGISTER', 'UNDO'}

    speed_threshold: bpy.props.FloatProperty(
        name="Fast Fingertips", default=0.5, min=0.01, soft_max=3.0, unit='VELOCITY',
        description="Fingertip speed above which a frame is a transition, in m/s")
    gap_mm: bpy.props.FloatProperty(
        name="Contact Gap", default=1.0, min=0.0, soft_max=10.0,
        description="Hands closer than this count as touching (hand–hand, thumb–finger), in mm")
    min_frames: bpy.props.IntProperty(
        name="Shortest Phase", default=3, min=1, soft_max=30,
        description="Phases shorter than this many frames join the phase before them (frames)")

    @classmethod
    def poll(cls, context):
        return SIGNSIM_OT_schedule_phase.poll.__func__(cls, context)

    def execute(self, context):
        ob = context.active_object
        try:
            segments = bake.schedule.detect_phases(context.scene, ob, self.speed_threshold,
                                              self.gap_mm, self.min_frames)
            action, _keys = bake.schedule.lay_phases(ob, segments)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        except Exception as ex:  # numerics on an unusual rig: a report, the trace on the console
            import traceback
            traceback.print_exc()
            self.report({'ERROR'}, rpt_("Could not find the phases: {}").format(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, rpt_("Keyed {} phases on '{}'").format(len(segments), action.name))
        return {'FINISHED'}


classes = (*classes, SIGNSIM_OT_schedule_auto)

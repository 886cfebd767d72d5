"""Thin operators of the Bake panel: bake the physics pass, switch reference/baked."""
import bpy

from ..signsim_addon.bake import api as bake
from ..signsim_addon.errors import SignSimError, operator_reporter, window_progress
from ..signsim_addon.softface import api as softface
from .common import active_armature, armature_with_action

rpt_ = bpy.app.translations.pgettext_rpt

_PRESETS = [('SETTINGS', "Rig Settings", "Use the physics settings stored on the armature")] + [
    (p, p.title(), f"The Physics panel's {p.title()} preset") for p in bake.PRESETS]


class SIGNSIM_OT_bake(bpy.types.Operator):
    """Bake the physics pass of the active armature's action into a new action '<action>.physics' (the action itself is never changed)"""
    bl_idname = "signsim.bake"
    bl_label = "Bake Physics"
    bl_options = {'REGISTER', 'UNDO'}

    preset: bpy.props.EnumProperty(name="Gains", items=_PRESETS, default='SETTINGS')
    frame_start: bpy.props.IntProperty(name="Start", default=0, description="First frame (0 with End 0: the whole action)")
    frame_end: bpy.props.IntProperty(name="End", default=0, description="Last frame (0: the action's last keyed frame)")

    _worker = None
    _timer = None

    @classmethod
    def poll(cls, context):
        return armature_with_action(context, cls, "Select the armature to bake",
                                    "The armature has no action to bake") is not None

    def _prepare(self, context):
        ob = context.active_object
        frame_range = None
        if self.frame_end > 0:
            frame_range = (self.frame_start, self.frame_end)
        return bake.prepare(context.scene, ob, preset=None if self.preset == 'SETTINGS' else self.preset,
                            frame_range=frame_range, report=operator_reporter(self))

    def _finish(self, context, job, solved, stages):
        """Write the solved bake on the main thread, its stages (bake.operator_stages, after
        the solve's) continuing the progress bar."""
        physics = context.active_object.signsim.physics
        with window_progress(context, rpt_("SignSim: baking physics")) as stages.progress:
            new = bake.write(context.scene, job, solved, physics.output_mode, physics.key_tolerance_deg, stages=stages)
        for w in solved.metrics["warnings"][len(job.rig.warnings):]:
            self.report({'WARNING'}, w)
        m = solved.metrics["baked"]
        self.report({'INFO'}, rpt_("Baked '{}': tracking {:.2f}° RMS, penetration max {:.2f} mm").format(
            new.name, m['tracking_rms_deg'], m.get('skin_penetration_max_mm', m['penetration_max_mm'])))
        try:
            res, _notes = softface.after_bake(context.scene, context.active_object, job.frames, physics.soft_face,
                                              report=operator_reporter(self))
        except SignSimError as ex:  # the bake stands; only the dent is missing
            self.report({'WARNING'}, str(ex))
        else:
            if res is not None:
                self.report({'INFO'}, rpt_("Soft face on '{}': {} shape keys, dent up to {:.2f} mm").format(
                    res["mesh"], res["modes"], res["peak_displacement_mm"]))
        return {'FINISHED'}

    def execute(self, context):
        try:
            job = self._prepare(context)
            stages = bake.operator_stages(job)
            with window_progress(context, rpt_("SignSim: baking physics")) as stages.progress:
                solved = bake.solve(job, stages)
            return self._finish(context, job, solved, stages)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}

    def invoke(self, context, event):
        if bpy.app.background:  # no event loop headless: do the work in execute
            return self.execute(context)
        try:
            self._worker = bake.BakeWorker(self._prepare(context)).start()
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.1, window=context.window)
        wm.progress_begin(0, 100)
        wm.modal_handler_add(self)
        return {'RUNNING_MODAL'}

    def modal(self, context, event):
        worker = self._worker
        if event.type == 'ESC':
            worker.cancel()  # the worker stops at its next progress call; Esc is ours
            return {'RUNNING_MODAL'}
        if event.type != 'TIMER' and not worker.done.is_set():
            return {'PASS_THROUGH'}
        context.window_manager.progress_update(int(100 * worker.fraction))
        context.workspace.status_text_set(rpt_("SignSim: baking physics, {} {:.0f}% (Esc to cancel)").format(
            worker.stage, 100 * worker.stage_fraction))
        if not worker.done.is_set():
            return {'RUNNING_MODAL'}
        self._end(context)
        if isinstance(worker.error, bake.BakeCancelled):
            self.report({'WARNING'}, rpt_("Bake cancelled: nothing was written"))
            return {'CANCELLED'}
        if worker.error is not None:
            self.report({'ERROR'}, str(worker.error))
            return {'CANCELLED'}
        try:
            return self._finish(context, worker.job, worker.result, worker.stages)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}

    def cancel(self, context):
        """Blender cancels the modal operator (file load, window closed): stop the solve
        and leave nothing behind — no timer, no status text, no new action."""
        if self._worker is not None:
            self._worker.cancel()
            self._worker.join()
        self._end(context)

    def _end(self, context):
        wm = context.window_manager
        if self._timer is not None:
            wm.event_timer_remove(self._timer)
            self._timer = None
            wm.progress_end()
        context.workspace.status_text_set(None)


class SIGNSIM_OT_preview_toggle(bpy.types.Operator):
    """Switch the armature between its reference action and the physics bake"""
    bl_idname = "signsim.preview_toggle"
    bl_label = "Reference / Baked"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        ob = active_armature(context, cls, "Select a baked armature")
        if ob is None:
            return False
        if bake.baked_pair(ob) is None:
            cls.poll_message_set("The armature has no physics bake to compare with")
            return False
        return True

    def execute(self, context):
        shown = bake.toggle_preview(context.active_object)
        self.report({'INFO'}, rpt_("Showing {}").format(shown))
        return {'FINISHED'}


class SIGNSIM_OT_reference_ghost(bpy.types.Operator):
    """Show or hide a ghost skeleton playing the reference next to the baked motion"""
    bl_idname = "signsim.reference_ghost"
    bl_label = "Reference Ghost"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        return SIGNSIM_OT_preview_toggle.poll.__func__(cls, context)

    def execute(self, context):
        ghost = bake.toggle_ghost(context.scene, context.active_object)
        self.report({'INFO'}, rpt_("Ghost shown") if ghost else rpt_("Ghost removed"))
        return {'FINISHED'}


classes = (SIGNSIM_OT_bake, SIGNSIM_OT_preview_toggle, SIGNSIM_OT_reference_ghost)

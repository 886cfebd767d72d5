"""Thin operators of the Compose panel: edit the clip and layer lists, compose."""
import bpy

from ..signsim_addon.compose import api as compose
from ..signsim_addon.library import api as library
from ..signsim_addon.errors import SignSimError, window_progress
from .common import active_armature

rpt_ = bpy.app.translations.pgettext_rpt


class SIGNSIM_OT_compose(bpy.types.Operator):
    """Splice the listed clips into one new action on the active armature, with blend windows, root alignment, layers and a check of every seam"""
    bl_idname = "signsim.compose"
    bl_label = "Compose"
    bl_options = {'REGISTER', 'UNDO'}

    @classmethod
    def poll(cls, context):
        target = active_armature(context, cls, "Select the armature to compose onto")
        if target is None:
            return False
        if context.mode != 'OBJECT':
            cls.poll_message_set("Switch to Object Mode to compose")
            return False
        if not any(c.clip.strip() for c in target.signsim.compose.clips):
            cls.poll_message_set("Add at least one clip to the list")
            return False
        return True

    def execute(self, context):
        target = active_armature(context)
        clips, layers, threshold = compose.specs_from_settings(target)
        settings = target.signsim.compose
        warnings = []
        try:
            with window_progress(context, rpt_("SignSim: composing")) as progress:
                result = compose.compose(target, clips, layers, threshold=threshold,
                                         library_path=library.ui.library_path(context),
                                         keep_height=settings.keep_height, foot_lock=settings.foot_lock,
                                         report=lambda level, m: level == 'WARNING' and warnings.append(m),
                                         progress=progress)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        compose.store_result(target, result)
        scene = context.scene
        scene.frame_start, scene.frame_end = int(result["frames"][0]), int(result["frames"][1])
        for w in warnings:
            self.report({'WARNING'}, w)
        flagged = sum(s["flagged"] for s in result["seams"])
        self.report({'WARNING'} if flagged else {'INFO'},
                    rpt_("Created '{}': {} seams, {} flagged").format(result['action'], len(result['seams']), flagged))
        return {'FINISHED'}


class SIGNSIM_OT_compose_list_edit(bpy.types.Operator):
    """Add or remove a clip or layer of the composition"""
    bl_idname = "signsim.compose_list_edit"
    bl_label = "Edit Compose List"
    bl_options = {'REGISTER', 'UNDO'}
    kind: bpy.props.EnumProperty(items=[('CLIP', "Clip", ""), ('LAYER', "Layer", "")])
    remove: bpy.props.BoolProperty()

    @classmethod
    def poll(cls, context):
        if active_armature(context, cls) is None:
            return False
        return True

    def execute(self, context):
        settings = active_armature(context).signsim.compose
        items, index = (settings.clips, "clip_index") if self.kind == 'CLIP' else (settings.layers, "layer_index")
        if self.remove:
            if 0 <= getattr(settings, index) < len(items):
                items.remove(getattr(settings, index))
                setattr(settings, index, max(0, min(getattr(settings, index), len(items) - 1)))
        else:
            items.add()
            setattr(settings, index, len(items) - 1)
        return {'FINISHED'}


classes = (SIGNSIM_OT_compose, SIGNSIM_OT_compose_list_edit)

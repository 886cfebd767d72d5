"""Thin operators of the Retarget panel: bone map editing and retargeting the source's action."""
import bpy
from bpy_extras.io_utils import ExportHelper, ImportHelper

from ..signsim_addon.retarget import api as retarget
from ..signsim_addon.errors import SignSimError
from .common import active_armature

rpt_ = bpy.app.translations.pgettext_rpt


def _armatures(context):
    """(target, source) armature objects of the Retarget panel; source may be None."""
    target = active_armature(context)
    if target is None:
        return None, None
    source = bpy.data.objects.get(target.signsim.bone_map_source)
    return target, (source if source is not None and source.type == 'ARMATURE' else None)


class _TargetOperator:
    bl_options = {'REGISTER', 'UNDO'}
    needs_source = False

    @classmethod
    def poll(cls, context):
        target, source = _armatures(context)
        if target is None:
            cls.poll_message_set("Select the target armature")
            return False
        if cls.needs_source and (source is None or source == target):
            cls.poll_message_set("Choose a source armature other than the target")
            return False
        return True

    def execute(self, context):
        target, source = _armatures(context)
        try:
            message = self.run(target, source)
        except SignSimError as ex:
            self.report({'ERROR'}, str(ex))
            return {'CANCELLED'}
        self.report({'INFO'}, message)
        return {'FINISHED'}


class SIGNSIM_OT_bonemap_auto(_TargetOperator, bpy.types.Operator):
    """Detect the bone map from the source armature's names and hierarchy"""
    bl_idname = "signsim.bonemap_auto"
    bl_label = "Auto Map"
    needs_source = True

    def run(self, target, source):
        bone_map = retarget.auto_map(source, target)
        retarget.store_map(target, bone_map)
        return rpt_("Mapped {} bones, {} unmapped").format(len(bone_map.pairs), len(bone_map.unmapped_target))


class SIGNSIM_OT_bonemap_set(_TargetOperator, bpy.types.Operator):
    """Set which source bone drives a target bone (empty source clears it)"""
    bl_idname = "signsim.bonemap_set"
    bl_label = "Set Bone Pair"
    target_bone: bpy.props.StringProperty(name="Target Bone")
    source_bone: bpy.props.StringProperty(name="Source Bone")

    def run(self, target, source):
        if self.source_bone and source is not None and self.source_bone not in source.data.bones:
            raise SignSimError(f"'{source.name}' has no bone '{self.source_bone}'")
        retarget.set_pair(target, self.target_bone, self.source_bone)
        return f"{self.target_bone} ← {self.source_bone or 'nothing'}"


class SIGNSIM_OT_bonemap_mirror(_TargetOperator, bpy.types.Operator):
    """Copy the left-side pairs of the bone map to the right side"""
    bl_idname = "signsim.bonemap_mirror"
    bl_label = "Mirror Left → Right"

    def run(self, target, source):
        return rpt_("Mirrored {} pairs").format(retarget.mirror_map(target, source))


class SIGNSIM_OT_bonemap_export(_TargetOperator, bpy.types.Operator, ExportHelper):
    """Save the bone map as a JSON preset"""
    bl_idname = "signsim.bonemap_export"
    bl_label = "Export Bone Map"
    filename_ext = ".json"
    filter_glob: bpy.props.StringProperty(default="*.json", options={'HIDDEN'})

    def run(self, target, source):
        retarget.export_map(target, self.filepath)
        return rpt_("Saved {}").format(self.filepath)


class SIGNSIM_OT_bonemap_import(_TargetOperator, bpy.types.Operator, ImportHelper):
    """Load a bone map JSON preset onto the target armature"""
    bl_idname = "signsim.bonemap_import"
    bl_label = "Import Bone Map"
    filename_ext = ".json"
    filter_glob: bpy.props.StringProperty(default="*.json", options={'HIDDEN'})

    def run(self, target, source):
        return rpt_("Loaded {} pairs").format(retarget.import_map(target, self.filepath))


class SIGNSIM_OT_retarget(_TargetOperator, bpy.types.Operator):
    """Retarget the source armature's action onto the active armature as a new action"""
    bl_idname = "signsim.retarget"
    bl_label = "Retarget"
    needs_source = True

    def run(self, target, source):
        result = retarget.retarget_source(source, target)
        return rpt_("Created action '{}' ({} frames)").format(result.action.name, len(result.frames))


classes = (SIGNSIM_OT_bonemap_auto, SIGNSIM_OT_bonemap_set, SIGNSIM_OT_bonemap_mirror,
           SIGNSIM_OT_bonemap_export, SIGNSIM_OT_bonemap_import, SIGNSIM_OT_retarget)

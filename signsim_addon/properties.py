"""SignSim's data on Blender IDs: one PointerProperty per ID type, named `signsim`.

- Scene.signsim: UI state of the sidebar (library filter, selections).
- Object.signsim: per-armature settings (bone map, physics gains, schedules).
- Action.signsim: clip metadata and bake provenance.

Each capability adds its fields to these groups; nothing else is stored elsewhere.
"""
import bpy


class SignSimSceneSettings(bpy.types.PropertyGroup):
    """Sidebar state for one scene."""


class SignSimBoneMapItem(bpy.types.PropertyGroup):
    """One bone map pair: which source bone drives this target bone (retarget.py)."""
    target: bpy.props.StringProperty(name="Target", description="Bone of this armature")
    source: bpy.props.StringProperty(name="Source", description="Bone of the source armature "
                                     "that drives the target bone (empty: not driven)")
    confidence: bpy.props.FloatProperty(name="Confidence", min=0.0, max=1.0, default=1.0,
                                        description="1 = matched by naming convention, lower = "
                                        "inferred from the hierarchy or set by hand")


class SignSimObjectSettings(bpy.types.PropertyGroup):
    """Per-armature settings."""
    bone_map: bpy.props.CollectionProperty(type=SignSimBoneMapItem, name="Bone Map")
    bone_map_index: bpy.props.IntProperty(name="Active Pair", default=0)
    bone_map_source: bpy.props.StringProperty(
        name="Source Armature", description="Armature whose motion is retargeted onto this one")


class SignSimActionSettings(bpy.types.PropertyGroup):
    """Clip metadata and provenance of an action."""


classes = (SignSimSceneSettings, SignSimBoneMapItem, SignSimObjectSettings, SignSimActionSettings)
_pointers = (
    (bpy.types.Scene, SignSimSceneSettings),
    (bpy.types.Object, SignSimObjectSettings),
    (bpy.types.Action, SignSimActionSettings),
)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    for id_type, group in _pointers:
        id_type.signsim = bpy.props.PointerProperty(type=group)


def unregister():
    for id_type, _group in reversed(_pointers):
        del id_type.signsim
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)

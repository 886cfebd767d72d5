"""SignSim's data on Blender IDs: one PointerProperty per ID type, named `signsim`.

- Scene.signsim: UI state of the sidebar (library filter, selections).
- Object.signsim: per-armature settings (bone map, physics gains, schedules).
- Action.signsim: clip metadata and bake provenance.

Each capability adds its fields to these groups; nothing else is stored elsewhere.
"""
import bpy


class SignSimSceneSettings(bpy.types.PropertyGroup):
    """Sidebar state for one scene."""


class SignSimObjectSettings(bpy.types.PropertyGroup):
    """Per-armature settings."""


class SignSimActionSettings(bpy.types.PropertyGroup):
    """Clip metadata and provenance of an action."""


classes = (SignSimSceneSettings, SignSimObjectSettings, SignSimActionSettings)
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

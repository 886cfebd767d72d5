"""Add-on preferences: where the motion library lives by default."""
import os

import bpy

# The root package (bl_ext.<repo>.signsim): Blender looks preferences up by it.
ADDON_ID = __package__.rpartition(".")[0]
DEFAULT_LIBRARY = os.path.join(os.path.expanduser("~"), "SignSim", "library.blend")


class SIGNSIM_AP_preferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_ID

    library_path: bpy.props.StringProperty(
        name="Motion Library",
        description="The .blend file that holds the motion library (clips as action assets)",
        subtype='FILE_PATH',
        default=DEFAULT_LIBRARY,
    )

    def draw(self, context):
        self.layout.prop(self, "library_path")


def library_path(context=None) -> str:
    """The default library .blend path from the preferences (absolute, user-expanded).

    Source: bpy.types.AddonPreferences. Falls back to ~/SignSim/library.blend when the
    add-on's preferences are unavailable (e.g. while unregistering).
    """
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_ID)
    path = addon.preferences.library_path if addon else DEFAULT_LIBRARY
    return os.path.abspath(bpy.path.abspath(os.path.expanduser(path)))


classes = (SIGNSIM_AP_preferences,)

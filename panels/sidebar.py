"""Where every SignSim panel lives: the 3D viewport's sidebar, tab "SignSim"."""


class SidebarPanel:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "SignSim"


def armature_or_hint(layout, context, hint="Select an armature"):
    """The active object if it is an armature; otherwise draws ``hint`` and returns None."""
    ob = context.active_object
    if ob is not None and ob.type == 'ARMATURE':
        return ob
    layout.label(text=hint, icon='INFO')
    return None

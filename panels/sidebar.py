"""Where every SignSim panel lives: the 3D viewport's sidebar, tab "SignSim"."""


class SidebarPanel:
    bl_space_type = 'VIEW_3D'
    bl_region_type = 'UI'
    bl_category = "SignSim"

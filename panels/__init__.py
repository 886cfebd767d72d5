"""Sidebar panels of the SignSim tab: drawing only."""
import bpy

classes = ()
register, unregister = bpy.utils.register_classes_factory(classes)

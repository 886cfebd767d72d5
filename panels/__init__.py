"""Sidebar panels of the SignSim tab: drawing only."""
import bpy

from . import library

classes = (*library.classes,)
register, unregister = bpy.utils.register_classes_factory(classes)

"""Thin operators: read properties, call signsim_addon, report."""
import bpy

from . import library

classes = (*library.classes,)
register, unregister = bpy.utils.register_classes_factory(classes)

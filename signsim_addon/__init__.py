"""The Blender side of SignSim: data model, drivers of each capability, the CLI."""
from . import cli, preferences, properties, translations
from .bake import physics_presets

_modules = (preferences, properties, physics_presets, translations, cli)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()

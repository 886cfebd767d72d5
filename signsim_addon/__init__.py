"""The Blender side of SignSim: data model, drivers of each capability, the CLI."""
from . import cli, library, physics_presets, preferences, properties, translations  # noqa: F401 (library: API for operators)

_modules = (preferences, properties, physics_presets, translations, cli)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()

"""The Blender side of SignSim: data model, drivers of each capability, the CLI."""
from . import cli, preferences, properties

_modules = (preferences, properties, cli)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()

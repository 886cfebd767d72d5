"""SignSim: clean, physically plausible keyframes for signing and gesturing characters.

The repository root is the extension's source folder. Modules register in this order and
unregister in reverse: properties and the CLI first, then operators, then panels.
"""
from . import operators, panels, signsim_addon

_modules = (signsim_addon, operators, panels)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()

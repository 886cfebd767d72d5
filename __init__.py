"""SignSim: clean, physically plausible keyframes for signing and gesturing characters.

The repository root is the extension's source folder. Everything Blender must know about
is in ONE ordered list, registered in order and unregistered in reverse: preferences,
property groups, the `signsim` pointer properties, the preset path, translations, the CLI
command, operators, panels.
"""
import os
import pathlib

import bpy


def _solver_cache():
    """Installed, the compiled solver is cached in the extension's user folder (writable,
    kept across updates); from a source checkout (tools/ next to this file) the kernels
    use the virtualenv's folder (solver/core/kernels.py). Set before the solver is imported."""
    if not os.environ.get("NUMBA_CACHE_DIR") and not (pathlib.Path(__file__).resolve().parent / "tools").is_dir():
        os.environ["NUMBA_CACHE_DIR"] = bpy.utils.extension_path_user(__package__, path="solver-cache", create=True)


_solver_cache()

from . import operators, panels  # noqa: E402  (after the cache folder is set)
from .signsim_addon import cli, preferences, properties, translations  # noqa: E402
from .signsim_addon.bake import physics_presets  # noqa: E402
from .signsim_addon.retarget import contact_list  # noqa: E402


class _Pointer:
    """A PointerProperty `signsim` on an ID type (bpy.props.PointerProperty)."""

    def __init__(self, id_type, group):
        self.id_type, self.group = id_type, group

    def register(self):
        self.id_type.signsim = bpy.props.PointerProperty(type=self.group)

    def unregister(self):
        del self.id_type.signsim


_REGISTRATION = (
    *preferences.classes,
    *properties.classes,
    *(_Pointer(id_type, group) for id_type, group in properties.POINTERS),
    *contact_list.classes,
    contact_list.LIST_PROPERTY,  # Object.signsim_contacts
    physics_presets,  # the shipped presets' folder
    translations,
    cli,              # bpy.utils.register_cli_command
    *operators.classes,
    *panels.classes,
)


def register():
    for entry in _REGISTRATION:
        if isinstance(entry, type):
            bpy.utils.register_class(entry)
        else:
            entry.register()


def unregister():
    for entry in reversed(_REGISTRATION):
        if isinstance(entry, type):
            bpy.utils.unregister_class(entry)
        else:
            entry.unregister()

"""Physics presets (soft / default / stiff) as Blender operator presets.

The three shipped presets are Python preset files in the extension's `presets/signsim/physics`
folder (found through bpy.utils.register_preset_path); the Physics panel's preset menu
applies them with `script.execute_preset`, and `signsim.physics_preset_add` writes the
user's own next to Blender's user presets. `preset_text` generates the shipped files
(tests/addon/test_panels.py checks they are up to date).
"""
import os

import bpy

from ...solver.core import settings
from .job import VALUE_NAMES

SUBDIR = "signsim/physics"
MENU = "SIGNSIM_MT_physics_presets"
MENU_LABEL = "Physics Presets"  # the menu's bl_label becomes the last applied preset's name
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # has presets/
FOLDER = os.path.join(ROOT, "presets", *SUBDIR.split("/"))
DEFINES = ["physics = bpy.context.active_object.signsim.physics"]
# the settings a preset stores (the bake's output options and the face are per shot, not presets)
VALUES = [f"physics.{k}" for k in VALUE_NAMES]


def shipped_values(name) -> dict:
    """{property: value} of a shipped preset ('soft', 'default', 'stiff'): the table's
    values (solver.core.settings.preset_values) as the properties take them."""
    v = settings.preset_values(name)
    v["max_substeps"] = str(v["max_substeps"])  # an EnumProperty of powers of two
    return v


def preset_text(name) -> str:
    """The preset file of a shipped preset, in the format AddPresetBase writes."""
    lines = ["import bpy"] + DEFINES + [""]
    lines += [f"physics.{k} = {v!r}" for k, v in shipped_values(name).items()]
    return "\n".join(lines) + "\n"


def shipped_files() -> dict:
    """{file path: text} of the shipped presets."""
    return {os.path.join(FOLDER, f"{name.title()}.py"): preset_text(name) for name in settings.PRESETS}


def write_shipped():
    """(Re)generate the shipped preset files after changing the presets' values (a
    development tool; test_shipped_presets_are_up_to_date fails until it is run)."""
    os.makedirs(FOLDER, exist_ok=True)
    for path, text in shipped_files().items():
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)


def preset_files() -> list:
    """Every physics preset file Blender's menu lists (shipped and the user's)."""
    out = []
    for folder in bpy.utils.preset_paths(SUBDIR):
        out += [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".py")]
    return out


def register():
    bpy.utils.register_preset_path(ROOT)


def unregister():
    bpy.utils.unregister_preset_path(ROOT)

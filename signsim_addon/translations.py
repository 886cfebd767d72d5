"""Simplified Chinese (zh_HANS) translation of SignSim's UI strings.

Registered with bpy.app.translations in the root registration order (signsim_addon first).
Contexts: "*" (Blender's default: panel labels, property names and descriptions, enum
items, tooltips, labels drawn by panels, reports) and "Operator" (operator labels, as
Blender looks them up). `ui_strings()` lists every string SignSim shows, so tests can
check that each one has a translation.
"""
import ast
import os

import bpy

from ._zh_hans import ZH_HANS as _TABLE

DEFAULT, OPERATOR = "*", "Operator"
# properties SignSim classes inherit from Blender (PropertyGroup, ExportHelper, AddPresetBase…)
_BLENDER_OWN = {"rna_type", "name", "filepath", "check_existing", "filter_glob", "directory",
                "files", "remove_name", "remove_active", "bl_idname"}


def _entries():
    out = {}
    for msgid, msgstr in _TABLE.items():
        out[(DEFAULT, msgid)] = msgstr
    return out


def translations() -> dict:
    """{locale: {(context, msgid): msgstr}} as bpy.app.translations.register wants it.

    Operator labels are looked up in the "Operator" context: each label of a SignSim
    operator gets an entry there too.
    """
    table = _entries()
    for cls in _signsim_types():
        if issubclass(cls, bpy.types.Operator) and cls.bl_label in _TABLE:
            table[(OPERATOR, cls.bl_label)] = _TABLE[cls.bl_label]
    return {"zh_HANS": table}


def _signsim_types():
    for name in dir(bpy.types):
        if name.startswith(("SIGNSIM_", "SignSim")):
            yield getattr(bpy.types, name)


def _rna_strings(rna, out, seen):
    """Names, descriptions and enum items of `rna`'s properties, recursing into SignSim
    property groups."""
    if rna.identifier in seen:
        return
    seen.add(rna.identifier)
    for prop in rna.properties:
        if prop.identifier in _BLENDER_OWN:
            continue  # Blender's own, translated by Blender
        fixed = getattr(prop, "fixed_type", None)
        if fixed is not None and fixed.identifier.startswith("SignSim"):
            _rna_strings(fixed, out, seen)
        if prop.name in {"", prop.identifier}:
            continue  # never shown by name
        for s in (prop.name, prop.description):
            if s:
                out.add((DEFAULT, s))
        for item in getattr(prop, "enum_items", ()):
            for s in (item.name, item.description):
                if s:
                    out.add((DEFAULT, s))


def ui_strings() -> set:
    """{(context, msgid)} of every SignSim UI string: registered panel, menu and operator
    labels, operator descriptions and properties, the names, descriptions and enum items
    of the SignSim property groups and preferences, and the literal labels and reports
    in panels/ and operators/ (text=…, iface_, rpt_ calls, report messages)."""
    out, seen = set(), set()
    for cls in _signsim_types():
        if issubclass(cls, bpy.types.Operator):
            out.add((OPERATOR, cls.bl_label))
            rna = getattr(bpy.ops.signsim, cls.bl_idname.split(".", 1)[1]).get_rna_type()
            if rna.description:
                out.add((DEFAULT, rna.description))
            _rna_strings(rna, out, seen)
        elif issubclass(cls, bpy.types.Panel):
            out.add((DEFAULT, cls.bl_label))
    from .bake import physics_presets
    out.add((DEFAULT, physics_presets.MENU_LABEL))  # a preset menu's label is the preset's name
    for id_type in (bpy.types.Scene, bpy.types.Object, bpy.types.Action):
        _rna_strings(id_type.bl_rna.properties["signsim"].fixed_type, out, seen)
    addon = bpy.context.preferences.addons.get(__package__.rpartition(".")[0])
    if addon is not None and addon.preferences is not None:
        _rna_strings(addon.preferences.bl_rna, out, seen)
    from .bake import metrics_report, schedule
    out |= {(DEFAULT, row[1]) for row in metrics_report.SUMMARY}
    out |= {(DEFAULT, s) for label, _v, desc in schedule.PHASES.values() for s in (label, desc)}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in ("panels", "operators"):
        for fname in sorted(os.listdir(os.path.join(root, folder))):
            if fname.endswith(".py"):
                with open(os.path.join(root, folder, fname), encoding="utf-8") as f:
                    out |= {(DEFAULT, s) for s in _literal_strings(f.read())}
    return out


def _literal_strings(source):
    """String constants passed as text=…, to iface_/rpt_/tip_/poll_message_set, or as a
    report message."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        args = []
        if name in {"iface_", "rpt_", "tip_"} and node.args:
            args.append(node.args[0])
        if name == "poll_message_set" and node.args:
            args.append(node.args[0])
        if name == "report" and len(node.args) == 2:
            args.append(node.args[1])
        args += [k.value for k in node.keywords if k.arg == "text"]
        found += [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                  and a.value.strip()]
    return found


def register():
    bpy.app.translations.register(__package__, translations())


def unregister():
    bpy.app.translations.unregister(__package__)

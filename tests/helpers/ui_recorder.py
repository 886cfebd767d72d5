"""A recording stand-in for bpy.types.UILayout: panels draw into it under the real bpy.

Every call is checked against Blender's own RNA (the property exists on the data, the
operator and menu are registered, the icon is one of Blender's, operator arguments are
properties of the operator), so a typo fails the test exactly where Blender would print
an error in the sidebar, and the test can assert what was shown.
"""
import types

import bpy

_ICONS = set(bpy.types.UILayout.bl_rna.functions["label"].parameters["icon"].enum_items.keys())
_ATTRS = {"enabled", "active", "alert", "scale_x", "scale_y", "alignment", "use_property_split",
          "use_property_decorate", "operator_context", "emboss", "active_default",
          "activate_init", "ui_units_x", "ui_units_y", "direction"}


class Drawn:
    """What one draw call showed."""

    def __init__(self):
        self.calls = []  # (kind, details dict)

    def kinds(self, kind):
        return [d for k, d in self.calls if k == kind]

    @property
    def props(self):
        """{property identifier} shown with prop / prop_search."""
        return {d["property"] for d in self.kinds("prop") + self.kinds("prop_search")}

    @property
    def operators(self):
        """[idname] of the buttons, in drawing order."""
        return [d["idname"] for d in self.kinds("operator")]

    def operator_args(self, idname):
        return [d["args"] for d in self.kinds("operator") if d["idname"] == idname]

    @property
    def labels(self):
        return [d["text"] for d in self.kinds("label")]


class OperatorProperties:
    """What layout.operator returns: records the arguments, refuses unknown ones."""

    def __init__(self, idname, args):
        object.__setattr__(self, "_rna", _operator_rna(idname))
        object.__setattr__(self, "_args", args)

    def __setattr__(self, name, value):
        if name not in self._rna.properties:
            raise AttributeError(f"operator {self._rna.identifier} has no property '{name}'")
        self._args[name] = value

    def __getattr__(self, name):
        return self._args[name]


def _operator_rna(idname):
    module, name = idname.split(".")
    op = getattr(getattr(bpy.ops, module), name)
    return op.get_rna_type()  # raises KeyError for an unregistered operator


def _icon(icon):
    if icon not in _ICONS:
        raise ValueError(f"unknown icon '{icon}'")


def _check_prop(data, prop):
    if prop.startswith('["'):
        key = prop[2:-2]
        if key not in data.keys():
            raise KeyError(f"{data!r} has no custom property {key}")
        return
    if prop not in data.bl_rna.properties:
        raise AttributeError(f"{data.bl_rna.identifier} has no property '{prop}'")


class Layout:
    def __init__(self, drawn=None):
        object.__setattr__(self, "drawn", drawn or Drawn())

    def __setattr__(self, name, value):
        if name not in _ATTRS:
            raise AttributeError(f"UILayout has no attribute '{name}'")
        object.__setattr__(self, name, value)

    def _log(self, kind, **details):
        self.drawn.calls.append((kind, details))

    def _child(self, kind, **kw):
        self._log(kind, **kw)
        return Layout(self.drawn)

    def row(self, **kw):
        return self._child("row", **kw)

    def column(self, **kw):
        return self._child("column", **kw)

    def box(self):
        return self._child("box")

    def split(self, **kw):
        return self._child("split", **kw)

    def grid_flow(self, **kw):
        return self._child("grid_flow", **kw)

    def column_flow(self, **kw):
        return self._child("column_flow", **kw)

    def label(self, *, text="", icon='NONE', **kw):
        _icon(icon)
        self._log("label", text=text, icon=icon)

    def prop(self, data, property, *, text=None, icon='NONE', **kw):
        _icon(icon)
        _check_prop(data, property)
        self._log("prop", data=data, property=property, text=text)

    def prop_search(self, data, property, search_data, search_property, *, text=None, icon='NONE', **kw):
        _icon(icon)
        _check_prop(data, property)
        _check_prop(search_data, search_property)
        self._log("prop_search", data=data, property=property, text=text)

    def operator(self, operator, *, text=None, icon='NONE', **kw):
        _icon(icon)
        args = {}
        props = OperatorProperties(operator, args)
        self._log("operator", idname=operator, text=text, args=args, icon=icon)
        return props

    def menu(self, menu, *, text=None, icon='NONE', **kw):
        _icon(icon)
        if not hasattr(bpy.types, menu):
            raise KeyError(f"menu {menu} is not registered")
        self._log("menu", menu=menu, text=text)

    def popover(self, panel, *, text=None, icon='NONE', **kw):
        _icon(icon)
        self._log("popover", panel=panel, text=text)

    def template_list(self, listtype_name, list_id, dataptr, propname, active_dataptr,
                      active_propname, **kw):
        if not hasattr(bpy.types, listtype_name):
            raise KeyError(f"UI list {listtype_name} is not registered")
        _check_prop(dataptr, propname)
        _check_prop(active_dataptr, active_propname)
        self._log("template_list", property=propname)

    def separator(self, **kw):
        self._log("separator")

    def separator_spacer(self):
        self._log("separator")


def signsim_panels():
    """Registered panel classes of the SignSim sidebar tab, in registration order."""
    found = []

    def walk(cls):
        for sub in cls.__subclasses__():
            if getattr(sub, "bl_category", None) == "SignSim" and sub.is_registered:
                found.append(sub)
            walk(sub)
    walk(bpy.types.Panel)
    return found


def draw(panel_cls, context=None):
    """Draw one panel into a recording layout; returns the Drawn record (None when the
    panel's poll hides it)."""
    context = context or bpy.context
    poll = getattr(panel_cls, "poll", None)
    if poll is not None and not poll(context):
        return None
    layout = Layout()
    panel = types.SimpleNamespace(layout=layout, bl_label=panel_cls.bl_label)
    if hasattr(panel_cls, "draw_header"):
        panel_cls.draw_header(panel, context)
    panel_cls.draw(panel, context)
    return layout.drawn

"""Files of the command line: check paths first, open .blend files, write atomically.

Every subcommand checks all its paths before any work, so a bad path costs nothing and
never leaves half a result behind, and no output may overwrite an input or another output.
"""
import os
from dataclasses import dataclass

import bpy

from .errors import SignSimError


@dataclass(frozen=True, kw_only=True)
class FileRequest:
    """What every file-to-file use case names: rig, the input .blend with the armature;
    out, where the result goes (never an input); armature, the object's name (None: the
    only armature in rig). Capabilities add their own fields."""
    rig: str
    out: str
    armature: str = None


def check_files(inputs, outputs):
    """SignSimError unless every input file exists, every output's folder exists, and no
    output is an input or another output (check_distinct). None entries are skipped."""
    inputs = [os.path.abspath(p) for p in inputs if p]
    outputs = [os.path.abspath(p) for p in outputs if p]
    for p in inputs:
        if not os.path.isfile(p):
            raise SignSimError(f"file not found: {p}")
    for p in outputs:
        if not os.path.isdir(os.path.dirname(p)):
            raise SignSimError(f"output folder does not exist: {os.path.dirname(p)}")
        if os.path.isdir(p):
            raise SignSimError(f"output is a folder, not a file: {p}")
    check_distinct(inputs, outputs)


def check_distinct(inputs, outputs, labels=None):
    """SignSimError when an output is one of the inputs or two outputs are one file (paths
    compared after resolving symbolic links). labels: optional text per output naming
    what writes it (e.g. "clip 'walk'"). None entries are skipped."""
    pairs = [(o, labels[i] if labels else None) for i, o in enumerate(outputs) if o]
    ins = {os.path.realpath(p): p for p in inputs if p}
    seen = {}
    for out, label in pairs:
        real = os.path.realpath(out)
        who = f"{label}'s output {os.path.abspath(out)}" if label else f"the output {os.path.abspath(out)}"
        if real in ins:
            raise SignSimError(f"{who} would overwrite the input {ins[real]}: choose another output path")
        if real in seen:
            raise SignSimError(f"{who} is also written by {seen[real]}: give each output its own path")
        seen[real] = label or os.path.abspath(out)


def make_folder(path):
    """Create the output folder `path` (and its parents) unless it exists; returns its
    absolute path. Raises SignSimError naming the path and the reason (a file is there,
    no permission, …) instead of the operating system's numbered error."""
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise SignSimError(f"cannot use {path} as the output folder: it is a file")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as ex:
        where = f" ({ex.filename})" if ex.filename and os.path.abspath(ex.filename) != path else ""
        raise SignSimError(f"cannot create the output folder {path}: "
                           f"{(ex.strerror or str(ex)).lower()}{where}") from None
    return path


def open_blend(path):
    """Open a .blend file as the current file. Raises SignSimError when it cannot be read."""
    try:
        bpy.ops.wm.open_mainfile(filepath=os.path.abspath(path), load_ui=False)
    except RuntimeError as ex:
        raise SignSimError(f"cannot open {path}: {str(ex).strip().splitlines()[-1]}") from None


def find_armature(name=None):
    """The armature object called `name` in the open file; with no name, the only armature
    there. Raises SignSimError naming the armatures there are."""
    armatures = sorted(o.name for o in bpy.data.objects if o.type == 'ARMATURE')
    if name:
        ob = bpy.data.objects.get(name)
        if ob is None or ob.type != 'ARMATURE':
            raise SignSimError(f"no armature named '{name}' in the rig file; armatures: "
                               f"{', '.join(armatures) or 'none'}")
        return ob
    if len(armatures) != 1:
        raise SignSimError(f"the rig file has {len(armatures)} armatures "
                           f"({', '.join(armatures) or 'none'}): choose one with --armature")
    return bpy.data.objects[armatures[0]]


def save_atomically(out, say=None):
    """Save the open file as a copy at OUT through a temporary file renamed into place;
    returns the absolute path."""
    out = os.path.abspath(out)
    tmp = out + ".partial.blend"
    try:
        bpy.ops.wm.save_as_mainfile(filepath=tmp, copy=True, compress=True)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    if say:
        say(f"wrote {out}")
    return out

"""Files of the command line: check paths first, open .blend files, write atomically.

Every subcommand checks all its paths before any work (they exist, the output folders are
writable), so a bad path costs nothing and never leaves half a result behind, and no
output may overwrite an input or another output. A command's outputs (the .blend and its
JSON side files) are renamed into place together at the end (save_outputs), and Blender's
own log lines ("Read blend", "Saved copy as") are kept off stdout and stderr (quiet).
"""
import contextlib
import io
import os
import sys
import tempfile
from dataclasses import dataclass

import bpy

from .errors import SignSimError, did_you_mean


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
        check_writable(p)
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


def check_writable(path):
    """SignSimError unless a file can be created next to `path`, in its folder or the
    nearest existing parent (a probe file is made and removed: permission bits alone do
    not tell, e.g. for root or read-only mounts)."""
    folder = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    try:
        fd, probe = tempfile.mkstemp(prefix=".signsim-probe-", dir=folder)
    except OSError as ex:
        raise SignSimError(f"cannot write in the folder {folder} ({ex.strerror or ex}): "
                           "choose another output path") from None
    os.close(fd)
    os.remove(probe)
    if os.path.exists(path) and not os.access(path, os.W_OK):
        raise SignSimError(f"cannot overwrite {path} (read-only file)")


@contextlib.contextmanager
def quiet():
    """Keep Blender's log lines (the C code's prints on file descriptors 1 and 2, e.g.
    "Read blend", "Saved copy as", importer progress) and Python prints inside the block
    off the terminal; yields the captured Python text for error messages."""
    buf = io.StringIO()
    sys.stdout.flush()
    sys.stderr.flush()
    saved, sink = [], None
    try:
        sink = tempfile.TemporaryFile()
        for fd in (1, 2):
            saved.append((fd, os.dup(fd)))
            os.dup2(sink.fileno(), fd)
    except (OSError, ValueError):  # no real descriptors (an embedding host): Python level only
        pass
    try:
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            yield buf
    finally:
        for fd, copy in reversed(saved):
            os.dup2(copy, fd)
            os.close(copy)
        if sink is not None:
            sink.close()


def open_blend(path):
    """Open a .blend file as the current file. Raises SignSimError when it cannot be read."""
    try:
        with quiet():
            bpy.ops.wm.open_mainfile(filepath=os.path.abspath(path), load_ui=False)
    except RuntimeError as ex:
        raise SignSimError(f"cannot open {path}: {str(ex).strip().splitlines()[-1]}") from None


def find_armature(name=None):
    """The armature object called `name` in the open file; with no name, the only armature
    there. Raises SignSimError naming the armatures there are (the nearest first when
    `name` matches none) and the file by its path (a character read from FBX/glTF, which has
    none: 'the rig file')."""
    armatures = sorted(o.name for o in bpy.data.objects if o.type == 'ARMATURE')
    where = bpy.data.filepath or "the rig file"
    if name:
        ob = bpy.data.objects.get(name)
        if ob is None or ob.type != 'ARMATURE':
            raise SignSimError(f"no armature named '{name}' in {where}{did_you_mean(name, armatures)} "
                               f"(armatures: {', '.join(armatures) or 'none'})")
        return ob
    if len(armatures) != 1:
        raise SignSimError(f"{where} has {len(armatures)} armatures "
                           f"({', '.join(armatures) or 'none'}): choose one with --armature")
    return bpy.data.objects[armatures[0]]


def find_action(name, path):
    """The action called `name` in the open file (read from `path`), or None for no name.
    Raises SignSimError when there is no such action."""
    if not name:
        return None
    action = bpy.data.actions.get(name)
    if action is None:
        raise SignSimError(f"no action named '{name}' in {path}")
    return action


def save_atomically(out, say=None, texts=None):
    """Save the open file as a copy at OUT, and each {path: text} of `texts` (JSON side
    files), through temporary files renamed into place only when all were written, so
    either every output is new or none changed. Returns OUT's absolute path. Raises
    SignSimError when a file cannot be written."""
    out = os.path.abspath(out)
    pending = [(out + ".partial.blend", out)]
    pending += [(os.path.abspath(p) + ".partial", os.path.abspath(p)) for p in (texts or {})]
    try:
        with quiet():
            bpy.ops.wm.save_as_mainfile(filepath=pending[0][0], copy=True, compress=True)
        for (tmp, _final), text in zip(pending[1:], (texts or {}).values()):
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
        for tmp, final in pending:
            os.replace(tmp, final)
    except (OSError, RuntimeError) as ex:
        raise SignSimError(f"cannot write {out}: {getattr(ex, 'strerror', None) or ex}") from None
    finally:
        for tmp, _final in pending:
            if os.path.exists(tmp):
                os.remove(tmp)
    if say:
        say(f"wrote {out}")
    return out

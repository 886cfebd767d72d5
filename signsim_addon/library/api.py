"""The motion library's use cases: import BVH/FBX/glTF clips into a tagged, searchable
.blend of action assets, and search it.

Public API (operators, the CLI, batch, the demo and the tests call only these):
- library_file(path=None) -> the library .blend: path, else the preferences' 
- import_paths(paths, library, tags=(), catalog=None, report=None) -> {"imported", "failed"}
- list_clips(library, **filters) -> [clip record]   (filters: see store.matches)
- edit_clip(library, name, rename=None, tags=None, delete=False)
- tag_clip(library, name, add=(), remove=()) -> clip record  (a facet tag replaces its value)
- tag_clips(library, names, add=(), remove=()) -> [clip record]  (every name checked first)
- load_clip(library, name) -> (action, skeleton)   appended into the open file
- unknown_filter_warnings(library, tags=(), catalog="") -> [warning] for tags/catalogs no clip has,
  with the nearest names
- collect_files(paths) -> ([file], [(path, error)])
- open_character(path): a new current file holding the character of an FBX/glTF file
  (CHARACTER_FORMATS), as `--rig` takes one
- import_character(path, out, report=None) -> {"out", "armatures", "meshes"}: that file saved
- check_not_scene_file(library): refuse a scene .blend given as the library
- index_file(library) -> the path of its SQLite index; CATALOG_FILE: the catalog file's
  name (beside the library)

Modules: tracking (datablock snapshots and rollback), importers (Blender's importers +
repairs), store (the library's part files, catalogs, tags, search), index (the SQLite
index of the clips), ui (the sidebar's state); the pure parts are solver/mocap/bvh_file.py (BVH
validation + numpy FK) and solver/mocap/clip_checks.py.
"""
import os

import bpy

from .. import files, preferences
from ..errors import ERROR, INFO, WARNING, SignSimError, silent
from ..progress import Stages, unique
from . import importers, store, tracking
from .importers import CHARACTER_FORMATS, open_character  # noqa: F401
from .index import path_of as index_file  # noqa: F401
from .store import CATS_FILE as CATALOG_FILE  # noqa: F401
from .store import (check_not_scene_file, edit_clip, list_clips, load_clip, matches, parse_tags, tag_clip,  # noqa: F401
                    tag_clips)
from .store import TEXT_FIELDS, empty_note, text_note, unknown_filter_warnings  # noqa: F401

__all__ = ("library_file", "index_file", "CATALOG_FILE", "check_not_scene_file", "import_paths", "list_clips", "edit_clip", "tag_clip", "tag_clips",
           "load_clip", "collect_files", "matches", "parse_tags", "unknown_filter_warnings",
           "TEXT_FIELDS", "text_note", "empty_note",
           "CHARACTER_FORMATS", "open_character", "import_character")


def library_file(path=None) -> str:
    """The absolute path of the library .blend: `path` (~ expanded), else the one in the
    preferences. Raises SignSimError when neither is set."""
    if path:
        return os.path.abspath(os.path.expanduser(path))
    try:
        return preferences.library_path()
    except Exception as ex:  # noqa: BLE001 (no preferences: the add-on is not enabled)
        raise SignSimError(f"no library given and no library path in the preferences ({ex})") from None


NOT_MOCAP = "not mocap (BVH, FBX, glTF)"
HIDDEN = "hidden (the name starts with '.'; name it on the command line to import it)"
LINKED_FOLDER = "a link to a folder, not followed (name the folder itself to import it)"


def collect_files(paths, skipped=None):
    """Expand files and folders (recursively, sorted) into ([file], [(path, error)]).

    Inside folders, hidden files and folders, links to folders (never followed: a link
    can loop) and files without a mocap extension (importers.SUPPORTED) are skipped:
    appended to `skipped` as (path, reason: HIDDEN, LINKED_FOLDER, NOT_MOCAP) when given.
    A named file of an unsupported type, or a path that does not exist, is a failure.
    """
    files, failed = [], []

    def skip(path, reason):
        if skipped is not None:
            skipped.append((path, reason))

    for p in paths:
        p = os.path.abspath(os.path.expanduser(str(p)))
        if os.path.isdir(p):
            for root, dirs, names in os.walk(p):
                walk = []
                for d in sorted(dirs):
                    full = os.path.join(root, d)
                    if d.startswith("."):
                        skip(full, HIDDEN)
                    elif os.path.islink(full):
                        skip(full, LINKED_FOLDER)
                    else:
                        walk.append(d)
                dirs[:] = walk
                for n in sorted(names):
                    full = os.path.join(root, n)
                    if n.startswith("."):
                        skip(full, HIDDEN)
                    elif os.path.splitext(n)[1].lower() in importers.SUPPORTED:
                        files.append(full)
                    else:
                        skip(full, NOT_MOCAP)
        elif os.path.isfile(p):
            if os.path.splitext(p)[1].lower() in importers.SUPPORTED:
                files.append(p)
            else:
                failed.append((p, _error_text(p)))
        else:
            failed.append((p, f"{os.path.basename(p) or p}: no such file or folder"))
    seen, unique = set(), []
    for f in files:
        if f not in seen:
            seen.add(f)
            unique.append(f)
    return unique, failed


def _error_text(path):
    try:
        importers.format_of(path)
    except SignSimError as ex:
        return str(ex)
    return f"{os.path.basename(path)}: cannot import"


def import_paths(paths, library, tags=(), catalog=None, report=None, progress=None):
    """Import files/folders into the library at `library` (created when missing).

    Every file is imported on its own: a failing file is rolled back completely and
    listed in "failed" with a one-line reason; the others carry on. Imported clips are
    added to the library (store.add_clips: the parts they go into, written atomically)
    each time store.PART_CLIPS of them or importers.MAX_CLIP_KEYS keys are waiting, and
    at the end, so memory and the time per file do not grow with the folder or the
    library; the open file is left exactly as it was (see store.py). A file with the
    same content (SHA-256) as one imported earlier in the call is skipped, so each clip
    is imported and counted once. Returns
    {"imported": [record + "updated"], "failed": [{"path", "error"}],
     "skipped": [{"path", "reason"}] (see collect_files), "library": path}.
    progress: None or a progress(stage, k, n, fraction) callable (signsim_addon/progress.py)
    whose stages are the files (named by their file names, a repeat suffixed: progress.unique;
    a BVH file's advances as its rows are read). An interrupt (KeyboardInterrupt) keeps
    the clips imported before it, reports how many, and is raised again.
    """
    tags = store.parse_tags(tags)
    bad = [t for t in tags if ":" in t and t.split(":", 1)[0] in store.FACETS and not t.split(":", 1)[1]]
    if bad:
        raise SignSimError(f"facet tag '{bad[0]}' has no value (use facet:value)")
    catalog = store.normalise_catalog(catalog) if catalog else None
    skipped = []
    files, failed = collect_files(paths, skipped)
    failed = [{"path": p, "error": e} for p, e in failed]
    skipped = [{"path": p, "reason": r} for p, r in skipped]
    imported, first_with = [], {}   # first_with: sha256 → the first file of the call with it
    library = store.check_library_path(library, write=True)   # before any work
    if os.path.isfile(library):
        store.check_not_scene_file(library)
    names = unique([os.path.basename(p) for p in files])  # a/take.bvh and b/take.bvh: two stages
    stages = Stages(names, progress)
    with tracking.NameGuard() as guard, tracking.Tracker():
        waiting, waiting_keys = [], 0   # clips not yet in the library, and their keys

        def sink(clips):   # each part of a file too long for one clip, as it is made
            imported.extend(store.add_clips(library, clips, guard, tags, catalog))

        try:
            for i, (path, name) in enumerate(zip(files, names)):
                with stages(name) as tick:
                    clips = []
                    try:
                        sha = importers.file_sha256(path)
                    except OSError:
                        sha = None   # import_file says why the file cannot be read
                    if sha is not None and sha in first_with:
                        skipped.append({"path": path, "reason": f"the same content (SHA-256) as "
                                        f"{os.path.basename(first_with[sha])}, earlier in this import"})
                    else:
                        first_with[sha] = path
                        try:
                            clips = importers.import_file(path, report, sink, sha256=sha, progress=tick)
                        except SignSimError as ex:
                            failed.append({"path": path, "error": str(ex)})
                            if report:
                                report(ERROR, str(ex))
                    waiting += clips
                    waiting_keys += sum(store.clip_keys(c.meta["frame_count"], c.meta["bone_count"]) for c in clips)
                    if waiting and (len(waiting) >= store.PART_CLIPS or waiting_keys >= importers.MAX_CLIP_KEYS
                                    or i == len(files) - 1):
                        # taken off `waiting` first: an interrupt inside add_clips must not add them again
                        batch, waiting, waiting_keys = waiting, [], 0
                        imported += store.add_clips(library, batch, guard, tags, catalog)
        except KeyboardInterrupt:
            # Ctrl-C or SIGTERM: the file in progress is rolled back (tracking.Tracker); the
            # clips imported before it are kept, and the interrupt goes on
            if waiting:
                imported += store.add_clips(library, waiting, guard, tags, catalog)
            if report:
                report(WARNING, f"interrupted: {len(imported)} clip(s) imported before the interrupt are kept in "
                                f"{library}; the file in progress was not imported")
            raise
    return {"imported": imported, "failed": failed, "skipped": skipped, "library": library}


def import_character(path, out, report=silent) -> dict:
    """Save the character of the FBX or glTF file `path` (open_character: armatures and
    meshes, no animation) as the .blend `out`, which then serves as a rig file.

    Returns {"out": absolute path, "armatures": [names], "meshes": [names]}. Raises
    SignSimError for a missing file or output folder, a BVH file (motion, not a
    character), another format, or a file without an armature; nothing is written then.
    """
    files.check_files([path], [out])
    open_character(path)
    armatures = sorted(o.name for o in bpy.data.objects if o.type == 'ARMATURE')
    meshes = sorted(o.name for o in bpy.data.objects if o.type == 'MESH')
    out = files.save_atomically(out)
    report(INFO, f"wrote {out}: armature {', '.join(armatures)}, {len(meshes)} mesh(es)")
    return {"out": out, "armatures": armatures, "meshes": meshes}


# the sidebar's state (which library, its clip list, the preview): imported last, it uses this API
from . import ui  # noqa: E402,F401

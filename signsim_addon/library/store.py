"""The motion library files: .blend files of action assets plus their source skeletons.

A library is split into part files (index.py: part 0 is the library .blend, further
parts sit in `<library>.parts/`) of at most PART_CLIPS clips each, because appending n
actions from one file costs Blender about n² (2 000 clips: 18 s to load, 200: 0.16 s).
Adding clips appends to the last part while it has room and otherwise starts a new
part; editing a clip loads and writes only its part; the index says which part holds
which clip, so no command loads the whole library.

How a part is read and written without disturbing the user's open file
(decision; `bpy.data.temp_data()` crashes on its second load in 5.0.1, so it is not used):
- the part's actions and skeletons are appended into the current bpy.data inside a
  `tracking.Tracker`; `tracking.NameGuard` gives them back their library names (a file
  datablock holding such a name is parked under a temporary name until the end), so no
  name on either side keeps a '.001' suffix;
- changes are made there, then `bpy.data.libraries.write(tmp, clips, fake_user=True)`
  writes exactly the part's clips (dependencies follow), the search index (index.py) is
  written for those files, and `os.replace` swaps them in, the parts first (commit);
- backups: none. The rename is atomic, so every part on disk is always a complete file,
  the old one or the new one; a `.blend1` copy would double the space for nothing
  (decision; Blender's own save keeps one, libraries.write never does);
- writers (import, tag, rename, delete) hold an exclusive lock on `<library>.lock` from
  reading the index to renaming the new files in, so concurrent writers are serialised
  and none overwrites another's clips; a writer that waits longer than LOCK_TIMEOUT_S
  stops with a clear message. Readers (list, search, the sidebar) need no lock: they read
  the index, or complete part files;
- on leaving, every appended or imported datablock is removed and the user's names are
  restored, so the open file is as it was (tests check this).
Catalogs live in `blender_assets.cats.txt` next to the library (Blender's format, one
UUID per catalog path, parents included), also written atomically; the Asset Browser
shows every part when the library's folder is an asset library.
"""
import contextlib
import math
import os
import re
import time
import uuid

import bpy

from .. import files
from ..errors import SignSimError, did_you_mean
from . import importers, index, tracking

LOCK_TIMEOUT_S = 600.0   # a writer loads and saves one part file (≤ PART_CLIPS clips)
PART_CLIPS = 200         # appending n clips costs ~n² in Blender: parts keep n small (bench_library.py)
CATS_FILE = "blender_assets.cats.txt"
DEFAULT_CATALOG = "imported"
FACETS = ("style", "body_part", "complexity", "handedness", "gloss")
AUTO_PREFIXES = ("fps:", "duration:")
AUTO_TAGS = ("has_fingers", "has_root_motion")


# ------------------------------------------------------------------------- catalogs

def read_catalogs(library):
    """{catalog path: uuid} from the catalog file next to `library` ({} when none)."""
    path = os.path.join(os.path.dirname(os.path.abspath(library)), CATS_FILE)
    cats = {}
    if not os.path.isfile(path):
        return cats
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or line.startswith("VERSION"):
                continue
            parts = line.split(":")
            if len(parts) >= 2:
                cats[parts[1]] = parts[0]
    return cats


def write_catalogs(library, cats):
    path = os.path.join(os.path.dirname(os.path.abspath(library)), CATS_FILE)
    lines = [
        "# This is an Asset Catalog Definition file for Blender.",
        "#",
        "# Empty lines and lines starting with `#` will be ignored.",
        "# The first non-ignored line should be the version indicator.",
        '# Other lines are of the format "UUID:catalog/path/for/assets:simple catalog name"',
        "",
        "VERSION 1",
        "",
    ]
    for cat_path, cat_id in sorted(cats.items()):
        lines.append(f"{cat_id}:{cat_path}:{cat_path.replace('/', '-')}")
    _atomic_write_text(path, "\n".join(lines) + "\n")


def ensure_catalog(cats, cat_path):
    """UUID of `cat_path` (created with its parents when new)."""
    cat_path = normalise_catalog(cat_path)
    parts = cat_path.split("/")
    for i in range(1, len(parts) + 1):
        p = "/".join(parts[:i])
        if p not in cats:
            cats[p] = str(uuid.uuid4())
    return cats[cat_path]


def normalise_catalog(cat_path):
    """The catalog path `cat_path` as 'a/b/c' ('\\' read as '/'; blank: DEFAULT_CATALOG).
    Raises SignSimError for an absolute path, an empty, '.' or '..' component, or ':'
    (the separator of the catalog definition file)."""
    text = (cat_path or "").replace("\\", "/").strip()
    if not text:
        return DEFAULT_CATALOG
    parts = [p.strip() for p in text.split("/")]
    if text.startswith("/"):
        raise SignSimError(f"catalog path '{cat_path}' must be relative (like signs/greetings), not absolute")
    if any(p in ("", ".", "..") for p in parts):
        raise SignSimError(f"catalog path '{cat_path}' has an empty, '.' or '..' part: "
                           "name each level (like signs/greetings)")
    if any(":" in p for p in parts):
        raise SignSimError(f"catalog path '{cat_path}' may not contain ':'")
    return "/".join(parts)


def _atomic_write_text(path, text):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


# --------------------------------------------------------------------------- tags

def parse_tags(text):
    """'a, style:formal,b' → ['a', 'style:formal', 'b'] (trimmed, de-duplicated, in order).
    SignSimError for a facet tag without a value ('style:')."""
    if not text:
        return []
    if isinstance(text, (list, tuple)):
        text = ",".join(text)
    out = []
    for t in text.split(","):
        t = t.strip()
        if is_facet_tag(t) and not t.split(":", 1)[1].strip():
            raise SignSimError(f"tag '{t}' has no value (write {t}VALUE)")
        if t and t not in out:
            out.append(t)
    return out


def is_facet_tag(tag):
    return ":" in tag and tag.split(":", 1)[0] in FACETS


def merge_tags(old, new):
    """`old` tags with `new` added, in order; a facet tag (facet:value) replaces the value
    that facet had (style:formal replaces style:casual)."""
    facets = {t.split(":", 1)[0] for t in new if is_facet_tag(t)}
    out = [t for t in old if not (is_facet_tag(t) and t.split(":", 1)[0] in facets)]
    for t in new:
        if t not in out:
            out.append(t)
    return out


def clip_tags(action):
    return [t.name for t in action.asset_data.tags] if action.asset_data else []


def set_tags(action, tags):
    ad = action.asset_data
    while len(ad.tags):
        ad.tags.remove(ad.tags[0])
    for t in tags:
        ad.tags.new(t, skip_if_exists=True)


def is_auto_tag(tag):
    return tag in AUTO_TAGS or tag.startswith(AUTO_PREFIXES)


# ------------------------------------------------------------------ clip records

def clip_record(action):
    """The JSON-able description of a clip (the `list --json` / `import --json` fields)."""
    s = action.signsim
    return {
        "name": action.name,
        "fps": round(s.fps, 4),
        "frames": s.frame_count,
        "duration_s": round(s.duration, 4),
        "bones": s.bone_count,
        "tags": sorted(clip_tags(action)),
        "warnings": [w for w in s.warnings.split("\n") if w],
        "catalog": s.catalog,
        "source": s.source_path,
        "format": s.source_format,
        "sha256": s.sha256,
        "skeleton": s.skeleton_signature,
        "skeleton_object": s.skeleton.name if s.skeleton else "",
    }


def matches(rec, **filters):
    """Whether a clip record passes the filters (shared by the CLI and the sidebar list);
    filters: see matcher."""
    return matcher(**filters)(rec)


TEXT_FIELDS = "name, catalog, source file name or tags"  # what a text filter looks in (matcher)


def text_note(text):
    """Why a text filter may have matched nothing: which fields it looks in."""
    return f"--text '{text}' looks for every word in a clip's {TEXT_FIELDS} (any case)"


def empty_note(path, text, others):
    """Which filter left no clip of the library at `path`: text_note when `text` alone
    matches none, else the other filters given (`others`: their options, e.g. ['--tags']);
    '' when none was given."""
    if text and not list_clips(path, text=text):
        return text_note(text)
    return f"{' and '.join(others)} left none{' of the clips --text matches' if text else ''}" if others else ""


def _text_of(rec):
    """What a text filter looks in (TEXT_FIELDS), lower case."""
    return " ".join([rec["name"], rec["catalog"], os.path.basename(rec["source"]), *rec["tags"]]).lower()


def matcher(text="", tags=(), any_tag=False, catalog="", min_duration=None,
            max_duration=None, fps=None, skeleton=""):
    """The test record → bool for these filters (prepared once, applied per record):
    every word of `text` in the TEXT_FIELDS (any case); all
    (any_tag: any) of `tags` (any case); the catalog or one of its sub-catalogs; duration
    within [min_duration, max_duration] s; fps within ±0.5; a skeleton signature prefix.
    Raises SignSimError for filters no clip can pass (min_duration above max_duration, a
    negative max_duration, an fps that is not positive, non-finite numbers): an empty
    answer would hide the mistake."""
    check_filters(min_duration, max_duration, fps)
    words = text.lower().split()
    want = [t.lower() for t in tags]
    cat = normalise_catalog(catalog) if catalog else ""

    def test(rec):
        if words:
            hay = _text_of(rec)
            if not all(word in hay for word in words):
                return False
        if want:
            have = {t.lower() for t in rec["tags"]}
            if not (any(t in have for t in want) if any_tag else all(t in have for t in want)):
                return False
        if cat and not (rec["catalog"] == cat or rec["catalog"].startswith(cat + "/")):
            return False
        if min_duration is not None and rec["duration_s"] < min_duration - index.DURATION_TOLERANCE:
            return False
        if max_duration is not None and rec["duration_s"] > max_duration + index.DURATION_TOLERANCE:
            return False
        if fps is not None and abs(rec["fps"] - fps) > 0.5:
            return False
        if skeleton and not rec["skeleton"].startswith(skeleton):
            return False
        return True
    return test


def check_filters(min_duration=None, max_duration=None, fps=None):
    """SignSimError for numeric filters no clip can pass (see matcher)."""
    for label, v in (("minimum duration", min_duration), ("maximum duration", max_duration), ("frame rate", fps)):
        if v is not None and not math.isfinite(v):
            raise SignSimError(f"the {label} filter {v} is not a number")
    if min_duration is not None and max_duration is not None and min_duration > max_duration:
        raise SignSimError(f"the minimum duration {min_duration:g} s is above the maximum "
                           f"{max_duration:g} s: no clip can match")
    if max_duration is not None and max_duration < 0:
        raise SignSimError(f"the maximum duration {max_duration:g} s is negative: no clip can match")
    if fps is not None and fps <= 0:
        raise SignSimError(f"the frame rate filter {fps:g} fps is not positive: no clip can match")


# ----------------------------------------------------------------- the library file

class Part:
    """One part file's clips appended into bpy.data (inside `open_part`)."""

    def __init__(self, library, number, guard):
        self.library = library
        self.number = number
        self.path = index.part_path(library, number)
        self.guard = guard
        self.clips = []       # actions
        self._keys = None     # (sha256, clip key) → action, built by find

    def by_name(self, name):
        for a in self.clips:
            if a.name == name:
                return a
        raise SignSimError(f"no clip named '{name}' in {self.library}")

    def find(self, sha, key):
        if self._keys is None:   # one pass, then a dict: a folder import asks once per clip
            self._keys = {(a.signsim.sha256, a.signsim.clip_key): a for a in self.clips}
        return self._keys.get((sha, key))

    def remove(self, action):
        skel = action.signsim.skeleton
        if self._keys is not None:
            self._keys.pop((action.signsim.sha256, action.signsim.clip_key), None)
        self.clips.remove(action)
        bpy.data.actions.remove(action)
        if skel is not None and not any(a.signsim.skeleton == skel for a in self.clips):
            arm = skel.data
            bpy.data.objects.remove(skel)
            if arm is not None and arm.users == 0:
                bpy.data.armatures.remove(arm)

    def add(self, clip, name, catalogs, tags=(), catalog=None):
        """Make an imported Clip a library asset named `name` (replacing the part's clip
        from the same file, whose own tags and catalog it keeps); returns
        (action, updated: bool)."""
        action = clip.action
        sha = clip.meta["sha256"]
        old = self.find(sha, clip.key)
        keep_tags, keep_catalog = [], None
        if old is not None:
            keep_tags = [t for t in clip_tags(old) if not is_auto_tag(t)]
            keep_catalog = old.signsim.catalog
            self.remove(old)
        self.guard.claim(action, name)
        s = action.signsim
        for k, v in clip.meta.items():
            if not k.startswith("_"):
                setattr(s, k, v)
        s.is_clip = True
        s.clip_key = clip.key
        s.skeleton = clip.skeleton
        s.warnings = "\n".join(clip.warnings)
        cat = normalise_catalog(catalog) if catalog else (keep_catalog or DEFAULT_CATALOG)
        s.catalog = cat
        if action.asset_data is None:
            action.asset_mark()
        action.asset_data.catalog_id = ensure_catalog(catalogs, cat)
        action.asset_data.description = f"{s.source_format} clip from {os.path.basename(s.source_path)}"
        set_tags(action, merge_tags(merge_tags(list(clip.tags), keep_tags), list(tags)))
        self.guard.claim(clip.skeleton,
                         f"{os.path.splitext(os.path.basename(s.source_path))[0]} skeleton")
        self.clips.append(action)
        if self._keys is not None:
            self._keys[(sha, clip.key)] = action
        return action, old is not None

    def records(self):
        """Index records (clip_record plus the index's private fields) of the part's clips."""
        return [dict(clip_record(a), clip_key=a.signsim.clip_key, part=self.number)
                for a in self.clips]

    def write_temporary(self):
        """Write the part's clips and their skeletons to a temporary file beside the
        part; returns its path (commit renames it into place)."""
        folder = os.path.dirname(self.path)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        ids = set(self.clips) | {a.signsim.skeleton for a in self.clips if a.signsim.skeleton}
        try:
            os.makedirs(folder, exist_ok=True)
            with files.quiet():
                bpy.data.libraries.write(tmp, ids, fake_user=True, path_remap='NONE', compress=True)
        except OSError as ex:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise SignSimError(f"cannot write the library {self.library}: {ex.strerror or ex}") from ex
        return tmp


def commit(library, records, written, catalogs=None):
    """Put written part files and the index of `records` (every clip of the library,
    with the index's private fields) in place: written = {part: temporary file}.

    The index is written for the temporary files' stamps (a rename keeps them), then the
    parts are renamed in, then the index, so at every moment each part on disk is a
    complete file and the index either describes the parts there or is seen as stale and
    rebuilt. No backup copy (see the module). Temporary files are removed on failure."""
    tmp_index = None
    try:
        part_stamps = {p: s for p, s in index.stamps(library).items() if p not in written}
        part_stamps.update({p: index.stamp_of(t) for p, t in written.items()})
        tmp_index = index.write_temporary(library, records, part_stamps)
        for p, tmp in sorted(written.items()):
            os.replace(tmp, index.part_path(library, p))
        os.replace(tmp_index, index.path_of(library))
    except OSError as ex:
        raise SignSimError(f"cannot write the library {library}: {ex.strerror or ex}") from ex
    finally:
        for t in [*written.values(), tmp_index]:
            if t and os.path.exists(t):
                os.remove(t)
    if catalogs is not None:
        write_catalogs(library, catalogs)


def unique_name(wanted, taken):
    """`wanted`, or Blender's next free `wanted.001`, `wanted.002`… not in `taken`."""
    if wanted not in taken:
        return wanted
    base = re.sub(r"\.\d{3}$", "", wanted)
    k = 1
    while f"{base}.{k:03d}" in taken:
        k += 1
    return f"{base}.{k:03d}"


def add_clips(library, clips, guard, tags=(), catalog=None):
    """Add imported Clips to the library (writer lock held): a clip from a file already
    in the library (same SHA-256 and clip key) replaces that clip in its part, keeping
    its name, tags and catalog; a new clip gets a name unique in the library and goes
    into the last part while that has fewer than PART_CLIPS clips and room for its keys
    (importers.MAX_CLIP_KEYS in all, so a part loads in bounded memory), else into a new
    part.
    Only the parts that change are loaded and written. Returns the clips' records, each
    with "updated"; every clip's action and skeleton are removed from bpy.data."""
    with writer_lock(library):
        records = all_records(library)
        by_key = {(r["sha256"], r["clip_key"]): r for r in records}
        taken = {r["name"] for r in records}
        load = {}     # part → [clips, keys]
        for r in records:
            load.setdefault(r["part"], [0, 0])
            load[r["part"]][0] += 1
            load[r["part"]][1] += clip_keys(r["frames"], r["bones"])
        last = max(load, default=0)
        plan = {}     # part → [(clip, name)]
        for clip in clips:
            old = by_key.get((clip.meta["sha256"], clip.key))
            if old is not None:
                part, name = old["part"], old["name"]
            else:
                keys = clip_keys(clip.meta["frame_count"], clip.meta["bone_count"])
                n, k = load.get(last, [0, 0])
                if n and (n >= PART_CLIPS or k + keys > importers.MAX_CLIP_KEYS):
                    last += 1
                part, name = last, unique_name(clip.name, taken)
                load.setdefault(part, [0, 0])
                load[part][0] += 1
                load[part][1] += keys
                taken.add(name)
                by_key[(clip.meta["sha256"], clip.key)] = {"part": part, "name": name}
            plan.setdefault(part, []).append((clip, name))
        catalogs = read_catalogs(library)
        written, new_records, out = {}, {}, []
        try:
            for part_no, entries in sorted(plan.items()):
                with open_part(library, part_no, guard) as part:
                    for clip, name in entries:
                        action, updated = part.add(clip, name, catalogs, tags, catalog)
                        out.append(dict(clip_record(action), updated=updated))
                    new_records[part_no] = part.records()
                    written[part_no] = part.write_temporary()
            kept = [r for r in records if r["part"] not in new_records]
            commit(library, kept + [r for rs in new_records.values() for r in rs], written, catalogs)
        finally:
            for t in written.values():
                if os.path.exists(t):
                    os.remove(t)
            tracking.remove_ids(_clip_ids(clips))
    return out


def clip_keys(frames, bones):
    """About how many keys a clip holds (a quaternion per bone and the root location)."""
    return frames * (4 * bones + 3)


def _clip_ids(clips):
    """The actions, skeletons and armatures of Clips still in bpy.data."""
    ids = set()
    for c in clips:
        for id_ in (c.action, c.skeleton):
            try:
                ids.add(id_)
                if isinstance(id_, bpy.types.Object) and id_.data is not None:
                    ids.add(id_.data)
            except ReferenceError:   # replaced by a later clip of the same file
                ids.discard(id_)
    return list(ids)


@contextlib.contextmanager
def writer_lock(path, timeout=None):
    """Hold the exclusive lock of the library at `path` (an OS file lock on
    `<library>.lock`, released when the process dies); SignSimError after `timeout`
    seconds (default LOCK_TIMEOUT_S) of waiting for another writer.

    The lock file is removed on release, so no command leaves it behind. Removing it
    while still holding it is safe: a writer that was waiting on the removed file finds,
    once it holds it, that `<library>.lock` is no longer that file, and locks the path's
    file anew (the lock is always on the file the path names)."""
    timeout = LOCK_TIMEOUT_S if timeout is None else timeout
    lock_path = path + ".lock"
    os.makedirs(os.path.dirname(lock_path), exist_ok=True)
    start = time.monotonic()
    while True:
        f = open(lock_path, "a+b")
        try:
            while not _try_lock(f):
                if time.monotonic() - start > timeout:
                    raise SignSimError(f"the library {path} is being written by another SignSim "
                                       f"process (waited {timeout:g} s for {lock_path}): try again "
                                       "when it has finished")
                time.sleep(0.05)
        except BaseException:
            f.close()
            raise
        if _names(f, lock_path):
            break
        _unlock(f)
        f.close()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # Windows cannot remove an open file: it stays
            os.remove(lock_path)
        _unlock(f)
        f.close()


def _names(f, path):
    """Whether the open file f is the file at `path` now."""
    try:
        return os.path.samestat(os.fstat(f.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


try:
    import fcntl

    def _try_lock(f):
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False

    def _unlock(f):
        fcntl.flock(f.fileno(), fcntl.LOCK_UN)
except ImportError:  # Windows
    import msvcrt

    def _try_lock(f):
        f.seek(0)
        try:
            msvcrt.locking(f.fileno(), msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False

    def _unlock(f):
        f.seek(0)
        msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)


@contextlib.contextmanager
def open_part(library, part, guard=None):
    """Yield a `Part` whose clips (from its file, when it exists) are appended into
    bpy.data; everything appended or created inside the block is removed on exit and the
    file's own names restored.

    guard: the caller's NameGuard when it also creates datablocks that must be gone
    before the file's names are restored (importing); else one is made here. Writers
    hold the writer lock around this (writer_lock)."""
    path = index.part_path(library, part)
    with contextlib.ExitStack() as stack:
        if guard is None:
            guard = stack.enter_context(tracking.NameGuard())
        stack.enter_context(tracking.Tracker())
        lib = Part(library, part, guard)
        if os.path.isfile(path):
            try:
                with files.quiet():
                    with bpy.data.libraries.load(path, link=False) as (src, dst):
                        scenes = list(src.scenes)
                        names = {"actions": [], "objects": [], "armatures": []} if scenes else {
                            "actions": list(src.actions), "objects": list(src.objects),
                            "armatures": list(src.armatures)}
                        # (copies: Blender swaps the names in these lists for the IDs)
                        dst.actions = list(names["actions"])
                        dst.objects = list(names["objects"])
                        dst.armatures = list(names["armatures"])
            except (OSError, RuntimeError) as ex:
                raise SignSimError(f"cannot read the library {path}: {str(ex).splitlines()[-1]}") from ex
            if scenes:  # a library holds clips and skeletons only: never overwrite a scene file
                raise _scene_file(path)
            for kind, wanted in names.items():  # appended next to the file's names: claim
                for id_, name in zip(getattr(dst, kind), wanted):
                    if id_ is not None:
                        guard.claim(id_, name)
            lib.clips = [a for a in dst.actions if a is not None and a.signsim.is_clip]
        yield lib


def all_records(library):
    """Every clip's index record (with the private fields clip_key and part), from the
    index, or read from the part files (one at a time) and the index rebuilt when it is
    missing or stale."""
    found = index.search(library)
    if found is not None:
        return found
    before = index.stamps(library)
    records = []
    for part in sorted(before):
        with open_part(library, part) as p:
            records += p.records()
    if index.stamps(library) == before:   # not replaced meanwhile by a writer
        index.rebuild(library, records, before)
    return sorted(records, key=lambda r: r["name"].lower())


def _public(rec):
    return {k: v for k, v in rec.items() if k not in index.PRIVATE}


def _scene_file(path):
    return SignSimError(f"{path} is a scene file, not a SignSim motion library: choose another library file")


def check_not_scene_file(path):
    """SignSimError when the .blend at `path` holds a scene (a scene file, not a motion
    library) or cannot be read. Reads only the file's names; nothing is appended."""
    path = check_library_path(path)
    try:
        with files.quiet():
            with bpy.data.libraries.load(path, link=False) as (src, _dst):
                scenes = list(src.scenes)
    except (OSError, RuntimeError) as ex:
        raise SignSimError(f"cannot read the library {path}: {str(ex).splitlines()[-1]}") from None
    if scenes:
        raise _scene_file(path)


def check_library_path(path, write=False):
    """The absolute library path, or SignSimError when it cannot be a library file (with
    write: or cannot be written, checked in its nearest existing folder)."""
    path = os.path.abspath(os.path.expanduser(str(path)))
    if os.path.isdir(path):
        raise SignSimError(f"the library must be a .blend file, not a folder: {path}")
    if not path.lower().endswith(".blend"):
        raise SignSimError(f"the library must be a .blend file: {path}")
    if write:
        files.check_writable(path)
    return path


def _find(records, library, name):
    for r in records:
        if r["name"] == name:
            return r
    parts = [r["name"] for r in records if re.fullmatch(re.escape(name) + r" part \d{2,}", r["name"])]
    if parts:   # a file too long for one clip (importers.MAX_CLIP_KEYS) became consecutive clips
        raise SignSimError(f"no clip named '{name}' in {library}: its file was imported as {len(parts)} "
                           f"consecutive clips, too long for one ('{parts[0]}' … '{parts[-1]}'); "
                           "name the parts you want")
    raise SignSimError(f"no clip named '{name}' in {library}{did_you_mean(name, [r['name'] for r in records])}")


def unknown_filter_warnings(path, tags=(), catalog="", text=""):
    """Warnings for filter values that match no clip of the library at `path`: each tag
    no clip has, a catalog holding no clip (nor sub-catalog), each word of `text` in no
    clip's TEXT_FIELDS, each with the nearest existing names or words (did_you_mean; the
    words of the fields split at anything but letters and digits). Reads the index
    (list_clips)."""
    records = list_clips(path)
    texts = [_text_of(r) for r in records]
    out = [f"no clip's {TEXT_FIELDS} contain '{w}'"
           f"{did_you_mean(w, {x for t in texts for x in re.split(r'[^0-9a-z]+', t) if x})}"
           for w in text.lower().split() if not any(w in t for t in texts)]
    have = {t for r in records for t in r["tags"]}
    have_lower = {t.lower() for t in have}
    out += [f"no clip has the tag '{t}'{did_you_mean(t, have)}" for t in tags if t.lower() not in have_lower]
    if catalog:
        cat = normalise_catalog(catalog)
        cats = set()
        for r in records:
            parts = r["catalog"].split("/")
            cats.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
        if cat not in cats:
            out.append(f"no clip is in the catalog '{cat}'{did_you_mean(cat, cats)}")
    return out


def load_clip(path, name):
    """Append one clip and its source skeleton into the open file (for retargeting,
    previews, scripts). Returns (action, skeleton object); the skeleton is not linked to
    any scene and Blender may add '.001' to names the open file already uses."""
    path = check_library_path(path)
    if not os.path.isfile(path):
        raise SignSimError(f"no motion library at {path}")
    part = index.part_path(path, _find(all_records(path), path, name)["part"])
    with files.quiet():
        with bpy.data.libraries.load(part, link=False) as (src, dst):
            if name not in src.actions:
                raise SignSimError(f"no clip named '{name}' in {path}")
            dst.actions = [name]
    action = dst.actions[0]
    for lib in list(bpy.data.libraries):  # appending leaves an empty Library behind
        if os.path.abspath(bpy.path.abspath(lib.filepath)) == part and not lib.users_id:
            bpy.data.libraries.remove(lib)
    action.use_fake_user = False
    skel = action.signsim.skeleton
    if skel is None:
        raise SignSimError(f"clip '{name}' has no source skeleton in {path}")
    skel.use_fake_user = False
    return action, skel


def list_clips(path, **filters):
    """Clip records of the library at `path` that pass `matches(**filters)`, sorted by
    name: read from the index (no action loaded), which is rebuilt from the part files
    when missing or stale."""
    path = check_library_path(path)
    if not os.path.isfile(path):
        raise SignSimError(f"no motion library at {os.path.abspath(path)}")
    keep = matcher(**filters)   # checks the filters (a bad catalog path) before any reading
    sql = dict(filters)
    if sql.get("catalog"):
        sql["catalog"] = normalise_catalog(sql["catalog"])
    found = index.search(path, public=True, **sql)
    if found is None:
        found = [_public(r) for r in all_records(path) if keep(r)]
    return found


@contextlib.contextmanager
def _edit(path, name):
    """Under the writer lock, yield (part, action, records) for the clip `name`: its part
    appended; on a normal exit the part and the index are written (commit)."""
    path = check_library_path(path)
    if not os.path.isfile(path):
        raise SignSimError(f"no motion library at {path}")
    with writer_lock(path):
        records = all_records(path)
        number = _find(records, path, name)["part"]
        with open_part(path, number) as part:
            yield part, part.by_name(name), records
            tmp = part.write_temporary()
            kept = [r for r in records if r["part"] != number]
            commit(path, kept + part.records(), {number: tmp})


def tag_clip(path, name, add=(), remove=()):
    """Add and remove tags of one clip (a facet tag replaces that facet's value); returns
    its new record. SignSimError when the clip lacks a tag to remove (nothing written)."""
    add, remove = parse_tags(add), parse_tags(remove)
    with _edit(path, name) as (_part, action, _records):
        old = clip_tags(action)
        missing = [t for t in remove if t not in old]   # judged on the stored tags
        if missing:
            raise SignSimError(f"clip '{name}' has no tag '{missing[0]}' (its tags: "
                               f"{', '.join(sorted(old)) or 'none'})")
        set_tags(action, merge_tags([t for t in old if t not in remove], add))
        rec = clip_record(action)
    return rec


def tag_clips(path, names, add=(), remove=()):
    """tag_clip on each clip of `names` (each once, in order); returns their new records.
    Every name and every tag to remove is checked against the library's index first, so
    a misspelt clip or a tag one of them lacks raises SignSimError with nothing written."""
    path = check_library_path(path)
    if not os.path.isfile(path):
        raise SignSimError(f"no motion library at {path}")
    names = list(dict.fromkeys(names))
    records = all_records(path)
    for name in names:
        old = set(_find(records, path, name)["tags"])
        missing = [t for t in parse_tags(remove) if t not in old]
        if missing:
            raise SignSimError(f"clip '{name}' has no tag '{missing[0]}' (its tags: "
                               f"{', '.join(sorted(old)) or 'none'}): nothing changed")
    return [tag_clip(path, name, add, remove) for name in names]


def edit_clip(path, name, rename=None, tags=None, delete=False):
    """Rename, retag or delete one clip of the library; returns its new record (or None)."""
    with _edit(path, name) as (part, action, records):
        if delete:
            part.remove(action)
            return None
        if rename is not None:
            rename = rename.strip()
            if not rename:
                raise SignSimError("a clip name cannot be empty")
            if rename != action.name and any(r["name"] == rename for r in records):
                raise SignSimError(f"the library already has a clip named '{rename}'")
            part.guard.claim(action, rename)
        if tags is not None:
            set_tags(action, parse_tags(tags))
        rec = clip_record(action)
    return rec

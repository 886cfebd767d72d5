"""The library's search index: a SQLite database (Python's sqlite3) beside the library
.blend holding every clip's record, so listing and searching never load an action.

A library is split into part files of at most store.PART_CLIPS clips: part 0 is the
library .blend itself, parts 1, 2, … are `<library>.parts/part-NNNN.blend` (see
part_path), so adding clips or editing one loads and writes one part, never the whole
library. `<library>.index.sqlite` stores every clip's record with the part holding it, plus
the size and modification time (ns) of each part file it describes. Writers
(store.commit) write the index for the very part files they write (all through
temporary files, the parts renamed first); any reader that finds the index missing,
unreadable, or stamped for other part files (a crash between the renames, a part saved
by another program, a part added or removed) rebuilds it from the part files. No bpy here.
"""
import gc
import json
import os
import re
import sqlite3

SUFFIX = ".index.sqlite"
PARTS_SUFFIX = ".parts"
VERSION = "4"
_SEP = "\x1f"   # around and between tags in the tag column: no tag holds it
# A clip record's fields (store.clip_record); tags and warnings are lists.
FIELDS = ("name", "fps", "frames", "duration_s", "bones", "tags", "warnings", "catalog",
          "source", "format", "sha256", "skeleton", "skeleton_object")
# Stored beside them: which clip of its file a clip is, and which part file holds it.
PRIVATE = ("clip_key", "part")
_COLUMNS = FIELDS + PRIVATE
_PART_FILE = re.compile(r"part-(\d{4,})\.blend$")
# Each row holds the whole record as one JSON array (`record`: a search parses all the
# rows it returns in one json.loads, cheaper than building them from columns) and, beside it, the columns the filters test, lower-cased as
# store.matcher compares them, so SQL applies every filter exactly. Rows are written in
# the order searches return them (by name, case-insensitive), so no search sorts.
_SCHEMA = ("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
           "CREATE TABLE files (part INTEGER PRIMARY KEY, size INTEGER, mtime_ns INTEGER);"
           "CREATE TABLE clips (hay TEXT, tags TEXT, catalog TEXT, duration_s REAL, fps REAL, "
           "skeleton TEXT, record TEXT);")


def path_of(library):
    return library + SUFFIX


def part_path(library, part):
    """The file of part `part` (0: the library .blend itself)."""
    if part == 0:
        return library
    return os.path.join(library + PARTS_SUFFIX, f"part-{part:04d}.blend")


def part_files(library):
    """{part number: path} of the part files on disk (part 0 when the .blend exists)."""
    out = {0: library} if os.path.isfile(library) else {}
    try:
        names = os.listdir(library + PARTS_SUFFIX)
    except OSError:
        return out
    for n in names:
        m = _PART_FILE.fullmatch(n)
        if m and int(m.group(1)) > 0:
            out[int(m.group(1))] = os.path.join(library + PARTS_SUFFIX, n)
    return out


def stamp_of(blend):
    """(size in bytes, modification time in ns) of a file, or None when it is missing."""
    try:
        st = os.stat(blend)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def stamps(library):
    """{part: stamp_of(part file)} of every part file on disk."""
    return {p: stamp_of(f) for p, f in part_files(library).items()}


def _row(rec):
    """The clips-table row of a record (with the PRIVATE fields)."""
    hay = " ".join([rec["name"], rec["catalog"], os.path.basename(rec["source"]), *rec["tags"]])
    return (hay.lower(), _SEP + _SEP.join(t.lower() for t in rec["tags"]) + _SEP,
            rec["catalog"], rec["duration_s"], rec["fps"], rec["skeleton"],
            json.dumps([rec[f] for f in _COLUMNS], ensure_ascii=False, separators=(",", ":")))


def write_temporary(library, records, part_stamps):
    """Write the index of `records` (each with the PRIVATE fields) for part files with
    `part_stamps` ({part: (size, mtime_ns)}) to a temporary file next to the final one;
    returns its path (the caller renames it into place: os.replace)."""
    final = path_of(library)
    tmp = f"{final}.{os.getpid()}.tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    con = sqlite3.connect(tmp)
    try:
        con.executescript(_SCHEMA)
        con.execute("INSERT INTO meta VALUES ('version', ?)", (VERSION,))
        con.executemany("INSERT INTO files VALUES (?, ?, ?)",
                        [(p, s[0], s[1]) for p, s in sorted(part_stamps.items())])
        ordered = sorted(records, key=lambda r: (r["name"].lower(), r["name"]))
        con.executemany("INSERT INTO clips VALUES (?, ?, ?, ?, ?, ?, ?)", map(_row, ordered))
        con.commit()
    except BaseException:
        con.close()
        os.remove(tmp)
        raise
    con.close()
    return tmp


def rebuild(library, records, part_stamps):
    """Write the index of `records` (read from part files with `part_stamps`) in place;
    skipped silently when the folder is not writable (listing still works, just slower)."""
    try:
        os.replace(write_temporary(library, records, part_stamps), path_of(library))
    except (OSError, sqlite3.Error):
        pass


DURATION_TOLERANCE = 1e-9   # s: store.matcher's, so SQL's duration test is the same


def search(library, text="", tags=(), any_tag=False, catalog="", min_duration=None,
           max_duration=None, fps=None, skeleton="", public=False):
    """Records (sorted by name, case-insensitive; with the PRIVATE fields unless
    `public`) of the clips that pass store.matcher's filters (the same arguments, with
    `catalog` already normalised), or None when the index is missing, unreadable or stale
    for the part files now there. Every filter is applied in SQL, exactly as store.matcher
    applies it (a test checks that they agree)."""
    path = path_of(library)
    if not os.path.isfile(library) or not os.path.isfile(path):
        return None
    where, params = [], []
    for word in text.lower().split():
        where.append("instr(hay, ?)")
        params.append(word)
    if tags:
        where.append("(" + (" OR " if any_tag else " AND ").join(["instr(tags, ?)"] * len(tags)) + ")")
        params += [_SEP + t.lower() + _SEP for t in tags]
    if catalog:
        where.append("(catalog = ? OR substr(catalog, 1, ?) = ?)")
        params += [catalog, len(catalog) + 1, catalog + "/"]
    if min_duration is not None:
        where.append("duration_s >= ?")
        params.append(min_duration - DURATION_TOLERANCE)
    if max_duration is not None:
        where.append("duration_s <= ?")
        params.append(max_duration + DURATION_TOLERANCE)
    if fps is not None:
        where.append("abs(fps - ?) <= 0.5")
        params.append(fps)
    if skeleton:
        where.append("substr(skeleton, 1, ?) = ?")
        params += [len(skeleton), skeleton]
    query = ("SELECT record FROM clips" + (" WHERE " + " AND ".join(where) if where else "")
             + " ORDER BY rowid")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            version = con.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
            indexed = {p: (s, m) for p, s, m in con.execute("SELECT part, size, mtime_ns FROM files")}
            if version != (VERSION,) or indexed != stamps(library):
                return None
            rows = con.execute(query, params).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    keys = FIELDS if public else _COLUMNS
    # Thousands of new containers would start Python's cyclic garbage collector many
    # times over, each pass walking all of Blender's Python objects (costing more than the
    # search); these hold no cycles.
    collecting = gc.isenabled()
    gc.disable()
    try:
        values = json.loads("[" + ",".join(r[0] for r in rows) + "]")
        return [dict(zip(keys, v)) for v in values]
    finally:
        if collecting:
            gc.enable()

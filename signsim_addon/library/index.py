"""The library's search index: a SQLite database (Python's sqlite3) beside the library
.blend holding every clip's record, so listing and searching never load an action.

`<library>.index.sqlite` stores the records plus the size and modification time (ns) of
the .blend it describes. store.Library.save writes the index for the very file it writes
(both through temporary files, the .blend renamed first); any reader that finds the index
missing, unreadable or stamped for another .blend (a crash between the two renames, the
.blend saved by another program) rebuilds it from the .blend. No bpy here.
"""
import os
import sqlite3

SUFFIX = ".index.sqlite"
VERSION = "2"
_SEP = "\x1f"   # around and between list items (tags, warnings): no tag or line holds it
# A clip record's fields (store.clip_record) as columns; tags and warnings are lists.
FIELDS = ("name", "fps", "frames", "duration_s", "bones", "tags", "warnings", "catalog",
          "source", "format", "sha256", "skeleton", "skeleton_object")
_LISTS = ("tags", "warnings")


def path_of(library):
    return library + SUFFIX


def stamp_of(blend):
    """(size in bytes, modification time in ns) of a file, or None when it is missing."""
    try:
        st = os.stat(blend)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _row(rec):
    return tuple(_SEP + _SEP.join(rec[f]) + _SEP if f in _LISTS else rec[f] for f in FIELDS)


def _record(row):
    rec = dict(zip(FIELDS, row))
    tags, warnings = rec["tags"], rec["warnings"]
    rec["tags"] = tags[1:-1].split(_SEP) if len(tags) > 2 else []
    rec["warnings"] = warnings[1:-1].split(_SEP) if len(warnings) > 2 else []
    return rec


def write_temporary(library, records, stamp):
    """Write the index of `records` for a .blend with `stamp` to a temporary file next to
    the final one; returns its path (the caller renames it into place: os.replace)."""
    final = path_of(library)
    tmp = f"{final}.{os.getpid()}.tmp"
    if os.path.exists(tmp):
        os.remove(tmp)
    con = sqlite3.connect(tmp)
    try:
        con.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
            f"CREATE TABLE clips ({', '.join(FIELDS)});")
        con.executemany("INSERT INTO meta VALUES (?, ?)",
                        [("version", VERSION), ("blend_size", str(stamp[0])),
                         ("blend_mtime_ns", str(stamp[1]))])
        con.executemany(f"INSERT INTO clips VALUES ({', '.join('?' * len(FIELDS))})",
                        [_row(r) for r in records])
        con.commit()
    except BaseException:
        con.close()
        os.remove(tmp)
        raise
    con.close()
    return tmp


def rebuild(library, records, stamp):
    """Write the index of `records` (read from the .blend with `stamp`) in place; skipped
    silently when the folder is not writable (listing still works, just slower)."""
    try:
        os.replace(write_temporary(library, records, stamp), path_of(library))
    except (OSError, sqlite3.Error):
        pass


def search(library, keep, text="", tags=(), any_tag=False, min_duration=None,
           max_duration=None, **_other):
    """Records (sorted by name, case-insensitive) of the clips that pass keep(record), or
    None when the index is missing, unreadable or stale for the .blend now there.

    The text, tag and duration filters (store.matches' arguments) narrow the rows in SQL
    first, only ever to a superset of keep's answer (SQLite's LIKE ignores ASCII case;
    non-ASCII words are left to keep), so keep stays the one definition of a match."""
    stamp = stamp_of(library)
    path = path_of(library)
    if stamp is None or not os.path.isfile(path):
        return None
    where, params = [], []
    for word in text.split():
        if word.isascii():
            where.append("(name || ' ' || catalog || ' ' || source || ' ' || tags) LIKE ? ESCAPE '!'")
            params.append(f"%{_like(word)}%")
    ascii_tags = [t for t in tags if t.isascii()]
    if ascii_tags and (not any_tag or len(ascii_tags) == len(tags)):
        terms = ["tags LIKE ? ESCAPE '!'"] * len(ascii_tags)
        where.append("(" + (" OR " if any_tag else " AND ").join(terms) + ")")
        params += [f"%{_SEP}{_like(t)}{_SEP}%" for t in ascii_tags]
    if min_duration is not None:
        where.append("duration_s >= ?")
        params.append(min_duration - 1e-6)
    if max_duration is not None:
        where.append("duration_s <= ?")
        params.append(max_duration + 1e-6)
    query = f"SELECT {', '.join(FIELDS)} FROM clips" + (" WHERE " + " AND ".join(where) if where else "")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            meta = dict(con.execute("SELECT key, value FROM meta"))
            if (meta.get("version"), meta.get("blend_size"), meta.get("blend_mtime_ns")) != \
                    (VERSION, str(stamp[0]), str(stamp[1])):
                return None
            rows = con.execute(query, params).fetchall()
        finally:
            con.close()
    except sqlite3.Error:
        return None
    found = [r for r in map(_record, rows) if keep(r)]
    return sorted(found, key=lambda r: r["name"].lower())


def _like(word):
    return word.replace("!", "!!").replace("%", "!%").replace("_", "!_")

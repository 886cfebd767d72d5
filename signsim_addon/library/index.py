"""The library's search index: a SQLite database (Python's sqlite3) beside the library
.blend holding every clip's record, so listing and searching never load an action.

`<library>.index.sqlite` stores the records plus the size and modification time (ns) of
the .blend it describes. store.Library.save writes the index for the very file it writes
(both through temporary files, the .blend renamed first); any reader that finds the index
missing, unreadable or stamped for another .blend (a crash between the two renames, the
.blend saved by another program) rebuilds it from the .blend. No bpy here.
"""
import json
import os
import sqlite3

SUFFIX = ".index.sqlite"
VERSION = "1"
_SEP = "\x1f"   # between tags in the tags column (a character no tag can hold)


def path_of(library):
    return library + SUFFIX


def stamp_of(blend):
    """(size in bytes, modification time in ns) of a file, or None when it is missing."""
    try:
        st = os.stat(blend)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


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
            "CREATE TABLE clips (name TEXT PRIMARY KEY, catalog TEXT, source TEXT, tags TEXT,"
            " duration_s REAL, fps REAL, skeleton TEXT, record TEXT);")
        con.executemany("INSERT INTO meta VALUES (?, ?)",
                        [("version", VERSION), ("blend_size", str(stamp[0])),
                         ("blend_mtime_ns", str(stamp[1]))])
        con.executemany("INSERT INTO clips VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
            (r["name"], r["catalog"], r["source"], _SEP.join(r["tags"]), r["duration_s"],
             r["fps"], r["skeleton"], json.dumps(r, sort_keys=True)) for r in records])
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


def search(library, keep):
    """Full records (sorted by name, case-insensitive) of the clips whose summary passes
    keep(summary) — summary: {name, catalog, source, tags, duration_s, fps, skeleton} —
    or None when the index is missing, unreadable or stale for the .blend now there."""
    stamp = stamp_of(library)
    path = path_of(library)
    if stamp is None or not os.path.isfile(path):
        return None
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            meta = dict(con.execute("SELECT key, value FROM meta"))
            if (meta.get("version"), meta.get("blend_size"), meta.get("blend_mtime_ns")) != \
                    (VERSION, str(stamp[0]), str(stamp[1])):
                return None
            rows = con.execute("SELECT name, catalog, source, tags, duration_s, fps, skeleton, "
                               "rowid FROM clips").fetchall()
            hits = []
            for name, catalog, source, tags, duration, fps, skeleton, rowid in rows:
                summary = {"name": name, "catalog": catalog, "source": source,
                           "tags": tags.split(_SEP) if tags else [], "duration_s": duration,
                           "fps": fps, "skeleton": skeleton}
                if keep(summary):
                    hits.append(rowid)
            records = _records(con, hits)
        finally:
            con.close()
    except sqlite3.Error:
        return None
    return sorted(records, key=lambda r: r["name"].lower())


def _records(con, rowids):
    out = []
    for i in range(0, len(rowids), 900):   # SQLite's default limit of bound parameters
        part = rowids[i:i + 900]
        q = f"SELECT record FROM clips WHERE rowid IN ({','.join('?' * len(part))})"
        out += [json.loads(text) for (text,) in con.execute(q, part)]
    return out

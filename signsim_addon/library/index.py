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
import os
import re
import sqlite3

SUFFIX = ".index.sqlite"
PARTS_SUFFIX = ".parts"
VERSION = "3"
_SEP = "\x1f"   # around and between list items (tags, warnings): no tag or line holds it
# A clip record's fields (store.clip_record) as columns; tags and warnings are lists.
FIELDS = ("name", "fps", "frames", "duration_s", "bones", "tags", "warnings", "catalog",
          "source", "format", "sha256", "skeleton", "skeleton_object")
# Stored beside them: which clip of its file a clip is, and which part file holds it.
PRIVATE = ("clip_key", "part")
_COLUMNS = FIELDS + PRIVATE
_LISTS = ("tags", "warnings")
_PART_FILE = re.compile(r"part-(\d{4,})\.blend$")


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
    return tuple(_SEP + _SEP.join(rec[f]) + _SEP if f in _LISTS else rec[f] for f in _COLUMNS)


def _list(text):
    return text[1:-1].split(_SEP) if len(text) > 2 else []


def _record(row):
    """A record from a row of FIELDS (+ PRIVATE): spelt out, as search builds thousands."""
    (name, fps, frames, duration, bones, tags, warnings, catalog, source, fmt, sha, skel,
     skel_object, *private) = row
    rec = {"name": name, "fps": fps, "frames": frames, "duration_s": duration, "bones": bones,
           "tags": _list(tags), "warnings": _list(warnings), "catalog": catalog,
           "source": source, "format": fmt, "sha256": sha, "skeleton": skel,
           "skeleton_object": skel_object}
    if private:
        rec.update(zip(PRIVATE, private))
    return rec


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
        con.executescript(
            "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);"
            "CREATE TABLE files (part INTEGER PRIMARY KEY, size INTEGER, mtime_ns INTEGER);"
            f"CREATE TABLE clips ({', '.join(_COLUMNS)});")
        con.execute("INSERT INTO meta VALUES ('version', ?)", (VERSION,))
        con.executemany("INSERT INTO files VALUES (?, ?, ?)",
                        [(p, s[0], s[1]) for p, s in sorted(part_stamps.items())])
        con.executemany(f"INSERT INTO clips VALUES ({', '.join('?' * len(_COLUMNS))})",
                        [_row(r) for r in records])
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


def sql_exact(tags):
    """Whether search's SQL tests these tags exactly (all ASCII: LIKE ignores ASCII case)."""
    return all(t.isascii() for t in tags)


def search(library, keep, text="", tags=(), any_tag=False, min_duration=None,
           max_duration=None, public=False, **_other):
    """Records (sorted by name, case-insensitive; with the PRIVATE fields unless
    `public`) of the clips that pass keep(record), or None when the index is missing,
    unreadable or stale for the part files now there.

    The text, tag and duration filters (store.matcher's arguments) narrow the rows in SQL
    first: the durations and ASCII tags exactly as store.matcher tests them (SQLite's LIKE
    ignores ASCII case; sql_exact(tags) says when the tag test is left to SQL), the text
    only to a superset (non-ASCII words are left to keep); keep tests the rest."""
    path = path_of(library)
    if not os.path.isfile(library) or not os.path.isfile(path):
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
        params.append(min_duration - DURATION_TOLERANCE)
    if max_duration is not None:
        where.append("duration_s <= ?")
        params.append(max_duration + DURATION_TOLERANCE)
    columns = FIELDS if public else _COLUMNS
    query = f"SELECT {', '.join(columns)} FROM clips" + (" WHERE " + " AND ".join(where) if where else "")
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            meta = dict(con.execute("SELECT key, value FROM meta"))
            indexed = {p: (s, m) for p, s, m in con.execute("SELECT part, size, mtime_ns FROM files")}
            if meta.get("version") != VERSION or indexed != stamps(library):
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

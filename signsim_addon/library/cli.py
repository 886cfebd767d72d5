"""`signsim import` and `signsim list`: the motion library from the command line."""
import os
import sys

from ..errors import WARNING, SignSimError, cli_reporter
from ..progress import cli_lines
from . import api as library

# `import` exit codes: 0 every file imported, 1 no clip imported (every file failed or none
# found, or an error), EXIT_PARTIAL some clips imported and some files failed.
EXIT_PARTIAL = 3
IMPORT_EPILOG = ("exit status: 0 every file imported (skipped files do not count); 1 no clip "
                 f"imported; {EXIT_PARTIAL} some clips imported and some files failed (stderr names them)")


def add_import_arguments(parser):
    parser.epilog = IMPORT_EPILOG
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="BVH/FBX/glTF files or folders (searched recursively)")
    parser.add_argument("--library", metavar="FILE",
                        help="library .blend (default: the one in the preferences)")
    parser.add_argument("--tags", default="", metavar="a,b",
                        help="tags for every imported clip; facets as facet:value "
                        "(style, body_part, complexity, handedness, gloss)")
    parser.add_argument("--catalog", default=None, metavar="PATH",
                        help="asset catalog path, e.g. signs/fingerspelling (default: imported)")


def run_import(args, say) -> dict:
    lib = library.library_file(args.library)
    lines = cli_lines(say, "import")

    def progress(name, k, n, fraction):  # every file's first line; a long one's progress
        if fraction == 0.0:
            say(f"[{k}/{n}] {name}")
        lines(name, k, n, fraction)

    result = library.import_paths(args.paths, lib, tags=args.tags, catalog=args.catalog,
                                  report=cli_reporter(say), progress=progress)
    for rec in result["imported"]:
        verb = "updated" if rec.get("updated") else "imported"
        say(f"  {verb} {rec['name']}: {rec['frames']} frames at {rec['fps']:g} fps "
            f"({rec['duration_s']:.2f} s), {rec['bones']} bones")
    by_reason = {}
    for s in result["skipped"]:
        by_reason.setdefault(s["reason"], []).append(os.path.basename(s["path"]))
    for reason, names in by_reason.items():
        say(f"  skipped {', '.join(names)}: {reason}")
    say(f"library: {result['library']}")
    if result["failed"] or not result["imported"]:
        # One line on stderr naming each failed file and why; the exit code says whether
        # any clip was written (EXIT_PARTIAL) or none (1).
        reasons = "; ".join(f["error"] for f in result["failed"]) or "no supported file found"
        print(f"signsim: {len(result['imported'])} clip(s) imported, "
              f"{len(result['failed'])} file(s) failed: {reasons}", file=sys.stderr, flush=True)
        result["_exit"] = EXIT_PARTIAL if result["imported"] else 1
    return result


def add_tag_arguments(parser):
    parser.add_argument("clips", nargs="+", metavar="CLIP", help="clip names in the library")
    parser.add_argument("--library", metavar="FILE",
                        help="library .blend (default: the one in the preferences)")
    parser.add_argument("--add", default="", metavar="a,b",
                        help="tags to add; facet:value replaces that facet's value")
    parser.add_argument("--remove", default="", metavar="a,b", help="tags to remove")


def run_tag(args, say) -> dict:
    if not (args.add or args.remove):
        raise SignSimError("nothing to do: give --add and/or --remove")
    recs = library.tag_clips(library.library_file(args.library), args.clips, add=args.add, remove=args.remove)
    for rec in recs:
        say(f"{rec['name']}: {', '.join(rec['tags'])}")
    return {"clips": recs}


def add_rig_arguments(parser):
    parser.add_argument("action", choices=("import",), help="import: save the character of CHARACTER as a .blend")
    parser.add_argument("character", metavar="CHARACTER", help="an .fbx, .glb or .gltf file with an armature")
    parser.add_argument("--out", required=True, metavar="RIG.blend", help="the .blend file to write")


def run_rig(args, say) -> dict:
    return library.import_character(args.character, args.out, cli_reporter(say))


def add_list_arguments(parser):
    parser.add_argument("--library", metavar="FILE",
                        help="library .blend (default: the one in the preferences)")
    parser.add_argument("--text", default="", help=f"clips whose {library.TEXT_FIELDS} contain every one "
                        "of these words (any case)")
    parser.add_argument("--tags", default="", metavar="a,b", help="clips with all these tags")
    parser.add_argument("--any", action="store_true", help="any of --tags instead of all")
    parser.add_argument("--catalog", default="", help="catalog path (and its sub-catalogs)")
    parser.add_argument("--min-duration", type=float, metavar="S", help="clips at least S seconds long")
    parser.add_argument("--max-duration", type=float, metavar="S", help="clips at most S seconds long")
    parser.add_argument("--fps", type=float, metavar="N", help="frame rate (±0.5)")
    parser.add_argument("--skeleton", default="", metavar="SIG",
                        help="skeleton signature (or a prefix of it)")


def run_list(args, say) -> dict:
    lib = library.library_file(args.library)
    report = cli_reporter(say)
    for w in library.unknown_filter_warnings(lib, tags=library.parse_tags(args.tags), catalog=args.catalog,
                                             text=args.text):
        report(WARNING, w)
    clips = library.list_clips(
        lib, text=args.text, tags=library.parse_tags(args.tags), any_tag=args.any,
        catalog=args.catalog, min_duration=args.min_duration,
        max_duration=args.max_duration, fps=args.fps, skeleton=args.skeleton)
    for c in clips:
        say(f"{c['name']:40s} {c['duration_s']:8.2f} s {c['fps']:7g} fps {c['bones']:4d} bones  "
            f"[{c['catalog']}] {', '.join(c['tags'])}")
    given = (("--tags", args.tags), ("--catalog", args.catalog), ("--min-duration", args.min_duration),
             ("--max-duration", args.max_duration), ("--fps", args.fps), ("--skeleton", args.skeleton))
    # only with --text: without it the other filters' own warnings (unknown_filter_warnings) say why
    note = library.empty_note(lib, args.text, [o for o, v in given if v not in (None, "")]) \
        if args.text and not clips else ""
    if note:
        report(WARNING, f"no clip matches: {note}")
    say(f"{len(clips)} clip(s) in {os.path.abspath(lib)}")
    return {"clips": clips}

"""`signsim import` and `signsim list`: the motion library from the command line."""
import os
import sys

from . import api as library


def add_import_arguments(parser):
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
    n_files = [0]

    def progress(i, n, path):
        n_files[0] = n
        say(f"[{i + 1}/{n}] {os.path.basename(path)}")

    result = library.import_paths(args.paths, lib, tags=args.tags, catalog=args.catalog,
                                  progress=progress)
    for rec in result["imported"]:
        verb = "updated" if rec.get("updated") else "imported"
        say(f"  {verb} {rec['name']}: {rec['frames']} frames at {rec['fps']:g} fps "
            f"({rec['duration_s']:.2f} s), {rec['bones']} bones"
            + "".join(f"\n    warning: {w}" for w in rec["warnings"]))
    for f in result["failed"]:
        say(f"  FAILED {f['error']}")
    if result["skipped"]:
        say(f"  skipped {len(result['skipped'])} file(s) that are not mocap: "
            + ", ".join(os.path.basename(p) for p in result["skipped"]))
    say(f"library: {result['library']}")
    if result["failed"] or not result["imported"]:
        # One summary line on stderr; the exit code says some file failed.
        print(f"signsim: {len(result['imported'])} clip(s) imported, "
              f"{len(result['failed'])} file(s) failed", file=sys.stderr, flush=True)
        result["_exit"] = 1
    return result


def add_list_arguments(parser):
    parser.add_argument("--library", metavar="FILE",
                        help="library .blend (default: the one in the preferences)")
    parser.add_argument("--text", default="", help="words in name, catalog, source or tags")
    parser.add_argument("--tags", default="", metavar="a,b", help="clips with all these tags")
    parser.add_argument("--any", action="store_true", help="any of --tags instead of all")
    parser.add_argument("--catalog", default="", help="catalog path (and its sub-catalogs)")
    parser.add_argument("--min-duration", type=float, metavar="S")
    parser.add_argument("--max-duration", type=float, metavar="S")
    parser.add_argument("--fps", type=float, metavar="N", help="frame rate (±0.5)")
    parser.add_argument("--skeleton", default="", metavar="SIG",
                        help="skeleton signature (or a prefix of it)")


def run_list(args, say) -> dict:
    lib = library.library_file(args.library)
    clips = library.list_clips(
        lib, text=args.text, tags=library.parse_tags(args.tags), any_tag=args.any,
        catalog=args.catalog, min_duration=args.min_duration,
        max_duration=args.max_duration, fps=args.fps, skeleton=args.skeleton)
    for c in clips:
        say(f"{c['name']:40s} {c['duration_s']:8.2f} s {c['fps']:7g} fps {c['bones']:4d} bones  "
            f"[{c['catalog']}] {', '.join(c['tags'])}")
    say(f"{len(clips)} clip(s) in {os.path.abspath(lib)}")
    return {"clips": clips}

"""`signsim resolve`: argument parsing and printing over resolve.api."""
import sys

from ..errors import BadOption, cli_reporter
from ..progress import cli_lines, startup_seconds
from . import api

EXIT_PARTIAL = 3  # the file is written, but some poses are not cleared (the JSON's "failed")


def _frames(text):
    try:
        a, b = text.split(":")
        return (int(a), int(b))
    except ValueError:
        raise BadOption(f"--frames must be FIRST:LAST (integers), got '{text}'") from None


def add_arguments(parser):
    parser.add_argument("--blend", required=True, help="the .blend file with the rig and its action")
    parser.add_argument("--armature", metavar="NAME", help="name of the armature object (default: the only one)")
    parser.add_argument("--action", help="action to resolve (default: the armature's assigned action)")
    parser.add_argument("--frames", metavar="A:B", help="only these scene frames (default: every keyed frame)")
    parser.add_argument("--margin", metavar="MM", type=float, default=2.0,
                        help="clearance every pair of body parts keeps, in millimetres (default 2)")
    parser.add_argument("--out", required=True, help="the .blend file to write (never the input)")


def run(args, say) -> dict:
    result = api.resolve_file(api.ResolveFileRequest(
        rig=args.blend, armature=args.armature, out=args.out, action=args.action,
        frames=_frames(args.frames) if args.frames else None, margin_mm=args.margin), cli_reporter(say),
        progress=cli_lines(say, "resolve"), startup=startup_seconds())
    if result["failed"]:  # written, but not clear: a script must not read it as done
        print(f"signsim: {result['resolved']} of {result['poses']} poses resolved, {result['failed']} not "
              f"cleared (written to {result['out']})", file=sys.stderr, flush=True)
        result["_exit"] = EXIT_PARTIAL
    return result

"""`signsim retarget`: mocap clips onto a rig in a .blend, written to a new .blend.

    signsim retarget --clip CLIP [--clip CLIP2 …] --rig RIG.blend [--armature NAME]
                     [--map preset.json] [--library FILE] --out OUT.blend [--json]

A CLIP is a mocap file (BVH, FBX, glTF/GLB, through the motion library's importer) or the
name of a clip in the motion library (--library, default: the preferences' library).
Prints (with --json) the result of retarget.api.retarget_files (top level: the first clip,
the one assigned; "clips": one entry per clip), plus "warnings": every warning the run gave (guessed units or up axis on import, a bone map found from the
skeleton's shape alone, guessed sides), also printed as 'warning: …' lines without --json.
"""
from ..errors import WARNING, cli_reporter
from . import api


def add_arguments(parser):
    parser.add_argument("--clip", action="append", required=True, metavar="CLIP",
                        help="library clip name, or mocap file to retarget (BVH, FBX, glTF/GLB: "
                        "its first clip); repeat for several clips")
    parser.add_argument("--rig", required=True, metavar="RIG.blend",
                        help=".blend file holding the target armature")
    parser.add_argument("--armature", metavar="NAME",
                        help="target armature object (default: the only armature in RIG)")
    parser.add_argument("--map", metavar="PRESET.json",
                        help="bone map preset (JSON, from the Retarget panel's export)")
    parser.add_argument("--library", metavar="FILE",
                        help="motion library .blend to take clip names from (default: the "
                        "one in the preferences)")
    parser.add_argument("--out", required=True, metavar="OUT.blend",
                        help="where to write the rig with the new action(s)")


def run(args, say):
    warnings, human = [], cli_reporter(say)

    def report(level, message):
        if level == WARNING:
            warnings.append(message)
        human(level, message)

    result = api.retarget_files(api.RetargetRequest(
        clips=tuple(args.clip), rig=args.rig, out=args.out, armature=args.armature,
        bone_map=args.map, library=args.library), report)
    for c in result["clips"]:
        say(f"  {c['clip']}: action '{c['action']}', frames {c['frames'][0]:g}–{c['frames'][1]:g}, "
            f"{len(c['bone_map'])} bones mapped ({len(c['coverage'])} body parts)"
            + (f", {len(c['warnings'])} warning(s)" if c["warnings"] else ""))
    say(f"wrote {result['out']}")
    result["warnings"] = warnings
    return result

"""`signsim retarget`: mocap clips onto a rig in a .blend, written to a new .blend.

    signsim retarget --clip CLIP [--clip CLIP2 …] --rig RIG [--armature NAME]
                     [--map preset.json] [--library FILE] [--no-contacts] [--fps N|rig]
                     --out OUT.blend [--json]

A CLIP is a mocap file (BVH, FBX, glTF/GLB, through the motion library's importer) or the
name of a clip in the motion library (--library, default: the preferences' library).
Prints (with --json) the result of retarget.api.retarget_files (top level: the first clip,
the one assigned; "clips": one entry per clip), plus "warnings": every warning the run gave (guessed units or up axis on import, a bone map found from the
skeleton's shape alone, guessed sides), also printed as 'warning: …' lines without --json.
Contacts of the source (a fingertip on the chin, thumb on index, palm on palm) are kept on
the rig's skin unless --no-contacts; "contacts" lists them ("frames", "parts",
"spot_error_mm", "gap_mm", "penetration_mm").
"""
from ..errors import WARNING, cli_reporter
from ..progress import cli_lines
from . import api


def add_arguments(parser):
    parser.add_argument("--clip", action="append", required=True, metavar="CLIP",
                        help="library clip name, or mocap file to retarget (BVH, FBX, glTF/GLB: "
                        "its first clip); repeat for several clips")
    parser.add_argument("--rig", required=True, metavar="RIG",
                        help="the character: a .blend, or an .fbx/.glb/.gltf file read by Blender's importer")
    parser.add_argument("--armature", metavar="NAME",
                        help="target armature object (default: the only armature in RIG)")
    parser.add_argument("--map", metavar="MAP.json",
                        help="bone map (JSON): the Retarget panel's export, a {\"target bone\": "
                             "\"source bone\"} object, or a saved `retarget --json` output")
    parser.add_argument("--library", metavar="FILE",
                        help="motion library .blend to take clip names from (default: the "
                        "one in the preferences)")
    parser.add_argument("--no-contacts", dest="contacts", action="store_false",
                        help="do not keep the source's contacts (fingertip on the face, hand on "
                        "hand) on the rig's skin: plain rotation transfer")
    add_fps_argument(parser)
    parser.add_argument("--out", required=True, metavar="OUT.blend",
                        help="where to write the rig with the new action(s)")


def add_fps_argument(parser):
    """--fps N|rig (api.check_fps, checked by the command: exit 2 when malformed)."""
    parser.add_argument("--fps", metavar="N|rig",
                        help="frame rate of the output scene (default: the first clip's own rate; "
                        "'rig': the rig file's); a clip of another rate is resampled")


def run(args, say):
    warnings, human = [], cli_reporter(say)

    def report(level, message):
        if level == WARNING:
            warnings.append(message)
        human(level, message)

    result = api.retarget_files(api.RetargetRequest(
        clips=tuple(args.clip), rig=args.rig, out=args.out, armature=args.armature,
        bone_map=args.map, library=args.library, contacts=args.contacts,
        fps=args.fps), report, progress=cli_lines(say, "retarget"))
    for c in result["clips"]:
        say(f"  {c['clip']}: action '{c['action']}', frames {c['frames'][0]:g}–{c['frames'][1]:g}, "
            f"{len(c['bone_map'])} bones mapped ({len(c['coverage'])} body parts)"
            + (f", {len(c['warnings'])} warning(s)" if c["warnings"] else ""))
        for k in c.get("contacts", []):
            say(f"    {api.contact_line(k)}")
    say(f"wrote {result['out']}")
    result["warnings"] = warnings
    return result

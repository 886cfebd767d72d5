"""`signsim compose`: splice clips into one action on a rig, written to a new .blend.

    signsim compose --clips A B [C …] --rig RIG [--armature NAME] [--window N [N …]]
                    [--curve smoothstep [CURVE …]] [--trim IN:OUT …] [--library FILE]
                    [--map MAP.json] [--threshold EPS] [--max-window N] [--search S]
                    [--keep-height] [--no-foot-lock] [--layer CLIP --layer-bones B1,B2 [--layer-start F]
                    [--layer-weight W]] [--fps N|rig] [--no-contacts] --out OUT.blend [--json]

A clip is a mocap file (BVH, FBX, glTF/GLB), a clip name of the motion library (--library,
default: the preferences' library) or an action already in RIG. --window and --curve take
one value for every seam or one per seam. Each seam is made at its best transition point
(the end of A and start of B whose poses and velocities match best, within --search s) and,
without --window, blended over the shortest window that passes every seam check (per bone
velocity jump and one-frame turn, root step); planted feet are held across seams, or
step to where the next clip stands them. --trim takes one
IN:OUT per clip in the clip's own frames (empty side: the clip's start or end; ':' keeps
the whole clip).

Each clip's contacts (a fingertip on the chin, thumb on index, palm on palm) are kept on
the rig's skin as `signsim retarget` keeps them, and no seam cuts or blends a clip's
contact frames, unless --no-contacts.

Prints (with --json) compose.api.compose's result plus "out" ("contacts" in the
composition's frames); flagged seams are also timeline markers in OUT. OUT is written
only on success, atomically.
"""
import argparse

from ..errors import cli_reporter
from ..progress import cli_lines
from ..retarget import api as retarget
from . import api


def add_arguments(parser):
    parser.add_argument("--clips", nargs="+", required=True, metavar="CLIP",
                        help="clips in order: library clip names, mocap files or actions of RIG")
    parser.add_argument("--rig", required=True, metavar="RIG",
                        help="the character: a .blend, or an .fbx/.glb/.gltf file read by Blender's importer")
    parser.add_argument("--armature", metavar="NAME", help="target armature (default: the only one in RIG)")
    parser.add_argument("--window", nargs="+", type=int, metavar="N",
                        help="blend window(s) in frames, one for all seams or one per seam (0: hard cut; "
                        "default: the suggested window of each seam)")
    parser.add_argument("--curve", nargs="+", choices=api.CURVES, metavar="CURVE",
                        help=f"blend curve(s): {', '.join(api.CURVES)} (default smoothstep)")
    parser.add_argument("--trim", nargs="+", metavar="IN:OUT",
                        help="per clip, the frames to use (e.g. 10:80, 20:, :)")
    parser.add_argument("--library", metavar="FILE", help="motion library .blend for clip names")
    parser.add_argument("--map", metavar="MAP.json", help="bone map preset for the clips' skeletons")
    parser.add_argument("--threshold", type=float, metavar="EPS",
                        help="largest velocity jump of any bone at a seam in rad/s (default, per bone: "
                        "median + 6 robust σ of its own jumps in the two clips)")
    parser.add_argument("--max-window", type=int, metavar="N", help="longest window a suggested blend may use, in frames (default: no cap)")
    parser.add_argument("--search", type=float, default=api.composition.SEARCH_TIME, metavar="S",
                        help=f"seconds of each clip end the transition search may cut (default "
                        f"{api.composition.SEARCH_TIME:g}, at most a quarter of the clip; 0: blend at the clip ends)")
    parser.add_argument("--keep-height", action="store_true",
                        help="rigs without legs: each clip keeps its root height (with legs every clip "
                        "stands on the first clip's floor)")
    parser.add_argument("--foot-lock", action=argparse.BooleanOptionalAction, default=True,
                        help="hold a foot planted across a seam at one spot by two-bone leg IK, or step it "
                        "to where the next clip stands it (default on; rigs without two legs have nothing "
                        "to hold)")
    parser.add_argument("--layer", metavar="CLIP", help="additive layer clip (e.g. a head nod)")
    parser.add_argument("--layer-bones", metavar="B1,B2", default="",
                        help="bones the layer may change, comma-separated (default: all)")
    parser.add_argument("--layer-start", type=int, default=0, metavar="F",
                        help="frame offset of the layer in the composition (default 0)")
    parser.add_argument("--layer-weight", type=float, default=1.0, metavar="W", help="layer weight, 0–1 (default 1: all of it)")
    parser.add_argument("--fps", metavar="N|rig",
                        help="frame rate of the sequence (default: the first clip's own rate; 'rig': the "
                        "rig file's); a clip of another rate is resampled")
    parser.add_argument("--no-contacts", dest="contacts", action="store_false",
                        help="do not keep the clips' contacts (fingertip on the face, hand on hand) on the "
                        "rig's skin: plain rotation transfer, seams placed without regard to them")
    parser.add_argument("--out", required=True, metavar="OUT.blend", help="where to write the rig")


def run(args, say):
    result = api.compose_files(api.ComposeRequest(
        clips=tuple(args.clips), rig=args.rig, out=args.out, armature=args.armature, windows=args.window,
        curves=args.curve, trims=args.trim, library=args.library, bone_map=args.map, threshold=args.threshold,
        max_window=args.max_window, search=args.search, keep_height=args.keep_height, foot_lock=args.foot_lock, layer=args.layer,
        layer_bones=args.layer_bones, layer_start=args.layer_start, layer_weight=args.layer_weight,
        fps=args.fps, contacts=args.contacts),
        cli_reporter(say), progress=cli_lines(say, "compose"))
    say(f"wrote {result['out']}")
    for seam in result["seams"]:
        worst = ", ".join(f"{w['bone']} {w['step_deg']:.0f}° (clips {w['own_step_deg']:.0f}°)" for w in seam["worst"])
        say(f"seam {seam['index']} at frame {seam['frame']:g}: window {seam['window']} ({seam['curve']}), cut "
            f"{seam['cut'][0]}+{seam['cut'][1]} frames, D {seam['D']:.2f} rad/s (at the clip ends "
            f"{seam['D_ends']:.2f}), worst {worst}"
            f"{'  FLAGGED: ' + '/'.join(seam['failures']) if seam['flagged'] else ''}")
    for k in result.get("contacts", []):
        say(retarget.contact_line(k))
    return result

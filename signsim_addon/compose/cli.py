"""`signsim compose`: splice clips into one action on a rig, written to a new .blend.

    signsim compose --clips A B [C …] --rig RIG.blend [--armature NAME] [--window N [N …]]
                    [--curve smoothstep [CURVE …]] [--trim IN:OUT …] [--library FILE]
                    [--map PRESET.json] [--threshold EPS] [--max-window N] [--keep-height]
                    [--foot-lock] [--layer CLIP --layer-bones B1,B2 [--layer-start F]
                    [--layer-weight W]] --out OUT.blend [--json]

A clip is a mocap file (BVH, FBX, glTF/GLB), a clip name of the motion library (--library,
default: the preferences' library) or an action already in RIG. --window and --curve take
one value for every seam or one per seam; without --window each seam gets its suggested
window (the shortest that keeps the velocity jump under the threshold). --trim takes one
IN:OUT per clip in the clip's own frames (empty side: the clip's start or end; ':' keeps
the whole clip).

Prints (with --json) {"armature", "action", "frames", "fps", "threshold", "clips",
"layers", "seams": [{"index", "window", "suggested", "curve", "velocity_jump",
"threshold", "flagged", "frame", "root_jump", "heading_deg", "root_offset_m",
"limit_excess_deg"}], "out"}. OUT is written only on success, atomically.
"""
import os

import bpy

from . import api as compose
from .. import files
from ..retarget import transfer as retarget
from ..retarget import api as retarget_api
from ..library import api as library
from ..errors import SignSimError, cli_reporter
from ...solver.compose import CURVES


def add_arguments(parser):
    parser.add_argument("--clips", nargs="+", required=True, metavar="CLIP",
                        help="clips in order: library clip names, mocap files or actions of RIG")
    parser.add_argument("--rig", required=True, metavar="RIG.blend", help=".blend file holding the rig")
    parser.add_argument("--armature", metavar="NAME", help="target armature (default: the only one in RIG)")
    parser.add_argument("--window", nargs="+", type=int, metavar="N",
                        help="blend window(s) in frames, one for all seams or one per seam (0: hard cut; "
                        "default: the suggested window of each seam)")
    parser.add_argument("--curve", nargs="+", choices=CURVES, metavar="CURVE",
                        help=f"blend curve(s): {', '.join(CURVES)} (default smoothstep)")
    parser.add_argument("--trim", nargs="+", metavar="IN:OUT",
                        help="per clip, the frames to use (e.g. 10:80, 20:, :)")
    parser.add_argument("--library", metavar="FILE", help="motion library .blend for clip names")
    parser.add_argument("--map", metavar="PRESET.json", help="bone map preset for the clips' skeletons")
    parser.add_argument("--threshold", type=float, metavar="EPS",
                        help="largest seam velocity jump in rad/s (default, per seam: the 99th percentile "
                        "of the two clips' own frame-to-frame velocity changes)")
    parser.add_argument("--max-window", type=int, metavar="N", help="longest window a suggestion may use")
    parser.add_argument("--keep-height", action="store_true",
                        help="align floor position and heading only; each clip keeps its root height")
    parser.add_argument("--foot-lock", action="store_true",
                        help="keep a planted foot still through each window by moving the root")
    parser.add_argument("--layer", metavar="CLIP", help="additive layer clip (e.g. a head nod)")
    parser.add_argument("--layer-bones", metavar="B1,B2", default="",
                        help="bones the layer may change, comma-separated (default: all)")
    parser.add_argument("--layer-start", type=int, default=0, metavar="F",
                        help="frame offset of the layer in the composition")
    parser.add_argument("--layer-weight", type=float, default=1.0, metavar="W", help="layer weight (0–1)")
    parser.add_argument("--out", required=True, metavar="OUT.blend", help="where to write the rig")


def _per_seam(values, n, what):
    if values is None:
        return [None] * n
    if len(values) == 1:
        return list(values) * n
    if len(values) != n:
        raise SignSimError(f"--{what}: give one value or one per seam ({n})")
    return list(values)


def _trims(trims, n):
    if trims is None:
        return [(None, None)] * n
    if len(trims) != n:
        raise SignSimError(f"--trim: give one IN:OUT per clip ({n})")
    out = []
    for t in trims:
        a, sep, b = t.partition(":")
        try:
            if not sep:
                raise ValueError
            out.append((int(a) if a.strip() else None, int(b) if b.strip() else None))
        except ValueError:
            raise SignSimError(f"--trim: '{t}' is not IN:OUT (whole frames, either side may be empty)") from None
    return out


def _absolute(clip):
    return os.path.abspath(clip) if retarget.is_clip_file(clip) else clip


def run(args, say):
    n = len(args.clips)
    if n < 1:
        raise SignSimError("--clips: name at least one clip")
    windows = _per_seam(args.window, n - 1, "window")
    curves = _per_seam(args.curve, n - 1, "curve")
    trims = _trims(args.trim, n)
    if any(w is not None and w < 0 for w in windows):
        raise SignSimError("--window: a window cannot be negative")
    for clip in args.clips + ([args.layer] if args.layer else []):
        if retarget.is_clip_file(clip) and not os.path.isfile(clip):
            raise SignSimError(f"clip not found: {clip}")
    files.check_files([args.rig], [args.out])
    library_file = library.library_file(args.library) if args.library else None
    if library_file and not os.path.isfile(library_file):
        raise SignSimError(f"no motion library at {library_file}")
    preset = retarget.load_preset(args.map) if args.map else None
    clips = [_absolute(c) for c in args.clips]
    layer = _absolute(args.layer) if args.layer else None

    target = retarget_api.open_rig(args.rig, args.armature)
    for clip in clips + ([layer] if layer else []):
        if not retarget.is_clip_file(clip) and clip not in bpy.data.actions:
            path = library_file or library.library_file(None)
            if not os.path.isfile(path):
                raise SignSimError(f"clip not found: {clip} (not a file nor an action of the rig, and no "
                                   f"motion library at {path})")
    specs = [compose.ClipSpec(c, t_in, t_out, None if i == 0 else windows[i - 1],
                              "smoothstep" if i == 0 or curves[i - 1] is None else curves[i - 1])
             for i, (c, (t_in, t_out)) in enumerate(zip(clips, trims))]
    layers = []
    if layer:
        layers.append(compose.LayerSpec(layer, [b.strip() for b in args.layer_bones.split(",") if b.strip()],
                                        args.layer_start, args.layer_weight))
    result = compose.compose(target, specs, layers, library_path=library_file, bone_map=preset,
                             threshold=args.threshold, max_window=args.max_window,
                             keep_height=args.keep_height, foot_lock=args.foot_lock, report=cli_reporter(say))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = int(result["frames"][0]), int(result["frames"][1])
    result["out"] = files.save_atomically(args.out, say)
    for seam in result["seams"]:
        say(f"seam {seam['index']}: window {seam['window']} ({seam['curve']}), velocity jump "
            f"{seam['velocity_jump']:.2f} rad/s (ε {seam['threshold']:.2f}){'  FLAGGED' if seam['flagged'] else ''}")
    return result

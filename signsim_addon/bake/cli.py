"""`signsim bake` and `signsim batch`: argument parsing and printing over bake.api."""
import argparse
import os
import sys

from ..errors import INFO, WARNING, SignSimError, cli_reporter
from ..library import api as library
from ..progress import cli_lines, startup_seconds
from . import api
from .batch import EXIT_VERDICT


def add_arguments(parser):
    parser.add_argument("--blend", required=True, help="the .blend file with the rig and its action")
    parser.add_argument("--armature", metavar="NAME", help="name of the armature object (default: the only one)")
    parser.add_argument("--action", help="reference action (default: the armature's assigned action)")
    parser.add_argument("--preset", choices=api.PRESETS,
                        help="physics preset (the Physics panel's preset of that name) instead of the rig's settings")
    _project_argument(parser)
    parser.add_argument("--out", required=True, help="the .blend file to write (never the input)")
    parser.add_argument("--metrics", help="also write the metrics JSON to this file")
    parser.add_argument("--picture", metavar="PNG",
                        help="also render a before/after contact sheet (Workbench, in a subprocess)")
    parser.add_argument("--soft-face", action="store_true",
                        help="also dent the head's skin under the fingertips (shape keys keyed per frame)")
    parser.add_argument("--face-modes", type=int, metavar="N", help="soft face modes (default: the rig's, 20)")
    _strict_argument(parser)




def _strict_argument(parser):
    parser.add_argument("--strict", action="store_true",
                        help="exit 3 on the verdict 'check' (warnings) too, not only on 'failed'")


def _failing(verdicts, strict):
    return [v for v in verdicts if v == "failed" or (strict and v == "check")]


def _project_argument(parser):
    parser.add_argument("--project", action=argparse.BooleanOptionalAction, default=None,
                        help="track the reference projected onto collision-free poses (the target); "
                             "--no-project tracks the reference itself (default: the rig's Physics setting, off)")


def run(args, say) -> dict:
    result = api.bake_file(api.BakeFileRequest(
        rig=args.blend, armature=args.armature, out=args.out, action=args.action, preset=args.preset,
        project=args.project,
        metrics=args.metrics, picture=args.picture, soft_face=args.soft_face or None,
        face_modes=args.face_modes), cli_reporter(say), progress=cli_lines(say, "bake"), startup=startup_seconds())
    if _failing([result["verdict"]], args.strict):  # written, but a script must not read it as done
        print(f"signsim: the bake is written to {result['out']} but its verdict is '{result['verdict']}'",
              file=sys.stderr, flush=True)
        result["_exit"] = EXIT_VERDICT
    return result


def add_batch_arguments(parser):
    parser.add_argument("--library", metavar="FILE", help="library .blend (default: the preferences')")
    parser.add_argument("--rig", required=True, metavar="RIG",
                        help="the character: a .blend, or an .fbx/.glb/.gltf file read by Blender's importer")
    parser.add_argument("--armature", metavar="NAME", help="target armature (default: the only one)")
    parser.add_argument("--out", required=True, metavar="DIR", help="folder for one .blend and .json per clip")
    parser.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="processes of the local Dask cluster (default: half the cores)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="run on the Dask cluster of this scheduler (e.g. tcp://10.0.0.5:8786) instead "
                             "of a local one; its workers must see the library, rig and --out at the same paths")
    parser.add_argument("--text", default="", help=f"only clips whose {library.TEXT_FIELDS} contain every "
                        "one of these words (any case, as list --text)")
    parser.add_argument("--tags", default="", metavar="a,b", help="only clips with all these tags")
    parser.add_argument("--preset", choices=api.PRESETS, help="physics preset for every bake")
    parser.add_argument("--fps", metavar="N|rig", help="retarget's --fps for every clip: the output's frame "
                        "rate (default: each clip's own; 'rig': the rig file's)")
    _project_argument(parser)
    _strict_argument(parser)


def run_batch(args, say) -> dict:
    to_say = cli_reporter(say)

    def report(level, message):
        if args.json and level == INFO:  # stdout carries only the JSON: progress goes to stderr
            print(message, file=sys.stderr, flush=True)
        else:
            to_say(level, message)

    lib = library.library_file(args.library)
    typos = library.unknown_filter_warnings(lib, tags=library.parse_tags(args.tags), text=args.text) \
        if os.path.isfile(lib) else []
    for w in typos:
        report(WARNING, w)
    try:
        result = api.bake_many(api.BatchRequest(
            rig=args.rig, out=args.out, library=args.library, armature=args.armature, workers=args.workers,
            text=args.text, tags=args.tags, preset=args.preset, project=args.project, scheduler=args.scheduler,
            fps=args.fps),
            report)
    except SignSimError as ex:   # "no clips to bake": say why in the error line too
        if typos and "no clips to bake" in str(ex):
            raise SignSimError(f"{ex}: {'; '.join(typos)}") from None
        raise
    for r in result["clips"]:
        say(f"  {r['clip']}: " + (f"FAILED {r['error']}" if "error" in r else
                                  f"{r['action']}, {r['metrics'].get('verdict')}, tracking "
                                  f"{r['metrics']['baked']['tracking_rms_deg']:.2f}° RMS"))
    failed = [r for r in result["clips"] if "error" in r]
    result["failed"] = len(failed)
    failing = _failing([r["metrics"].get("verdict") for r in result["clips"] if "error" not in r], args.strict)
    if failed:
        print(f"signsim: {len(result['clips']) - len(failed)} clip(s) baked, {len(failed)} failed",
              file=sys.stderr, flush=True)
        result["_exit"] = 1
    elif failing:
        print(f"signsim: {len(result['clips'])} clip(s) baked, {len(failing)} with the verdict "
              f"{' or '.join(sorted(set(failing)))}", file=sys.stderr, flush=True)
        result["_exit"] = EXIT_VERDICT
    return result

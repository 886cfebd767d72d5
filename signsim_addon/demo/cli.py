"""`signsim demo`: the main job on the bundled sample, end to end.

sample clip (BVH, as users receive it) → motion library → retarget onto the bundled
signer rig → physics bake → saved .blend → metrics. The same functions as the `import`,
`retarget` and `bake` subcommands do the work.
"""
import argparse
import os

from ..bake import cli as bake_cli
from ..library import api as library
from ..retarget import cli as retarget_cli
from . import samples
from ..errors import SignSimError

CLIP = "fingerspelling.bvh"


def add_arguments(parser):
    parser.add_argument("--out", metavar="DIR", default="signsim-demo",
                        help="folder for the files the demo writes (default: ./signsim-demo)")


def run(args, say) -> dict:
    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    paths = {"library": os.path.join(out, "library.blend"),
             "retargeted": os.path.join(out, "fingerspelling_on_signer.blend"),
             "baked": os.path.join(out, "fingerspelling_baked.blend"),
             "metrics": os.path.join(out, "fingerspelling_metrics.json")}
    clip = str(samples.SAMPLES / CLIP)
    say(f"1/3 import {CLIP} into the motion library {paths['library']}")
    imported = library.import_paths([clip], paths["library"], tags="gloss:fingerspelling,handedness:right",
                                    catalog="signs/fingerspelling")
    if imported["failed"]:
        raise SignSimError(imported["failed"][0]["error"])
    rec = imported["imported"][0]
    say(f"    clip '{rec['name']}': {rec['frames']} frames at {rec['fps']:g} fps, {rec['bones']} bones, "
        f"tags {', '.join(rec['tags'])}")
    say("2/3 retarget onto the bundled signer rig")
    rt = retarget_cli.run(argparse.Namespace(
        clip=[clip], rig=str(samples.SIGNER_BLEND), armature="Signer", map=None, library=None,
        out=paths["retargeted"]), lambda *_: None)
    say(f"    action '{rt['action']}' on '{rt['armature']}', {len(rt['bone_map'])} bones mapped")
    say("3/3 bake the physics pass")
    baked = bake_cli.run(argparse.Namespace(
        blend=paths["retargeted"], armature="Signer", action=None, preset=None,
        out=paths["baked"], metrics=paths["metrics"]), say)
    say("wrote: " + ", ".join(paths.values()))
    return {"action": baked["action"], "metrics": baked["metrics"], "paths": paths}

"""The demo's use cases: the bundled sample signer, and the main job end to end.

sample clip (BVH, as users receive it) → motion library → retarget onto the bundled
signer rig → physics bake → saved .blend → metrics, through the library, retarget and
bake APIs (the same functions as the `import`, `retarget` and `bake` subcommands).
"""
import os
from dataclasses import dataclass

from .. import files
from ..bake import api as bake
from ..errors import INFO, SignSimError, silent
from ..library import api as library
from ..retarget import api as retarget
from .samples import SAMPLES, SIGNER_BLEND, append_signer  # noqa: F401

CLIP = "fingerspelling.bvh"


@dataclass(frozen=True)
class DemoRequest:
    """out: folder for the files the demo writes (created when missing); force: replace
    files of those names already there (else refused before any work)."""
    out: str = "signsim-demo"
    force: bool = False


def run_demo(request: DemoRequest, report=silent, progress=None) -> dict:
    """Import, retarget and bake the bundled sample clip into request.out.

    progress: None or a progress(stage, k, n, fraction) callable (signsim_addon/progress.py)
    given to each step's use case (their stages, counted within the step).

    Returns {"action": baked action, "metrics": public metrics, "paths": {"library",
    "retargeted", "baked", "metrics"}}. Raises SignSimError when a step fails, and before
    any work when request.out already holds files the demo writes (unless request.force).
    """
    out = os.path.abspath(request.out)
    paths = {"library": os.path.join(out, "library.blend"),
             "retargeted": os.path.join(out, "fingerspelling_on_signer.blend"),
             "baked": os.path.join(out, "fingerspelling_baked.blend"),
             "metrics": os.path.join(out, "fingerspelling_metrics.json")}
    # the library's index and the folder's catalog file are rewritten as well
    written = [*paths.values(), library.index_file(paths["library"]),
               os.path.join(out, library.CATALOG_FILE)]
    there = [os.path.basename(p) for p in written if os.path.lexists(p)]
    if there and not request.force:
        raise SignSimError(f"{out} already holds {', '.join(there)}, which the demo would replace: "
                           "give --force to replace them, or another --out")
    files.make_folder(out)
    clip = str(SAMPLES / CLIP)
    report(INFO, f"1/3 import {CLIP} into the motion library {paths['library']}")
    imported = library.import_paths([clip], paths["library"], tags="gloss:fingerspelling,handedness:right",
                                    catalog="signs/fingerspelling", progress=progress)
    if imported["failed"]:
        raise SignSimError(imported["failed"][0]["error"])
    rec = imported["imported"][0]
    report(INFO, f"    clip '{rec['name']}': {rec['frames']} frames at {rec['fps']:g} fps, {rec['bones']} bones, "
                 f"tags {', '.join(rec['tags'])}")
    report(INFO, "2/3 retarget onto the bundled signer rig")
    rt = retarget.retarget_files(retarget.RetargetRequest(
        clips=(clip,), rig=str(SIGNER_BLEND), armature="Signer", out=paths["retargeted"]), progress=progress)
    report(INFO, f"    action '{rt['action']}' on '{rt['armature']}', {len(rt['bone_map'])} bones mapped")
    report(INFO, "3/3 bake the physics pass")
    baked = bake.bake_file(bake.BakeFileRequest(
        rig=paths["retargeted"], armature="Signer", out=paths["baked"], metrics=paths["metrics"]), report,
        progress=progress)
    report(INFO, "wrote: " + ", ".join(paths.values()))
    return {"action": baked["action"], "metrics": baked["metrics"], "paths": paths}

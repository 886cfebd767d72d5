"""Batch: retarget and bake every (matching) library clip, in parallel processes.

Each clip runs as two child processes of the same CLI — `retarget` then `bake` — so a
crash or a bad clip never takes the batch down, and N workers use N cores. The child
command is the running Blender (`blender -b -c signsim …`) or, through the bpy module,
the `./signsim` launcher (which exports SIGNSIM_CLI).
"""
import json
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import bpy

from .. import files
from ..library import api as library
from ..errors import INFO, WARNING, SignSimError, silent


@dataclass(frozen=True, kw_only=True)
class BatchRequest(files.FileRequest):
    """Retarget and bake library clips onto one rig (files.FileRequest; out is a folder
    for one .blend and .json per clip): library (None: the preferences'), workers ≥ 1,
    text and tags (comma-separated) filters of the clips, preset (None or
    'soft'|'default'|'stiff')."""
    library: str = None
    workers: int = 1
    text: str = ""
    tags: str = ""
    preset: str = None


def cli_command():
    """The argv prefix that runs SignSim's CLI in a child process. Raises SignSimError."""
    if os.environ.get("SIGNSIM_CLI"):
        return json.loads(os.environ["SIGNSIM_CLI"])
    if bpy.app.binary_path:  # the installed extension registers `-c signsim` at startup
        return [bpy.app.binary_path, "-b", "-c", "signsim"]
    raise SignSimError("batch needs the blender executable or the ./signsim launcher to start workers")


def clip_outputs(clip, out):
    """(retargeted .blend, baked .blend, metrics .json) batch writes for CLIP in folder OUT;
    the clip name with characters other than letters, digits, '-', '_', '.' as '_'."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in clip)
    return tuple(os.path.join(out, f"{safe}{ext}") for ext in (".retargeted.blend", ".blend", ".json"))


def run_clip(command, clip, args: BatchRequest):
    """Retarget + bake one clip in child processes; returns its result record."""
    retargeted, baked, metrics = clip_outputs(clip, args.out)
    steps = [["retarget", "--clip", clip, "--library", args.library, "--rig", args.rig,
              "--out", retargeted, "--json"] + (["--armature", args.armature] if args.armature else [])]
    record = {"clip": clip}
    for step in steps + [None]:
        if step is None:
            armature = record["armature"]
            step = ["bake", "--blend", retargeted, "--armature", armature, "--out", baked,
                    "--metrics", metrics, "--json"] + (["--preset", args.preset] if args.preset else [])
        proc = subprocess.run(command + step, capture_output=True, text=True)
        lines = proc.stdout.strip().splitlines()
        try:
            result = json.loads(lines[-1]) if lines else {}
        except json.JSONDecodeError:
            result = {}
        if proc.returncode != 0:
            err = proc.stderr.strip().splitlines()
            record["error"] = result.get("error") or (err[-1] if err else f"{step[0]} exited {proc.returncode}")
            break
        record.update({k: v for k, v in result.items() if k in ("armature", "action", "metrics")})
        record["warnings"] = record.get("warnings", []) + list(result.get("warnings", ()))
    if os.path.exists(retargeted):
        os.remove(retargeted)
    if "error" not in record:
        record["out"], record["metrics_file"] = baked, metrics
    return record


def bake_many(request: BatchRequest, report=silent) -> dict:
    """Retarget + bake every matching library clip, request.workers at a time, each clip
    in its own child processes. Returns {"clips": [record], "out": folder}; a record has
    "clip", "warnings" (the retarget's and the bake's, each also reported as
    "<clip>: <warning>") and either "error" or "armature", "action", "metrics", "out",
    "metrics_file".
    Raises SignSimError for a missing rig or library, no matching clip, a bad --out, or
    output files that would overwrite the rig, the library or each other (before any work)."""
    args = replace(request, library=library.library_file(request.library), rig=os.path.abspath(request.rig),
                   out=os.path.abspath(request.out))
    if not os.path.isfile(args.rig):
        raise SignSimError(f"rig file not found: {args.rig}")
    if args.workers < 1:
        raise SignSimError("--workers must be at least 1")
    clips = [c["name"] for c in library.list_clips(args.library, text=args.text,
                                                   tags=library.parse_tags(args.tags))]
    if not clips:
        raise SignSimError(f"no clips to bake in {args.library}")
    # before any work: no clip's files may be the rig, the library or another clip's files
    outputs = [(path, c) for c in clips for path in clip_outputs(c, args.out)]
    files.check_distinct([args.rig, args.library], [p for p, _ in outputs],
                         [f"clip '{c}'" for _, c in outputs])
    files.make_folder(args.out)
    command = cli_command()
    report(INFO, f"baking {len(clips)} clip(s) on {args.workers} worker(s) into {args.out}")
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        records = list(pool.map(lambda c: run_clip(command, c, args), clips))
    for r in records:
        for w in r.get("warnings", ()):
            report(WARNING, f"{r['clip']}: {w}")
    return {"clips": records, "out": args.out}

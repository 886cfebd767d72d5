"""`signsim bake`: bake the physics pass of one armature in a .blend file, headless."""
import json
import os
import subprocess
import sys

import bpy

from . import bake, contact_sheet, files
from .errors import SignSimError


def add_arguments(parser):
    parser.add_argument("--blend", required=True, help="the .blend file with the rig and its action")
    parser.add_argument("--armature", required=True, help="name of the armature object")
    parser.add_argument("--action", help="reference action (default: the armature's assigned action)")
    parser.add_argument("--preset", choices=sorted(bake.PRESET_SCALE), help="gain preset instead of the rig's settings")
    parser.add_argument("--out", required=True, help="the .blend file to write (never the input)")
    parser.add_argument("--metrics", help="also write the metrics JSON to this file")
    parser.add_argument("--picture", metavar="PNG",
                        help="also render a before/after contact sheet (Workbench, in a subprocess)")


def find_armature(name):
    """The armature object called `name`. Raises SignSimError listing the armatures there are."""
    ob = bpy.data.objects.get(name)
    if ob is None or ob.type != 'ARMATURE':
        there = ", ".join(o.name for o in bpy.data.objects if o.type == 'ARMATURE') or "none"
        raise SignSimError(f"no armature named '{name}' (armatures in the file: {there})")
    return ob


def run(args, say) -> dict:
    files.check_files([args.blend], [args.out, args.metrics, getattr(args, "picture", None)])
    files.open_blend(args.blend)
    ob = find_armature(args.armature)
    action = None
    if args.action:
        action = bpy.data.actions.get(args.action)
        if action is None:
            raise SignSimError(f"no action named '{args.action}' in {args.blend}")
    scene = bpy.context.scene
    job = bake.prepare(scene, ob, action, preset=args.preset, report=lambda m: say(f"warning: {m}"))
    say(f"baking {len(job.frames)} frames of '{job.action_name}' on '{ob.name}' "
        f"({len(job.rig.bone_names)} simulated bones)")
    solved = bake.solve(job)
    for w in solved.metrics["warnings"][len(job.rig.warnings):]:
        say(f"warning: {w}")
    physics = ob.signsim.physics
    new = bake.write(scene, job, solved, physics.output_mode, physics.key_tolerance_deg)
    files.save_atomically(args.out)
    metrics = bake.public_metrics(solved.metrics)
    if args.metrics:
        with open(args.metrics, "w", encoding="utf-8") as f:
            json.dump(metrics, f, indent=1, sort_keys=True)
    for side in ("reference", "baked"):
        m = metrics[side]
        say(f"{side:>9}: tracking {m['tracking_rms_deg']:.2f}° RMS, lag {m['lag_ms']:.1f} ms, "
            f"jerk {m['jerk_cost']:.3g} m²/s⁵, penetration max {m['penetration_max_mm']:.2f} mm "
            f"(p95 {m['penetration_p95_mm']:.2f}), limit excess {m['joint_limit_excess_deg']:.2f}°")
    say(f"wrote action '{new.name}' to {args.out}")
    result = {"action": new.name, "metrics": metrics, "out": os.path.abspath(args.out),
              "warnings": solved.metrics["warnings"]}
    if getattr(args, "picture", None):
        frames = contact_sheet.pick_frames(solved.metrics["reference"]["per_frame_penetration_mm"],
                                           int(job.frames[0]))
        result["picture"] = render_contact_sheet(os.path.abspath(args.out), ob.name, job.action_name,
                                                 new.name, frames, args.picture)
        say(f"wrote contact sheet {result['picture']}")
    return result


def render_contact_sheet(blend, armature, reference, baked, frames, png):
    """Render contact_sheet.py in a child process; returns the PNG path.

    Raises SignSimError with the child's last line when rendering fails.
    """
    png = os.path.abspath(png)
    args = [blend, armature, reference, baked, ",".join(map(str, frames)), png]
    script = contact_sheet.__file__
    if bpy.app.binary_path:
        cmd = [bpy.app.binary_path, "-b", "--factory-startup", "--python", script, "--", *args]
    else:  # the bpy module: the same Python runs the script
        cmd = [sys.executable, script, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not os.path.isfile(png):
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise SignSimError(f"contact sheet failed: {lines[-1] if lines else f'exit {proc.returncode}'}")
    return png

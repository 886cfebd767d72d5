"""The bake's use cases: what the Bake and Physics operators, `signsim bake`, `signsim
batch`, the demo and the tests call.

- bake_file(BakeFileRequest, report) -> {"action", "metrics", "out", "warnings"[, "picture"]}
- prepare / solve / write / BakeWorker: the three phases of one bake (job.py), for the
  modal operator, which solves in a background thread;
- bake_many(BatchRequest, report) -> {"clips", "out"}: retarget + bake library clips in
  child processes (batch.py).
The settings' table (groups, defaults, presets) is solver.core.settings; PRESETS, GROUPS and
GROUP_LABELS are re-exported here for the operators and panels.
"""
import json
import os
import subprocess
import sys
from dataclasses import dataclass

import bpy

from ...solver.physics.bake_report import verdict
from ...solver.physics.warm_up import warm_up
from ...solver.core.settings import GROUP_LABELS, GROUPS  # noqa: F401 (for operators and panels)
from .. import files
from ..errors import INFO, WARNING, SignSimError, silent
from ..progress import Stages
from ..softface import api as softface
from . import contact_sheet
# the modules behind the Physics, Schedule and Metrics panels' buttons
from . import metrics_report, physics_presets, schedule  # noqa: F401
from .batch import BatchRequest, bake_many  # noqa: F401
from .preview import baked_pair, toggle as toggle_preview, toggle_ghost  # noqa: F401
from .job import (METRIC_CURVES, PRESETS, SUFFIX, TRACK_PHYSICS, TRACK_REFERENCE, BakeCancelled,  # noqa: F401
                  BakeJob, BakeWorker, Solved, bake_stages, operator_stages, prepare, public_metrics, reference_of, solve, write)


@dataclass(frozen=True, kw_only=True)
class BakeFileRequest(files.FileRequest):
    """Bake one armature of a .blend file (files.FileRequest) into a new .blend.

    action: reference action name (None: the armature's assigned action); preset: None
    (the rig's settings) or one of PRESETS; metrics: optional JSON path; picture:
    optional PNG path of a before/after contact sheet (rendered in a child process);
    soft_face: dent the face under the baked fingertips (None: the rig's Physics
    setting); face_modes: its number of modes (None: the rig's); project: track the
    projected target (None: the rig's Physics setting; False: the reference itself).
    """
    action: str = None
    preset: str = None
    metrics: str = None
    picture: str = None
    soft_face: bool = None
    face_modes: int = None
    project: bool = None


def bake_file(request: BakeFileRequest, report=silent, progress=None, startup=None) -> dict:
    """Bake request.armature's action in request.rig and save the result to request.out.

    progress: None or progress(stage, k, n, fraction) (signsim_addon/progress.py) over the
    stages of bake_stages (with 'soft_face' and 'picture' when asked). startup: None or
    the wall seconds the process ran before this call (the CLI: progress.startup_seconds),
    the first of "stage_seconds" as 'startup'.
    Returns {"action": new action name, "metrics": public metrics, "out": absolute path,
    "verdict" (also in the metrics): 'ok', 'check' (warnings) or 'failed' (not usable as it
    is: solver.physics.bake_report.verdict), "warnings": every warning reported (the same
    text), "stage_seconds": {stage: wall seconds} (together the bake's wall time),
    "picture": PNG path when asked, "soft_face": softface.summary of the soft face when
    asked}. Raises SignSimError for bad paths, a missing armature or action, and anything
    prepare/solve refuse; nothing is written then.
    """
    r = request
    stages = Stages(bake_stages(bool(r.project)), progress, None if startup is None else {"startup": startup})
    with stages("reading"):
        files.check_files([r.rig], [r.out, r.metrics, r.picture])
        files.open_blend(r.rig)
        ob = files.find_armature(r.armature)
        action = files.find_action(r.action, r.rig)
        scene = bpy.context.scene
        job = prepare(scene, ob, action, preset=r.preset, report=report, project=r.project)
        physics = ob.signsim.physics
        soft_face = physics.soft_face if r.soft_face is None else r.soft_face
        stages.plan(bake_stages(job.settings.project, *(("soft_face",) if soft_face else ()),
                                *(("picture",) if r.picture else ())))
        report(INFO, f"baking {len(job.frames)} frames of '{job.action_name}' on '{ob.name}' "
                     f"({len(job.rig.bone_names)} simulated bones)")
    solved = solve(job, stages)  # its stage 'compile' compiles the solver on the first bake after install
    seconds, compiled = warm_up()  # the first call's result
    if compiled:
        report(INFO, f"compiled the solver (once after install, then loaded from the cache): {seconds:.1f} s")
    new = write(scene, job, solved, physics.output_mode, physics.key_tolerance_deg,
                stages=stages)  # adds the skin's warnings
    for w in solved.metrics["warnings"][len(job.rig.warnings):]:
        report(WARNING, w)
    with stages("soft_face" if soft_face else "writing"):  # off, it only removes an earlier bake's dent
        soft, notes = softface.after_bake(scene, ob, job.frames, soft_face, r.face_modes, report)
    solved.metrics["warnings"].extend(notes)
    metrics = public_metrics(solved.metrics)   # the .blend and the metrics: both or neither
    metrics["verdict"] = verdict(metrics)
    if soft is not None:
        metrics["soft_face"] = softface.summary(soft)
    with stages("writing"):
        files.save_atomically(r.out, texts={r.metrics: json.dumps(metrics, indent=1, sort_keys=True)}
                              if r.metrics else None)
    for side in ("reference", "baked"):
        m = metrics[side]
        report(INFO, f"{side:>9}: tracking {m['tracking_rms_deg']:.2f}° RMS, lag {m['lag_ms']:.1f} ms, "
                     f"jerk {m['jerk_cost']:.3g} m²/s⁵, penetration max {m['penetration_max_mm']:.2f} mm "
                     f"(p95 {m['penetration_p95_mm']:.2f}) on the body model, limit excess "
                     f"{m['joint_limit_excess_deg']:.2f}°")
        if "skin_penetration_max_mm" in m:
            by_kind = ", ".join(f"{k} {v:.2f}" for k, v in m["skin_penetration_max_mm_by_kind"].items() if v > 0)
            report(INFO, f"{side:>9}: on the skin: penetration max {m['skin_penetration_max_mm']:.2f} mm, "
                         f"intersecting on {m['skin_frames_penetrating']} of {len(job.frames)} frames"
                         + (f" ({by_kind} mm)" if by_kind else ""))
    if "target" in metrics:
        t = metrics["target"]
        report(INFO, f"   target: {t['projected_frames']} of {len(job.frames)} frames projected "
                     f"({t['colliding_frames']} colliding), largest change {t['largest_change_deg']:.1f}°"
                     + (f" ('{t['largest_change_bone']}' at frame {t['largest_change_frame']:.0f})"
                        if t["largest_change_bone"] else "")
                     + f", mean {t['mean_change_deg']:.1f}°; projection {t['projection_seconds']:.2f} s "
                       f"({1e3 * t['seconds_per_colliding_frame']:.0f} ms per colliding frame)")
    report(INFO, f"wrote action '{new.name}' to {r.out}")
    report(INFO, f"verdict: {metrics['verdict']}" + (f" ({len(metrics['warnings'])} warning(s))"
                                                       if metrics["warnings"] else ""))
    result = {"action": new.name, "metrics": metrics, "verdict": metrics["verdict"], "out": os.path.abspath(r.out),
              "warnings": solved.metrics["warnings"]}
    if soft is not None:
        result["soft_face"] = softface.summary(soft)
        report(INFO, f"soft face: {soft['modes']} shape keys on '{soft['mesh']}', dent up to "
                     f"{soft['peak_displacement_mm']:.2f} mm, {100 * soft['far_field_ratio']:.1f} % beyond 4 cm")
    if r.picture:
        frames = contact_sheet.pick_frames(solved.metrics["reference"]["per_frame_penetration_mm"],
                                           int(job.frames[0]))
        with stages("picture"):
            result["picture"] = render_contact_sheet(os.path.abspath(r.out), ob.name, job.action_name,
                                                     new.name, frames, r.picture)
        report(INFO, f"wrote contact sheet {result['picture']}")
    result["stage_seconds"] = stages.finish(report)
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

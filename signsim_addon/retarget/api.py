"""Retargeting's use cases: what the Retarget operators, `signsim retarget`, `signsim
compose`, batch, the demo and the tests call.

- retarget_files(RetargetRequest, report) -> JSON-able result (clips onto a rig file);
- retarget_source(source, target, report) -> Result (the operator: the stored bone map,
  else the automatic one);
- bone map editing on an armature: auto_map, store_map, stored_map, set_pair,
  mirror_map, export_map, import_map; presets: load_preset, check_preset.
A bone map preset naming bones the target lacks is refused with one clear error, by the
CLI and the operator alike.
- for compose (clips as arrays, no intermediate action): source_clip, skeleton,
  rest_matrices, is_clip_file, transfer_clip (transfer.transfer: a clip onto a target's
  skeleton), keep_contacts (the contact pass on those arrays), write_action (the bulk key
  writer), store_contacts, contact_summary and mark_contacts (a composed action's contacts);
  contact_line (a contact of contact_summary as the commands print it).
"""
import contextlib
import json
import math
import os
from dataclasses import dataclass

import bpy


from .. import compat, files, keys
from ..errors import INFO, WARNING, BadOption, SignSimError, silent
from ..progress import Stages, unique
from ..library import api as library
from ...solver.retarget import bonemap
from . import contacts as contact_pass
from .contacts import add_contact  # noqa: F401
from .contacts import mark_timeline as mark_contacts, summary as contact_summary  # noqa: F401 (compose)
from .contacts import summary_line as contact_line  # noqa: F401 (the retarget and compose commands)
from . import transfer
from .transfer import (auto_map, clip_not_found, export_map, is_clip_file, mirror_map, retarget, set_pair,  # noqa: F401
                       skeleton, source_clip, store_map, stored_map)
from .transfer import write_action, rest_matrices, transfer as transfer_clip  # noqa: F401 (compose)


@dataclass(frozen=True, kw_only=True)
class RetargetRequest(files.FileRequest):
    """Retarget clips onto the armature of a rig file (files.FileRequest), written to a
    new .blend.

    clips: library clip names or mocap files (BVH, FBX, glTF/GLB); bone_map: preset JSON
    path (None: the automatic map of each skeleton); library: motion library .blend for
    clip names (None: the preferences'); contacts: keep the source's contacts on the
    rig's skin (contacts.preserve; on by default); fps: the output scene's frame rate
    (check_fps: None keeps the first clip's own rate, "rig" the rig file's, a number in fps
    that rate); every clip is keyed at that rate, a clip of another rate resampled.
    """
    clips: tuple
    bone_map: str = None
    library: str = None
    contacts: bool = True
    fps: object = None


def check_fps(fps):
    """The output frame rate asked for, checked: None (the first clip's own rate), "rig"
    (the rig file's scene rate) or a rate above 0 and at most 1000 fps (a float). Takes those or
    their text (--fps N|rig); raises BadOption for anything else ('abc', 0, -5)."""
    if fps is None or fps == "rig":
        return fps
    try:
        rate = float(fps)
    except (TypeError, ValueError):
        raise BadOption(f"--fps: '{fps}' is not a frame rate (a number of frames per second, "
                        f"or 'rig' for the rig file's)") from None
    if not (math.isfinite(rate) and 0 < rate <= 1000):
        raise BadOption(f"--fps: {fps} is not a frame rate above 0 and at most 1000 fps")
    return rate


def set_scene_rate(scene, fps, clip_fps, report=silent):
    """Give scene the output rate check_fps(fps) names for a first clip of clip_fps (fps)
    and return it (fps): None takes clip_fps, "rig" keeps the scene's. A change from the
    scene's rate is reported at INFO ("the scene takes the clip's 30 fps (the rig file had
    24)"), exactly (keys.set_scene_fps)."""
    old = keys.scene_fps(scene)
    if fps == "rig":
        return old
    rate = float(clip_fps if fps is None else fps)
    if abs(rate - old) > 1e-6 * old:
        keys.set_scene_fps(scene, rate)
        report(INFO, f"the scene takes the clip's {rate:g} fps (the rig file had {old:g})" if fps is None
               else f"the scene takes {rate:g} fps (--fps; the rig file had {old:g})")
    return keys.scene_fps(scene)


def load_preset(filepath, target=None):
    """A BoneMap from a JSON preset file, checked against `target` when given (check_preset).
    Raises SignSimError for a missing or malformed file."""
    bone_map = transfer.load_preset(filepath)
    if target is not None:
        check_preset(bone_map, target, filepath)
    return bone_map


def check_preset(bone_map, target, filepath):
    """SignSimError when the preset names target bones `target` does not have."""
    unknown = [t for t in bone_map.as_dict() if t not in target.data.bones]
    if unknown:
        raise SignSimError(f"{filepath}: bones not in '{target.name}': {', '.join(unknown[:6])}")


def import_map(target, filepath):
    """Store the preset at filepath on target; returns the number of pairs stored.
    Raises SignSimError for a missing/malformed preset or one naming bones target lacks."""
    bone_map = load_preset(filepath, target)
    store_map(target, bone_map)
    return len(bone_map.pairs)


def open_rig(path, armature=None):
    """Open the rig — a .blend, or a character in an FBX/glTF file (library.open_character:
    a new file holding it) — and return its target armature object (files.find_armature)."""
    if path.lower().endswith(".blend"):
        files.open_blend(path)
    else:
        library.open_character(path)
    return files.find_armature(armature)


def resolve_clips(clips, library_path):
    """(clip specs with file paths made absolute, absolute library path or None).

    Checked before the rig is opened (relative paths, one-line errors): a missing mocap
    file, or a clip name without a library file or with a scene file as the library,
    raise SignSimError.
    """
    names = [c for c in clips if not is_clip_file(c)]
    for clip in clips:
        if is_clip_file(clip) and not os.path.isfile(clip):
            raise clip_not_found(clip)
    library_file = None
    if names:
        library_file = library.library_file(library_path)
        if not os.path.isfile(library_file):
            raise SignSimError(f"clip not found: {names[0]} (not a file, and no motion library "
                               f"at {library_file})")
        library.check_not_scene_file(library_file)
    return [os.path.abspath(c) if is_clip_file(c) else c for c in clips], library_file


def keep_contacts(source, target, result, report=silent):
    """The contact pass retarget makes, on a clip transferred as arrays (transfer_clip's
    Result, action None): source's contacts kept on target's skin by correcting
    result.keys in place (contacts.preserve; its warnings go to report). Returns the
    contacts in their stored form (dicts with "frames" [first, last] and "influence" in
    result.frames, "parts", "bones", "spot_local", the measures or "skipped")."""
    return contact_pass.preserve(source, target, result, report=report)


def store_contacts(action, items):
    """Store contacts (keep_contacts' form, frames in action's frames) on action, where the
    bake and contact_summary read them."""
    action[contact_pass.CONTACTS_PROP] = json.dumps(items)


def retarget_source(source, target, report=silent, contacts=True):
    """Retarget source's action onto target with target's stored bone map, else the
    automatic map (then stored); with contacts, the source's contacts are kept
    (contacts.preserve, honouring the armature's contact list: contacts switched off
    stay off, added ones are kept). Returns transfer.Result; raises SignSimError."""
    bone_map = stored_map(target)
    if bone_map is None:
        bone_map = auto_map(source, target)
        store_map(target, bone_map)
    with _previewed_clip(source) as fps:
        res = retarget(source, target, bone_map, source_fps=fps, report=report)
        if contacts:
            res.contacts = contact_pass.preserve(source, target, res, report=report,
                                                 **contact_pass.animator_choices(target))
    if contacts:
        contact_pass.mark_timeline(bpy.context.scene, res.action)
    return res


@contextlib.contextmanager
def _previewed_clip(source):
    """Yields the frame rate of source's clip (None: the scene's). A library preview plays
    its clip from an NLA strip (library.ui.preview_clip) with no action assigned; while the
    retarget reads it, the strip's action is assigned and the tracks muted, then all is
    put back as it was."""
    ad = source.animation_data
    strips = [st for t in ad.nla_tracks for st in t.strips if st.action] if ad is not None else []
    if ad is None or ad.action is not None or not source.signsim.is_preview or not strips:
        yield None
        return
    muted = [(t, t.mute) for t in ad.nla_tracks]
    for t, _m in muted:
        t.mute = True
    compat.assign_action(source, strips[0].action, strips[0].action_slot)
    try:
        yield strips[0].action.signsim.fps or None
    finally:
        ad.action = None
        for t, m in muted:
            t.mute = m


def retarget_files(request: RetargetRequest, report=silent, progress=None) -> dict:
    """Retarget every clip of the request onto the rig and save request.out.

    One map serves all clips: the preset, or the automatic map of each skeleton (clips
    sharing a skeleton share it). OUT is written only when every clip succeeded, through
    a temporary file renamed into place; the clips' own armatures are not kept in it.
    The output scene's rate is set by request.fps (set_scene_rate) before the first clip is
    retargeted; a clip of another rate is resampled to it (a warning gives the frames
    before and after), so every action is keyed at whole frames of the scene's rate.
    Returns {"armature", "action" (the first clip's, assigned to the armature), "bone_map":
    {target: source} (the map stored on the armature: the first clip's), "coverage",
    "unmapped_target", "confidence" (of that map), "frames": [first, last] (of "action"),
    "fps" (the scene's rate, frames/s), "out"[, "actions"], "clips": [{"clip", "action", "frames", "bone_map", "coverage",
    "warnings"}] (one per clip, in order)}. progress: None or a progress(stage, k, n,
    fraction) callable (signsim_addon/progress.py) over the stages 'reading' (the rig),
    one per clip (named as its action's prefix; ticks after the clip is read and after it
    is retargeted) and 'writing'. Raises SignSimError.
    """
    r = request
    fps = check_fps(r.fps)
    clips, library_file = resolve_clips(list(r.clips), r.library)
    preset = transfer.load_preset(r.bone_map) if r.bone_map else None
    files.check_files([r.rig, library_file, r.bone_map, *(c for c in clips if is_clip_file(c))], [r.out])

    names = [os.path.splitext(os.path.basename(c))[0] if is_clip_file(c) else c for c in clips]
    stage_names = unique(names)  # two clips of one name: two stages
    stages = Stages(("reading", *stage_names, "writing"), progress)
    with stages("reading"):
        target = open_rig(r.rig, r.armature)
    if preset is not None:
        check_preset(preset, target, r.bone_map)
    results, maps, clip_warnings = [], {}, []
    previous = compat.assigned_action(target)
    # the rig file's contact list (switched off / added in the Contacts panel) is in the
    # first clip's frames: the clip the armature gets, whose contacts the list shows
    choices = contact_pass.animator_choices(target) if r.contacts else {}
    for clip, name, stage_name in zip(clips, names, stage_names):
        warned = []
        clip_warnings.append(warned)

        def clip_report(level, message, warned=warned):
            if level == WARNING:
                warned.append(message)
            report(level, message)
        with stages(stage_name) as tick:
            with source_clip(clip, library_file, report=clip_report) as src:
                # one map for every clip of one skeleton: the preset, or the automatic map
                skeleton_key = tuple(b.name for b in src.armature.data.bones)
                bone_map = preset or maps.get(skeleton_key) or auto_map(src.armature, target)
                maps.setdefault(skeleton_key, bone_map)
                tick(1 / 3)
                if not results:
                    scene_fps = set_scene_rate(bpy.context.scene, fps, src.fps, report)
                results.append(retarget(src.armature, target, bone_map, source_fps=src.fps,
                                        action_name=f"{name}_{target.name}", report=clip_report))
                tick(2 / 3)
                if r.contacts:
                    results[-1].contacts = contact_pass.preserve(src.armature, target, results[-1],
                                                                 report=clip_report,
                                                                 **(choices if len(results) == 1 else {}))
    for res in results[1:]:
        res.action.use_fake_user = True    # kept in OUT although only the first is assigned
    first = results[0].action
    compat.assign_action(target, first, first.slots[0])
    compat.keep_unused(previous)
    if r.contacts:
        contact_pass.mark_timeline(bpy.context.scene, first)
        if len(results) > 1:
            contact_pass.store_list(target, first, **choices)
    bone_map = results[0].bone_map
    store_map(target, bone_map)
    # the file opens on the clip it was made for, as Blender's BVH importer sets the range
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = int(results[0].frames[0]), int(results[0].frames[-1])
    scene.frame_current = scene.frame_start

    with stages("writing"):
        out = files.save_atomically(r.out)
    sk_t = skeleton(target)
    result = {
        "armature": target.name,
        "action": first.name,
        "bone_map": bone_map.as_dict(),
        "coverage": bonemap.coverage(bone_map, sk_t),
        "unmapped_target": [b.name for b in target.data.bones if b.name not in bone_map.as_dict()],
        "confidence": bone_map.confidence(),
        "frames": [int(round(results[0].frames[0])), int(round(results[0].frames[-1]))],
        "fps": scene_fps,
        "out": out,
    }
    if r.contacts:
        result["contacts"] = contact_pass.summary(first)
    if len(results) > 1:
        result["actions"] = [r.action.name for r in results]
    result["clips"] = [{
        "clip": clip, "action": res.action.name,
        "frames": [int(round(res.frames[0])), int(round(res.frames[-1]))],
        "bone_map": res.bone_map.as_dict(), "coverage": bonemap.coverage(res.bone_map, sk_t),
        "warnings": warned, **({"contacts": contact_pass.summary(res.action)} if r.contacts else {})}
        for clip, res, warned in zip(clips, results, clip_warnings)]
    return result

"""`signsim retarget`: mocap clips onto a rig in a .blend, written to a new .blend.

    signsim retarget --clip CLIP [--clip CLIP2 …] --rig RIG.blend [--armature NAME]
                     [--map preset.json] [--library FILE] --out OUT.blend [--json]

A CLIP is a mocap file (BVH, FBX, glTF/GLB, through the motion library's importer) or the
name of a clip in the motion library (--library, default: the preferences' library).

Prints (with --json) {"armature", "action", "actions", "bone_map": {target: source},
"coverage": [body parts], "unmapped_target": [...], "confidence": {target: 0..1},
"frames": [first, last], "out"} (bone map and frames of the first clip). One map serves all
clips: the preset, or the automatic map of each skeleton (clips sharing a skeleton share
it). OUT is written only when every clip succeeded, through a temporary file renamed into
place; the clips' own armatures are not kept in it.
"""
import os

import bpy

from . import bonemap
from .. import files
from . import transfer as retarget
from ..errors import SignSimError


def add_arguments(parser):
    parser.add_argument("--clip", action="append", required=True, metavar="CLIP",
                        help="library clip name, or mocap file to retarget (BVH, FBX, glTF/GLB: "
                        "its first clip); repeat for several clips")
    parser.add_argument("--rig", required=True, metavar="RIG.blend",
                        help=".blend file holding the target armature")
    parser.add_argument("--armature", metavar="NAME",
                        help="target armature object (default: the only armature in RIG)")
    parser.add_argument("--map", metavar="PRESET.json",
                        help="bone map preset (JSON, from the Retarget panel's export)")
    parser.add_argument("--library", metavar="FILE",
                        help="motion library .blend to take clip names from (default: the "
                        "one in the preferences)")
    parser.add_argument("--out", required=True, metavar="OUT.blend",
                        help="where to write the rig with the new action(s)")


def open_rig(path, armature):
    """Open the rig .blend and return its target armature object (see _target)."""
    files.open_blend(path)
    return _target(armature)


def _target(name):
    armatures = sorted(o.name for o in bpy.data.objects if o.type == 'ARMATURE')
    if name:
        ob = bpy.data.objects.get(name)
        if ob is None or ob.type != 'ARMATURE':
            raise SignSimError(f"no armature named '{name}' in the rig file; armatures: "
                               f"{', '.join(armatures) or 'none'}")
        return ob
    if len(armatures) != 1:
        raise SignSimError(f"the rig file has {len(armatures)} armatures "
                           f"({', '.join(armatures) or 'none'}): choose one with --armature")
    return bpy.data.objects[armatures[0]]


def resolve_clips(clips, library_path):
    """(clip specs with file paths made absolute, absolute library path or None).

    Checked before the rig is opened (relative paths, one-line errors): a missing mocap
    file, or a clip name without a library file, raise SignSimError.
    """
    names = [c for c in clips if not retarget.is_clip_file(c)]
    for clip in clips:
        if retarget.is_clip_file(clip) and not os.path.isfile(clip):
            raise SignSimError(f"clip not found: {clip}")
    library_file = None
    if names:
        library_file = retarget.library_file(library_path)
        if not os.path.isfile(library_file):
            raise SignSimError(f"clip not found: {names[0]} (not a file, and no motion library "
                               f"at {library_file})")
    return [os.path.abspath(c) if retarget.is_clip_file(c) else c for c in clips], library_file


def run(args, say):
    clips, library_file = resolve_clips(args.clip, args.library)
    files.check_files([args.rig], [args.out])
    preset = retarget.load_preset(args.map) if args.map else None

    target = open_rig(args.rig, args.armature)
    if preset is not None:
        unknown = [t for t in preset.as_dict() if t not in target.data.bones]
        if unknown:
            raise SignSimError(f"{args.map}: bones not in '{target.name}': {', '.join(unknown[:6])}")
    results, maps = [], {}
    for clip in clips:
        with retarget.source_clip(clip, library_file, report=say) as src:
            # one map for every clip of one skeleton: the preset, or the automatic map
            skeleton_key = tuple(b.name for b in src.armature.data.bones)
            bone_map = preset or maps.get(skeleton_key) or retarget.auto_map(src.armature, target)
            maps.setdefault(skeleton_key, bone_map)
            name = os.path.splitext(os.path.basename(clip))[0] if retarget.is_clip_file(clip) \
                else clip
            results.append(retarget.retarget(src.armature, target, bone_map, source_fps=src.fps,
                                             action_name=f"{name}_{target.name}", report=say))
    for res in results[1:]:
        res.action.use_fake_user = True    # kept in OUT although only the first is assigned
    first = results[0].action
    ad = target.animation_data
    if ad.action != first:
        ad.action = first
        slot = first.slots[0]
        if ad.action_slot_handle != slot.handle:
            ad.action_slot = slot
    bone_map = results[0].bone_map
    retarget.store_map(target, bone_map)

    out = files.save_atomically(args.out, say)
    sk_t = retarget.skeleton(target)
    result = {
        "armature": target.name,
        "action": first.name,
        "bone_map": bone_map.as_dict(),
        "coverage": bonemap.coverage(bone_map, sk_t),
        "unmapped_target": [b.name for b in target.data.bones if b.name not in bone_map.as_dict()],
        "confidence": bone_map.confidence(),
        "frames": [float(results[0].frames[0]), float(results[0].frames[-1])],
        "out": out,
    }
    if len(results) > 1:
        result["actions"] = [r.action.name for r in results]
    return result

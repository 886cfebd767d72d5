"""Import one motion file through Blender's own importer, then repair what it gets wrong.

`import_file(path, report)` returns a list of `Clip` records whose action and skeleton
(armature object) live in bpy.data; everything else the importer made (meshes, materials,
images, lights, empties) is removed, and the open scene's frame rate, frame range,
current frame, selection and mode are restored. On any failure every datablock the import
created is removed and a SignSimError naming the file is raised. A BVH file with more
keys than one clip holds (MAX_CLIP_KEYS) becomes consecutive clips, handed one by one to
`import_file(path, report, sink)`'s sink so that only one is in memory at a time.

Repairs (each has a test with a small input in tests/library/test_library_repairs.py):
- BVH is validated and measured first (bvh.read): header/row mismatch → warning, every row
  kept; up axis and units from a numpy FK pass → the importer's axis_up/global_scale, so
  the skeleton stands upright (Z up) in metres; fps from Frame Time, never use_fps_scale.
  Blender's importer builds the armature from the hierarchy and first frame; every
  frame's keys are computed with the importer's formulas in numpy and written in bulk
  (a test checks the poses match the plain importer's on the real files).
- rotations → quaternions with continuous hemispheres (Euler keys converted in numpy);
  single-frame spikes reported; a calibration pose at the start trimmed (and reported).
- FBX: bones unconnected (root motion), keyed object scale baked into the rest pose and
  location keys, exporter leaf bones (`*_end`) dropped by name, one clip per animation
  stack, importer crashes (the 5.0.1 light bug) turned into one-line errors.
- FBX and glTF: parent nodes, object rotation and scale baked into the skeleton, a lying
  skeleton turned upright; channels a clip does not animate keyed with the imported
  pose; one clip per animation; glTF imported at its own sample rate (from accessors).
"""
import hashlib
import math
import os
import re
import tempfile

import bpy
import numpy as np

from .. import compat, files
from ..errors import INFO, WARNING, SignSimError
from .. import keys
from ..keys import write_curve
from ...solver.core import quat
from ...solver.core import skeleton
from ...solver.mocap import bvh_file, clip_checks, gltf_file
from . import tracking

SUPPORTED = {".bvh": "BVH", ".fbx": "FBX", ".glb": "GLTF", ".gltf": "GLTF"}

_FINGER = re.compile(r"thumb|index|middle|ring|pinky|little|finger|f_", re.I)
ROOT_MOTION_MIN = 0.2   # metres of root travel that count as root motion
FINGER_BONES_MIN = 10   # articulated hands, not a single "hand end" joint per hand
FINGER_MOTION_MIN = math.radians(1.0)  # fingers that never move are not finger animation
SHORT_S, LONG_S = 2.0, 10.0
KEYED_HEIGHT_RANGE = (0.3, 4.0)  # FBX/glTF heights (m) trusted as they are
# Keys of one clip at most: Blender holds a key in 72 bytes (a BezTriple), so ~290 MB.
MAX_CLIP_KEYS = 4_000_000


class Clip:
    """A clip made by an import: `action` and `skeleton` are in bpy.data."""

    def __init__(self, action, skeleton, name, key, meta, tags, warnings):
        self.action = action
        self.skeleton = skeleton
        self.name = name          # wanted clip name
        self.key = key            # identifies the clip inside its file (stack/animation)
        self.meta = meta          # dict of SignSimActionSettings fields
        self.tags = tags          # automatic tags
        self.warnings = warnings


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def format_of(path):
    """'BVH'/'FBX'/'GLTF', or SignSimError for an unsupported extension."""
    ext = os.path.splitext(path)[1].lower()
    fmt = SUPPORTED.get(ext)
    if fmt is None:
        shown = ext or "no extension"
        raise SignSimError(f"{os.path.basename(path)}: unsupported file type ({shown}); "
                           f"expected .bvh, .fbx, .glb or .gltf")
    return fmt


def import_file(path, report=None, sink=None, sha256=None, progress=None):
    """Import one BVH/FBX/glTF file; returns [Clip]. bpy.data is unchanged on failure.
    sha256: the file's SHA-256 (hex) when the caller has it (else computed here);
    progress: None or callable(fraction of a BVH file's rows read, 0–1).

    sink(clips): when given, a BVH file too long for one clip (see MAX_CLIP_KEYS) hands
    each of its clips to sink as soon as it is made (which must take it out of bpy.data,
    as store.add_clips does), so memory holds one clip at a time; those clips are not in
    the returned list. A failure after some clips went to sink leaves them there."""
    path = os.path.abspath(path)
    name = os.path.basename(path)
    fmt = format_of(path)
    if not os.path.isfile(path):
        raise SignSimError(f"{name}: no such file")
    if os.path.getsize(path) == 0:
        raise SignSimError(f"{name}: the file is empty")
    sha = sha256 or file_sha256(path)
    reported = set()
    with tracking.Tracker(keep=True) as tr, tracking.SceneState(bpy.context):
        scene = bpy.context.scene

        def finish(clips, keep=(), to_sink=False):
            """Check and clean up freshly made clips (keep: datablocks still needed)."""
            for clip in clips:
                clip.meta.update(source_path=path, source_format=fmt, sha256=sha)
                _check_keys(path, clip)
            _keep_only(tr, clips, keep)
            if report:
                for w in (w for c in clips for w in c.warnings if w not in reported):
                    reported.add(w)
                    report(WARNING, f"{name}: {w}")
            if to_sink and sink is not None:
                sink(clips)
                return []
            return clips

        try:
            if fmt == "BVH":
                clips = _import_bvh(path, scene, tr, report, finish, progress)
            elif fmt == "FBX":
                clips = finish(_import_fbx(path, scene, tr))
            else:
                clips = finish(_import_gltf(path, scene, tr))
        except SignSimError:
            raise
        except Exception as ex:  # after Blender's importer ran (_run_importer): SignSim's own
            raise SignSimError(f"{name}: SignSim could not process the {fmt} data "
                               f"(internal error {type(ex).__name__}: {_last_line(ex)})") from ex
    return clips


def _check_fps(path, fps):
    lo, hi = bvh_file.FPS_RANGE
    if not (math.isfinite(fps) and lo <= fps <= hi):
        raise SignSimError(f"{os.path.basename(path)}: the frame rate {fps:.4g} fps is outside "
                           f"{lo:g}–{hi:g} fps")


def _check_keys(path, clip):
    """Refuse a clip whose frame rate or keys no real motion has: every key finite as a
    32-bit float (Blender's storage), quaternion keys of plausible length, Euler keys
    within ±bvh.ROTATION_LIMIT_DEG."""
    _check_fps(path, clip.meta["fps"])
    bag = compat.get_channelbag(clip.action, clip.meta["_slot"])
    for fc in (bag.fcurves if bag else ()):
        n = len(fc.keyframe_points)
        co = np.empty(2 * n, dtype=np.float32)
        fc.keyframe_points.foreach_get("co", co)
        v = co[1::2].astype(np.float64)
        bad = None
        if not np.isfinite(co).all():
            bad = "a non-finite key"
        elif "rotation_euler" in fc.data_path and np.abs(v).max(initial=0) > math.radians(bvh_file.ROTATION_LIMIT_DEG):
            bad = f"an Euler angle of {np.degrees(np.abs(v).max()):.4g}° (beyond any plausible angle)"
        elif "rotation_quaternion" in fc.data_path and np.abs(v).max(initial=0) > 1e3:
            bad = f"a quaternion component of {np.abs(v).max():.4g} (not a rotation)"
        if bad:
            raise SignSimError(f"{os.path.basename(path)}: clip '{clip.name}' has {bad} on "
                               f"{fc.data_path}[{fc.array_index}]")


def _last_line(ex):
    lines = [ln.strip() for ln in str(ex).splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Location:")]
    msg = lines[-1] if lines else type(ex).__name__
    if "CyclesLightSettings" in msg or "blen_read_light" in str(ex):
        return (f"the file contains a light, which Blender 5.0.1's FBX importer cannot read "
                f"({msg}); remove lights from the FBX and export it again")
    return msg


def _run_importer(op, fmt, path, **kwargs):
    with files.quiet() as log:
        try:
            result = op(filepath=path, **kwargs)
        except RuntimeError as ex:
            raise SignSimError(f"{os.path.basename(path)}: Blender's {fmt} importer failed: "
                               f"{_last_line(ex)}") from ex
    if 'FINISHED' not in result:
        tail = [ln for ln in log.getvalue().splitlines() if ln.strip()][-1:]
        raise SignSimError(f"{os.path.basename(path)}: Blender's {fmt} importer refused the "
                           f"file{': ' + tail[0] if tail else ''}")


def _new_armatures(tr):
    return [i for i in tr.created() if isinstance(i, bpy.types.Object) and i.type == 'ARMATURE']


def _keep_only(tr, clips, keep_also=()):
    """Remove what the import made beyond the clips' actions and skeletons (and
    `keep_also`)."""
    keep_objects = {c.skeleton for c in clips}
    for ob in keep_objects:
        # out of the scene: a folder import keeps every skeleton until the library is
        # written, and each linked one would slow every later importer call down
        for coll in list(ob.users_collection):
            coll.objects.unlink(ob)
        if ob.parent is not None:
            mw = ob.matrix_world.copy()
            ob.parent = None
            ob.matrix_world = mw
        ob.animation_data_clear()
    keep = set(keep_objects) | {c.action for c in clips} | {ob.data for ob in keep_objects}
    keep |= set(keep_also)
    drop = [i for i in tr.created() if i not in keep]
    tracking.remove_ids(drop)


# ---------------------------------------------------------------------------------- BVH

def _import_bvh(path, scene, tr, report, finish, progress=None):
    """Blender's BVH importer builds the armature (rest pose, axis conversion, scale) from
    the file's hierarchy and first frame; every frame's keys are then computed here in
    numpy with the importer's own formulas (see _bvh_keys) and written in bulk. Keying
    every frame through the importer costs a Python call per key; tests check that the
    result poses the skeleton exactly as Blender's importer does on the real files.

    A file with more keys than MAX_CLIP_KEYS becomes consecutive clips '<name> part 01',
    … of equal length, each on its own copy of the skeleton, made and handed to
    finish(…, to_sink=True) one after the other. progress(fraction read) as the rows are
    read. Returns the finished clips."""
    try:
        data = bvh_file.read(path, progress=progress)
    except bvh_file.BvhError as ex:  # one line naming the file
        raise SignSimError(str(ex)) from None
    up, forward, scale, _height, note = bvh_file.detect_orientation(data)
    with tempfile.TemporaryDirectory(prefix="signsim-bvh-") as tmp:
        skel_file = os.path.join(tmp, os.path.basename(path))
        with open(skel_file, "w", encoding="utf-8") as f:
            f.write(bvh_file.skeleton_text(data))
        _run_importer(bpy.ops.import_anim.bvh, "BVH", skel_file, target='ARMATURE',
                      global_scale=scale, frame_start=1, use_fps_scale=False,
                      update_scene_fps=False, update_scene_duration=False,
                      rotate_mode='QUATERNION', axis_forward=forward, axis_up=up)
    arms = _new_armatures(tr)
    if len(arms) != 1 or arms[0].animation_data is None or arms[0].animation_data.action is None:
        raise SignSimError(f"{os.path.basename(path)}: Blender's BVH importer made no animated armature")
    arm = arms[0]
    action = arm.animation_data.action
    warnings = list(data.warnings)
    if note:
        warnings.append(note)
    if abs(data.fps - round(data.fps)) < 0.01:
        fps = float(round(data.fps))   # Frame Time .0083333 → 120, 0.033333 → 30
    else:
        fps = data.fps
    name = os.path.splitext(os.path.basename(path))[0]
    curves = sum(4 * bool(rot) + 3 * bool(pos) for pos, rot, _axes in
                 (bvh_file.joint_channels(data, j) for j in range(len(data.names))))
    n_parts = max(1, math.ceil(data.rows * curves / MAX_CLIP_KEYS))
    if n_parts == 1:
        trimmed = _bvh_keys(arm, action, data, scale, forward, up, warnings)
        frames = data.rows - trimmed
        meta = dict(fps=fps, frame_count=frames, frame_start=1.0,
                    frame_end=float(frames), duration=frames / fps, trimmed_frames=trimmed)
        return finish([_finish(arm, action, name, "", meta, warnings)])
    size = math.ceil(data.rows / n_parts)
    done = []
    for k in range(n_parts):
        rows = slice(k * size, min(data.rows, (k + 1) * size))
        last = k == n_parts - 1
        if last:   # the importer's own skeleton and action for the last part
            arm_k, action_k = arm, action
        else:
            arm_k = arm.copy()
            arm_k.data = arm.data.copy()
            action_k = action.copy()
            compat.assign_action(arm_k, action_k, _slot_like(action_k, arm))
        part_warnings = warnings + [
            f"part {k + 1} of {n_parts} (frames {rows.start + 1}–{rows.stop} of the file): its "
            f"{data.rows} frames × {curves} F-curves exceed the {MAX_CLIP_KEYS} keys one clip holds"]
        trimmed = _bvh_keys(arm_k, action_k, data, scale, forward, up, part_warnings,
                            rows=rows, trim=k == 0)
        frames = rows.stop - rows.start - trimmed
        meta = dict(fps=fps, frame_count=frames, frame_start=1.0, frame_end=float(frames),
                    duration=frames / fps, trimmed_frames=trimmed)
        clip = _finish(arm_k, action_k, f"{name} part {k + 1:02d}",
                       f"frames {rows.start + 1}-{rows.stop}", meta, part_warnings)
        done += finish([clip], keep=() if last else (arm, arm.data, action), to_sink=True)
        if report:
            report(INFO, f"  {os.path.basename(path)}: part {k + 1}/{n_parts} done")
    return done


def _slot_like(action, arm):
    """The slot of `action` (a copy of arm's action) matching arm's assigned slot."""
    handle = arm.animation_data.action_slot_handle
    return next((s for s in action.slots if s.handle == handle), action.slots[0] if action.slots else None)


def _bone_names(arm, names):
    """Armature bone for each BVH joint (the importer de-duplicates names with .001 and
    Blender cuts names to 63 bytes)."""
    bones = arm.data.bones
    out, seen = [], set()
    for n in names:
        cand = n
        k = 0
        while cand in seen:
            k += 1
            cand = "%s.%03d" % (n, k)
        seen.add(cand)
        if cand not in bones:
            short = cand.encode()[:63].decode(errors="ignore")
            cand = short if short in bones else None
        out.append(cand)
    return out


def _bvh_keys(arm, action, data, scale, forward, up, warnings, rows=slice(None), trim=True):
    """Write every frame's keys of a BVH clip as the importer would, but in quaternions
    with continuous hemispheres; trim a calibration pose; report spikes.

    Importer formulas (io_anim_bvh.import_bvh.bvh_node_dict2armature), with R the bone's
    rest matrix (3×3) in the file's axes × global_scale, before the axis rotation that
    transform_apply bakes into the rest pose (so R = G⁻¹ · matrix_local):
      rotation = R⁻¹ · R_bvh · R     (R_bvh from the channels, applied in file order)
      location = R⁻¹ · (p · s − offset · s)   for joints with position channels.
    rows: the file's frames to key (a slice; keyed from frame 1 on); trim: look for a
    calibration pose at its start. Returns the number of frames trimmed."""
    from bpy_extras.io_utils import axis_conversion
    g = np.array(axis_conversion(from_forward=forward, from_up=up))
    bag = compat.get_channelbag(action, arm.animation_data.action_slot)
    bag.fcurves.clear()
    names = _bone_names(arm, data.names)
    motion = data.motion[rows]
    q_bvh = bvh_file.local_rotations(data, rows)           # (F, J, 4) in the file's axes
    n = len(motion)
    rot_bones, rot_j, loc_bones, loc_v = [], [], [], []
    for j, bone_name in enumerate(names):
        if bone_name is None:
            continue
        pos_cols, rot_cols, _axes = bvh_file.joint_channels(data, j)
        if rot_cols:
            rot_bones.append(bone_name)
            rot_j.append(j)
        if pos_cols:
            rest = g.T @ np.array(arm.data.bones[bone_name].matrix_local)[:3, :3]
            p = np.zeros((n, 3))
            for axis, col in enumerate(pos_cols):
                if col is not None:
                    p[:, axis] = motion[:, col]
            p = (p - data.offsets[j]) * scale
            loc_v.append(p @ np.linalg.inv(rest).T)
            loc_bones.append(bone_name)
    q = np.empty((n, len(rot_bones), 4))
    for b_i, (b, j) in enumerate(zip(rot_bones, rot_j)):
        qr = quat.from_matrix(g.T @ np.array(arm.data.bones[b].matrix_local)[:3, :3])
        q[:, b_i] = quat.mul(quat.mul(quat.conj(qr), q_bvh[:, j]), qr)
    del q_bvh, motion
    q = quat.make_continuous(q)
    root = next((i for i, b in enumerate(loc_bones) if arm.data.bones[b].parent is None), None)
    loc = loc_v[root] if root is not None else None
    trim = clip_checks.calibration_frames(q, loc, loc_scale=0.5) if trim else 0
    if trim:
        warnings.append(f"calibration pose at the start: the first {trim} frame"
                        f"{'s' if trim > 1 else ''} (before a jump) trimmed")
    q = q[trim:]
    _report_spikes(q, rot_bones, warnings, first_frame=1)
    times = np.arange(1, n - trim + 1, dtype=np.float64)
    for b, v in zip(loc_bones, loc_v):
        path = f'pose.bones["{bpy.utils.escape_identifier(b)}"].location'
        for i in range(3):
            write_curve(bag, path, i, b, times, v[trim:, i])
    for b_i, b in enumerate(rot_bones):
        arm.pose.bones[b].rotation_mode = 'QUATERNION'
        path = f'pose.bones["{bpy.utils.escape_identifier(b)}"].rotation_quaternion'
        for i in range(4):
            write_curve(bag, path, i, b, times, q[:, b_i, i])
    return trim


def _report_spikes(q, names, warnings, first_frame):
    if len(q) < 3 or not names:
        return
    spikes = clip_checks.find_spikes(q)
    if not spikes:
        return
    shown = ", ".join(f"{f + first_frame} ({', '.join(names[b] for b in bs[:3])}"
                      f"{'…' if len(bs) > 3 else ''})" for f, bs in spikes[:5])
    more = f" and {len(spikes) - 5} more" if len(spikes) > 5 else ""
    warnings.append(f"single-frame spike{'s' if len(spikes) > 1 else ''} at frame "
                    f"{shown}{more}")


# ------------------------------------------------------------------------ FBX and glTF

# The binary FBX header (Autodesk's FBX file format), then the version as uint32 LE.
FBX_BINARY_MAGIC = b"Kaydara FBX Binary\x20\x20\x00\x1a\x00"
FBX_VERSIONS = (7100, 9999)   # Blender's importer reads FBX 7.1 and later


def check_fbx_header(path):
    """SignSimError naming what the file is, when it is no binary FBX of a version that
    Blender's importer reads. (That importer calls every file whose first 24 bytes decode
    as UTF-8 "ASCII FBX", a damaged binary header included.)"""
    name = os.path.basename(path)
    with open(path, "rb") as f:
        head = f.read(1024)
    if head.startswith(FBX_BINARY_MAGIC):
        if len(head) < len(FBX_BINARY_MAGIC) + 4:
            raise SignSimError(f"{name}: a binary FBX file truncated inside its header")
        version = int.from_bytes(head[len(FBX_BINARY_MAGIC):len(FBX_BINARY_MAGIC) + 4], "little")
        lo, hi = FBX_VERSIONS
        if 6000 <= version < lo:
            raise SignSimError(f"{name}: a binary FBX of version {version}: SignSim reads version "
                               f"{lo} (FBX 7.1) and later; export it again as FBX 7.x")
        if not lo <= version <= hi:
            raise SignSimError(f"{name}: a binary FBX header with version {version}, which no FBX "
                               "exporter writes: the file is damaged or not an FBX")
        return
    text = head.decode("utf-8", "replace")
    if text.lstrip().startswith("; FBX") or "FBXHeaderExtension" in text:
        raise SignSimError(f"{name}: an ASCII FBX file: SignSim reads binary FBX only; "
                           "export it again as binary FBX")
    raise SignSimError(f"{name}: not an FBX file (no binary FBX header 'Kaydara FBX Binary', "
                       "no FBX text header)")


CHARACTER_FORMATS = (".fbx", ".glb", ".gltf")
# Blender's FBX importer as clips and characters are read: ignore_leaf_bones=True would drop
# the last bone of *every* chain, added or real (a file without added leaves loses its heads
# and fingertips), so clip import drops exporter leaves by name afterwards (_drop_leaf_bones).
FBX_OPTIONS = {"ignore_leaf_bones": False, "automatic_bone_orientation": False, "use_custom_props": False}


def open_character(path):
    """Make a new, empty current file holding the character of an FBX or glTF file (ext in
    CHARACTER_FORMATS), read by Blender's importer with the checks and settings clip import
    uses: its armatures, meshes and their modifiers, without its animations (a character's
    own clips are imported into the library instead). Raises SignSimError for another
    format, a file the importer refuses, or a file without an armature."""
    name = os.path.basename(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".bvh":
        raise SignSimError(f"{name}: a BVH file holds motion, not a character: give it as a clip; "
                           "a rig is a .blend, .fbx, .glb or .gltf file")
    if ext not in CHARACTER_FORMATS:
        raise SignSimError(f"{name}: unsupported rig file ({ext or 'no extension'}); a rig is a .blend, "
                           ".fbx, .glb or .gltf file")
    fmt = SUPPORTED[ext]
    if fmt == "FBX":
        check_fbx_header(path)
    else:
        try:
            gltf_file.read_document(path)
        except gltf_file.GltfError as ex:
            raise SignSimError(str(ex)) from None
    with files.quiet():
        bpy.ops.wm.read_homefile(use_empty=True, load_ui=False)
    if fmt == "FBX":
        _run_importer(bpy.ops.import_scene.fbx, "FBX", path, use_anim=False, **FBX_OPTIONS)
    else:
        _run_importer(bpy.ops.import_scene.gltf, "glTF", path)
    for ob in bpy.data.objects:
        if ob.animation_data is not None:
            ob.animation_data_clear()
    for action in list(bpy.data.actions):
        bpy.data.actions.remove(action)
    if not any(ob.type == 'ARMATURE' for ob in bpy.data.objects):
        raise SignSimError(f"{name}: no armature in the file: a rig needs one")


def _import_fbx(path, scene, tr):
    check_fbx_header(path)
    _run_importer(bpy.ops.import_scene.fbx, "FBX", path, use_anim=True, **FBX_OPTIONS)
    fps = keys.scene_fps(scene)
    _check_fps(path, fps)
    return _clips_from_keyed(path, scene, tr, fps, "FBX")


def _import_gltf(path, scene, tr):
    # glTF keys are in seconds; Blender's importer turns them into frames at the scene
    # rate. Use the file's own sampling rate (restored afterwards by SceneState).
    try:
        doc = gltf_file.read_document(path)
    except gltf_file.GltfError as ex:
        raise SignSimError(str(ex)) from None
    fps = gltf_file.sample_rate(doc) or 24.0
    _check_fps(path, fps)
    keys.set_scene_fps(scene, fps)
    _run_importer(bpy.ops.import_scene.gltf, "glTF", path)
    return _clips_from_keyed(path, scene, tr, fps, "glTF")


def _clips_from_keyed(path, scene, tr, fps, fmt):
    name = os.path.basename(path)
    arms = _new_armatures(tr)
    if not arms:
        raise SignSimError(f"{name}: the {fmt} file has no armature (skeleton)")
    actions = [a for a in tr.created() if isinstance(a, bpy.types.Action)]
    clips = []
    stem = os.path.splitext(name)[0]
    for arm in arms:
        mine = [(a, s) for a in actions for s in a.slots
                if s.target_id_type == 'OBJECT' and _moves_bones(a, s, arm)]
        if not mine:
            continue
        _STATIC[arm.session_uid] = _pose_snapshot(arm)
        _drop_redundant_object_keys(arm, [a for a, _s in mine])
        _detach_and_apply_rotation(arm, [a for a, _s in mine], scene)
        _drop_leaf_bones(arm, [a for a, _s in mine], scene)
        _unconnect_bones(arm, scene)
        scale_warn = _bake_object_scale(arm, [a for a, _s in mine], scene)
        for action, slot in mine:
            warnings = list(scale_warn)
            _repair_keyed_action(arm, action, slot, warnings)
            start, end = action.frame_range
            frames = int(round(end - start)) + 1
            key = action.name.split("|")[-1] if "|" in action.name else action.name
            clip_name = f"{stem} {key}" if len(mine) > 1 else stem
            meta = dict(fps=fps, frame_count=frames, frame_start=float(start),
                        frame_end=float(end), duration=frames / fps, trimmed_frames=0)
            clips.append(_finish(arm, action, clip_name, key, meta, warnings, slot))
    if not clips:
        raise SignSimError(f"{name}: the {fmt} file has no animation of its armature")
    # Upright and metres: measured on the posed skeleton, fixed on the rest pose + keys.
    for arm in {c.skeleton for c in clips}:
        mine = [c for c in clips if c.skeleton is arm]
        _normalise_units(arm, mine, scene)
        for c in mine:
            _key_static_pose(arm, c.action, c.meta["_slot"])
        _STATIC.pop(arm.session_uid, None)
    return clips


_STATIC = {}  # armature session_uid → its pose right after the import (see _key_static_pose)


def _pose_snapshot(arm):
    """Each pose bone's channels as the importer left them, before anything evaluates
    an action (glTF: the node transforms that un-animated bones keep)."""
    out = {}
    for pb in arm.pose.bones:
        if pb.rotation_mode == 'QUATERNION':
            rot = ("rotation_quaternion", tuple(pb.rotation_quaternion), (1, 0, 0, 0))
        elif pb.rotation_mode == 'AXIS_ANGLE':
            rot = ("rotation_axis_angle", tuple(pb.rotation_axis_angle), (0, 0, 1, 0))
        else:
            rot = ("rotation_euler", tuple(pb.rotation_euler), (0, 0, 0))
        out[pb.name] = {"location": tuple(pb.location), "rot": rot, "scale": tuple(pb.scale)}
    return out


def _key_static_pose(arm, action, slot):
    """A clip must not depend on the skeleton's un-keyed pose: importers (glTF) leave
    pose values on bones the animation does not key; key them (constant) in the clip,
    with the values the import left (not those of another clip evaluated since)."""
    bag = compat.get_channelbag(action, slot)
    have = {(fc.data_path, fc.array_index) for fc in bag.fcurves}
    start, end = action.frame_range
    times = np.array([start, end]) if end > start else np.array([start])
    snapshot = _STATIC.get(arm.session_uid) or _pose_snapshot(arm)
    for pb in arm.pose.bones:
        base = f'pose.bones["{bpy.utils.escape_identifier(pb.name)}"]'
        pose = snapshot.get(pb.name)
        if pose is None:
            continue
        for prop, value, identity in (("location", pose["location"], (0, 0, 0)), pose["rot"],
                                      ("scale", pose["scale"], (1, 1, 1))):
            if np.allclose(value, identity, atol=1e-6):
                continue
            path = f"{base}.{prop}"
            for i, v in enumerate(value):
                if (path, i) not in have:
                    write_curve(bag, path, i, pb.name, times, np.full(len(times), v))


def _moves_bones(action, slot, arm):
    bag = compat.get_channelbag(action, slot)
    if bag is None:
        return False
    names = {b.name for b in arm.data.bones}
    for fc in bag.fcurves:
        m = re.match(r'pose\.bones\["(.+?)"\]', fc.data_path)
        if m and m.group(1).replace('\\"', '"') in names:
            return True
    return False


def _edit_mode(arm, scene):
    if arm.name not in scene.objects:
        scene.collection.objects.link(arm)
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode='EDIT')


_LEAF = re.compile(r"(_end|_nub|\.end|end_site|_leaf)$", re.I)


def _drop_leaf_bones(arm, actions, scene):
    """Remove the leaf bones exporters add to mark a bone's length (`*_end`, `*_Nub`):
    childless, named so, and never animated."""
    keyed = set()
    for action in actions:
        for slot in action.slots:
            bag = compat.get_channelbag(action, slot)
            for fc in (bag.fcurves if bag else ()):
                m = re.match(r'pose\.bones\["(.+?)"\]', fc.data_path)
                if m and len({round(k.co[1], 6) for k in fc.keyframe_points}) > 1:
                    keyed.add(m.group(1))
    leaves = [b.name for b in arm.data.bones
              if not b.children and _LEAF.search(b.name) and b.name not in keyed]
    if not leaves:
        return
    _edit_mode(arm, scene)
    for name in leaves:
        eb = arm.data.edit_bones.get(name)
        if eb is not None:
            arm.data.edit_bones.remove(eb)
    bpy.ops.object.mode_set(mode='OBJECT')
    for action in actions:
        for slot in action.slots:
            bag = compat.get_channelbag(action, slot)
            for fc in list(bag.fcurves if bag else ()):
                m = re.match(r'pose\.bones\["(.+?)"\]', fc.data_path)
                if m and m.group(1) in leaves:
                    bag.fcurves.remove(fc)


def _drop_redundant_object_keys(arm, actions):
    """FBX stacks key the armature object's location and rotation even when it never
    moves: remove such curves when they are constant and equal to the object's own
    transform (so nothing changes), which lets the rotation be baked into the rest pose."""
    for action in actions:
        for slot in action.slots:
            bag = compat.get_channelbag(action, slot)
            for fc in list(bag.fcurves if bag else ()):
                if fc.data_path not in ("location", "rotation_euler", "rotation_quaternion"):
                    continue
                values = [k.co[1] for k in fc.keyframe_points]
                current = getattr(arm, fc.data_path)[fc.array_index]
                if values and max(abs(v - current) for v in values) < 1e-5:
                    bag.fcurves.remove(fc)


def _detach_and_apply_rotation(arm, actions, scene):
    """Importers can hang the armature under an empty (glTF root nodes, FBX roots) or
    rotate its object for the up axis: keep the world transform on the armature itself,
    then bake an un-keyed object rotation into the rest pose (pose channels are relative
    to the rest pose, so the motion is unchanged) so the clip needs no object transform."""
    if arm.parent is not None:
        mw = arm.matrix_world.copy()
        arm.parent = None
        arm.matrix_world = mw
    if _keyed_paths(actions) & {"rotation_euler", "rotation_quaternion", "rotation_axis_angle"}:
        return
    if arm.matrix_world.to_3x3().normalized() == arm.matrix_world.to_3x3().normalized().Identity(3):
        return
    if arm.name not in scene.objects:
        scene.collection.objects.link(arm)
    _apply_object_transform(arm, location=False)


def _keyed_paths(actions):
    """The data paths of every F-curve of `actions`, in all their slots (a set of str)."""
    keyed = set()
    for action in actions:
        for slot in action.slots:
            bag = compat.get_channelbag(action, slot)
            keyed.update(fc.data_path for fc in (bag.fcurves if bag else ()))
    return keyed


def _apply_object_transform(arm, location):
    """Bake arm's object rotation (and location when asked) into its rest pose with
    bpy.ops.object.transform_apply, arm alone selected and active."""
    view_layer = bpy.context.view_layer
    for o in view_layer.objects:
        o.select_set(False)
    arm.select_set(True)
    view_layer.objects.active = arm
    bpy.ops.object.transform_apply(location=location, rotation=True, scale=False)


def _unconnect_bones(arm, scene):
    """FBX import connects a child whose head sits on its parent's tail, which makes
    Blender ignore the child's location keys (root motion lost): unconnect them all."""
    if not any(b.use_connect for b in arm.data.bones):
        return
    _edit_mode(arm, scene)
    for eb in arm.data.edit_bones:
        eb.use_connect = False
    bpy.ops.object.mode_set(mode='OBJECT')


def _scale_armature(arm, factor, actions, scene):
    """Scale the rest pose by `factor` and every bone location key with it."""
    _edit_mode(arm, scene)
    for eb in arm.data.edit_bones:
        eb.head = eb.head * factor
        eb.tail = eb.tail * factor
    bpy.ops.object.mode_set(mode='OBJECT')
    for pose in _STATIC.get(arm.session_uid, {}).values():  # un-keyed pose offsets too
        pose["location"] = tuple(v * factor for v in pose["location"])
    for action in actions:
        for slot in action.slots:
            bag = compat.get_channelbag(action, slot)
            if bag is None:
                continue
            for fc in bag.fcurves:
                if fc.data_path.startswith("pose.bones[") and fc.data_path.endswith(".location"):
                    co = np.empty(2 * len(fc.keyframe_points))
                    fc.keyframe_points.foreach_get("co", co)
                    co[1::2] *= factor
                    fc.keyframe_points.foreach_set("co", co)
                    for attr in ("handle_left", "handle_right"):
                        h = np.empty(2 * len(fc.keyframe_points))
                        fc.keyframe_points.foreach_get(attr, h)
                        h[1::2] *= factor
                        fc.keyframe_points.foreach_set(attr, h)
                    fc.update()


def _bake_object_scale(arm, actions, scene):
    """A centimetre FBX imports with a keyed object scale (0.01): drop the scale keys and
    move the factor into the rest pose and the bone location keys."""
    scales = []
    for action in actions:
        for slot in action.slots:
            bag = compat.get_channelbag(action, slot)
            if bag is None:
                continue
            for fc in list(bag.fcurves):
                if fc.data_path == "scale":
                    scales.extend(k.co[1] for k in fc.keyframe_points)
                    bag.fcurves.remove(fc)
    s = np.array(list(arm.scale) + scales, dtype=np.float64)
    factor = float(np.median(s))
    arm.scale = (1.0, 1.0, 1.0)
    if not math.isfinite(factor) or factor <= 0 or abs(factor - 1.0) < 1e-6:
        return []
    if np.ptp(s) > 1e-4 * factor:
        extra = [f"the object scale varies ({s.min():.4g}–{s.max():.4g}); {factor:.4g} used"]
    else:
        extra = []
    _scale_armature(arm, factor, actions, scene)
    return extra + [f"object scale {factor:.4g} baked into the rest pose and location keys"]


def _repair_keyed_action(arm, action, slot, warnings):
    """Quaternion keys with continuous hemispheres (Euler bones converted), spikes reported."""
    bag = compat.get_channelbag(action, slot)
    by_bone = {}
    for fc in bag.fcurves:
        m = re.match(r'pose\.bones\["(.+?)"\]\.(rotation_quaternion|rotation_euler)$', fc.data_path)
        if m:
            by_bone.setdefault((m.group(1), m.group(2)), {})[fc.array_index] = fc
    names, series = [], []
    for (bone, kind), fcs in by_bone.items():
        pb = arm.pose.bones.get(bone.replace('\\"', '"'))
        need = 4 if kind == "rotation_quaternion" else 3
        if pb is None or len(fcs) != need:
            continue
        counts = {len(fc.keyframe_points) for fc in fcs.values()}
        if len(counts) != 1:
            continue
        n = counts.pop()
        cos = []
        for i in range(need):
            co = np.empty(2 * n)
            fcs[i].keyframe_points.foreach_get("co", co)
            cos.append(co)
        times = cos[0][0::2]
        vals = np.stack([c[1::2] for c in cos], axis=1)
        if kind == "rotation_euler":
            order = pb.rotation_mode if pb.rotation_mode not in ('QUATERNION', 'AXIS_ANGLE') else 'XYZ'
            q = quat.make_continuous(quat.from_euler(vals, order))
            group = fcs[0].group.name if fcs[0].group else pb.name
            for fc in fcs.values():
                bag.fcurves.remove(fc)
            path = f'pose.bones["{bone}"].rotation_quaternion'
            for i in range(4):
                write_curve(bag, path, i, group, times, q[:, i])
            pb.rotation_mode = 'QUATERNION'
        else:
            norm = np.linalg.norm(vals, axis=1, keepdims=True)
            q = quat.make_continuous(vals / np.where(norm > 0.0, norm, 1.0))
            for i in range(4):
                co = cos[i]
                co[1::2] = q[:, i]
                fcs[i].keyframe_points.foreach_set("co", co)
                fcs[i].update()
        if n == len(times):
            names.append(pb.name)
            series.append((times, q))
    # spikes: bones sharing the same key times
    if series:
        t0 = series[0][0]
        same = [(nm, q) for nm, (t, q) in zip(names, series) if len(t) == len(t0) and np.allclose(t, t0)]
        if same:
            q = np.stack([q for _n, q in same], axis=1)
            _report_spikes(q, [nm for nm, _q in same], warnings, first_frame=int(round(t0[0])))


def _posed_heads(arm, action, slot, scene, frame):
    """World positions ({bone: head}, {bone: tail}) with `action` at `frame`."""
    compat.assign_action(arm, action, slot)
    if arm.name not in scene.objects:
        scene.collection.objects.link(arm)
    scene.frame_set(int(round(frame)))
    bpy.context.view_layer.update()
    mw = np.array(arm.matrix_world)
    heads, tails = {}, {}
    for pb in arm.pose.bones:
        heads[pb.name] = (mw @ np.append(np.array(pb.head), 1.0))[:3]
        tails[pb.name] = (mw @ np.append(np.array(pb.tail), 1.0))[:3]
    return heads, tails


def _turn_upright(arm, actions, scene, axis, sign):
    """Rotate the armature so its world `sign`·axis points up (+Z), baked into the rest
    pose like an object rotation (pose channels are relative to it). Not when the object's
    own transform is animated. Returns whether it turned."""
    from mathutils import Vector
    if any(not path.startswith("pose.") for path in _keyed_paths(actions)):
        return False
    v = Vector((0.0, 0.0, 0.0))
    v[axis] = sign
    turn = v.rotation_difference(Vector((0.0, 0.0, 1.0))).to_matrix().to_4x4()
    arm.matrix_world = turn @ arm.matrix_world
    _apply_object_transform(arm, location=True)
    return True


def _normalise_units(arm, clips, scene):
    clip = clips[0]
    slot = clip.meta["_slot"]
    heads, tails = _posed_heads(arm, clip.action, slot, scene, clip.meta["frame_start"])
    names = list(heads)
    parents = [names.index(arm.pose.bones[n].parent.name) if arm.pose.bones[n].parent else -1
               for n in names]
    pos = np.array([heads[n] for n in names])
    mw = np.array(arm.matrix_world)
    rest = np.array([(mw @ np.append(np.array(arm.data.bones[n].head_local), 1.0))[:3] for n in names])
    axis, sign, note = bvh_file.up_axis(names, parents, rest, pos[None])
    if note:
        for c in clips:
            c.warnings.append(note)
    if axis != 2 or sign < 0:
        if _turn_upright(arm, [c.action for c in clips], scene, axis, sign):
            label = ("-" if sign < 0 else "+") + "XYZ"[axis]
            for c in clips:
                c.warnings.append(f"the skeleton stood along {label}: turned upright (Z up)")
            heads, tails = _posed_heads(arm, clip.action, slot, scene, clip.meta["frame_start"])
            pos = np.array([heads[n] for n in names])
        else:
            for c in clips:
                c.warnings.append("the skeleton does not stand upright (head not above "
                                  "hips) and its object rotation is animated: not turned")
    # FBX and glTF declare their units: only units that are clearly wrong are fixed.
    # Height from the floor (z = 0) to the top of the highest bone.
    z = np.concatenate((pos[:, 2], np.array([tails[n] for n in names])[:, 2]))
    height = float(max(z.max(), 0.0) - min(z.min(), 0.0)) if len(z) else 0.0
    lo, hi = KEYED_HEIGHT_RANGE
    if height <= 1e-9 or lo <= height <= hi:
        return
    for unit in bvh_file.UNIT_CANDIDATES[1:]:
        if bvh_file.HEIGHT_RANGE[0] <= height * unit <= bvh_file.HEIGHT_RANGE[1]:
            factor = unit
            break
    else:
        factor = bvh_file.TARGET_HEIGHT / height
    _scale_armature(arm, factor, [c.action for c in clips], scene)
    for c in clips:
        c.warnings.append(f"skeleton height {height:.3g} units scaled by {factor:.4g} to metres")


# --------------------------------------------------------------------------- finishing

def skeleton_signature(arm):
    """Hash of bone names + parent links (order-independent), 16 hex digits."""
    lines = sorted(f"{b.name}\t{b.parent.name if b.parent else ''}" for b in arm.data.bones)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def _finish(arm, action, name, key, meta, warnings, slot=None):
    slot = slot or arm.animation_data.action_slot
    bones = len(arm.data.bones)
    fps = meta["fps"]
    tags = [f"fps:{int(round(fps))}"]
    d = meta["duration"]
    tags.append("duration:" + ("short" if d < SHORT_S else "medium" if d < LONG_S else "long"))
    fingers = [b.name for b in arm.data.bones if _FINGER.search(b.name.split(":")[-1])]
    if len(fingers) >= FINGER_BONES_MIN and _max_rotation(action, slot, fingers) >= FINGER_MOTION_MIN:
        tags.append("has_fingers")
    if _root_travel(arm, action, slot) >= ROOT_MOTION_MIN:
        tags.append("has_root_motion")
    meta.update(bone_count=bones, skeleton_signature=skeleton_signature(arm), _slot=slot)
    return Clip(action, arm, name, key, meta, tags, warnings)


def _max_rotation(action, slot, bone_names):
    """Largest angle (radians) any of the bones turns away from its first key."""
    bag = compat.get_channelbag(action, slot)
    best = 0.0
    if bag is None:
        return best
    for name in bone_names:
        path = f'pose.bones["{bpy.utils.escape_identifier(name)}"].rotation_quaternion'
        fcs = [bag.fcurves.find(path, index=i) for i in range(4)]
        if any(fc is None for fc in fcs) or len({len(fc.keyframe_points) for fc in fcs}) != 1:
            continue
        n = len(fcs[0].keyframe_points)
        q = np.empty((n, 4))
        for i, fc in enumerate(fcs):
            co = np.empty(2 * n)
            fc.keyframe_points.foreach_get("co", co)
            q[:, i] = co[1::2]
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        best = max(best, float(quat.angle_between(q[:1], q).max()) if n else 0.0)
    return best


def _root_travel(arm, action, slot, samples=16):
    """Largest distance (m) the body's hips travel from their place at the first frame,
    over `samples` frames: the hips found from the skeleton's geometry (where the legs and
    the spine meet), so a static root above them (Bandai's joint_Root, a Biped's Bip01 left
    at rest) does not hide root motion; a skeleton that is no humanoid uses its root."""
    first, last = action.frame_range
    scene = bpy.context.scene
    frames = np.linspace(first, last, samples)
    # leave the skeleton as it was: its un-keyed pose values belong to the import
    linked = arm.name in scene.objects
    ad = arm.animation_data
    before = (ad.action, ad.action_slot) if ad is not None else None
    pose = [(pb.location.copy(), pb.rotation_quaternion.copy(), pb.rotation_euler.copy(),
             tuple(pb.rotation_axis_angle), pb.scale.copy()) for pb in arm.pose.bones]
    heads = [_posed_heads(arm, action, slot, scene, f)[0] for f in frames]
    if before is not None:
        arm.animation_data.action = before[0]
        if before[1] is not None and arm.animation_data.action_slot != before[1]:
            arm.animation_data.action_slot = before[1]
    else:
        arm.animation_data_clear()
    for pb, (loc, q, e, aa, sc) in zip(arm.pose.bones, pose):
        pb.location, pb.rotation_quaternion, pb.rotation_euler = loc, q, e
        pb.rotation_axis_angle, pb.scale = aa, sc
    if not linked:
        scene.collection.objects.unlink(arm)
    names = list(heads[0])
    pos = np.array([[h[n] for n in names] for h in heads])           # (F, N, 3)
    parents = [names.index(arm.pose.bones[n].parent.name) if arm.pose.bones[n].parent else -1
               for n in names]
    try:
        hips = skeleton.analyse(names, parents, pos[0], poses=pos).hips
    except ValueError:
        hips = parents.index(-1)
    return float(np.linalg.norm(pos[:, hips] - pos[0, hips], axis=1).max())

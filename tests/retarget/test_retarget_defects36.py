"""Issue 36 defects, each on an input the test builds: a fingerless rig given a clap, a
bowing source, Mixamo thumbs, a capture that turns around.
Driven through `signsim retarget` (the CLI), measured on Blender's evaluated bones."""
import json
import pathlib

import bpy
import numpy as np
import pytest

import library_samples

SAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends"

FINGER_PREFIXES = ("thumb", "f_", "palm")


@pytest.fixture
def cli(addon):
    return addon.signsim_addon.cli.main


def _last_json(capsys):
    captured = capsys.readouterr()
    return json.loads(captured.out.strip().splitlines()[-1]), captured.err


def _fingerless_signer(path):
    """The bundled signer (armature and skin) with every finger and thumb bone deleted,
    saved to path."""
    bpy.ops.wm.open_mainfile(filepath=str(SAMPLES / "signer.blend"))
    ob = bpy.data.objects["Signer"]
    bpy.context.view_layer.objects.active = ob
    bpy.ops.object.mode_set(mode='EDIT')
    bones = ob.data.edit_bones
    for name in [b.name for b in bones if b.name.startswith(FINGER_PREFIXES)]:
        bones.remove(bones[name])
    bpy.ops.object.mode_set(mode='OBJECT')
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    return path


@pytest.mark.slow
def test_clap_onto_fingerless_rig(cli, shared_data, tmp_path, capsys):
    """A clap onto a rig without finger bones: no crash; palm–palm contacts are tried on
    the rig (kept, or skipped with the measured reason, never for a missing palm frame);
    any contact that needs a finger is skipped with a warning."""
    rig = _fingerless_signer(tmp_path / "fingerless.blend")
    code = cli(["retarget", "--clip", str(shared_data / "generated" / "clap_fast.bvh"),
                "--rig", str(rig), "--out", str(tmp_path / "out.blend"), "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    contacts = result["contacts"]
    palms = [k for k in contacts if sorted(k["parts"]) == ["palm_L", "palm_R"]]
    assert palms, contacts
    for k in palms:
        assert "gap_mm" in k or "the target has no" not in k["skipped"], k
        if "skipped" in k:                               # measured on the rig, and said
            assert any("palm_L-palm_R" in w and k["skipped"] in w for w in result["warnings"]), k
    for k in contacts:
        if any(not p.startswith(("palm", "face")) and p not in ("chin", "cheek_L", "cheek_R")
               for p in k["parts"]) and "gap_mm" not in k:
            assert any("-".join(k["parts"]) in w for w in result["warnings"]), k



@pytest.mark.slow
def test_finger_contacts_skipped_on_fingerless_rig(cli, tmp_path, capsys):
    """The bundled chin/cheek clip (an index fingertip on the chin, then the cheek) onto
    the signer without finger bones: exit 0, each fingertip contact skipped, saying the
    rig has no such finger, in --json and as a warning."""
    rig = _fingerless_signer(tmp_path / "fingerless.blend")
    code = cli(["retarget", "--clip", str(SAMPLES / "chin_cheek.bvh"), "--rig", str(rig),
                "--out", str(tmp_path / "out.blend"), "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    fingers = [k for k in result["contacts"] if k["parts"][0].startswith("index")]
    assert fingers, result["contacts"]
    for k in fingers:
        assert k["skipped"].startswith(f"the target has no {k['parts'][0]}"), k
        assert any(k["skipped"] in w and "-".join(k["parts"]) in w for w in result["warnings"]), k


BOW = 87.0   # degrees the hips pitch forward (legs kept vertical): the head 3.1 cm above the hips


def _bowing_clip(path):
    """A 12-joint BVH (library_samples) that stands upright, then bows: the hips pitch
    forward to BOW degrees over frames 24–32 and holds it (the legs turned back so they stay vertical),
    holding the head (60 cm above the hips when upright) 60·cos(87°) = 3.1 cm above them."""
    rows = []
    for t in range(48):
        a = BOW * min(1.0, max(0.0, (t - 24) / 8))
        rows.append({"Hips": (a, 0, 0), "LeftUpLeg": (-a, 0, 0), "RightUpLeg": (-a, 0, 0),
                     "LeftArm": (0, 0, -60), "RightArm": (0, 0, 60)})
    path.write_text(library_samples.bvh_text(rows))
    return path


@pytest.mark.slow
def test_bow_is_not_an_inversion(cli, shared_data, tmp_path, capsys):
    """A source bowing with its head 3 cm above its hips retargets (exit 0) onto the signer,
    whose head dips just below its own hips (before: refused as "head below hips where the
    source stands upright"); a map that truly hangs the target's head below its hips (the
    spine driven by a leg) is still refused with one line, nothing written."""
    clip = _bowing_clip(tmp_path / "bow.bvh")
    code = cli(["retarget", "--clip", str(clip), "--rig", str(SAMPLES / "signer.blend"),
                "--out", str(tmp_path / "bow.blend"), "--no-contacts", "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    assert not any("head is not above its hips" in w for w in result["warnings"]), result["warnings"]
    # a Mixamo clip with the signer's spine mapped down the left leg
    mixamo = str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh")
    code = cli(["retarget", "--clip", mixamo, "--rig", str(SAMPLES / "signer.blend"),
                "--out", str(tmp_path / "mixamo.blend"), "--no-contacts", "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    down = dict(result["bone_map"], **{"spine.001": "mixamorig:LeftUpLeg", "spine.002": "mixamorig:LeftLeg",
                                        "spine.003": "mixamorig:LeftFoot"})
    preset = tmp_path / "down.json"
    preset.write_text(json.dumps(down))
    out = tmp_path / "down.blend"
    code = cli(["retarget", "--clip", mixamo, "--rig", str(SAMPLES / "signer.blend"),
                "--map", str(preset), "--out", str(out), "--no-contacts"])
    err = capsys.readouterr().err
    assert code != 0 and "head below its hips" in err, err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


# name, parent, offset (cm, Y up, facing +Z), end site: a Mixamo-named body with clavicles
CLAVICLE_BODY = (
    ("Hips", None, (0, 0, 0), None),
    ("Spine", "Hips", (0, 10, 0), None), ("Spine1", "Spine", (0, 15, 0), None),
    ("Spine2", "Spine1", (0, 15, 0), None), ("Neck", "Spine2", (0, 15, 0), None),
    ("Head", "Neck", (0, 10, 0), (0, 18, 0)),
    ("LeftShoulder", "Spine2", (3, 10, 0), None), ("LeftArm", "LeftShoulder", (14, 0, 0), None),
    ("LeftForeArm", "LeftArm", (28, 0, 0), None), ("LeftHand", "LeftForeArm", (25, 0, 0), (9, 0, 0)),
    ("RightShoulder", "Spine2", (-3, 10, 0), None), ("RightArm", "RightShoulder", (-14, 0, 0), None),
    ("RightForeArm", "RightArm", (-28, 0, 0), None), ("RightHand", "RightForeArm", (-25, 0, 0), (-9, 0, 0)),
    ("LeftUpLeg", "Hips", (9, -4, 0), None), ("LeftLeg", "LeftUpLeg", (0, -43, 0), None),
    ("LeftFoot", "LeftLeg", (0, -42, 0), None), ("LeftToeBase", "LeftFoot", (0, -6, 13), (0, 0, 6)),
    ("RightUpLeg", "Hips", (-9, -4, 0), None), ("RightLeg", "RightUpLeg", (0, -43, 0), None),
    ("RightFoot", "RightLeg", (0, -42, 0), None), ("RightToeBase", "RightFoot", (0, -6, 13), (0, 0, 6)),
)


def _clavicle_bvh(rows, body=CLAVICLE_BODY):
    """BVH text of body (CLAVICLE_BODY: hips 95 cm up, T pose at rest); rows: per frame
    {joint: (z, x, y) degrees}, joints not given at 0."""
    out, kids = ["HIERARCHY"], {}
    for j in body:
        kids.setdefault(j[1], []).append(j)

    def emit(j, ind):
        name, parent, off, end = j
        out.append(f"{ind}{'ROOT' if parent is None else 'JOINT'} {name}\n{ind}{{")
        out.append(f"{ind}  OFFSET {off[0]} {off[1]} {off[2]}")
        out.append(f"{ind}  CHANNELS " + ("6 Xposition Yposition Zposition " if parent is None else "3 ")
                   + "Zrotation Xrotation Yrotation")
        for c in kids.get(name, []):
            emit(c, ind + "  ")
        if end:
            out.append(f"{ind}  End Site\n{ind}  {{\n{ind}    OFFSET {end[0]} {end[1]} {end[2]}\n{ind}  }}")
        out.append(f"{ind}}}")
    emit(body[0], "")
    out += ["MOTION", f"Frames: {len(rows)}", "Frame Time: 0.0333333"]
    for row in rows:
        vals = [0.0, 95.0, 0.0]
        for name, *_ in body:
            vals += list(row.get(name, (0.0, 0.0, 0.0)))
        out.append(" ".join(f"{v:.4f}" for v in vals))
    return "\n".join(out) + "\n"


def _max_turn_deg(mats):
    """Largest angle (deg) between the rotation of each 3×3 matrix in mats and the first's."""
    first = mats[0]
    return max(float(np.degrees(np.arccos(np.clip((np.trace(first.T @ m) - 1) / 2, -1.0, 1.0))))
               for m in mats)


HAND = {"Thumb": [(2.56, -1.28, 3.2), (2.6, 0, 2.2), (2.4, 0, 0.8), (2.0, 0, 0.3)],
        "Index": [(9, 0, 2.5), (4, 0, 0), (2.5, 0, 0), (2, 0, 0)],
        "Middle": [(9.5, 0, 0.3), (4.5, 0, 0), (2.8, 0, 0), (2, 0, 0)],
        "Ring": [(9, 0, -1.8), (4, 0, 0), (2.5, 0, 0), (2, 0, 0)],
        "Pinky": [(8, 0, -3.6), (3, 0, 0), (2, 0, 0), (1.5, 0, 0)]}


def _with_fingers():
    """CLAVICLE_BODY with HAND's fingers on both hands (mirrored), named like Mixamo's."""
    body = [(n, p, o, None if n.endswith("Hand") else e) for n, p, o, e in CLAVICLE_BODY]
    for side, s in (("Left", 1), ("Right", -1)):
        for finger, offsets in HAND.items():
            parent = f"{side}Hand"
            for k, o in enumerate(offsets):
                name = f"{side}Hand{finger}{k + 1}"
                body.append((name, parent, (s * o[0], o[1], o[2]), (s * 1.5, 0, 0) if k == 3 else None))
                parent = name
    return tuple(body)


@pytest.mark.slow
def test_thumbs_mapped_alike_on_both_hands(cli, tmp_path, capsys):
    """A symmetric Mixamo-style skeleton whose left hand swings and turns while the right
    stays still: both thumbs (and every finger) are mapped from the same joint numbers
    (before: the left thumb from Thumb2, the right from Thumb1)."""
    rows = []
    for t in range(60):
        rows.append({"LeftArm": (80 * np.sin(t / 6), 30 * np.sin(t / 4), 0),
                     "LeftHand": (0, 90 * np.sin(t / 5), 40 * np.cos(t / 3)), "RightArm": (70, 0, 0)})
    clip = tmp_path / "one_hand_moves.bvh"
    clip.write_text(_clavicle_bvh(rows, _with_fingers()))
    code = cli(["retarget", "--clip", str(clip), "--rig", str(SAMPLES / "signer.blend"),
                "--out", str(tmp_path / "out.blend"), "--no-contacts", "--json"])
    result, err = _last_json(capsys)
    assert code == 0, err
    bm = result["bone_map"]
    fingers = [t for t in bm if t.startswith(("thumb", "f_")) and t.endswith(".L")]
    assert {t.split(".")[0] for t in fingers} == {"thumb", "f_index", "f_middle", "f_ring", "f_pinky"}
    for t in fingers:
        mirror = t[:-1] + "R"
        assert bm.get(mirror, "").replace("Right", "Left") == bm[t], (t, bm[t], bm.get(mirror))


def _edited_walk(src, path, edit, rows=240):
    """The first `rows` frames of CMU's walk (anatomically right joint names, Y up) with
    edit(data, motion, ramp) applied to the motion rows (ramp: 0 until 30 % of the cut,
    rising to 1 at 70 %): written to path."""
    from solver.mocap import bvh_file
    data = bvh_file.read(str(src))
    motion = np.array(data.motion[:rows], dtype=float)
    edit(data, motion, np.clip((np.linspace(0.0, 1.0, rows) - 0.3) / 0.4, 0.0, 1.0))
    head = bvh_file.skeleton_text(data).split("MOTION")[0]
    rows_text = "\n".join(" ".join(f"{v:.6f}" for v in r) for r in motion)
    path.write_text(f"{head}MOTION\nFrames: {rows}\nFrame Time: {data.frame_time!r}\n{rows_text}\n")
    return path


def _turn(data, motion, ramp, start=60.0, turn=180.0):
    """The whole body turned about the vertical through its first hip position: `start`
    degrees throughout and `turn` more along the ramp (a dancer's half turn)."""
    from scipy.spatial.transform import Rotation
    from solver.mocap import bvh_file
    pos, rot, axes = bvh_file.joint_channels(data, 0)
    spin = Rotation.from_euler("Y", (start + turn * ramp)[:, None], degrees=True)
    motion[:, rot] = (spin * Rotation.from_euler(axes, motion[:, rot], degrees=True)).as_euler(axes, degrees=True)
    centre = motion[0, pos] * [1.0, 0.0, 1.0]
    motion[:, pos] = spin.apply(motion[:, pos] - centre) + centre


def _twist(data, motion, ramp, degrees=80.0):
    """The upper body twisted against the pelvis about the lower back's own vertical axis,
    by `degrees` along the ramp (a torso turning to look behind)."""
    from scipy.spatial.transform import Rotation
    from solver.mocap import bvh_file
    _pos, rot, axes = bvh_file.joint_channels(data, data.names.index("LowerBack"))
    local = Rotation.from_euler(axes, motion[:, rot], degrees=True)
    twisted = local * Rotation.from_euler("Y", (degrees * ramp)[:, None], degrees=True)
    motion[:, rot] = twisted.as_euler(axes, degrees=True)


@pytest.mark.slow
def test_turning_capture_keeps_sides_and_pelvis(addon, shared_data, tmp_path):
    """A walk with a half turn about the vertical, its joint names anatomically right
    (the ballet turn's case): onto the signer no left bone is driven by a right one, and
    the pelvis stays square with the shoulders as the source's (yaw within 30°)."""
    import retarget_measure as rm
    from retarget_rigs import signer
    clip = _edited_walk(shared_data / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh", tmp_path / "turn.bvh", _turn)
    bpy.ops.wm.read_homefile(use_empty=True)
    src, tgt, result, _fps = rm.retarget_clip(addon.signsim_addon.retarget.api, clip, signer())
    pairs = result.bone_map.as_dict()
    assert pairs["thigh.L"] == "LeftUpLeg" and pairs["upper_arm.L"] == "LeftArm", pairs
    assert rm.sides_named_crossed(pairs) == []
    assert rm.yaw_error(src, tgt) <= 30.0


@pytest.mark.slow
def test_shoulders_turned_against_the_hips_are_refused(addon, cli, shared_data, tmp_path, capsys):
    """A walk whose upper body twists 80° against its pelvis: the automatic map follows
    the twist (hip–shoulder yaw within 30° of the source's); a preset driving the signer's
    pelvis from the source's chest turns the hips with the shoulders, the target's yaw
    staying 0° where the source's reaches 75°: refused with one line, nothing written."""
    import retarget_measure as rm
    clip, src, tgt, result = _twisting_walk_onto_the_signer(addon, shared_data, tmp_path)
    assert rm.yaw_error(src, tgt) <= 30.0
    assert np.abs(rm.hip_shoulder_yaw(src)).max() >= 60.0
    err = _retarget_refused(cli, capsys, clip, dict(result.bone_map.as_dict(), spine="Spine1"), tmp_path)
    assert "shoulders" in err and "refused" in err, err


def _on_toes(data, motion, ramp, pitch=40.0):
    """Both feet pitched toes-down about their own lateral axis by `pitch` degrees along
    the ramp and the body raised so that a toe tip stays where it stood (a walk that goes
    up onto its toes): the planted feet stand flat before the ramp and on their toes after."""
    from scipy.spatial.transform import Rotation
    from solver.mocap import bvh_file
    theta = np.radians(pitch * ramp)
    for side in ("Left", "Right"):
        _pos, rot, axes = bvh_file.joint_channels(data, data.names.index(f"{side}Foot"))
        local = Rotation.from_euler(axes, motion[:, rot], degrees=True)
        motion[:, rot] = (local * Rotation.from_rotvec(np.outer(theta, [1.0, 0.0, 0.0]))).as_euler(axes, degrees=True)
    toe = data.names.index("LeftToeBase")          # its rest offsets: Y up, Z forward
    tip = data.offsets[toe] + next(np.array(o) for j, o in data.end_sites if j == toe)
    drop = np.arcsin(-tip[1] / np.linalg.norm(tip))  # ankle → toe tip below the horizontal
    pos, _rot, _axes = bvh_file.joint_channels(data, 0)
    motion[:, pos[1]] += np.linalg.norm(tip) * (np.sin(drop + theta) - np.sin(drop))


@pytest.mark.slow
@pytest.mark.parametrize("rig", ["signer", "godot"])
def test_feet_follow_a_source_that_goes_onto_its_toes(addon, shared_data, tmp_path, rig):
    """CMU's walk going up onto its toes for the second half: each target foot's pitch and
    roll, relative to its rest, follow the source's within 20° on at least 95 % of the
    frames (the feet are levelled from the frames where the source's stand flat, not from
    every planted frame, whose toe stands tilt the flat ones toe-up)."""
    import retarget_measure as rm
    from retarget_rigs import target_rig
    clip = _edited_walk(shared_data / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh", tmp_path / "toes.bvh",
                        _on_toes, rows=480)
    bpy.ops.wm.read_homefile(use_empty=True)
    src, tgt, _result, _fps = rm.retarget_clip(addon.signsim_addon.retarget.api, clip, target_rig(shared_data, rig))
    assert min(rm.foot_angles(src, s)[0].min() for s in ("L", "R")) <= -40.0     # the source on its toes
    assert rm.foot_pitch_within(src, tgt, rest=True) >= 0.95


def _boxing_bvh(path, frames=90):
    """CLAVICLE_BODY boxing: the arms punch in turn (clavicles following them), the chest
    turns 35° either way with each punch and the neck turns back against it so that the
    head keeps facing forward (frames at 30 fps)."""
    rows = []
    for t in range(frames):
        a = np.sin(2 * np.pi * t / 30)
        rows.append({"Spine2": (0, 0, 35 * a), "Neck": (0, 0, -35 * a),
                     "LeftShoulder": (5 * max(a, 0), 0, 10 * max(a, 0)), "LeftArm": (-70, 0, 80 * max(a, 0)),
                     "LeftForeArm": (0, 0, 90 * (1 - max(a, 0))),
                     "RightShoulder": (-5 * max(-a, 0), 0, -10 * max(-a, 0)), "RightArm": (70, 0, -80 * max(-a, 0)),
                     "RightForeArm": (0, 0, -90 * (1 - max(-a, 0)))})
    path.write_text(_clavicle_bvh(rows))
    return path


@pytest.mark.slow
def test_biped_neck_carrying_the_clavicles_follows_the_source_neck(addon, shared_data, tmp_path):
    """A boxer (the chest turning with each punch, the neck turning back) onto the CC0
    base mesh made a 3ds Max Biped as exported (clavicles on Bip01 Neck, centimetres under
    an object scale of 0.01): Bip01 Neck turns as the source's neck does (its world
    rotation within 10° of the source neck's on average, after the constant rest
    difference), not with the chest, and steps between frames at most 20° beyond the
    source neck's own step."""
    import retarget_measure as rm
    from retarget_rigs import max_biped
    bpy.ops.wm.read_homefile(use_empty=True)
    target = max_biped(shared_data)
    src, tgt, _result, _fps = rm.retarget_clip(addon.signsim_addon.retarget.api,
                                               _boxing_bvh(tmp_path / "boxing.bvh"), target)
    s_neck, t_neck = src.body.neck[0], tgt.names.index("Bip01 Neck")
    assert rm.offset_angles(src.rot[:, s_neck], tgt.rot[:, t_neck]).mean() <= 10.0
    assert (rm.rotation_jumps(tgt)[:, t_neck] - rm.rotation_jumps(src)[:, s_neck]).max() <= 20.0


@pytest.mark.slow
def test_a_wrung_spine_is_refused(addon, cli, shared_data, tmp_path, capsys):
    """A walk whose upper body twists 80° against its pelvis about the lower back: a preset
    driving the signer's chest from the source's LowerBack (its two lower spine bones left
    unmapped) wrings the signer's neck 79° beyond the source's Neck (measured with the
    refusal turned off): refused with one line, nothing written. The automatic map is not
    refused."""
    import retarget_measure as rm
    clip, src, tgt, result = _twisting_walk_onto_the_signer(addon, shared_data, tmp_path)
    assert rm.twist_excess(src, tgt, result.bone_map.as_dict())["twist_excess_deg"] <= 45.0
    preset = {t: s for t, s in result.bone_map.as_dict().items() if t not in ("spine.001", "spine.002")}
    preset["spine.003"] = "LowerBack"
    err = _retarget_refused(cli, capsys, clip, preset, tmp_path)
    assert "twist" in err and "refused" in err, err


def _twisting_walk_onto_the_signer(addon, shared_data, tmp_path):
    """(clip path, source Poses, target Poses, retarget result) of CMU's walk with its upper
    body twisting 80° against the pelvis (_twist), retargeted onto the signer with the
    automatic map."""
    import retarget_measure as rm
    from retarget_rigs import signer
    clip = _edited_walk(shared_data / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh", tmp_path / "twist.bvh", _twist)
    bpy.ops.wm.read_homefile(use_empty=True)
    src, tgt, result, _fps = rm.retarget_clip(addon.signsim_addon.retarget.api, clip, signer())
    return clip, src, tgt, result


def _retarget_refused(cli, capsys, clip, preset, tmp_path):
    """`signsim retarget` of clip onto the bundled signer with the bone map `preset`
    ({target: source}); asserts it is refused with one stderr line and nothing written,
    and returns that line."""
    (tmp_path / "map.json").write_text(json.dumps(preset))
    out = tmp_path / "out.blend"
    code = cli(["retarget", "--clip", str(clip), "--rig", str(SAMPLES / "signer.blend"), "--map",
                str(tmp_path / "map.json"), "--out", str(out), "--no-contacts"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and not out.exists() and len(err) == 1, err
    return err[0]

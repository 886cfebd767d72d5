"""Compose on the bundled signer: real mocap clips spliced with suggested windows,
a head-nod layer, the CLI and the operator."""
import importlib
import json
import pathlib

import bpy
import numpy as np
import pytest

from cli_capture import without_progress
from ui_recorder import Layout, draw

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SIGNER = ROOT / "sample_blends" / "signer.blend"
BYE = "bandai_dataset-1_bye_active_001.bvh"      # a waving gesture, 30 fps
MIXAMO = "bvhpython_test_freebvh_mixamorig.bvh"   # 30 fps, full hands
CHIN = ROOT / "sample_blends" / "chin_cheek.bvh"
# the signer's own clips: chin_cheek → fingerspelling passes every seam check (mixamo →
# chin does not: its feet stand 27–33 cm from where chin_cheek's do, a skate no hold joins)
FINGERS = ROOT / "sample_blends" / "fingerspelling.bvh"


@pytest.fixture
def quat(addon):
    return addon.solver.core.quat


@pytest.fixture
def signer():
    bpy.ops.wm.open_mainfile(filepath=str(SIGNER))
    return bpy.data.objects["Signer"]


def keyed(action, ob):
    """{bone: (rot (F, 4), loc (F, 3) or None)} and frames of an action's keys."""
    bag = action.layers[0].strips[0].channelbag(action.slots[0])
    out, frames = {}, None
    for pb in ob.pose.bones:
        def read(path, n):
            fcs = [bag.fcurves.find(f'pose.bones["{pb.name}"].{path}', index=i) for i in range(n)]
            if any(fc is None for fc in fcs):
                return None, None
            co = np.empty((n, 2 * len(fcs[0].keyframe_points)))
            for i, fc in enumerate(fcs):
                fc.keyframe_points.foreach_get("co", co[i])
            return co[:, 1::2].T, co[0, 0::2]
        rot, frames = read("rotation_quaternion", 4)
        loc, _f = read("location", 3)
        out[pb.name] = (rot, loc)
    return out, frames


def hips_path(ob, keys):
    """Armature-space head of the root bone `spine` per key (m)."""
    bone = ob.data.bones["spine"]
    rest = np.array(bone.matrix_local)
    return keys["spine"][1] @ rest[:3, :3].T + rest[:3, 3]


def root_steps(ob, action):
    """Horizontal steps of the hips (m): clips stand on one floor, so the hips' height may
    differ between clips, but the hips never jump across the floor."""
    keys, _frames = keyed(action, ob)
    return np.linalg.norm(np.diff(hips_path(ob, keys)[:, :2], axis=0), axis=1)


@pytest.mark.slow
def test_seam_report_root_continuity_and_hard_cuts(cm, quat, signer, shared_data):
    mocap = shared_data / "mocap"
    clips = [cm.ClipSpec(str(mocap / BYE)), cm.ClipSpec(str(mocap / MIXAMO)),
             cm.ClipSpec(str(mocap / BYE), trim_in=40, trim_out=150)]
    objects, actions = set(bpy.data.objects), set(bpy.data.actions)
    result = cm.compose(signer, clips)
    assert set(bpy.data.objects) == objects                      # the clips' skeletons are gone
    assert set(bpy.data.actions) - actions == {bpy.data.actions[result["action"]]}
    assert result["threshold"] is None and len(result["seams"]) == 2
    for seam in result["seams"]:
        assert seam["window"] == seam["suggested"] > 1
        assert seam["flagged"] == bool(seam["failures"]) == (not seam["found"])
        assert 0 < seam["D"] and 0 < seam["D_ends"] and len(seam["worst"]) == 3

    action = signer.animation_data.action
    assert action.name == result["action"]
    assert signer.animation_data.action_slot.handle == action.slots[0].handle
    stored = json.loads(action.signsim.compose_report)
    assert [s["D"] for s in stored["seams"]] == [s["D"] for s in result["seams"]]
    keys, frames = keyed(action, signer)
    assert [frames[0], frames[-1]] == result["frames"]
    assert len(frames) == sum(c["frames"] for c in result["clips"]) - sum(s["window"] + sum(s["cut"])
                                                                           for s in result["seams"])
    for bone, (rot, _loc) in keys.items():
        assert rot is not None, bone
        assert np.all(np.sum(rot[1:] * rot[:-1], axis=1) > 0.0), f"hemisphere flip in {bone}"
        step = quat.angle_between(rot[1:], rot[:-1])
        assert np.degrees(step).max() < 90.0, f"{bone} flips by {np.degrees(step).max():.0f}°"
    # the root: continuous across seams, no horizontal step longer than the clips' own (+ 1 mm)
    own = max(root_steps(signer, bpy.data.actions[cm.compose(signer, [c])["action"]]).max() for c in clips)
    signer.animation_data.action = action
    path = hips_path(signer, keys)
    steps = np.linalg.norm(np.diff(path[:, :2], axis=0), axis=1)
    for s in result["seams"]:
        k = int(s["frame"] - frames[0])
        assert steps[max(k - 2, 0):k + s["window"] + 2].max() <= own + 1e-3
    # Blender plays what was keyed: the evaluated hips head follows the path
    for k in (0, len(frames) // 2, len(frames) - 1):
        bpy.context.scene.frame_set(int(frames[k]))
        head = np.array(signer.pose.bones["spine"].head)
        assert np.linalg.norm(head - path[k]) < 1e-4

    # hard cuts (window 0) and one-frame windows jump by far more than ε, yet the root
    # stays continuous thanks to the alignment
    for window in (0, 1):
        cut = cm.compose(signer, [clips[0]] + [cm.ClipSpec(c.clip, c.trim_in, c.trim_out, window)
                                               for c in clips[1:]])
        for seam in cut["seams"]:
            assert seam["flagged"] and "jump" in seam["failures"]
        assert json.loads(bpy.data.actions[cut["action"]].signsim.compose_report)["seams"][0]["flagged"]
        steps = root_steps(signer, bpy.data.actions[cut["action"]])
        for s in cut["seams"]:
            k = int(s["frame"] - frames[0])
            assert steps[k - 2:k + 3].max() <= own + 1e-3


def nod_action(ob, frames=60):
    """A head nod keyed on the rig: `head` pitches ±20° about its X axis, twice."""
    action = bpy.data.actions.new("HeadNod")
    slot = action.slots.new(id_type='OBJECT', name=ob.name)
    compat = importlib.import_module("bl_ext.signsim_dev.signsim.signsim_addon.compat")  # 4.5 and 5.0
    bag = compat.ensure_channelbag(action, slot)
    t = np.arange(frames, dtype=float)
    angle = np.radians(20.0) * np.sin(2 * np.pi * t / 30.0)
    q = np.stack([np.cos(angle / 2), np.sin(angle / 2), 0 * t, 0 * t], axis=1)
    for i in range(4):
        fc = bag.fcurves.new('pose.bones["head"].rotation_quaternion', index=i)
        fc.keyframe_points.add(frames)
        co = np.empty(2 * frames)
        co[0::2], co[1::2] = t + 1, q[:, i]
        fc.keyframe_points.foreach_set("co", co)
        fc.update()
    return action


@pytest.mark.compat
@pytest.mark.slow
def test_head_nod_layer_changes_only_the_masked_bones(cm, quat, signer):
    sign = str(ROOT / "sample_blends" / "fingerspelling.bvh")
    nod = nod_action(signer)
    base = cm.compose(signer, [cm.ClipSpec(sign)])
    base_keys, _f = keyed(bpy.data.actions[base["action"]], signer)
    # the layer weight is animatable: keyed 0 → 1 → 1 → 0 on the armature object
    item = signer.signsim.compose.layers.add()
    item.clip, item.bones = "HeadNod", "head"
    for frame, w in ((1, 0.0), (20, 1.0), (50, 1.0), (70, 0.0)):
        item.weight = w
        signer.keyframe_insert('signsim.compose.layers[0].weight', frame=frame)
    layered = cm.compose(signer, [cm.ClipSpec(sign)], [cm.LayerSpec("HeadNod", ["head"], start=0, index=0)])
    action = bpy.data.actions[layered["action"]]
    keys, frames = keyed(action, signer)
    for bone, (rot, loc) in keys.items():
        if bone == "head":
            continue
        assert np.array_equal(rot, base_keys[bone][0]), f"{bone} changed"
        if loc is not None:
            assert np.array_equal(loc, base_keys[bone][1])
    head, head0 = keys["head"][0], base_keys["head"][0]
    diff = np.degrees(quat.angle_between(head, head0))
    assert diff[:1].max() < 1e-3 and diff[75:].max() < 1e-3      # weight 0, and past the layer
    assert diff[20:50].max() > 15.0                               # the nod at full weight
    # per frame, the nod is scaled by the keyed weight: angle = w(frame) · |20° sin(2π k / 30)|
    bag = action.layers[0].strips[0].channelbag(action.slots[0])
    weight = bag.fcurves.find('signsim.compose.layers[0].weight')      # came along into the new action
    assert weight is not None
    k = np.arange(60)
    w = np.array([weight.evaluate(f) for f in frames[:60]])
    assert np.ptp(w[5:15]) > 0.3                                        # a real fade, not a constant
    np.testing.assert_allclose(diff[:60], w * np.abs(20.0 * np.sin(2 * np.pi * k / 30.0)), atol=0.02)
    bpy.context.scene.frame_set(12)
    assert 0.0 < signer.signsim.compose.layers[0].weight < 1.0          # and it plays from there
    assert bpy.data.actions.get("HeadNod") == nod                       # the layer's action stays


@pytest.mark.slow
def test_errors_leave_nothing_behind(cm, signer, shared_data, tmp_path):
    err = importlib.import_module(cm.__name__.split(".signsim_addon.")[0] + ".signsim_addon.errors").SignSimError
    mocap = shared_data / "mocap"
    before = (set(bpy.data.objects), set(bpy.data.actions), set(bpy.data.armatures))
    for clips, message in (
            ([cm.ClipSpec(str(mocap / BYE)), cm.ClipSpec(str(tmp_path / "nope.bvh"))], "clip not found"),
            ([cm.ClipSpec(str(mocap / BYE), trim_in=50, trim_out=20)], "the out frame must come after the in frame"),
            ([cm.ClipSpec(str(mocap / BYE)), cm.ClipSpec(str(mocap / MIXAMO), window=500)], "past the clip"),
            ([cm.ClipSpec(str(mocap / BYE), curve="cubic")], "unknown blend curve")):
        with pytest.raises(err, match=message):
            cm.compose(signer, clips, library_path=str(tmp_path / "lib.blend"))
        assert (set(bpy.data.objects), set(bpy.data.actions), set(bpy.data.armatures)) == before


@pytest.mark.slow
def test_clips_of_a_few_frames_compose(cm, signer, shared_data):
    """Clips trimmed to 3-6 frames (shorter than the flip detector's 5-frame kernel) compose
    into as many frames as they have, minus the seam's blend (4 and 5 frames failed with
    numpy's "operands could not be broadcast together")."""
    clip = str(shared_data / "mocap" / BYE)
    for n in (3, 4, 5, 6):
        result = cm.compose(signer, [cm.ClipSpec(clip, trim_in=10, trim_out=10 + n - 1),
                                     cm.ClipSpec(clip, trim_in=60, trim_out=60 + n - 1)])
        frames = result["frames"][1] - result["frames"][0] + 1
        assert 2 * n - result["seams"][0]["window"] - 1 <= frames <= 2 * n, (n, frames)


@pytest.mark.compat
@pytest.mark.slow
def test_cli_compose_json_and_written_file(addon, shared_data, tmp_path, capsys):
    cli = addon.signsim_addon.cli.main
    out = tmp_path / "out.blend"
    mocap = shared_data / "mocap"
    code = cli(["compose", "--clips", str(CHIN), str(FINGERS), "--rig", str(SIGNER),
                "--out", str(out), "--json", "--no-contacts"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["armature"] == "Signer" and result["out"] == str(out)
    seam = result["seams"][0]
    assert {"index", "window", "D", "D_ends", "worst", "flagged", "plants"} <= set(seam) and result["foot_lock"]
    assert seam["window"] == seam["suggested"] and not seam["flagged"]
    assert not list(tmp_path.glob("*.partial.blend"))
    bpy.ops.wm.open_mainfile(filepath=str(out))
    assert [o.name for o in bpy.data.objects if o.type == 'ARMATURE'] == ["Signer"]
    signer = bpy.data.objects["Signer"]
    assert signer.animation_data.action.name == result["action"]
    assert [a.name for a in bpy.data.actions] == [result["action"]]
    assert json.loads(signer.animation_data.action.signsim.compose_report)["seams"][0]["window"] == seam["window"]
    assert (bpy.context.scene.frame_start, bpy.context.scene.frame_end) == tuple(map(int, result["frames"]))

    # a hard cut by --window 0 is flagged; bad input is one line and writes nothing
    out2 = tmp_path / "cut.blend"
    code = cli(["compose", "--clips", str(mocap / BYE), str(mocap / MIXAMO), "--rig", str(SIGNER),
                "--window", "0", "--curve", "linear", "--trim", "1:120", ":", "--no-foot-lock", "--out", str(out2),
                "--json"])
    cut = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and cut["seams"][0]["flagged"] and cut["seams"][0]["window"] == 0 and not cut["foot_lock"]
    bpy.ops.wm.open_mainfile(filepath=str(out2))
    assert [m.frame for m in bpy.context.scene.timeline_markers if m.name.startswith("SignSim seam 1")] \
        == [int(cut["seams"][0]["frame"])]                           # the flagged seam, marked in the file
    assert cut["clips"][0]["frames"] == 120
    # a malformed option value is a usage error (2, docs/cli.md); a missing library or clip an error (1)
    for args, message, status in ((["--window", "1", "2"], "one value or one per seam", 2),
                                  (["--trim", "1-5", ":"], "is not IN:OUT", 2),
                                  (["--clips", "wave_hello", "--library", str(tmp_path / "lib.blend")],
                                   "no motion library", 1),
                                  (["--layer", "HeadNod"], "clip not found: HeadNod", 1)):
        argv = ["compose", "--rig", str(SIGNER), "--out", str(tmp_path / "bad.blend"), "--json"]
        if "--clips" not in args:
            argv += ["--clips", str(mocap / BYE), str(mocap / MIXAMO)]
        assert cli(argv + args) == status, args
        err = capsys.readouterr().err
        assert len(without_progress(err)) == 1 and message in err, err
        assert not (tmp_path / "bad.blend").exists()


@pytest.mark.slow
def test_operator_stores_seams_for_the_panel(addon, signer, shared_data):
    settings = signer.signsim.compose
    bpy.context.view_layer.objects.active = signer
    assert not bpy.ops.signsim.compose.poll()
    for clip in (CHIN, FINGERS):
        bpy.ops.signsim.compose_list_edit(kind='CLIP')
        settings.clips[-1].clip = str(clip)
    settings.clips[1].curve = "linear"
    assert bpy.ops.signsim.compose() == {'FINISHED'}
    item = settings.clips[1]
    assert item.suggested_window > 1 and not item.flagged and 0 < item.velocity_jump and item.worst
    assert not [m for m in bpy.context.scene.timeline_markers if m.name.startswith("SignSim seam")]
    action = signer.animation_data.action
    assert json.loads(action.signsim.compose_report)["seams"][0]["curve"] == "linear"
    item.window = 0
    assert bpy.ops.signsim.compose() == {'FINISHED'}
    assert settings.clips[1].flagged
    markers = [m for m in bpy.context.scene.timeline_markers if m.name.startswith("SignSim seam")]
    assert len(markers) == 1 and markers[0].name.startswith("SignSim seam 1: ")
    flagged = importlib.import_module(addon.__name__ + ".signsim_addon.compose.api").flagged_seams(
        signer.animation_data.action)
    assert [s["index"] for s in flagged] == [1]
    bpy.ops.signsim.compose_list_edit(kind='CLIP', remove=True)
    assert len(settings.clips) == 1


@pytest.mark.slow
def test_foot_lock_and_actions_of_the_file_as_clips(cm, signer, shared_data):
    """With the foot lock (the default) a foot planted across the seam keeps its floor spot
    (Blender's evaluated foot head, within 1 cm) where it slides without; an action already
    in the file (here a composed one) serves as a clip as it is."""
    mocap = shared_data / "mocap"
    walk = cm.ClipSpec(str(mocap / "cmu_01_01_cgspeed__fairmotion.bvh"), 1025, 1457)   # steps, 120 fps
    locked = cm.compose(signer, [walk, walk])
    held = [p for p in locked["seams"][0]["plants"] if p["held"]]
    assert locked["foot_lock"] and held, "a walk has a foot planted across the seam"
    free = cm.compose(signer, [walk, walk], foot_lock=False)
    assert not free["foot_lock"] and not free["seams"][0]["plants"]
    slide = {}
    for result in (locked, free):
        signer.animation_data.action = bpy.data.actions[result["action"]]
        for p in held:
            points = []
            for f in range(int(p["frames"][0]), int(p["frames"][1]) + 1):
                bpy.context.scene.frame_set(f)
                points.append(np.array(signer.matrix_world @ signer.pose.bones[p["bone"]].head))
            points = np.array(points)
            slide[result["foot_lock"], p["bone"]] = np.linalg.norm(points[:, :2] - points[:1, :2], axis=-1).max()
    assert max(v for (lock, _b), v in slide.items() if lock) <= 0.01
    assert max(v for (lock, _b), v in slide.items() if not lock) > 0.01

    clips = [cm.ClipSpec(str(mocap / MIXAMO)), cm.ClipSpec(str(mocap / BYE))]
    result = cm.compose(signer, clips)
    first = result["action"]
    again = cm.compose(signer, [cm.ClipSpec(first, trim_out=100), cm.ClipSpec(str(mocap / BYE))])
    assert again["clips"][0]["frames"] == 100
    a, _f = keyed(bpy.data.actions[first], signer)
    b, _f = keyed(bpy.data.actions[again["action"]], signer)
    for bone in ("hand.L", "f_index.02.R", "spine"):
        np.testing.assert_allclose(b[bone][0][:50], a[bone][0][:50], atol=1e-6)    # windows ≤ half a clip


@pytest.mark.slow
def test_library_clip_and_its_file_compose_the_same(addon, cm, shared_data, tmp_path):
    """One way onto the rig: a library clip by name gives the keys its mocap file gives."""
    mocap = shared_data / "mocap"
    lib = tmp_path / "lib.blend"
    addon.signsim_addon.library.api.import_paths([str(mocap / MIXAMO)], str(lib))
    bpy.ops.wm.open_mainfile(filepath=str(SIGNER))
    signer = bpy.data.objects["Signer"]
    by_file = cm.compose(signer, [cm.ClipSpec(str(mocap / BYE)), cm.ClipSpec(str(mocap / MIXAMO))])
    by_name = cm.compose(signer, [cm.ClipSpec(str(mocap / BYE)), cm.ClipSpec(MIXAMO[:-4])], library_path=str(lib))
    assert by_name["seams"][0]["window"] == by_file["seams"][0]["window"]
    a, _f = keyed(bpy.data.actions[by_file["action"]], signer)
    b, _f = keyed(bpy.data.actions[by_name["action"]], signer)
    for bone in a:
        np.testing.assert_allclose(b[bone][0], a[bone][0], atol=1e-6)
    assert [o.name for o in bpy.data.objects if o.type == 'ARMATURE'] == ["Signer"]


def test_compose_panel_draws_clips_seams_and_flags(addon, signer, shared_data):
    from types import SimpleNamespace
    panels = importlib.import_module(addon.__name__ + ".panels.compose")
    settings = signer.signsim.compose
    for clip in (BYE, MIXAMO):
        settings.clips.add().clip = str(shared_data / "mocap" / clip)
    settings.clips[1].window = 0
    nod_action(signer)
    settings.layers.add().clip = "HeadNod"
    settings.clip_index = 1
    bpy.context.view_layer.objects.active = signer
    assert bpy.ops.signsim.compose() == {'FINISHED'}
    drawn = draw(panels.SIGNSIM_PT_compose, SimpleNamespace(active_object=signer))
    assert "signsim.compose" in drawn.operators
    assert {"clips", "layers"} <= {d["property"] for d in drawn.kinds("template_list")}
    assert {"trim_in", "trim_out", "window", "curve", "threshold", "keep_height", "foot_lock"} <= drawn.props
    labels = " ".join(drawn.labels)
    assert "1 flagged seam" in labels and "Seam 1 at frame" in labels and "Suggested window:" in labels
    assert "in one frame (limit" in labels and "Worst bones:" in labels          # the worst bones
    for index, item in enumerate(settings.clips):      # the list rows: window, suggestion, flag
        row = Layout()
        panels.SIGNSIM_UL_compose_clips.draw_item(None, None, row, settings, item, 0, settings, "clip_index", index)
        assert ("window" in row.drawn.props) == (index > 0)
    row = Layout()
    panels.SIGNSIM_UL_compose_layers.draw_item(None, None, row, settings, settings.layers[0], 0, settings,
                                               "layer_index", 0)
    assert row.drawn.props == {"clip", "weight"}


def test_cli_layer_weight_is_range_checked_and_reported(addon, tmp_path, capsys):
    cli = addon.signsim_addon.cli.main
    spell = ROOT / "sample_blends" / "fingerspelling.bvh"
    base = ["compose", "--clips", str(CHIN), "--rig", str(SIGNER), "--layer", str(spell), "--layer-bones", "head"]
    for bad in ("5", "-0.1", "nan"):
        out = tmp_path / "bad.blend"
        assert cli([*base, "--layer-weight", bad, "--out", str(out)]) == 2  # out of range: a usage error (docs/cli.md)
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--layer-weight" in err[0] and "outside 0–1" in err[0], err
        assert not out.exists()
    assert cli([*base, "--layer-weight", "0.25", "--out", str(tmp_path / "ok.blend"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["layers"] == [{"clip": str(spell), "bones": ["head"], "start": 0, "weight": 0.25}]


def test_cli_compose_takes_the_first_clips_rate(addon, tmp_path, capsys):
    """The sequence takes the first clip's own rate (issue 37): chin_cheek declared at 120
    fps then fingerspelling (30 fps, resampled to 120 and warned); --fps rig keeps the
    signer file's 30 fps and resamples the first clip instead; --fps abc is a usage error."""
    cli = addon.signsim_addon.cli.main
    fast = tmp_path / "chin_120.bvh"
    fast.write_text(CHIN.read_text().replace("Frame Time: 0.033333", "Frame Time: 0.0083333"))
    base = ["compose", "--clips", str(fast), str(FINGERS), "--rig", str(SIGNER), "--json"]
    runs = {}
    for name, extra in (("own", []), ("rig", ["--fps", "rig"])):
        code = cli(base + ["--out", str(tmp_path / f"{name}.blend"), *extra])
        captured = capsys.readouterr()
        assert code == 0, captured.err
        runs[name] = json.loads(captured.out.strip().splitlines()[-1])
    own, rig = runs["own"], runs["rig"]
    assert own["fps"] == 120 and rig["fps"] == 30
    assert [w for w in own["warnings"] if "resampled" in w] == \
        ["the clip's 30 fps resampled to the scene's 120 fps: 135 frames became 537"]
    assert [w for w in rig["warnings"] if "resampled" in w] == \
        ["the clip's 120 fps resampled to the scene's 30 fps: 91 frames became 23"]
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "own.blend"))
    assert bpy.context.scene.render.fps / bpy.context.scene.render.fps_base == 120
    assert cli(base + ["--out", str(tmp_path / "bad.blend"), "--fps", "abc"]) == 2
    err = capsys.readouterr().err
    assert len(without_progress(err)) == 1 and "--fps" in err and "frame rate" in err, err
    assert not (tmp_path / "bad.blend").exists()

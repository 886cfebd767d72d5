"""The physics bake on the bundled signer: a new action, the reference untouched, metrics."""
import json
import pathlib

import bpy
import numpy as np
import pytest
from mathutils import Vector

from action_keys import all_keys

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample_blends"
SHORT = (1, 12)  # frames: enough for every code path, quick to solve


@pytest.fixture
def mods(addon):
    a = addon.signsim_addon
    return a.bake.api, a.keys, a.errors.SignSimError


def _open(path):
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    rig = bpy.data.objects["Signer"]
    bpy.context.view_layer.objects.active = rig
    return rig


@pytest.mark.slow
def test_bake_writes_a_new_action_and_never_modifies_the_reference(retargeted, mods):
    bake, keys, _ = mods
    rig = _open(retargeted)
    ref = rig.animation_data.action
    before = all_keys(ref)
    assert bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    new = rig.animation_data.action
    assert new.name == ref.name + ".physics" and new != ref
    after = all_keys(bpy.data.actions[ref.name])
    assert before.keys() == after.keys()
    assert all(np.array_equal(before[k], after[k]) for k in before)
    assert new.signsim.reference_action == ref
    metrics = json.loads(new.signsim.bake_metrics)
    assert set(metrics) == {"reference", "baked", "contact_pairs", "held_overlap_mm", "contacts_honoured",
                            "limits_widened", "hinges_freed",
                            "warnings"}
    # a key on every frame of the range for every simulated bone, hemispheres continuous
    bag = keys.channelbag(new, rig.animation_data.action_slot)
    fc = bag.fcurves.find(keys.bone_path("f_index.02.R", "rotation_quaternion"), index=0)
    assert len(fc.keyframe_points) == SHORT[1] - SHORT[0] + 1
    q = np.array([[bag.fcurves.find(keys.bone_path("thumb.03.R", "rotation_quaternion"), index=k)
                   .evaluate(f) for k in range(4)] for f in range(SHORT[0], SHORT[1] + 1)])
    assert np.all(np.sum(q[1:] * q[:-1], axis=1) > 0)


@pytest.mark.slow
def test_two_bakes_are_bit_identical(retargeted, mods):
    bake, _, _ = mods
    rig = _open(retargeted)
    runs = []
    for _ in range(2):
        job = bake.prepare(bpy.context.scene, rig, frame_range=SHORT)
        runs.append(bake.solve(job).rotations)
    assert runs[0].tobytes() == runs[1].tobytes()
    new = [bake.write(bpy.context.scene, job, bake.Solved(r, {"baked": {}, "reference": {}})) for r in runs]
    a, b = (all_keys(n) for n in new)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_undo_restores_the_files_actions(retargeted):
    """Ctrl+Z after a bake: Blender's global undo restores the file's actions.

    The bpy module keeps an undo stack only for a file with UI (read_homefile()) and
    ed.undo needs a screen in the context; opening a .blend or assigning the active
    object directly leaves no undo step to return to, so the rig is appended instead.
    """
    bpy.ops.wm.read_homefile()
    with bpy.data.libraries.load(str(retargeted), link=False) as (src, dst):
        dst.objects = list(src.objects)
    for ob in dst.objects:
        bpy.context.scene.collection.objects.link(ob)
    rig = bpy.data.objects["Signer"]
    names = sorted(a.name for a in bpy.data.actions)
    assigned = rig.animation_data.action.name
    bpy.ops.ed.undo_push(message="before bake")
    with bpy.context.temp_override(active_object=rig, object=rig):
        # EXEC_DEFAULT with undo=True pushes the operator's own undo step, as the button does
        assert bpy.ops.signsim.bake('EXEC_DEFAULT', True, frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    assert sorted(a.name for a in bpy.data.actions) != names
    with bpy.context.temp_override(screen=bpy.data.screens[0]):
        assert bpy.ops.ed.undo() == {'FINISHED'}
    assert sorted(a.name for a in bpy.data.actions) == names
    assert bpy.data.objects["Signer"].animation_data.action.name == assigned


def test_cancelled_bake_leaves_no_new_action(retargeted, mods):
    bake, _, _ = mods
    rig = _open(retargeted)
    names = sorted(a.name for a in bpy.data.actions)
    worker = bake.BakeWorker(bake.prepare(bpy.context.scene, rig))
    worker.cancel()
    worker.start().join(60)
    assert worker.done.is_set() and isinstance(worker.error, bake.BakeCancelled)
    assert worker.result is None
    assert sorted(a.name for a in bpy.data.actions) == names


@pytest.mark.slow
def test_key_reduction_stays_within_tolerance(retargeted, mods, addon):
    bake, keys, _ = mods
    rig = _open(retargeted)
    job = bake.prepare(bpy.context.scene, rig, frame_range=(1, 40))
    solved = bake.solve(job)
    tol = 0.5
    new = bake.write(bpy.context.scene, job, solved, key_tolerance_deg=tol)
    bag = keys.channelbag(new, rig.animation_data.action_slot)
    quat = addon.solver.core.quat
    total = 0
    for j, name in enumerate(job.rig.bone_names):
        fcs = [bag.fcurves.find(keys.bone_path(name, "rotation_quaternion"), index=k) for k in range(4)]
        total += len(fcs[0].keyframe_points)
        played = np.array([[fc.evaluate(f) for fc in fcs] for f in job.frames])
        err = np.degrees(quat.angle_between(quat.normalize(played), solved.rotations[:, j]))
        assert err.max() <= tol + 1e-3, name
    assert total < 0.8 * len(job.rig.bone_names) * len(job.frames)


@pytest.mark.slow
def test_nla_output_stacks_the_bake_over_the_reference(retargeted, mods):
    bake, _, _ = mods
    rig = _open(retargeted)
    ref = rig.animation_data.action
    rig.signsim.physics.output_mode = 'NLA'
    assert bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    tracks = rig.animation_data.nla_tracks
    assert [t.name for t in tracks] == [bake.TRACK_REFERENCE, bake.TRACK_PHYSICS]
    assert tracks[0].strips[0].action == ref
    assert tracks[1].strips[0].action.name == ref.name + ".physics"
    assert rig.animation_data.action is None
    assert bpy.ops.signsim.preview_toggle() == {'FINISHED'} and tracks[1].mute


def test_preview_switches_and_ghost_plays_the_reference(retargeted):
    rig = _open(retargeted)
    ref = rig.animation_data.action
    assert bpy.ops.signsim.preview_toggle.poll() is False  # nothing baked yet
    bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1])
    baked = rig.animation_data.action
    bpy.ops.signsim.preview_toggle()
    assert rig.animation_data.action == ref
    bpy.ops.signsim.preview_toggle()
    assert rig.animation_data.action == baked
    bpy.ops.signsim.reference_ghost()
    ghost = bpy.data.objects["Signer.reference_ghost"]
    assert ghost.animation_data.action == ref and ghost.data == rig.data
    bpy.ops.signsim.reference_ghost()
    assert "Signer.reference_ghost" not in bpy.data.objects


def test_bad_input_is_one_clear_error_and_writes_nothing(retargeted, mods):
    bake, _, SignSimError = mods
    rig = _open(retargeted)
    names = sorted(a.name for a in bpy.data.actions)
    body = bpy.data.objects["SignerBody"]
    with pytest.raises(SignSimError, match="not an armature"):
        bake.prepare(bpy.context.scene, body)
    empty = bpy.data.actions.new("empty")
    slot = empty.slots.new('OBJECT', "Signer")
    with pytest.raises(SignSimError, match="no keyframes"):
        bake.prepare(bpy.context.scene, rig, action=empty)
    bpy.data.actions.remove(empty)
    del slot
    arm = bpy.data.armatures.new("stub")
    stub = bpy.data.objects.new("stub", arm)
    bpy.context.scene.collection.objects.link(stub)
    bpy.context.view_layer.objects.active = stub
    bpy.ops.object.mode_set(mode='EDIT')
    for name, head, tail, parent in (("hips", (0, 0, 1), (0, 0, 1.1), None),
                                     ("chest", (0, 0, 1.1), (0, 0, 1.4), "hips")):
        b = arm.edit_bones.new(name)
        b.head, b.tail = head, tail
        b.parent = arm.edit_bones.get(parent) if parent else None
    bpy.ops.object.mode_set(mode='OBJECT')
    with pytest.raises(SignSimError):
        bake.prepare(bpy.context.scene, stub, action=rig.animation_data.action)
    assert sorted(a.name for a in bpy.data.actions) == names


def test_rig_without_a_mesh_bakes_with_default_capsules_and_no_face(retargeted, mods):
    bake, _, _ = mods
    rig = _open(retargeted)
    for name in ("SignerBody", "SignerFace"):
        bpy.data.objects.remove(bpy.data.objects[name])
    for b in rig.data.bones:
        del b["signsim_capsule_radius"]
    warnings = []
    job = bake.prepare(bpy.context.scene, rig, frame_range=SHORT, report=lambda level, m: warnings.append(m))
    assert job.rig.face is None
    assert any("default radii" in w for w in warnings) and any("face" in w for w in warnings)
    assert np.all(np.isfinite(bake.solve(job).rotations))


@pytest.fixture(scope="module")
def cli_bake(retargeted, addon, tmp_path_factory, request):
    """One `signsim bake` of the retargeted clip with every output asked for (--metrics,
    --picture, --json) at the default preset: (exit code, the --json result, out, metrics
    path, picture path). The metrics-contract and contact-sheet tests assert on it instead
    of each baking the whole clip again; --picture (a render in a subprocess) only when the
    contact-sheet test (marked slow) is in the run."""
    import contextlib
    import io
    tmp = tmp_path_factory.mktemp("cli_bake")
    out, metrics, png = tmp / "baked.blend", tmp / "m.json", tmp / "sheet.png"
    picture = any(i.name == "test_cli_bake_renders_a_before_after_contact_sheet" for i in request.session.items)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = addon.signsim_addon.cli.main(["bake", "--blend", str(retargeted), "--armature", "Signer",
                                             "--preset", "default", "--out", str(out), "--metrics", str(metrics),
                                             *(["--picture", str(png)] if picture else []), "--json"])
    result = json.loads(printed.getvalue().strip().splitlines()[-1]) if code == 0 else None
    return code, result, out, metrics, png


@pytest.mark.compat
@pytest.mark.slow
def test_cli_bake_prints_the_metrics_contract(cli_bake):
    code, result, out, metrics, _png = cli_bake
    assert code == 0
    assert result["action"].endswith(".physics") and out.is_file()
    keys = {"tracking_rms_deg", "lag_ms", "jerk_cost", "penetration_max_mm", "penetration_p95_mm",
            "frames_penetrating", "joint_limit_excess_deg", "substeps_mean", "fallbacks",
            "bake_seconds", "realtime_factor"}
    for side in ("reference", "baked"):
        assert keys <= set(result["metrics"][side])
    assert json.loads(metrics.read_text()) == result["metrics"]
    m = result["metrics"]
    # the verdict: written with the metrics; 'check' exactly when the bake warns (exit 0 without --strict)
    assert result["verdict"] == m["verdict"] == ("check" if m["warnings"] else "ok")
    # The main job's promise on the bundled fingerspelling clip:
    assert m["baked"]["jerk_cost"] < m["reference"]["jerk_cost"]
    assert m["baked"]["penetration_max_mm"] < m["reference"]["penetration_max_mm"]
    # The reference's fingers sink up to 4 mm into the palm's skin, which the bake removes
    # by bending them back: that deviation is tracking error too.
    assert m["baked"]["tracking_rms_deg"] <= 3.5
    assert not any("fell back" in w for w in result["warnings"])
    assert abs(m["baked"]["lag_ms"]) <= 1000.0 / 30.0
    assert m["baked"]["fallbacks"] == 0


@pytest.mark.slow
def test_cli_bake_strict_exits_3_on_a_bake_to_check(retargeted, addon, tmp_path, capsys):
    """--strict: a written bake whose verdict is 'check' (it warns) exits 3 with one stderr
    line after the progress lines; the file and the JSON are still written (the demo clip's bake warns)."""
    out = tmp_path / "strict.blend"
    code = addon.signsim_addon.cli.main(["bake", "--blend", str(retargeted), "--armature", "Signer", "--preset",
                                         "default", "--out", str(out), "--strict", "--json"])
    captured = capsys.readouterr()
    result = json.loads(captured.out.strip().splitlines()[-1])
    assert result["verdict"] == "check" and result["warnings"]
    assert code == 3 and out.is_file()
    # stderr: progress lines of the long stages (with --json), then the one verdict line
    lines = captured.err.strip().splitlines()
    assert lines[-1:] == [f"signsim: the bake is written to {out} but its verdict is 'check'"]
    assert all(line.startswith("[bake ") for line in lines[:-1]), lines


def test_cli_bake_errors_write_nothing(retargeted, addon, tmp_path, capsys):
    out = tmp_path / "never.blend"
    code = addon.signsim_addon.cli.main(["bake", "--blend", str(retargeted), "--armature", "Nobody",
                                         "--out", str(out)])
    assert code == 1 and not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Nobody" in err[0] and "Signer" in err[0]


@pytest.mark.slow
def test_per_frame_metric_curves_agree_with_the_metrics_json(retargeted, mods):
    bake, keys, _ = mods
    rig = _open(retargeted)
    assert bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    new = rig.animation_data.action
    metrics = json.loads(new.signsim.bake_metrics)
    bag = keys.channelbag(new, rig.animation_data.action_slot)
    for prop, side, key in bake.METRIC_CURVES:
        fc = bag.fcurves.find(f'["{prop}"]')
        assert prop in rig and fc is not None, prop
        played = [fc.evaluate(f) for f in range(SHORT[0], SHORT[1] + 1)]
        np.testing.assert_allclose(played, metrics[side][key], atol=1e-4)
    assert max(metrics["baked"]["per_frame_penetration_mm"]) == pytest.approx(
        metrics["baked"]["penetration_max_mm"], abs=1e-3)


@pytest.mark.slow
def test_cli_bake_renders_a_before_after_contact_sheet(cli_bake, addon):
    code, result, _out, _metrics, png = cli_bake
    assert code == 0
    assert result["picture"] == str(png)
    img = bpy.data.images.load(str(png))
    sheet = addon.signsim_addon.bake.api.contact_sheet
    assert tuple(img.size) == (sheet.SHEET_FRAMES * sheet.SIZE, 2 * sheet.SIZE)
    px = np.empty(img.size[0] * img.size[1] * 4, dtype=np.float32)
    img.pixels.foreach_get(px)
    rgb = px.reshape(img.size[1], img.size[0], 4)[..., :3]
    assert rgb.std() > 0.05  # a rendered figure, not an empty frame


@pytest.mark.slow
def test_baking_again_starts_from_the_reference_not_the_bake(retargeted, mods):
    bake, _, _ = mods
    rig = _open(retargeted)
    ref = rig.animation_data.action
    assert bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    assert bake.reference_of(rig) == ref
    rig.signsim.physics.fingers_frequency *= 2.0
    assert bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    second = rig.animation_data.action
    assert second.signsim.reference_action == ref and second.name.startswith(ref.name + ".physics")
    rig.signsim.physics.output_mode = 'NLA'
    assert bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    assert rig.animation_data.nla_tracks[bake.TRACK_REFERENCE].strips[0].action == ref
    assert bake.reference_of(rig) == ref


def test_cli_outputs_never_overwrite_inputs_or_each_other(retargeted, addon, tmp_path, capsys):
    cli = addon.signsim_addon.cli.main
    before = retargeted.read_bytes()
    out = tmp_path / "baked.blend"
    for extra in (["--metrics", str(retargeted)], ["--picture", str(retargeted)], ["--metrics", str(out)],
                  ["--metrics", str(tmp_path / "missing" / "m.json")]):
        code = cli(["bake", "--blend", str(retargeted), "--armature", "Signer", "--out", str(out), *extra])
        assert code == 1 and len(capsys.readouterr().err.strip().splitlines()) == 1
    assert retargeted.read_bytes() == before and not out.exists()
    rig = SAMPLES / "signer.blend"
    rig_bytes = rig.read_bytes()
    for cmd in (["retarget", "--clip", str(SAMPLES / "chin_cheek.bvh")],
                ["compose", "--clips", str(SAMPLES / "chin_cheek.bvh"), str(SAMPLES / "fingerspelling.bvh")]):
        assert cli([*cmd, "--rig", str(rig), "--out", str(rig)]) == 1
        assert "overwrite" in capsys.readouterr().err
    assert rig.read_bytes() == rig_bytes


def _in_view(scene, cam, points):
    from bpy_extras.object_utils import world_to_camera_view
    uv = np.array([tuple(world_to_camera_view(scene, cam, Vector(p))) for p in points])
    return uv, bool(((uv[:, :2] > 0) & (uv[:, :2] < 1)).all() and (uv[:, 2] > 0).all())


@pytest.mark.parametrize("character", ["signer", "signer moved down and aside", "godot glTF"])
def test_contact_sheet_camera_frames_the_head_and_hands(addon, shared_data, character):
    """The sheet's camera sees the whole head (its highest bone, and the skin above it) and both
    hands, for the bundled signer, the same rig with its origin elsewhere, and a glTF
    character whose armature origin is 1 m below the world origin."""
    sheet = addon.signsim_addon.bake.contact_sheet
    if character == "godot glTF":
        bpy.ops.import_scene.gltf(filepath=str(shared_data / "characters" / "godot_male_base_mesh_cc0.glb"))
    else:
        bpy.ops.wm.open_mainfile(filepath=str(SAMPLES / "signer.blend"))
    scene = bpy.context.scene
    rig = next(o for o in scene.objects if o.type == 'ARMATURE')
    if character == "signer moved down and aside":
        rig.location = (0.7, 0.3, -1.0)
    frames = [scene.frame_start, scene.frame_start + 10]
    cam = sheet.frame_camera(scene, rig, frames)
    for frame in frames:
        scene.frame_set(frame)
        mw = rig.matrix_world
        ends = {b.name: (mw @ b.head, mw @ b.tail) for b in rig.pose.bones}
        head = max(ends, key=lambda n: ends[n][1].z)                 # the top of the head chain
        dg = bpy.context.evaluated_depsgraph_get()
        skin = [o for o in scene.objects if o.type == 'MESH' and o.parent == rig]
        top = max(((o.matrix_world @ v.co) for o in skin for v in o.evaluated_get(dg).to_mesh().vertices),
                  key=lambda p: p.z)
        hands = [p for n, e in ends.items() if n.startswith("hand") for p in e]
        uv, inside = _in_view(scene, cam, [*ends[head], top, *hands])
        assert inside, (character, head, uv)
        # framed, not lost in the distance: the head fills a visible part of the picture
        assert uv[:3, 1].max() - uv[:3, 1].min() > 0.05

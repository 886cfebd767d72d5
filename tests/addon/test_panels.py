"""Sidebar panels: drawn under the real bpy into a recording layout, and the
logic behind their buttons: schedules, presets, metrics table and exports, translations."""
import csv
import json
import os
import pathlib
import re
import types

import bpy
import numpy as np
import pytest

from action_keys import all_keys
from ui_recorder import draw, signsim_panels

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SAMPLES = ROOT / "sample_blends"
SHORT = (1, 12)
MY_PANELS = {"SIGNSIM_PT_physics", "SIGNSIM_PT_schedule", "SIGNSIM_PT_bake", "SIGNSIM_PT_metrics"}


@pytest.fixture(scope="module")
def baked(retargeted, tmp_path_factory):
    """The retargeted file after `signsim.bake` of frames 1–12 (saved once per module)."""
    rig = _open(retargeted)
    assert bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1]) == {'FINISHED'}
    out = tmp_path_factory.mktemp("panels") / "baked.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(out), copy=True)
    assert rig.animation_data.action.name.endswith(".physics")
    return out


@pytest.fixture
def mods(addon):
    a = addon.signsim_addon
    api = a.bake.api
    return types.SimpleNamespace(bake=api, schedule=api.schedule, metrics_report=api.metrics_report,
                                 physics_presets=api.physics_presets, keys=a.keys,
                                 errors=a.errors, translations=a.translations,
                                 settings=addon.solver.core.settings)


def _open(path):
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    rig = bpy.data.objects["Signer"]
    bpy.context.view_layer.objects.active = rig
    return rig


def _draw_all():
    panels = signsim_panels()
    return {getattr(p, "bl_idname", "") or p.__name__: draw(p) for p in panels}


def _fresh_armature():
    arm = bpy.data.armatures.new("Rig")
    ob = bpy.data.objects.new("Rig", arm)
    bpy.context.scene.collection.objects.link(ob)
    bpy.context.view_layer.objects.active = ob
    return ob


# --- drawing --------------------------------------------------------------------------

def test_signsim_tab_has_the_issue_panels_in_order(addon):
    assert MY_PANELS <= {getattr(p, "bl_idname", "") or p.__name__ for p in signsim_panels()}
    names = [c.__name__ for c in addon.panels.classes]  # registration order = sidebar order
    assert names.index("SIGNSIM_PT_physics") < names.index("SIGNSIM_PT_schedule") \
        < names.index("SIGNSIM_PT_bake") < names.index("SIGNSIM_PT_metrics")
    assert {"SIGNSIM_PT_main", "SIGNSIM_PT_library", "SIGNSIM_PT_retarget"} <= set(names)


def test_every_panel_draws_in_an_empty_scene():
    drawn = _draw_all()
    assert all(d is not None for d in drawn.values())
    for name in ("SIGNSIM_PT_physics", "SIGNSIM_PT_schedule", "SIGNSIM_PT_bake"):
        assert drawn[name].labels == ["Select an armature"] and not drawn[name].operators
    assert drawn["SIGNSIM_PT_metrics"].labels == ["Bake an armature to see its metrics"]
    assert "signsim.append_sample" in drawn["SIGNSIM_PT_main"].operators


def test_every_panel_draws_for_a_rig_without_settings(mods):
    _fresh_armature()
    drawn = _draw_all()
    physics = drawn["SIGNSIM_PT_physics"]
    groups = mods.bake.GROUPS
    assert {f"{g}_{k}" for g in groups for k in ("frequency", "damping")} <= physics.props
    assert {"contact_stiffness", "contact_damping", "target_depth_mm", "use_schedule", "feedforward",
            "max_substeps", "simulate_parts", "face_object"} <= physics.props
    assert [d["menu"] for d in physics.kinds("menu")] == ["SIGNSIM_MT_physics_presets"]
    assert physics.operator_args("signsim.physics_preset_add") == [{}, {"remove_active": True}]
    schedule = drawn["SIGNSIM_PT_schedule"]
    assert "contact_multiplier" in schedule.props
    assert "Add an action to key a schedule" in schedule.labels
    bake = drawn["SIGNSIM_PT_bake"]
    assert {"output_mode", "key_tolerance_deg", "bake_use_range", "bake_frame_start",
            "bake_frame_end"} <= bake.props
    assert bake.operators == ["signsim.bake", "signsim.preview_toggle", "signsim.reference_ghost"]
    assert "The armature has no action to bake" in bake.labels
    assert drawn["SIGNSIM_PT_metrics"].labels == ["Bake an armature to see its metrics"]
    assert drawn["SIGNSIM_PT_retarget"].operators  # the other panels still draw


@pytest.mark.slow
def test_panels_on_a_rig_with_its_reference_action(retargeted):
    rig = _open(retargeted)
    s = bpy.context.scene.signsim
    s.schedule_frame_start, s.schedule_frame_end = 3, 9
    s.bake_use_range, s.bake_frame_start, s.bake_frame_end = True, 2, 20
    drawn = _draw_all()
    schedule = drawn["SIGNSIM_PT_schedule"]
    assert {"contact_multiplier", "schedule_frame_start", "schedule_frame_end"} <= schedule.props
    assert schedule.operator_args("signsim.schedule_phase") == [
        {"phase": p, "frame_start": 3, "frame_end": 9} for p in ("HOLD", "TRANSITION", "CONTACT")]
    assert "No schedule: the multiplier is constant" in schedule.labels
    assert "signsim.schedule_auto" in schedule.operators
    bake = drawn["SIGNSIM_PT_bake"]
    assert bake.operator_args("signsim.bake") == [{"frame_start": 2, "frame_end": 20}]
    assert f"Reference: {rig.animation_data.action.name}" in bake.labels


@pytest.mark.slow
def test_every_panel_draws_after_a_bake(baked, mods):
    rig = _open(baked)
    action = rig.animation_data.action
    metrics = json.loads(action.signsim.bake_metrics)
    drawn = _draw_all()
    m = drawn["SIGNSIM_PT_metrics"]
    assert action.name in m.labels
    for label in ("Metric", "Before", "After", "Tracking Error (RMS)", "Penetration Max",
                  "Jerk Cost", "Tracking per Group (°)", "Fingers", "Thumb"):
        assert label in m.labels, label
    icons = {d["icon"] for d in m.kinds("label")}
    assert icons & {"CHECKMARK", "ERROR"}  # better/worse marks
    assert m.operators == ["signsim.metrics_worst_frame", "signsim.metrics_export_csv",
                           "signsim.metrics_export_json", "signsim.metrics_show_curves"]
    for r in mods.metrics_report.table_rows(metrics):
        assert r.text(r.before) in m.labels and r.text(r.after) in m.labels, r.key
    assert {f'["{p}"]' for p, _s, _k in mods.bake.METRIC_CURVES} <= m.props
    bake = drawn["SIGNSIM_PT_bake"]
    assert any(t.startswith("Showing the bake") for t in bake.labels)
    schedule = drawn["SIGNSIM_PT_schedule"]
    ref = action.signsim.reference_action
    assert f"Keys go on the reference '{ref.name}'" in schedule.labels


@pytest.mark.slow
def test_metrics_panel_shows_the_projection(baked, mods):
    """A bake with the projection: its target block (frames projected, the largest and
    mean contact-driven change, the time) in its own box; a bake without one draws none."""
    rig = _open(baked)
    action = rig.animation_data.action
    assert "Projection (Target vs Reference)" not in draw(bpy.types.SIGNSIM_PT_metrics).labels
    metrics = json.loads(action.signsim.bake_metrics)
    metrics["target"] = {"projected_frames": 12, "colliding_frames": 14, "largest_change_deg": 17.84,
                         "largest_change_bone": "thumb.01.R", "largest_change_frame": 47.0, "mean_change_deg": 6.51,
                         "projection_seconds": 1.0, "seconds_per_colliding_frame": 0.0089}
    action.signsim.bake_metrics = json.dumps(metrics)
    labels = draw(bpy.types.SIGNSIM_PT_metrics).labels
    assert mods.metrics_report.target_rows(metrics) == [
        ("Projected Frames", "12 (14 colliding)"), ("Largest Change", "17.8° · thumb.01.R · frame 47"),
        ("Mean Change", "6.5°"), ("Projection Time", "1.00 s · 9 ms per colliding frame")]
    for label, text in mods.metrics_report.target_rows(metrics):
        assert label in labels and text in labels
    assert "Projection (Target vs Reference)" in labels


@pytest.mark.slow
def test_metrics_panel_reports_bad_metrics_without_raising(baked):
    rig = _open(baked)
    rig.animation_data.action.signsim.bake_metrics = "{not json"
    drawn = draw(bpy.types.SIGNSIM_PT_metrics)
    assert any("not valid JSON" in t for t in drawn.labels)


# --- stiffness schedule ---------------------------------------------------------------

@pytest.mark.slow
def test_schedule_phases_key_the_multiplier_on_the_reference(retargeted, mods):
    sched = mods.schedule
    assert bpy.ops.signsim.schedule_phase.poll() is False
    rig = _open(retargeted)
    ref = rig.animation_data.action
    assert bpy.ops.signsim.schedule_clear.poll() is False  # nothing to clear yet
    assert bpy.ops.signsim.schedule_phase(phase='CONTACT', frame_start=5, frame_end=8) == {'FINISHED'}
    assert bpy.ops.signsim.schedule_phase(phase='TRANSITION', frame_start=7, frame_end=10) == {'FINISHED'}
    fc = sched.curve(ref, rig.animation_data.action_slot)
    assert fc.data_path == "signsim.physics.contact_multiplier"
    assert sched.curve_keys(fc) == [(5.0, 2.0), (7.0, 0.5), (10.0, 0.5)]
    assert fc.evaluate(6.0) == pytest.approx(1.25)
    # the property evaluates from the curve, as the bake reads it
    bpy.context.scene.frame_set(5)
    assert rig.signsim.physics.contact_multiplier == pytest.approx(2.0)
    assert [r[2] for r in sched.summary(rig)] == ['CONTACT', 'TRANSITION', 'TRANSITION']
    assert bpy.ops.signsim.schedule_clear() == {'FINISHED'}
    assert sched.curve(ref, rig.animation_data.action_slot) is None


@pytest.mark.slow
def test_schedule_from_motion_follows_the_seed_phases(retargeted, mods):
    sched = mods.schedule
    rig = _open(retargeted)
    segments = sched.detect_phases(bpy.context.scene, rig)
    phases = {p for p, _a, _b in segments}
    assert {'CONTACT', 'HOLD'} <= phases  # fingerspelling: thumb meets fingertips, then holds
    assert segments[0][1] == 1 and segments[-1][2] == 135
    assert all(b + 1 == a for (_p, _x, b), (_q, a, _y) in zip(segments, segments[1:]))
    assert all(p != q for (p, _a, _b), (q, _c, _d) in zip(segments, segments[1:]))
    assert bpy.ops.signsim.schedule_auto() == {'FINISHED'}
    drawn = draw(bpy.types.SIGNSIM_PT_schedule)
    keyed = [d for d in drawn.kinds("label") if d["icon"] == 'KEYFRAME']
    assert len(keyed) == min(len(sched.summary(rig)), 12)
    assert "signsim.schedule_clear" in drawn.operators
    fc = sched.curve(rig.animation_data.action, rig.animation_data.action_slot)
    for phase, first, last in segments:
        value = sched.PHASES[phase][1]
        assert fc.evaluate(first) == pytest.approx(value) and fc.evaluate(last) == pytest.approx(value)


@pytest.mark.slow
def test_schedule_errors_are_reports(retargeted):
    _open(retargeted)
    with pytest.raises(RuntimeError, match="empty frame range"):
        bpy.ops.signsim.schedule_phase(phase='HOLD', frame_start=9, frame_end=3)


@pytest.mark.slow
def test_schedule_on_a_bake_goes_to_its_reference(baked, mods):
    rig = _open(baked)
    bake_action = rig.animation_data.action
    ref = bake_action.signsim.reference_action
    bpy.ops.signsim.schedule_phase(phase='HOLD', frame_start=1, frame_end=4)
    slot = ref.slots[rig.animation_data.action_slot.identifier]
    assert mods.schedule.curve(ref, slot) is not None


# --- gains and schedule reach the bake ------------------------------------------------

def _bake_with(path, change=None, frames=SHORT):
    rig = _open(path)
    if change is not None:
        change(rig)
    assert bpy.ops.signsim.bake(frame_start=frames[0], frame_end=frames[1]) == {'FINISHED'}
    return all_keys(rig.animation_data.action, ".rotation_")


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_gains_and_schedule_set_in_the_properties_change_the_next_bake(retargeted):
    base = _bake_with(retargeted)
    again = _bake_with(retargeted)
    assert _same(base, again)  # identical settings: identical keys
    stiffer = _bake_with(retargeted, lambda rig: setattr(rig.signsim.physics, "fingers_frequency", 14.0))
    assert not _same(base, stiffer)

    # The contact schedule matters where something touches: the clip's fingers meet the
    # palm from frame 14 on.
    touching = (12, 24)
    base = _bake_with(retargeted, frames=touching)

    def key_schedule(rig):
        assert bpy.ops.signsim.schedule_phase(phase='TRANSITION', frame_start=touching[0],
                                              frame_end=touching[1]) == {'FINISHED'}
    scheduled = _bake_with(retargeted, key_schedule, touching)
    assert not _same(base, scheduled)

    def key_by_hand(rig):  # the animator's own keys on the property (I key in the sidebar)
        p = rig.signsim.physics
        for frame, value in ((touching[0], 0.3), (touching[1], 3.0)):
            p.contact_multiplier = value
            assert p.keyframe_insert("contact_multiplier", frame=frame)
    by_hand = _bake_with(retargeted, key_by_hand, touching)
    assert not _same(base, by_hand) and not _same(scheduled, by_hand)
    # and the bake recorded which settings it used
    rig = bpy.data.objects["Signer"]
    settings = json.loads(rig.animation_data.action.signsim.bake_settings)
    assert settings["gains"]["fingers"][0] == pytest.approx(8.0)


# --- presets --------------------------------------------------------------------------

def test_shipped_presets_are_up_to_date_and_listed(mods):
    pp = mods.physics_presets
    for path, text in pp.shipped_files().items():
        with open(path, encoding="utf-8") as f:
            assert f.read() == text, f"{path} is stale: run physics_presets.write_shipped()"
    names = {os.path.basename(p) for p in pp.preset_files()}
    assert {"Soft.py", "Default.py", "Stiff.py"} <= names


def test_applying_and_adding_presets_changes_the_settings(mods):
    pp = mods.physics_presets
    ob = _fresh_armature()
    p = ob.signsim.physics
    soft = next(f for f in pp.preset_files() if f.endswith("Soft.py"))
    assert bpy.ops.script.execute_preset(filepath=soft, menu_idname=pp.MENU) == {'FINISHED'}
    assert p.fingers_frequency == pytest.approx(8.0 * mods.settings.PRESETS["soft"].frequency_scale)
    assert p.contact_stiffness == pytest.approx(mods.settings.PRESETS["soft"].contact_stiffness)
    # the user's own preset
    p.fingers_frequency, p.wrist_damping = 11.5, 0.7
    assert bpy.ops.signsim.physics_preset_add(name="My Signer") == {'FINISHED'}
    mine = next(f for f in pp.preset_files() if f.endswith("My_Signer.py"))
    p.fingers_frequency, p.wrist_damping = 3.0, 1.0
    bpy.ops.script.execute_preset(filepath=mine, menu_idname=pp.MENU)
    assert (p.fingers_frequency, p.wrist_damping) == (pytest.approx(11.5), pytest.approx(0.7))
    os.remove(mine)


def test_preset_add_needs_an_armature():
    assert bpy.ops.signsim.physics_preset_add.poll() is False


# --- metrics: table, worst frame, exports ---------------------------------------------

def test_metric_rows_mark_better_and_worse(mods):
    mr = mods.metrics_report
    m = {"reference": {"tracking_rms_deg": 0.0, "jerk_cost": 10.0, "penetration_max_mm": 2.0,
                       "frames_penetrating": 5},
         "baked": {"tracking_rms_deg": 1.5, "jerk_cost": 8.0, "penetration_max_mm": 3.0,
                   "frames_penetrating": 5, "tracking_rms_deg_per_group": {"fingers": 2.0}}}
    rows = {r.key: r for r in mr.table_rows(m)}
    assert rows["jerk_cost"].verdict == 'BETTER' and rows["penetration_max_mm"].verdict == 'WORSE'
    assert rows["frames_penetrating"].verdict == 'SAME' and rows["tracking_rms_deg"].verdict == ''
    assert rows["penetration_max_mm"].text(3.0) == "3.000 mm"
    assert mr.group_rows(m) == [("fingers", 2.0)]
    with pytest.raises(mods.errors.SignSimError):
        mr.parse('{"baked": {}}')


@pytest.mark.slow
def test_jump_to_worst_frame(baked, mods):
    rig = _open(baked)
    assert bpy.ops.signsim.metrics_worst_frame() == {'FINISHED'}
    metrics = json.loads(rig.animation_data.action.signsim.bake_metrics)
    pen = metrics["baked"]["per_frame_penetration_mm"]
    assert bpy.context.scene.frame_current == SHORT[0] + int(np.argmax(pen))
    bpy.ops.wm.read_homefile(use_empty=True)
    assert bpy.ops.signsim.metrics_worst_frame.poll() is False


@pytest.mark.slow
def test_csv_and_json_exports_agree_with_the_metrics_and_the_curves(baked, mods, tmp_path):
    rig = _open(baked)
    action = rig.animation_data.action
    metrics = json.loads(action.signsim.bake_metrics)
    csv_path, json_path = tmp_path / "m.csv", tmp_path / "m.json"
    assert bpy.ops.signsim.metrics_export_csv(filepath=str(csv_path)) == {'FINISHED'}
    assert bpy.ops.signsim.metrics_export_json(filepath=str(json_path)) == {'FINISHED'}

    doc = json.loads(json_path.read_text(encoding="utf-8"))
    assert doc["metrics"] == metrics and doc["action"] == action.name
    assert doc["reference_action"] == action.signsim.reference_action.name
    assert doc["frames"] == list(map(float, range(SHORT[0], SHORT[1] + 1)))
    assert doc["settings"] == json.loads(action.signsim.bake_settings)

    text = csv_path.read_text(encoding="utf-8")
    header = next(csv.reader(text.splitlines()))
    assert header == ["metric", "unit", "group", "frame", "reference", "baked"]
    back = mods.metrics_report.read_csv(text)
    for r in mods.metrics_report.table_rows(metrics):
        assert back["baked"][r.key] == pytest.approx(r.after)
        assert back["reference"][r.key] == pytest.approx(r.before)
    assert back["baked"]["tracking_rms_deg_per_group"] == pytest.approx(
        metrics["baked"]["tracking_rms_deg_per_group"])
    assert back["frames"] == doc["frames"]
    bag = mods.keys.channelbag(action, rig.animation_data.action_slot)
    for prop, side, key in mods.bake.METRIC_CURVES:
        assert back[side][key] == pytest.approx(metrics[side][key])
        fc = bag.fcurves.find(f'["{prop}"]')
        np.testing.assert_allclose([fc.evaluate(f) for f in back["frames"]], back[side][key], atol=1e-4)


@pytest.mark.slow
def test_metric_curves_need_a_graph_editor(baked):
    _open(baked)  # the bpy module has no window, hence no Graph Editor
    # what show_curves sets on a Graph Editor exists in Blender's RNA
    assert {"show_only_selected", "filter_text"} <= set(bpy.types.DopeSheet.bl_rna.properties.keys())
    assert "dopesheet" in bpy.types.SpaceGraphEditor.bl_rna.properties
    with pytest.raises(RuntimeError, match="Open a Graph Editor"):
        bpy.ops.signsim.metrics_show_curves()


@pytest.mark.slow
def test_export_to_an_unwritable_path_is_a_report(baked, tmp_path):
    _open(baked)
    with pytest.raises(RuntimeError, match="Error"):
        bpy.ops.signsim.metrics_export_csv(filepath=str(tmp_path / "no" / "such" / "dir.csv"))


# --- operators and translations -------------------------------------------------------

def _signsim_operator_classes():
    return [getattr(bpy.types, n) for n in dir(bpy.types) if n.startswith("SIGNSIM_OT_")]


# operator → poll message in an empty scene, then on an armature without an action
POLL_MESSAGES = {
    "schedule_phase": ("Select the armature to key a schedule on",
                       "The armature has no action to key the schedule on"),
    "schedule_auto": ("Select the armature to key a schedule on",
                      "The armature has no action to key the schedule on"),
    "schedule_clear": ("Select the armature whose schedule to clear",
                       "The armature's action has no schedule keys"),
    "physics_preset_add": ("Select the armature whose physics settings to store", None),
    "metrics_worst_frame": ("Select a baked armature", "The armature has no physics bake with metrics"),
    "metrics_export_csv": ("Select a baked armature", "The armature has no physics bake with metrics"),
    "metrics_export_json": ("Select a baked armature", "The armature has no physics bake with metrics"),
    "metrics_show_curves": ("Select a baked armature", "The armature has no physics bake with metrics"),
}


def test_new_operators_explain_why_they_are_disabled():
    for name, (empty, _rig) in POLL_MESSAGES.items():
        with pytest.raises(RuntimeError, match=re.escape(empty)):
            getattr(bpy.ops.signsim, name)()
    _fresh_armature()
    for name, (_empty, rig) in POLL_MESSAGES.items():
        if rig is not None:
            with pytest.raises(RuntimeError, match=re.escape(rig)):
                getattr(bpy.ops.signsim, name)()


def test_new_operators_have_tooltips_and_undo_where_they_change_data():
    for name in POLL_MESSAGES:
        rna = getattr(bpy.ops.signsim, name).get_rna_type()
        assert rna.description, name
        for prop in rna.properties:
            if prop.identifier not in {"rna_type", "filepath", "filter_glob", "check_existing",
                                       "name", "remove_name", "remove_active"}:
                assert prop.description, (name, prop.identifier)
    for name in ("SIGNSIM_OT_schedule_phase", "SIGNSIM_OT_schedule_clear", "SIGNSIM_OT_schedule_auto"):
        assert 'UNDO' in getattr(bpy.types, name).bl_options


def test_every_ui_string_has_a_simplified_chinese_translation(mods):
    tr = mods.translations
    table = tr.translations()["zh_HANS"]
    for panel in signsim_panels():
        assert ("*", panel.bl_label) in table, panel.bl_label
    for cls in _signsim_operator_classes():
        assert ("Operator", cls.bl_label) in table, cls.bl_label
    missing = sorted(s for c, s in tr.ui_strings() if (c, s) not in table)
    assert not missing
    cjk = [v for v in table.values() if any("\u4e00" <= ch <= "\u9fff" for ch in v)]
    assert len(cjk) >= 0.9 * len(table)
    # placeholders survive translation
    for (_c, msgid), msgstr in table.items():
        assert msgid.count("{") == msgstr.count("{"), msgid


def test_translations_register_and_unregister(mods):
    tr = mods.translations
    tr.unregister()
    tr.register()  # no error: the table is in the form bpy.app.translations accepts


@pytest.mark.skipif(not bpy.app.build_options.international,
                    reason="this bpy build has no international support (no UI languages)")
def test_panel_labels_are_chinese_with_the_ui_language_set():
    view = bpy.context.preferences.view
    old = view.language, view.use_translate_interface
    try:
        view.language = 'zh_HANS'
        view.use_translate_interface = True
        for panel in signsim_panels():
            text = bpy.app.translations.pgettext_iface(panel.bl_label)
            assert panel.bl_label == "SignSim" or text != panel.bl_label, panel.bl_label
        for cls in _signsim_operator_classes():
            assert bpy.app.translations.pgettext_iface(cls.bl_label, "Operator") != cls.bl_label
    finally:
        view.language, view.use_translate_interface = old

"""One physics settings table: the CLI's --preset, the panel's presets and the property
limits agree with it; invalid settings and a cancelled modal bake leave nothing behind."""
import json
import math
import types

import bpy
import numpy as np
import pytest

SHORT = (1, 12)


def _open(path):
    bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    rig = bpy.data.objects["Signer"]
    bpy.context.view_layer.objects.active = rig
    return rig


def _fields(settings):
    """Every SimSettings field as comparable values (arrays as lists)."""
    out = {}
    for name in settings.__dataclass_fields__:
        v = getattr(settings, name)
        out[name] = dict(v) if name == "group_gains" else (None if v is None else np.asarray(v).tolist()
                                                            if isinstance(v, np.ndarray) else v)
    return out


@pytest.mark.slow
def test_cli_preset_soft_is_the_physics_panels_soft_preset(retargeted, addon, tmp_path, capsys):
    api = addon.signsim_addon.bake.api
    out = tmp_path / "soft.blend"
    code = addon.signsim_addon.cli.main(["bake", "--blend", str(retargeted), "--armature", "Signer",
                                         "--preset", "soft", "--out", str(out), "--json"])
    verdict = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["verdict"]
    assert code == (3 if verdict == "failed" else 0) and out.is_file()  # written; exit 3 says a failed verdict
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    cli_record = json.loads(bpy.data.objects["Signer"].animation_data.action.signsim.bake_settings)

    rig = _open(retargeted)
    by_name = api.prepare(bpy.context.scene, rig, preset="soft", frame_range=SHORT)
    soft = next(f for f in api.physics_presets.preset_files() if f.endswith("Soft.py"))
    assert bpy.ops.script.execute_preset(filepath=soft, menu_idname=api.physics_presets.MENU) == {'FINISHED'}
    assert rig.signsim.physics.contact_stiffness == pytest.approx(1.5e4)  # the panel's Soft
    panel = api.prepare(bpy.context.scene, rig, frame_range=SHORT)
    assert _fields(by_name.settings) == _fields(panel.settings)
    assert {**cli_record, "preset": None} == {**panel.settings_record, "preset": None}
    assert cli_record["preset"] == "soft"
    assert cli_record["contact_stiffness"] == 1.5e4
    assert cli_record["gains"]["fingers"][0] == pytest.approx(8.0 * 0.6)


def test_property_defaults_and_solver_defaults_come_from_one_table(addon):
    table, simulate = addon.solver.core.settings, addon.solver.physics.simulate
    arm = bpy.data.objects.new("Rig", bpy.data.armatures.new("Rig"))
    p = arm.signsim.physics
    s = simulate.SimSettings()
    assert p.contact_stiffness == s.contact_stiffness == table.CONTACT_STIFFNESS == 3e4
    assert p.contact_damping == s.contact_damping == table.CONTACT_DAMPING == 20.0
    assert p.target_depth_mm == pytest.approx(s.d_target * 1e3) and s.d_target == pytest.approx(2e-4)
    assert int(p.max_substeps) == s.max_substeps == 4
    for g in table.GROUPS:
        assert getattr(p, f"{g}_frequency") == pytest.approx(s.group_gains[g].frequency_hz)
    assert set(s.group_gains) == set(table.GROUPS)  # no labels of another naming scheme


def test_max_substeps_cannot_be_set_to_3(addon):
    table, simulate = addon.solver.core.settings, addon.solver.physics.simulate
    p = bpy.data.objects.new("Rig", bpy.data.armatures.new("Rig")).signsim.physics
    items = [i.identifier for i in p.bl_rna.properties["max_substeps"].enum_items]
    assert items == ["1", "2", "4", "8", "16", "32"]
    for bad in ("3", 3):
        with pytest.raises(TypeError):
            p.max_substeps = bad
    assert p.max_substeps == "4"
    for n in table.SUBSTEP_CHOICES:  # every value the property can hold, the solver accepts
        simulate.SimSettings(max_substeps=n).validate(3)


@pytest.mark.slow
@pytest.mark.parametrize("prop,raw", [("contact_stiffness", -5.0), ("fingers_frequency", math.nan),
                                      ("target_depth_mm", 0.0), ("max_substeps", 3)])
def test_invalid_physics_setting_makes_the_bake_report_one_line(retargeted, prop, raw):
    """A stored value the solver rejects (written as a raw ID property, as a script or an
    old file could): the Bake button reports one line, writes nothing, no traceback."""
    rig = _open(retargeted)
    rig.signsim.physics[prop] = raw
    before = set(bpy.data.actions.keys())
    with pytest.raises(RuntimeError) as info:
        bpy.ops.signsim.bake(frame_start=SHORT[0], frame_end=SHORT[1])
    message = str(info.value).strip()
    assert message.startswith("Error: invalid physics setting:"), message
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert set(bpy.data.actions.keys()) == before


class _Recorder:
    """Stands in for what the bpy module lacks without a window: the workspace's status
    text, and a window manager whose timers are counted (the real timers are used)."""

    def __init__(self, wm):
        self.wm, self.status, self.timers = wm, "untouched", set()

    def event_timer_add(self, step, window=None):
        timer = self.wm.event_timer_add(step, window=window)
        self.timers.add(timer.as_pointer())
        return timer

    def event_timer_remove(self, timer):
        self.timers.discard(timer.as_pointer())
        self.wm.event_timer_remove(timer)

    def progress_begin(self, lo, hi):
        self.wm.progress_begin(lo, hi)

    def progress_update(self, value):
        self.wm.progress_update(value)

    def progress_end(self):
        self.wm.progress_end()

    def status_text_set(self, text):
        self.status = text


def _modal_bake(addon, rig):
    """The modal bake's state after invoke: a started worker, a timer, a status line."""
    api = addon.signsim_addon.bake.api
    rec = _Recorder(bpy.context.window_manager)
    context = types.SimpleNamespace(window_manager=rec, workspace=rec, window=None,
                                    active_object=rig, scene=bpy.context.scene)
    op_cls = bpy.types.SIGNSIM_OT_bake
    op = types.SimpleNamespace(reports=[])
    op.report = lambda level, message: op.reports.append((set(level), message))
    op._end = lambda ctx: op_cls._end(op, ctx)
    op._finish = lambda ctx, job, solved: op_cls._finish(op, ctx, job, solved)
    op._worker = api.BakeWorker(api.prepare(bpy.context.scene, rig)).start()  # the whole clip
    op._timer = rec.event_timer_add(0.1)
    rec.progress_begin(0, 100)
    return op_cls, op, context, rec


@pytest.mark.slow
def test_cancelling_the_modal_bake_leaves_no_timer_status_or_action(retargeted, addon):
    rig = _open(retargeted)
    before = set(bpy.data.actions.keys())
    op_cls, op, context, rec = _modal_bake(addon, rig)
    assert op_cls.modal(op, context, types.SimpleNamespace(type='TIMER')) == {'RUNNING_MODAL'}
    assert rec.status.startswith("SignSim: baking physics")
    op_cls.cancel(op, context)  # Blender cancels the operator (e.g. a file is loaded)
    assert op._worker.done.is_set() and isinstance(op._worker.error, addon.signsim_addon.bake.api.BakeCancelled)
    assert rec.timers == set() and rec.status is None
    assert set(bpy.data.actions.keys()) == before


@pytest.mark.slow
def test_escape_is_consumed_and_cancels_the_modal_bake(retargeted, addon):
    rig = _open(retargeted)
    before = set(bpy.data.actions.keys())
    op_cls, op, context, rec = _modal_bake(addon, rig)
    assert op_cls.modal(op, context, types.SimpleNamespace(type='ESC')) == {'RUNNING_MODAL'}
    op._worker.join(60)
    assert op_cls.modal(op, context, types.SimpleNamespace(type='TIMER')) == {'CANCELLED'}
    assert op.reports == [({'WARNING'}, "Bake cancelled: nothing was written")]
    assert rec.timers == set() and rec.status is None
    assert set(bpy.data.actions.keys()) == before

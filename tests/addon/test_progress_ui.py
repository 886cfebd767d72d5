"""The UI's progress (issue 37): an operator that runs long shows Blender's progress bar
and the status text '<what>: <stage> 43 %' through errors.window_progress, fed by the
same progress callable the CLI prints, and clears both when it ends."""
import pathlib
import types

import bpy
import pytest

SAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends"


class _Window:
    """Stands in for what the bpy module lacks without a window: records the progress bar
    (the real window manager's calls are made too) and the workspace's status text."""

    def __init__(self, wm):
        self.wm, self.bar, self.status = wm, [], []

    def progress_begin(self, lo, hi):
        self.wm.progress_begin(lo, hi)
        self.bar.append("begin")

    def progress_update(self, value):
        self.wm.progress_update(value)
        self.bar.append(value)

    def progress_end(self):
        self.wm.progress_end()
        self.bar.append("end")

    def status_text_set(self, text):
        self.status.append(text)


@pytest.mark.slow
def test_resolve_operator_shows_its_stages_and_clears_them(retargeted, addon):
    bpy.ops.wm.open_mainfile(filepath=str(retargeted), load_ui=False)
    rig = bpy.data.objects["Signer"]
    scene = bpy.context.scene
    window = _Window(bpy.context.window_manager)
    context = types.SimpleNamespace(window_manager=window, workspace=window, active_object=rig, scene=scene)
    op = types.SimpleNamespace(mode='RANGE', frame_start=int(scene.frame_start), frame_end=int(scene.frame_start) + 2,
                               margin_mm=2.0, asset="", reports=[])
    op.report = lambda level, message: op.reports.append((set(level), message))
    assert bpy.types.SIGNSIM_OT_resolve_collisions.execute(op, context) == {'FINISHED'}, op.reports
    values = window.bar[1:-1]
    assert window.bar[0] == "begin" and window.bar[-1] == "end"
    assert values == sorted(values) and values[0] == 0 and values[-1] == 100, values
    shown = [s for s in window.status if s]
    stages = list(dict.fromkeys(s.split(": ")[-1].rsplit(" ", 2)[0] for s in shown))
    assert stages == ["reading", "compile", "body", "poses", "writing", "skin_check"], shown
    assert "SignSim: resolving: poses 33 %" in shown and "SignSim: resolving: poses 100 %" in shown
    assert window.status[-1] is None


@pytest.mark.slow
def test_bake_operator_bar_runs_on_through_the_write_to_the_end(retargeted, addon):
    """The bake's bar covers the stages the operator runs — the solve's, then the write and
    the skin check on the main thread — so it rises to 100 % and never goes back."""
    bpy.ops.wm.open_mainfile(filepath=str(retargeted), load_ui=False)
    rig = bpy.data.objects["Signer"]
    scene = bpy.context.scene
    window = _Window(bpy.context.window_manager)
    context = types.SimpleNamespace(window_manager=window, workspace=window, active_object=rig, scene=scene)
    op = types.SimpleNamespace(preset='SETTINGS', frame_start=int(scene.frame_start),
                               frame_end=int(scene.frame_start) + 5, reports=[])
    op.report = lambda level, message: op.reports.append((set(level), message))
    cls = bpy.types.SIGNSIM_OT_bake
    op._prepare, op._finish = types.MethodType(cls._prepare, op), types.MethodType(cls._finish, op)
    assert cls.execute(op, context) == {'FINISHED'}, op.reports
    assert window.bar[0] == "begin" and window.bar[-1] == "end"
    values = [v for v in window.bar if not isinstance(v, str)]
    assert values == sorted(values) and values[-1] == 100, window.bar
    shown = [s for s in window.status if s]
    stages = list(dict.fromkeys(s.split(": ")[-1].rsplit(" ", 2)[0] for s in shown))
    assert stages == ["compile", "body", "simulation", "metrics", "writing", "skin_check"], shown
    assert "SignSim: baking physics: skin_check 100 %" in shown
    assert window.status[-1] is None


@pytest.mark.slow
def test_compose_operator_bar_covers_the_stages_compose_runs(addon):
    """compose() runs 'clips' and 'composing' (the file's reading and writing are
    compose_file's): the operator's bar reaches 100 % over those two."""
    bpy.ops.wm.open_mainfile(filepath=str(SAMPLES / "signer.blend"), load_ui=False)
    rig = bpy.data.objects["Signer"]
    bpy.context.view_layer.objects.active = rig
    for clip in ("chin_cheek.bvh", "fingerspelling.bvh"):
        bpy.ops.signsim.compose_list_edit(kind='CLIP')
        rig.signsim.compose.clips[-1].clip = str(SAMPLES / clip)
    window = _Window(bpy.context.window_manager)
    context = types.SimpleNamespace(window_manager=window, workspace=window, active_object=rig,
                                    scene=bpy.context.scene, preferences=bpy.context.preferences)
    op = types.SimpleNamespace(reports=[])
    op.report = lambda level, message: op.reports.append((set(level), message))
    assert bpy.types.SIGNSIM_OT_compose.execute(op, context) == {'FINISHED'}, op.reports
    values = window.bar[1:-1]
    assert values == sorted(values) and values[-1] == 100, window.bar
    stages = list(dict.fromkeys(s.split(": ")[-1].rsplit(" ", 2)[0] for s in window.status if s))
    assert stages == ["clips", "composing"], window.status

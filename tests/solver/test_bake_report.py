"""What a bake reports (solver/physics/bake_report.py), on arrays."""
from types import SimpleNamespace

import numpy as np

from solver.physics import bake_report


def test_world_error_warning_counts_every_frame_off():
    """Every frame with a bone beyond 30° (and beyond 90°) is counted, contacts included."""
    err = np.zeros((10, 3))
    err[2:7, 1] = 45.0
    err[4:6, 2] = 120.0
    rig = SimpleNamespace(bone_names=["a", "b", "c"])
    record = bake_report.world_error_record(err)
    assert record == {"world_error_max_deg": 120.0, "frames_world_error_above_30_deg": 5,
                      "frames_world_error_above_90_deg": 2}
    (w,) = bake_report.world_error_warnings(rig, err, np.arange(1.0, 11.0))
    assert "on 5 of 10 frames (2 frames more than 90°)" in w and "'c' 120° at frame 5" in w
    assert bake_report.world_error_warnings(rig, np.full((4, 3), 29.0), np.arange(4.0)) == []


def test_deviation_warning_names_the_worst_bone_by_its_scene_frame():
    """Messages name scene frames: a bake of frames 101–110 whose worst deviation is on its
    fourth frame says 'at frame 104', never the array index."""
    err = np.zeros((10, 2))
    err[3, 1] = 40.0
    model = SimpleNamespace(n_bones=2, parents=np.array([-1, 0]), ancestors=np.array([[1.0, 1.0], [0.0, 1.0]]))
    rig = SimpleNamespace(bone_names=["hand", "finger"], model=model)
    result = SimpleNamespace(fallback_counts=[0, 0, 0])
    (w,) = bake_report.deviation_warnings(rig, result, err, np.zeros((10, 2), bool), 1 / 30, np.arange(101.0, 111.0))
    assert "'finger' 40.0° at frame 104" in w and "1 bones end more than" in w


def test_verdict_fails_an_unusable_bake_and_asks_to_check_a_warned_one():
    def record(rms, above_90, warnings=()):
        return {"baked": {"tracking_rms_deg": rms, "frames_world_error_above_90_deg": above_90},
                "warnings": list(warnings)}
    assert bake_report.verdict(record(1.0, 0)) == "ok"
    assert bake_report.verdict(record(1.0, 0, ["a bone strayed"])) == "check"
    assert bake_report.verdict(record(1.0, 1)) == "failed"      # a bone more than 90° off on a frame
    assert bake_report.verdict(record(bake_report.TRACKING_WARN_DEG + 0.1, 0)) == "failed"
    assert bake_report.verdict(record(bake_report.TRACKING_WARN_DEG, 0, ["x"])) == "check"

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

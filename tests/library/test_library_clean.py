"""The numpy helpers (library/clean.py) and the BVH reader (library/bvh.py) on their own."""
import itertools
import math
import pathlib
import sys

import numpy as np
import pytest
from mathutils import Euler

import library_samples as S  # noqa: E402


@pytest.fixture
def clean(addon):
    return addon.signsim_addon.library.clean


@pytest.fixture
def bvh(addon):
    return addon.signsim_addon.library.bvh


@pytest.fixture
def quat(addon):
    return addon.solver.quat


@pytest.mark.parametrize("order", ["".join(p) for p in itertools.permutations("XYZ")])
def test_from_euler_matches_blender(quat, order):
    """The library converts Euler keys with solver.quat.from_euler: Blender's convention."""
    rng = np.random.default_rng(7)
    angles = rng.uniform(-math.pi, math.pi, (50, 3))
    q = quat.from_euler(angles, order)
    for a, qi in zip(angles, q):
        ref = np.array(Euler(a, order).to_quaternion())
        assert abs(abs(np.dot(ref, qi)) - 1) < 1e-6  # mathutils is float32


def test_bvh_channel_order_matches_blender(bvh, quat, tmp_path):
    """BVH 'Zrotation Xrotation Yrotation' is R = Rz · Rx · Ry: Blender's Euler 'YXZ'."""
    text = ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Zrotation Xrotation Yrotation\n"
            " End Site\n {\n  OFFSET 0 1 0\n }\n}\nMOTION\nFrames: 1\nFrame Time: 0.1\n30 -50 70\n")
    q = bvh.local_rotations(bvh.read(str(S.write(tmp_path / "o.bvh", text))))[0, 0]
    ref = np.array(Euler(np.radians([-50, 70, 30]), "YXZ").to_quaternion())
    assert abs(abs(np.dot(ref, q)) - 1) < 1e-6


def test_find_spikes_and_calibration(clean):
    t = np.linspace(0, 2, 60)
    ang = 0.3 * np.sin(t)
    q = np.stack([np.cos(ang / 2), np.sin(ang / 2), 0 * t, 0 * t], axis=1)[:, None, :]
    q = np.repeat(q, 2, axis=1)
    assert clean.find_spikes(q) == [] and clean.calibration_frames(q) == 0
    spiky = q.copy()
    spiky[20, 1] = [math.cos(1.0), 0, math.sin(1.0), 0]      # 114° off, one frame
    assert clean.find_spikes(spiky) == [(20, [1])]
    calib = q.copy()
    calib[0] = [math.cos(0.8), 0, 0, math.sin(0.8)]          # 92° away, then the clip
    assert clean.calibration_frames(calib) == 1


@pytest.mark.parametrize("text,words", [
    ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xrotation Yrotation Qrotation\n}\n"
     "MOTION\nFrames: 1\nFrame Time: 0.1\n0 0 0\n", "unknown channel 'qrotation'"),
    ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xrotation Yrotation Zrotation\n}\n"
     "MOTION\nFrames: 1\nFrame Time: 0\n0 0 0\n", "not a positive number"),
    ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xrotation Yrotation Zrotation\n}\n"
     "MOTION\nFrames: 1\n0 0 0\n", "Frame Time"),
    ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xrotation Yrotation Zrotation\n}\n"
     "MOTION\nFrames: 2\nFrame Time: 0.1\n0 0 0\n0 zero 0\n", "'zero', which is not a number"),
    ("HIERARCHY\nROOT Hips\n{\n OFFSET 0 0 0\n CHANNELS 3 Xrotation Yrotation Zrotation\n}\n"
     "MOTION\nFrames: 1\nFrame Time: 0.1\n0 inf 0\n", "non-finite"),
])
def test_bvh_read_errors_name_the_file(bvh, tmp_path, text, words):
    path = S.write(tmp_path / "x.bvh", text)
    with pytest.raises(Exception) as err:
        bvh.read(str(path))
    assert str(err.value).startswith("x.bvh: ") and words in str(err.value)


def test_bvh_detects_up_axis_and_units(bvh, tmp_path):
    for up, unit, want_up, want_scale in (("Y", 1.0, "Y", 0.01), ("Z", 0.1, "Z", 0.1),
                                          ("Y", 1 / 2.54, "Y", 0.0254)):
        path = S.write(tmp_path / "a.bvh", S.bvh_text(S.still_rows(5), up=up, unit=unit))
        got_up, _fwd, scale, height, _note = bvh.detect_orientation(bvh.read(str(path)))
        assert (got_up, scale) == (want_up, want_scale)
        # joints only: the head joint, not the end site 15 cm above it
        assert height * scale == pytest.approx((S.HEIGHT_CM - 15) / 100, abs=0.01)

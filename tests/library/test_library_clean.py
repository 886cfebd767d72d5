"""The cleaning helpers (solver/mocap/clip_checks.py) and the BVH reader (solver/mocap/bvh_file.py) against Blender."""
import itertools
import math

import numpy as np
import pytest
from mathutils import Euler

import library_samples as S


@pytest.fixture
def clean(addon):
    return addon.solver.mocap.clip_checks


@pytest.fixture
def bvh(addon):
    return addon.solver.mocap.bvh_file


@pytest.fixture
def quat(addon):
    return addon.solver.core.quat


@pytest.mark.parametrize("order", ["".join(p) for p in itertools.permutations("XYZ")])
def test_from_euler_matches_blender(quat, order):
    """The library converts Euler keys with solver.core.quat.from_euler: Blender's convention."""
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



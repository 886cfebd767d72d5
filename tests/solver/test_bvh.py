"""The BVH reader (solver/mocap/bvh_file.py) on its own: one-line errors naming the file, up axis
and unit detection."""
import pytest

import library_samples as S
from solver.mocap import bvh_file


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
def test_bvh_read_errors_name_the_file(tmp_path, text, words):
    path = S.write(tmp_path / "x.bvh", text)
    with pytest.raises(bvh_file.BvhError) as err:
        bvh_file.read(str(path))
    assert str(err.value).startswith("x.bvh: ") and words in str(err.value)


def test_bvh_detects_up_axis_and_units(tmp_path):
    for up, unit, want_up, want_scale in (("Y", 1.0, "Y", 0.01), ("Z", 0.1, "Z", 0.1),
                                          ("Y", 1 / 2.54, "Y", 0.0254)):
        path = S.write(tmp_path / "a.bvh", S.bvh_text(S.still_rows(5), up=up, unit=unit))
        got_up, _fwd, scale, height, _note = bvh_file.detect_orientation(bvh_file.read(str(path)))
        assert (got_up, scale) == (want_up, want_scale)
        # joints only: the head joint, not the end site 15 cm above it
        assert height * scale == pytest.approx((S.HEIGHT_CM - 15) / 100, abs=0.01)

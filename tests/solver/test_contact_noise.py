"""Contacts found in a source under capture noise, at the solver level: a BVH file's joints
as the add-on's SourceBody (tests/helpers/bvh_source.py), with σ 1.5° Gaussian noise on the
hand and finger channels (the shared noise tool, a 25° single-frame spike every 10 s
included), has the clean clip's contacts: the same parts, each start and stop within two
frames, none invented (issue 35)."""
import pathlib
import subprocess
import sys

import pytest

from bvh_source import source_body
from solver.retarget import contact_transfer

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
NOISE_TOOL = SHARED / "tools" / "add_mocap_noise.py"
CHIN_CHEEK = ROOT / "sample_blends" / "chin_cheek.bvh"
CLAP = SHARED / "data" / "generated" / "clap_fast.bvh"


def _found(path):
    body, fps = source_body(path)
    return [(c.part_a, c.part_b, c.start, c.stop) for c in contact_transfer.detect(body, fps)]


def _noisy(clip, tmp_path, sigma, seed):
    if not NOISE_TOOL.is_file() or not clip.is_file():
        pytest.skip(f"{NOISE_TOOL} or {clip} not found")
    out = tmp_path / f"noisy_{seed}.bvh"
    subprocess.run([sys.executable, str(NOISE_TOOL), str(clip), str(out), str(sigma), str(seed)],
                   check=True, capture_output=True)
    return out


def test_the_clean_clips_have_their_contacts():
    assert _found(CHIN_CHEEK) == [("index_R", "chin", 26, 38), ("index_R", "cheek_R", 50, 63)]
    if not CLAP.is_file():
        pytest.skip(f"{CLAP} not found")
    assert _found(CLAP) == [("palm_L", "palm_R", 6 + 20 * k, 15 + 20 * k) for k in range(15)]


@pytest.mark.parametrize("clip, sigma, seed", (
    (CHIN_CHEEK, 1.5, 7), (CHIN_CHEEK, 1.5, 8), (CLAP, 1.5, 7), (CLAP, 1.5, 8)))
def test_capture_noise_neither_splits_nor_invents_a_contact(tmp_path, clip, sigma, seed):
    clean = _found(clip)
    noisy = _found(_noisy(clip, tmp_path, sigma, seed))
    assert [c[:2] for c in noisy] == [c[:2] for c in clean]
    for (*_parts, s0, s1), (*_same, n0, n1) in zip(clean, noisy):
        assert abs(n0 - s0) <= 2 and abs(n1 - s1) <= 2, (clean, noisy)

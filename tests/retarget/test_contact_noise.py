"""Contacts found in a clip with capture noise: the bundled chin_cheek.bvh with 1–1.5° of
Gaussian noise on the hand and finger joints (the shared noise tool) has one chin and one
cheek contact, starting and stopping within two frames of the clean clip's, retargeted onto
the CC0 base mesh (found, not split into fragments; whether they are kept is
test_contact_preserve's; the solver-level cases are tests/solver/test_contact_noise.py)."""
import json
import pathlib
import subprocess
import sys

import bpy
import pytest

from retarget_rigs import character

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
NOISE_TOOL = ROOT.parent / "shared" / "tools" / "add_mocap_noise.py"
CLIP = ROOT / "sample_blends" / "chin_cheek.bvh"
FPS = 30


def _contacts(addon, clip):
    rt = addon.signsim_addon.retarget.api
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.context.scene.render.fps = FPS
    target = character(DATA, "godot")
    src = rt.source_clip(str(clip))
    res = rt.retarget(src.armature, target, rt.auto_map(src.armature, target), source_fps=src.fps)
    return rt.contact_pass.preserve(src.armature, target, res)


@pytest.mark.slow
@pytest.mark.parametrize("sigma, seed", ((1.0, 11), (1.0, 12), (1.5, 7)))
def test_capture_noise_does_not_split_contacts(addon, tmp_path, sigma, seed):
    if not NOISE_TOOL.is_file():
        pytest.skip(f"{NOISE_TOOL} not found")
    noisy = tmp_path / "noisy.bvh"
    subprocess.run([sys.executable, str(NOISE_TOOL), str(CLIP), str(noisy), str(sigma), str(seed)],
                   check=True, capture_output=True)
    clean = _contacts(addon, CLIP)
    found = _contacts(addon, noisy)
    print(json.dumps({"sigma": sigma, "seed": seed, "clean": clean, "noisy": found}))
    assert [c["parts"] for c in found] == [c["parts"] for c in clean]
    for a, b in zip(clean, found):
        assert all(abs(x - y) <= 2 for x, y in zip(a["frames"], b["frames"])), (clean, found)

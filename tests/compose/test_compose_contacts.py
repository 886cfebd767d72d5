"""Compose keeps its clips' contacts: fingerspelling + chin_cheek + fingerspelling onto
the bundled signer, measured on the evaluated skin as the retarget's contacts are
(contact_measure.measure_contact), against the single-clip retarget of chin_cheek."""
import hashlib
import importlib
import json
import pathlib

import bpy
import pytest

from action_keys import all_keys
from contact_measure import Skin, measure_contact

ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_blends"
CLIPS = (SAMPLES / "fingerspelling.bvh", SAMPLES / "chin_cheek.bvh", SAMPLES / "fingerspelling.bvh")
GAP, PEN, SPOT = 2e-3, 1e-3, 5e-3      # m: the retarget's contact limits
# sha256 of every key of this composition without contacts, as compose made it before it
# kept contacts (action_keys.all_keys, sorted by data path and index)
PLAIN_KEYS = "c633f9eeda2cc128a66bb101718b3cbbe13945abebacdb0a7e2b9599afe34589"


def _digest(action):
    keys = all_keys(action)
    h = hashlib.sha256()
    for k in sorted(keys):
        h.update(repr(k).encode())
        h.update(keys[k].tobytes())
    return h.hexdigest()


def _compose(cm, tmp_path, contacts):
    return cm.compose_files(cm.ComposeRequest(clips=tuple(map(str, CLIPS)), rig=str(SAMPLES / "signer.blend"),
                                              out=str(tmp_path / f"composed_{contacts}.blend"),
                                              contacts=contacts))


@pytest.mark.slow
def test_composed_contacts_stay_on_the_skin(addon, cm, tmp_path):
    retarget = importlib.import_module(addon.__name__ + ".signsim_addon.retarget.api")
    warned = []
    single = retarget.retarget_files(retarget.RetargetRequest(
        clips=(str(CLIPS[1]),), rig=str(SAMPLES / "signer.blend"), out=str(tmp_path / "single.blend")),
        lambda level, message: warned.append(message) if level == "WARNING" else None)
    assert single["contacts"]

    plain = _compose(cm, tmp_path, False)
    assert "contacts" not in plain
    assert _digest(bpy.data.actions[plain["action"]]) == PLAIN_KEYS

    composed_warnings = []
    result = cm.compose_files(cm.ComposeRequest(
        clips=tuple(map(str, CLIPS)), rig=str(SAMPLES / "signer.blend"), out=str(tmp_path / "composed.blend")),
        lambda level, message: composed_warnings.append(message) if level == "WARNING" else None)
    # the middle clip's contacts at its retarget's frames, moved by where the clip starts
    seam = result["seams"][0]
    offset = seam["frame"] - seam["cut"][1] - single["frames"][0]
    middle = [c for c in result["contacts"] if c["parts"] in [s["parts"] for s in single["contacts"]]]
    assert [c["frames"] for c in middle] == [[f + offset for f in s["frames"]] for s in single["contacts"]]
    # the same warnings as the retarget's, named by clip
    assert [w for w in warned if "contact" in w or "palm" in w] == \
        [w.split(": ", 1)[1] for w in composed_warnings if w.startswith("chin_cheek.bvh: ")]

    target = bpy.data.objects[result["armature"]]
    action = target.animation_data.action
    stored = json.loads(action["signsim_contacts"])
    skin = Skin(target)
    for contact in stored:
        assert "skipped" not in contact, contact
        first, last = (int(f) for f in contact["frames"])
        # no seam window blends a contact's frames
        assert all(not (s["frame"] <= last and first < s["frame"] + s["window"]) for s in result["seams"])
        for frame in range(first, last + 1):
            gap, pen, spot = measure_contact(skin, contact, frame)
            assert gap <= GAP and pen <= PEN and spot <= SPOT, (contact["parts"], frame, gap, pen, spot)

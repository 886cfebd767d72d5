"""The animator's contact list (Contacts panel, Object.signsim_contacts): a contact
switched off there is not kept at the next retarget — from the operator's path and from
the command line's, which reads the list saved in the rig file.

Clip: the bundled chin_cheek.bvh (index fingertip on the chin, then on the cheek) onto the
CC0 base mesh. What is compared are the retargeted keys (pose-bone rotations), against the
plain retarget (contacts off) computed in the same test.
"""
import json
import pathlib

import bpy
import numpy as np
import pytest

from retarget_rigs import character

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
CLIP = ROOT / "sample_blends" / "chin_cheek.bvh"
FPS = 30


def _angle_deg(a, b):
    """Largest rotation (degrees) between two (F, 4) quaternion tracks."""
    dot = np.abs(np.sum(a * b, axis=-1)) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))
    return float(np.degrees(2 * np.arccos(np.clip(dot, -1.0, 1.0))).max())


def _worst_in(frames, window, keys, plain):
    """Largest rotation difference (degrees) of any bone between two retargets' keys on
    the frames of window (first, last scene frames)."""
    sel = (frames >= window[0]) & (frames <= window[1])
    return max(_angle_deg(keys[n][sel], plain[n][sel]) for n in keys)


def _outside(frames, window, others):
    """(F,) bool: frames of window that no other contact's influence (its ease-in, hold
    and ease-out, scene frames) reaches."""
    sel = (frames >= window[0]) & (frames <= window[1])
    for c in others:
        sel &= (frames < c["influence"][0]) | (frames > c["influence"][1])
    return sel


def _kept(action, rt):
    return [c for c in rt.contact_pass.summary(action) if "skipped" not in c]


def _setup(rt):
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.context.scene.render.fps = FPS
    target = character(DATA, "godot")
    src = rt.source_clip(str(CLIP))
    return target, src.armature


@pytest.mark.slow
def test_a_contact_switched_off_in_the_list_is_not_kept(addon):
    rt = addon.signsim_addon.retarget.api
    target, source = _setup(rt)
    plain = rt.retarget_source(source, target, contacts=False)
    first = rt.retarget_source(source, target)
    kept = _kept(first.action, rt)
    assert kept, "the base mesh keeps a contact of chin_cheek"
    off = kept[0]
    # the contact changed the motion on its frames (else this test could not fail)
    assert _worst_in(first.frames, off["frames"], first.keys["rot"], plain.keys["rot"]) > 1.0
    item = next(i for i in target.signsim_contacts
                if [i.part_a, i.part_b] == off["parts"] and i.frame_start == round(off["frames"][0]))
    item.enabled = False
    again = rt.retarget_source(source, target)
    now = rt.contact_pass.summary(again.action)
    assert not any(c["parts"] == off["parts"] and c["frames"] == off["frames"] for c in now)
    # on its frames outside the other contacts' ease-in and ease-out, the plain retarget
    free = _outside(again.frames, off["frames"], json.loads(again.action[rt.contact_pass.CONTACTS_PROP]))
    assert free.sum() >= 3
    assert max(_angle_deg(again.keys["rot"][n][free], plain.keys["rot"][n][free]) for n in plain.keys["rot"]) < 1e-3
    # the list remembers the choice for the retarget after this one
    assert any([i.part_a, i.part_b] == off["parts"] and not i.enabled for i in target.signsim_contacts)
    # the other contacts are kept as before
    others = [c for c in kept if c is not off]
    assert [c["parts"] for c in _kept(again.action, rt)] == [c["parts"] for c in others]


@pytest.mark.slow
def test_the_command_line_reads_the_list_saved_in_the_rig_file(addon, tmp_path):
    rt = addon.signsim_addon.retarget.api
    target, source = _setup(rt)
    first = rt.retarget_source(source, target)
    kept = _kept(first.action, rt)
    assert kept
    off = kept[0]
    for i in target.signsim_contacts:
        i.enabled = not ([i.part_a, i.part_b] == off["parts"] and i.frame_start == round(off["frames"][0]))
    bpy.data.objects.remove(source)
    rig = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(rig), copy=True)
    out = rt.retarget_files(rt.RetargetRequest(clips=(str(CLIP),), rig=str(rig), out=str(tmp_path / "a.blend"),
                                               armature=target.name))
    got = out["contacts"]
    print(json.dumps({"switched_off": off, "contacts": got}))
    assert not any(c["parts"] == off["parts"] and c["frames"] == off["frames"] for c in got)
    assert [c["parts"] for c in got if "skipped" not in c] == [c["parts"] for c in kept[1:]]

"""Skeleton understanding on every shared file, in the file's own axes and units.

BVH files are read as their text says (no import repair), so a Y-up, decimetre or
upside-down file is seen as it is; characters are read from Blender's glTF import. The
truth is judged from the joints the file's own convention names (its head and its feet,
its left hand), never from the analysis' own intermediate values.
"""
import pathlib

import numpy as np
import pytest

from retarget_rigs import target_rig

from solver.core import skeleton

CLIPS = sorted(p.name for d in ("mocap", "generated")
               for p in (pathlib.Path(__file__).resolve().parents[3] / "shared" / "data" / d).glob("*.bvh"))
# per naming convention: (head, left foot, left hand) joint names
TRUTH = {"animdrawings": ("Head", "LeftFoot", "LeftHand"), "bandai": ("Head", "Foot_L", "Hand_L"),
         "bvhpython": ("mixamorig:Head", "mixamorig:LeftFoot", "mixamorig:LeftHand"),
         "cmu": ("Head", "LeftFoot", "LeftHand"), "makehuman": ("head", "foot.L", "wrist.L"),
         "pybvh": ("Head", "LeftFoot", "LeftHand"), "clap": ("spine.006", "foot.L", "hand.L"),
         "fingerspell": ("spine.006", "foot.L", "hand.L")}


def _classifier(addon, names):
    from solver.retarget import bonemap
    joint_named = bonemap._is_joint_named(names)
    return lambda name: bonemap.classify(name, joint_named)


def _bvh_skeleton(addon, path, frames=16):
    from solver.mocap import bvh_file
    data = bvh_file.read(str(path))
    rest = np.zeros((len(data.names), 3))
    for j, p in enumerate(data.parents):
        rest[j] = data.offsets[j] + (rest[p] if p >= 0 else 0.0)
    rows = np.unique(np.linspace(0, data.rows - 1, min(frames, data.rows)).astype(int))
    return data.names, data.parents, rest, bvh_file.joint_positions(data, rows)


@pytest.mark.parametrize("clip", CLIPS)
@pytest.mark.parametrize("names", ["file", "none"])
def test_bvh_body_in_file_axes(addon, shared_data, clip, names):
    """Up from the feet to the head, left from the facing, whatever the file's axes and
    whether or not its joints have names."""
    path = next(shared_data.glob(f"*/{clip}"))
    joint_names, parents, rest, poses = _bvh_skeleton(addon, path)
    head, foot, hand = (joint_names.index(n) for n in TRUTH[clip.split("_")[0]])
    use = joint_names if names == "file" else [f"Node_{k}" for k in range(len(joint_names))]
    an = skeleton.analyse(use, parents, rest, poses=poses,
                          classify=_classifier(addon, use) if names == "file" else None)
    hips_to_head = poses[:, head] - poses[:, an.hips]
    feet = poses[:, foot] - poses[:, an.hips]
    # the head above the hips on every frame, the feet below them (a dancer may kick one
    # foot up: the median frame)
    assert np.all(hips_to_head @ an.up > 0.5 * np.linalg.norm(hips_to_head, axis=1))
    assert np.median(feet @ an.up / np.linalg.norm(feet, axis=1)) < -0.8
    assert an.head == head
    # the file's left hand is the anatomical left (these files name their sides right)
    assert an.limbs[("L", "hand")] == [hand]
    assert an.facing_evidence == "feet"
    assert an.finger_joints() == {} or max(an.finger_joints().values()) <= 4
    if names == "file":
        assert not [w for w in an.warnings if "other side" in w]
        assert not an.topology_only()
    else:
        assert an.topology_only()
        named = skeleton.analyse(joint_names, parents, rest, poses=poses,
                                 classify=_classifier(addon, joint_names))
        # the same body from the shape alone, fingers told apart by geometry
        assert (an.hips, an.spine, an.neck, an.limbs) == (named.hips, named.spine, named.neck, named.limbs)
        assert an.fingers == named.fingers


@pytest.mark.parametrize("rig", ["signer", "godot", "robot"])
def test_characters(addon, shared_data, rig):
    ob = target_rig(shared_data, rig)
    bones = ob.data.bones
    names = [b.name for b in bones]
    parents = [names.index(b.parent.name) if b.parent else -1 for b in bones]
    heads = np.array([ob.matrix_world @ b.head_local for b in bones])
    tails = np.array([ob.matrix_world @ b.tail_local for b in bones])
    an = skeleton.analyse(names, parents, heads, tails, classify=_classifier(addon, names))
    assert an.up @ np.array([0.0, 0.0, 1.0]) > 0.99
    hand_l = {"signer": "hand.L", "godot": "hand.L", "robot": "Palm2.L"}[rig]
    assert names.index(hand_l) in an.limbs[("L", "hand")]
    if rig == "robot":
        # two-joint fingers, IK feet and knee poles outside the body tree
        assert set(an.finger_joints().values()) == {2}
        assert {names[i] for i in an.helpers} >= {"Foot.L", "Foot.R", "PoleTarget.L", "PoleTarget.R"}
        assert an.facing_evidence == "names"
    else:
        assert set(an.finger_joints().values()) == {3}
        assert an.facing_evidence == "feet"
        # the same body from geometry alone (every bone renamed Node_<n>)
        blind = skeleton.analyse([f"Node_{k}" for k in range(len(names))], parents, heads, tails)
        assert (blind.hips, blind.spine, blind.neck, blind.head) == (an.hips, an.spine, an.neck, an.head)
        assert blind.limbs == an.limbs and blind.fingers == an.fingers
        assert np.allclose(blind.left, an.left)


@pytest.mark.parametrize("clip", CLIPS)
def test_import_stands_upright_with_its_guesses_reported(addon, shared_data, clip):
    """The library's importer turns every shared clip head-up (judged from geometry on
    every sampled frame) and reports a unit it had to guess."""
    import bpy
    importers = addon.signsim_addon.library.importers
    path = next(shared_data.glob(f"*/{clip}"))
    (imported,) = importers.import_file(str(path))[:1]
    arm = imported.skeleton
    if arm.name not in bpy.context.scene.objects:
        bpy.context.scene.collection.objects.link(arm)
    ad = arm.animation_data_create()
    ad.action = imported.action
    if ad.action_slot_handle != imported.meta["_slot"].handle:
        ad.action_slot = imported.meta["_slot"]
    bones = arm.data.bones
    names = [b.name for b in bones]
    head = names.index(TRUTH[clip.split("_")[0]][0])
    first, last = imported.action.frame_range
    for f in np.linspace(first, last, 12):
        bpy.context.scene.frame_set(int(round(f)))
        z = np.array([(arm.matrix_world @ pb.head).z for pb in arm.pose.bones])
        assert z[head] > np.median(z) + 0.2
    units = [w for w in imported.warnings if w.startswith("units taken as")]
    assert bool(units) == (clip.split("_")[0] in ("makehuman", "cmu", "pybvh", "bvhpython", "animdrawings", "bandai"))


def test_root_motion_below_a_static_root(addon, shared_data, tmp_path):
    """Bandai's hierarchy has a static joint_Root above the hips: a copy whose hips walk
    3 m (made here) is tagged has_root_motion."""
    from solver.mocap import bvh_file
    source = shared_data / "mocap" / "bandai_dataset-1_bye_active_001.bvh"
    data = bvh_file.read(str(source))
    hierarchy = source.read_text().split("MOTION")[0]
    hips = data.names.index("Hips")
    col = data.first_channel[hips] + data.channels[hips].index("xposition")
    motion = data.motion.copy()
    motion[:, col] += np.linspace(0.0, 300.0, len(motion))          # centimetres
    path = tmp_path / "walking_bandai.bvh"
    path.write_text(f"{hierarchy.rstrip()}\nMOTION\nFrames: {len(motion)}\n"
                    f"Frame Time: {data.frame_time!r}\n"
                    + "\n".join(" ".join(f"{v:.6f}" for v in row) for row in motion) + "\n")
    (imported,) = addon.signsim_addon.library.importers.import_file(str(path))
    assert data.parents[hips] == data.names.index("joint_Root")
    assert "has_root_motion" in imported.tags


@pytest.mark.slow
def test_guesses_are_warnings_in_human_and_json_output(addon, shared_data, tmp_path, capsys):
    """A clip whose joints carry no names (Node_<n>, made here) in decimetres: the map from
    the shape alone and the guessed unit are warnings, as 'warning:' lines and in --json."""
    import json

    import bpy
    text = (shared_data / "mocap" / "makehuman_face-poseunits.bvh").read_text()
    from solver.mocap import bvh_file
    for k, name in enumerate(bvh_file.read(str(shared_data / "mocap" / "makehuman_face-poseunits.bvh")).names):
        text = text.replace(f"JOINT {name}\n", f"JOINT Node_{k}\n").replace(f"ROOT {name}\n", f"ROOT Node_{k}\n")
    clip = tmp_path / "nameless.bvh"
    clip.write_text(text)
    target_rig(shared_data, "godot")
    rig = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(rig), copy=True)
    cli = addon.signsim_addon.cli.main
    for flag in ([], ["--json"]):
        code = cli(["retarget", "--clip", str(clip), "--rig", str(rig),
                    "--out", str(tmp_path / "out.blend"), *flag])
        out = capsys.readouterr().out
        assert code == 0
        if flag:
            warnings = json.loads(out.strip().splitlines()[-1])["warnings"]
        else:
            warnings = [line[len("warning: "):] for line in out.splitlines() if line.startswith("warning: ")]
        assert any("units taken as decimetres" in w for w in warnings)
        assert any("'source': bone map from the skeleton's shape alone" in w for w in warnings)
        assert not any("'target'" in w for w in warnings)       # the base mesh's names agree


def test_impossible_results_are_refused_and_nothing_written(addon, shared_data):
    """A bone map that drives the left arm by the right one (sides judged from each body's
    geometry), or one that puts the head below the hips, is refused with one message; no
    action is made and the target keeps its own."""
    import bpy
    rt = addon.signsim_addon.retarget.api
    from solver.retarget import bonemap
    target = target_rig(shared_data, "godot")
    source, _a, fps, _c = rt.source_clip(str(shared_data / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh"))
    good = rt.auto_map(source, target)
    swap = {n: n.replace("Left", "#").replace("Right", "Left").replace("#", "Right") for n in good.as_dict().values()}
    crossed = bonemap.BoneMap([(t, swap[s], c) for t, s, c in good.pairs])
    actions = set(bpy.data.actions)
    before = target.animation_data.action if target.animation_data else None
    with pytest.raises(addon.signsim_addon.errors.SignSimError, match="other side of the source"):
        rt.retarget(source, target, crossed, source_fps=fps, frame_range=(1, 20))
    assert set(bpy.data.actions) == actions
    assert (target.animation_data.action if target.animation_data else None) == before
    # a map that bends the spine down the legs: the head would hang below the hips
    down = bonemap.BoneMap([(t, {"spine.001": "mixamorig:LeftUpLeg", "spine.002": "mixamorig:LeftLeg",
                            "spine.003": "mixamorig:LeftFoot"}.get(t, s), c) for t, s, c in good.pairs])
    with pytest.raises(addon.signsim_addon.errors.SignSimError, match="head below its hips"):
        rt.retarget(source, target, down, source_fps=fps, frame_range=(1, 20))
    assert set(bpy.data.actions) == actions

"""What the composed feet do, measured on Blender's evaluated pose (world foot positions
frame by frame), against what the seam report says (tester7 findings F1, F3, F5, F0, F7):
the checks of the feet run on the output whether or not the feet are held, a foot pushed
through the floor at a seam is said, a plant the output lets slide is not called held,
the robot's IK feet are checked, and layer starts outside the composition are refused."""
import json
import pathlib

import bpy
import numpy as np
import pytest
from compose_measure import open_signer

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
SIGNER = ROOT / "sample_blends" / "signer.blend"
FINGERS = ROOT / "sample_blends" / "fingerspelling.bvh"
DATA = ROOT.parent / "shared" / "data"
BYE = DATA / "mocap" / "bandai_dataset-1_bye_active_001.bvh"
MIXAMO = DATA / "mocap" / "bvhpython_test_freebvh_mixamorig.bvh"
CMU = DATA / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh"
ROBOT = DATA / "characters" / "threejs_RobotExpressive.glb"
BAND = 0.04                       # × leg length above the floor: a foot this low is on it
pytestmark = pytest.mark.skipif(not (BYE.is_file() and MIXAMO.is_file() and CMU.is_file()),
                                reason=f"third-party test data not found at {DATA}")


def feet(ob, result, foot=("foot.L", "foot.R"), toe=("toe.L", "toe.R")):
    """Per foot (F, 2, P, 3) world points m of the output as Blender evaluates it: the foot
    bone's head and tail, and the toe bone's head and tail when there is one."""
    ob.animation_data.action = bpy.data.actions[result["action"]]
    first, last = (int(round(f)) for f in result["frames"])
    mw = ob.matrix_world
    out = []
    for f in range(first, last + 1):
        bpy.context.scene.frame_set(f)
        row = []
        for k in range(2):
            bones = [ob.pose.bones[foot[k]]] + ([ob.pose.bones[toe[k]]] if toe else [])
            row.append([list(mw @ p) for b in bones for p in (b.head, b.tail)])
        out.append(row)
    return np.array(out)


def seam_part(result, seam, n):
    """Output frame indices of a seam's window and 2 frames each side."""
    k = int(seam["frame"] - result["frames"][0])
    return slice(max(k - 2, 0), min(k + seam["window"] + 3, n))


def floor_slide(points, floor, band):
    """How far (m) the least-moving point of a foot (points (F, P, 3)) gets horizontally
    from where it is at the first frame, when its lowest point stays within `band` m of
    `floor` at every frame; 0 when it leaves the floor."""
    if np.any(points[..., 2].min(axis=1) > floor + band):
        return 0.0
    return float(np.linalg.norm(points[..., :2] - points[:1, :, :2], axis=-1).max(axis=0).min())


def leg_band(ob):
    thigh, foot = ob.data.bones["thigh.L"], ob.data.bones["foot.L"]
    return BAND * float((ob.matrix_world.to_3x3() @ (thigh.head_local - foot.head_local)).length)


@pytest.mark.slow
def test_no_foot_lock_still_checks_the_feet(cm):
    """bye → fingerspelling stand 12 cm apart: with --no-foot-lock the blend slides both
    feet along the floor across the window (measured > 5 cm each) and the seam fails
    'plant' with both listed in 'skating'; with the lock on they are held (≤ 1 cm) and the
    seam passes."""
    ob = open_signer()
    band = leg_band(ob)
    for lock in (False, True):
        result = cm.compose(ob, [cm.ClipSpec(str(BYE)), cm.ClipSpec(str(FINGERS))], foot_lock=lock)
        pts = feet(ob, result)
        floor = float(np.percentile(pts[..., 2].min(axis=2), 5))
        seam = result["seams"][0]
        part = seam_part(result, seam, len(pts))
        slides = [floor_slide(pts[part, k], floor, band) for k in range(2)]
        skating = {k["bone"] for k in seam["skating"]}
        print(f"\nfoot lock {lock}: slides on the floor {slides[0] * 100:.1f} / {slides[1] * 100:.1f} cm, "
              f"flagged {seam['flagged']} {seam['failures']}, skating {sorted(skating)}")
        if lock:
            assert max(slides) <= 0.01 and not seam["flagged"] and not skating
        else:
            assert min(slides) > 0.05
            assert seam["flagged"] and "plant" in seam["failures"] and skating == {"foot.L", "foot.R"}
            assert all(abs(k["distance_m"] - s) < 0.02 for k, s in zip(seam["skating"], slides))


@pytest.mark.slow
def test_a_foot_pushed_through_the_floor_at_a_seam_fails_it(cm):
    """The walk repeated: at every seam the blend pushes the right foot below the lowest
    point the clip alone ever gives it (measured > 2 cm deeper) while it moves along;
    every such seam fails 'plant' and lists the foot in 'sinking' with its depth."""
    ob = open_signer()
    alone = cm.compose(ob, [cm.ClipSpec(str(MIXAMO))])
    own_low = float(feet(ob, alone)[..., 2].min())
    result = cm.compose(ob, [cm.ClipSpec(str(MIXAMO))] * 3)
    pts = feet(ob, result)
    deep = []
    for seam in result["seams"]:
        part = seam_part(result, seam, len(pts))
        for k, foot in enumerate(("foot.L", "foot.R")):
            below = own_low - float(pts[part, k, :, 2].min())
            sinking = {x["bone"]: x for x in seam["sinking"]}
            print(f"\nseam {seam['index']} {foot}: {below * 100:.1f} cm below the clip's lowest; "
                  f"reported {sinking.get(foot)}")
            if below > 0.02:
                deep.append(seam["index"])
                assert foot in sinking and "plant" in seam["failures"] and seam["flagged"]
                assert sinking[foot]["depth_m"] > sinking[foot]["own_m"] + 0.01
            elif below <= 0.0:
                assert foot not in sinking
    assert len(deep) == 2, "both seams of the walk push the right foot through the floor"


@pytest.mark.slow
def test_a_plant_the_output_lets_slide_is_not_called_held(cm):
    """bye → fingerspelling with a 6-frame window: the feet slide along the floor over the
    window (measured > 2 cm); they are not reported held, the seam fails 'plant' and lists
    them in 'skating'."""
    ob = open_signer()
    band = leg_band(ob)
    result = cm.compose(ob, [cm.ClipSpec(str(BYE)), cm.ClipSpec(str(FINGERS), window=6)])
    pts = feet(ob, result)
    floor = float(np.percentile(pts[..., 2].min(axis=2), 5))
    seam = result["seams"][0]
    part = seam_part(result, seam, len(pts))
    sliding = []
    for k, foot in enumerate(("foot.L", "foot.R")):
        slide = floor_slide(pts[part, k], floor, band)
        plant = [p for p in seam["plants"] if p["bone"] == foot]
        print(f"\n{foot}: slides {slide * 100:.1f} cm on the floor; reported {plant}")
        if slide > 0.02:
            sliding.append(foot)
            assert all(not p["held"] and p["slides"] for p in plant)
            assert foot in {x["bone"] for x in seam["skating"]}
    assert sliding == ["foot.L", "foot.R"]
    assert "plant" in seam["failures"]


@pytest.mark.slow
@pytest.mark.skipif(not ROBOT.is_file(), reason="RobotExpressive not found")
def test_the_robot_ik_feet_are_checked(cm, tmp_path):
    """RobotExpressive (feet parented to the root, not the shins: IK feet) through jump →
    wave → jump: its feet are found from geometry, and every seam where a foot moves more
    than 10 cm along the floor (lowest point within 4 % of the leg of it at both frames of
    each step) beyond the clips fails 'plant'."""
    bpy.ops.wm.read_homefile(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=str(ROBOT))
    ob = next(o for o in bpy.data.objects if o.type == 'ARMATURE')
    specs = [cm.ClipSpec(str(CMU), 300, 900), cm.ClipSpec(str(BYE)), cm.ClipSpec(str(CMU), 1200, 1500)]
    result = cm.compose(ob, specs)
    pts = feet(ob, result, ("Foot.L", "Foot.R"), None)
    mw = ob.matrix_world
    leg = float((mw @ ob.data.bones["UpperLeg.L"].head_local - mw @ ob.data.bones["Foot.L"].head_local).length)
    floor = float(np.percentile(pts[..., 2].min(axis=2), 5))
    moved = []
    for seam in result["seams"]:
        part = seam_part(result, seam, len(pts))
        for k in range(2):
            p = pts[part, k]
            on = p[..., 2].min(axis=1) <= floor + BAND * leg
            step = np.linalg.norm(np.diff(p[..., :2], axis=0), axis=-1).min(axis=1)
            along = float(step[on[1:] & on[:-1]].sum())
            print(f"\nseam {seam['index']} foot {k}: {along:.2f} m along the floor; flagged {seam['flagged']} "
                  f"{seam['failures']} skating {seam['skating']}")
            if along > 0.1 + 0.1 * leg:
                moved.append(seam["index"])
                assert "plant" in seam["failures"] and seam["flagged"]
    assert moved, "the jump landing into the wave drags the robot's feet along the floor"


@pytest.mark.slow
def test_layer_starts_outside_the_composition_are_refused(addon, tmp_path, capsys):
    """--layer-start −1 or past the last frame: one line on stderr, exit 1, nothing written
    (tester: a numpy broadcast error for −1; exit 0 and a layer that never plays for
    100000); a --map naming a source bone the clip lacks is warned about."""
    cli = addon.signsim_addon.cli.main
    out = tmp_path / "o.blend"
    base = ["compose", "--clips", str(BYE), str(FINGERS), "--rig", str(SIGNER), "--out", str(out)]
    for start, words in (("-1", "before the composition's first frame"), ("100000", "never play")):
        assert cli(base + ["--layer", str(FINGERS), "--layer-start", start]) == 1
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("signsim: error")]
        assert len(err) == 1 and words in err[0] and "broadcast" not in err[0], err
        assert not out.exists()
    preset = tmp_path / "map.json"
    preset.write_text(json.dumps({"hand.R": "nosuch"}))
    assert cli(base + ["--map", str(preset), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert any("nosuch" in w and "not used" in w for w in result["warnings"])

"""Sources of unusual build: the three.js robot's own clips (a glTF character whose feet are
IK bones hanging from its root, outside the leg chains) drive a character standing on its
floor, measured on Blender's evaluated pose."""
import pathlib

import bpy
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"


@pytest.mark.slow
def test_robot_clip_keeps_the_signer_on_its_floor(addon, tmp_path):
    """The robot's Wave onto the bundled signer: the lowest point of the signer's feet stays
    within 2 cm of its rest floor on every frame."""
    api = addon.signsim_addon
    lib = tmp_path / "lib.blend"
    api.library.api.import_paths([str(DATA / "characters" / "threejs_RobotExpressive.glb")], str(lib))
    bpy.ops.wm.open_mainfile(filepath=str(ROOT / "sample_blends" / "signer.blend"))
    target = bpy.data.objects["Signer"]
    rt = api.retarget.api
    with rt.source_clip("threejs_RobotExpressive Wave", str(lib)) as src:
        res = rt.retarget(src.armature, target, rt.auto_map(src.armature, target), source_fps=src.fps)
    feet = [pb for pb in target.pose.bones if pb.name.split(".")[0] in ("foot", "toe", "heel")]
    mw = target.matrix_world
    rest_floor = min(min((mw @ b.bone.head_local).z, (mw @ b.bone.tail_local).z) for b in feet)
    lowest = []
    for f in res.frames:
        bpy.context.scene.frame_set(int(f))
        lowest.append(min(min((mw @ b.head).z, (mw @ b.tail).z) for b in feet))
    lift = np.array(lowest) - rest_floor
    print(f"\nfeet above the rest floor: {100 * lift.min():.2f} .. {100 * lift.max():.2f} cm")
    assert np.abs(lift).max() < 0.02


@pytest.mark.slow
def test_a_lying_source_is_said(addon):
    """The bundled fingerspelling clip is Z-up; Blender's own BVH importer with its default
    Y-up axes lays the skeleton on its back. Retargeting that source (the operator's path:
    a source the animator imported) says the source lies, in the warnings; the same clip
    imported through SignSim stands and says nothing of the kind."""
    api = addon.signsim_addon
    clip = ROOT / "sample_blends" / "fingerspelling.bvh"
    bpy.ops.wm.open_mainfile(filepath=str(ROOT / "sample_blends" / "signer.blend"))
    target = bpy.data.objects["Signer"]
    bpy.ops.import_anim.bvh(filepath=str(clip))
    lying = bpy.context.view_layer.objects.active
    rt = api.retarget.api
    warned = []
    rt.retarget(lying, target, rt.auto_map(lying, target), report=lambda level, m: warned.append(m))
    assert any("lies on its side or back" in m for m in warned)
    warned.clear()
    with rt.source_clip(str(clip)) as src:
        rt.retarget(src.armature, target, rt.auto_map(src.armature, target), source_fps=src.fps,
                    report=lambda level, m: warned.append(m))
    assert not any("lies on its side or back" in m for m in warned)


@pytest.mark.slow
def test_a_posed_rest_is_said(addon, retargeted, tmp_path):
    """Blender's FBX exporter, armature only (no skin, so no bind pose), writes the pose it
    exports in as the rest: the signer's own motion read back from that file has a signing
    pose for its rest, so the twist of its bones about their length is unknown (it came
    back 38-155° off, exit 0). The retarget says so; the signer's BVH rest does not."""
    fbx = tmp_path / "signer_motion.fbx"
    bpy.ops.wm.open_mainfile(filepath=str(retargeted))
    bpy.context.scene.frame_set(40)
    for ob in bpy.data.objects:
        ob.select_set(ob.type == 'ARMATURE')
    bpy.ops.export_scene.fbx(filepath=str(fbx), use_selection=True, object_types={'ARMATURE'},
                             bake_anim=True, add_leaf_bones=False)
    rt = addon.signsim_addon.retarget.api
    bpy.ops.wm.open_mainfile(filepath=str(ROOT / "sample_blends" / "signer.blend"))
    target = bpy.data.objects["Signer"]
    for clip, posed in ((fbx, True), (ROOT / "sample_blends" / "fingerspelling.bvh", False)):
        warned = []
        with rt.source_clip(str(clip)) as src:
            first = src.armature.animation_data.action.frame_range[0]
            rt.retarget(src.armature, target, rt.auto_map(src.armature, target), source_fps=src.fps,
                        frame_range=(first, first + 10), report=lambda level, m: warned.append(m))
        assert any("rest pose is no neutral pose" in m for m in warned) == posed, (clip, warned)

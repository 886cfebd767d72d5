"""The bundled sample scene (sample_blends/): it regenerates identically, the rig has the
structure SignSim relies on, the face is a closed surface with features, and the BVH
clips import with Blender's importer and show what they claim to show."""
import importlib.util
import math
import pathlib

import bmesh
import bpy
import numpy as np
import pytest
from mathutils import Vector
from mathutils.bvhtree import BVHTree
from scipy.signal import find_peaks

SAMPLES = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends"
SIDES = ("L", "R")
FINGERS = ("thumb", "f_index", "f_middle", "f_ring", "f_pinky")


@pytest.fixture(scope="module")
def make_samples():
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def open_signer():
    bpy.ops.wm.open_mainfile(filepath=str(SAMPLES / "signer.blend"))
    return bpy.data.objects["Signer"]


def import_clip(name):
    """Import sample_blends/<name>.bvh as a user would (Blender's Z-up axes); returns the armature."""
    bpy.ops.import_anim.bvh(filepath=str(SAMPLES / f"{name}.bvh"), axis_forward='Y', axis_up='Z',
                            update_scene_fps=True)
    return bpy.data.objects[name]


def frames_of(ob):
    start, end = ob.animation_data.action.frame_range
    return range(int(start), int(end) + 1)


def mesh_tree(ob):
    m = ob.matrix_world
    return BVHTree.FromPolygons([m @ v.co for v in ob.data.vertices], [tuple(p.vertices) for p in ob.data.polygons])


@pytest.mark.slow
def test_regenerates_identically(make_samples, tmp_path):
    make_samples.build(tmp_path)
    for clip in ("fingerspelling.bvh", "chin_cheek.bvh"):
        assert (tmp_path / clip).read_bytes() == (SAMPLES / clip).read_bytes(), clip
    assert make_samples.digest(tmp_path / "signer.blend") == make_samples.digest(SAMPLES / "signer.blend")
    bpy.ops.wm.read_homefile(use_empty=True)


def test_files_are_small():
    assert (SAMPLES / "signer.blend").stat().st_size < 3_000_000


def test_rig_has_neck_head_arms_and_full_hands():
    rig = open_signer()
    bones = rig.data.bones
    assert bones["head"].parent.name == "neck"
    assert bones["neck"].parent.name == "spine.003"
    for s in SIDES:
        chain = ["spine.003", f"shoulder.{s}", f"upper_arm.{s}", f"forearm.{s}", f"hand.{s}"]
        for parent, child in zip(chain, chain[1:]):
            assert bones[child].parent.name == parent
        for f in FINGERS:
            chain = [f"hand.{s}"] + [f"{f}.0{i}.{s}" for i in (1, 2, 3)]
            for parent, child in zip(chain, chain[1:]):
                assert bones[child].parent.name == parent
            assert not bones[f"{f}.03.{s}"].children
        for leg in ("thigh", "shin", "foot", "toe"):
            assert f"{leg}.{s}" in bones
    assert not [b.name for b in bones if b.name.startswith(("palm", "heel", "face", "breast", "pelvis"))]
    assert all(pb.rotation_mode == 'QUATERNION' for pb in rig.pose.bones)
    assert all(b.use_deform for b in bones)


def test_body_stands_1_7_m_and_is_skinned():
    rig = open_signer()
    body = bpy.data.objects["SignerBody"]
    z = [v.co.z for v in body.data.vertices]
    assert abs(max(z) - 1.70) < 0.02 and abs(min(z)) < 0.02
    assert body.parent == rig
    assert [m.object for m in body.modifiers if m.type == 'ARMATURE'] == [rig]
    assert {g.name for g in body.vertex_groups} == {b.name for b in rig.data.bones}
    assert all(v.groups for v in body.data.vertices)
    bm = bmesh.new()
    bm.from_mesh(body.data)
    assert all(len(e.link_faces) == 2 for e in bm.edges)


def test_capsule_radii_on_every_bone():
    rig = open_signer()
    radii = {b.name: b.get("signsim_capsule_radius") for b in rig.data.bones if b.use_deform}
    assert all(r is not None and r > 0 for r in radii.values()), radii
    for s in SIDES:
        for f in FINGERS[1:]:
            assert all(0.004 < radii[f"{f}.0{i}.{s}"] < 0.012 for i in (1, 2, 3))
        assert 0.02 < radii[f"upper_arm.{s}"] < 0.06
    assert 0.05 < radii["head"] < 0.1


def test_face_is_closed_with_nose_chin_and_cheeks():
    rig = open_signer()
    face = bpy.data.objects["SignerFace"]
    assert face.parent == rig and face.parent_type == 'BONE' and face.parent_bone == "head"
    bm = bmesh.new()
    bm.from_mesh(face.data)
    assert all(len(e.link_faces) == 2 for e in bm.edges), "face mesh is not closed"
    head = rig.data.bones["head"]
    co = np.array([face.matrix_world @ v.co for v in face.data.vertices])
    nose = co[np.argmin(co[:, 1])]                       # the signer faces -Y
    assert abs(nose[0]) < 0.003 and head.head_local.z < nose[2] < head.tail_local.z
    tree = mesh_tree(face)

    def depth(x, z):
        """How far forward (m, along -Y) the face reaches at (x, z)."""
        hit = tree.ray_cast(Vector((x, -1.0, z)), Vector((0, 1, 0)))[0]
        return -hit.y if hit else -math.inf

    # chin: below the nose, further forward than the mouth region above it
    zs = np.arange(nose[2] - 0.12, nose[2] - 0.02, 0.002)
    profile = np.array([depth(0.0, z) for z in zs])
    peaks, _ = find_peaks(profile, prominence=0.003)
    assert len(peaks) >= 1, "no chin"
    # cheeks: bumps either side in a horizontal section, around the head's vertical axis
    axis = Vector((0, head.head_local.y, 0))
    found = {1: False, -1: False}
    for z in np.arange(nose[2] - 0.04, nose[2] + 0.01, 0.005):
        angles = np.radians(np.arange(-90, 91, 2))
        r = []
        for a in angles:
            u = Vector((math.sin(a), -math.cos(a), 0))
            c = axis + Vector((0, 0, z))
            hit = tree.ray_cast(c + u * 0.3, -u)[0]
            r.append((hit - c).dot(u))
        peaks, _ = find_peaks(np.array(r), prominence=0.003)
        for p in peaks:
            deg = math.degrees(angles[p])
            if 20 < abs(deg) < 70:
                found[int(np.sign(deg))] = True
    assert all(found.values()), f"cheek bumps found (+X, -X): {found}"


@pytest.mark.parametrize("clip, seconds", [("fingerspelling", (4, 6)), ("chin_cheek", (2.5, 3.5))])
def test_clips_import_with_the_signers_bones(clip, seconds):
    rig = open_signer()
    ob = import_clip(clip)
    assert ob.type == 'ARMATURE'
    assert {b.name for b in ob.data.bones} == {b.name for b in rig.data.bones}
    for b in rig.data.bones:   # same rest skeleton, in the same axes
        assert (ob.data.bones[b.name].head_local - b.head_local).length < 1e-4
    assert round(bpy.context.scene.render.fps / bpy.context.scene.render.fps_base) == 30
    frames = frames_of(ob)
    assert seconds[0] <= (len(frames) - 1) / 30 <= seconds[1]


def fingertip_speed(ob, side):
    """Per frame step, summed over the five fingertips: how far they move in the hand's frame (m)."""
    scene = bpy.context.scene
    tips = []
    for f in frames_of(ob):
        scene.frame_set(f)
        inv = ob.pose.bones[f"hand.{side}"].matrix.inverted()
        tips.append([list(inv @ ob.pose.bones[f"{finger}.03.{side}"].tail) for finger in FINGERS])
    return np.linalg.norm(np.diff(np.array(tips), axis=0), axis=2).sum(axis=1)


def test_fingerspelling_changes_handshape_4_to_5_times_a_second():
    bpy.ops.wm.read_homefile(use_empty=True)
    ob = import_clip("fingerspelling")
    speed = fingertip_speed(ob, "R")
    # each change of handshape is one burst of finger motion between two holds
    peaks, _ = find_peaks(speed, height=0.005, prominence=0.003)
    assert len(peaks) >= 15
    per_second = 30.0 / np.mean(np.diff(peaks))
    assert 4.0 <= per_second <= 5.0, per_second
    assert np.sum(speed < 1e-4) >= len(peaks), "no holds between handshapes"
    assert fingertip_speed(ob, "L").max() > 0.005, "the other hand never changes shape"


def test_chin_cheek_fingertip_touches_chin_then_cheek():
    open_signer()
    face = bpy.data.objects["SignerFace"]
    tree = mesh_tree(face)
    co = np.array([face.matrix_world @ v.co for v in face.data.vertices])
    nose = co[np.argmin(co[:, 1])]
    ob = import_clip("chin_cheek")
    pose = ob.pose.bones
    rest_head = ob.data.bones["head"].matrix_local
    scene = bpy.context.scene
    touches = []
    for f in frames_of(ob):
        scene.frame_set(f)
        # the fingertip in the head's rest frame, where the face mesh lives
        tip = rest_head @ pose["head"].matrix.inverted() @ pose["f_index.03.R"].tail
        hit, normal, _, dist = tree.find_nearest(ob.matrix_world @ tip)
        signed = dist if (tip - hit).dot(normal) >= 0 else -dist
        assert signed > -0.003, f"frame {f}: fingertip {-signed * 1000:.1f} mm inside the face"
        if dist < 0.005:
            touches.append((f, hit))
    assert touches, "the index fingertip never comes within 5 mm of the face"
    chin = [f for f, p in touches if abs(p.x) < 0.02 and p.z < nose[2] - 0.03]
    cheek = [f for f, p in touches if p.x < -0.025 and abs(p.z - nose[2]) < 0.04]
    assert chin and cheek and max(chin) < min(cheek), (chin, cheek)

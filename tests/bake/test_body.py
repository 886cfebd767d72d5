"""The physics pass on characters SignSim has never seen: body volumes from the skin,
metres whatever the scale, warnings for every fallback.

Motion is made here by keying the target rig's own bones (no retargeting involved).
Penetrations are checked against an exact mesh test: distance from the bones' sample
spheres to the evaluated skin (mathutils.bvhtree.BVHTree) of the touched body part.
"""
import json
import os
import pathlib

import bpy
import numpy as np
import pytest
from mathutils import Quaternion, Vector
from mathutils.bvhtree import BVHTree

from retarget_rigs import character


@pytest.fixture
def mods(addon):
    a = addon.signsim_addon
    return a.bake.api, a.body.geometry, a.errors.SignSimError


def key_pose(ob, poses, action_name="drive"):
    """Key `poses` ([{bone: (w, x, y, z) local rotation}] one per frame, from frame 1) on ob."""
    ob.animation_data_create()
    action = bpy.data.actions.new(action_name)
    ob.animation_data.action = action
    for f, pose in enumerate(poses, start=1):
        for pb in ob.pose.bones:
            pb.rotation_mode = 'QUATERNION'
            pb.rotation_quaternion = pose.get(pb.name, (1, 0, 0, 0))
            pb.keyframe_insert("rotation_quaternion", frame=f)
    return action


def chest_frame(ob, job):
    """World rotation (3, 3) and position (3,) m of the rig's chest (the model's base) at rest."""
    m = ob.matrix_world @ ob.data.bones[job.rig.base_bone].matrix_local
    return np.array(m.to_3x3().normalized()), np.array(m.translation) * job.rig.world_scale


def reach(solver, job, ob, bones, tip_bone, target, start=None):
    """Local rotations {bone: Quaternion} of `bones` (model bone names) that put the tail
    of `tip_bone` at world `target` (3,) m: damped least squares on the model's FK."""
    from scipy.optimize import least_squares
    model = job.rig.model
    names = list(job.rig.bone_names)
    idx = [names.index(b) for b in bones]
    tip = names.index(tip_bone)
    R, p = chest_frame(ob, job)
    kinematics, quat = solver.core.kinematics, solver.core.quat

    def pose(x):
        q = np.tile([1.0, 0, 0, 0], (model.n_bones, 1))
        q[idx] = quat.exp(x.reshape(-1, 3))
        return q

    def residual(x):
        kin = kinematics.forward_kinematics(model, pose(x), R, p)
        end = kinematics.capsule_segments(model, kin)[tip, 1]
        return np.concatenate([end - target, 0.002 * x])  # small regularisation: a natural pose

    x0 = np.zeros(3 * len(idx)) if start is None else start
    sol = least_squares(residual, x0)
    assert np.linalg.norm(residual(sol.x)[:3]) < 1e-3, "target out of reach"
    return {b: Quaternion(q) for b, q in zip(bones, pose(sol.x)[idx])}, sol.x


def region_bvh(ob_mesh, depsgraph, vertex_ok):
    """BVHTree of the evaluated mesh's polygons whose vertices all satisfy vertex_ok (V,) bool."""
    ev = ob_mesh.evaluated_get(depsgraph)
    me = ev.to_mesh()
    mw = ob_mesh.matrix_world
    verts = [mw @ v.co for v in me.vertices]
    polys = [tuple(p.vertices) for p in me.polygons if all(vertex_ok[v] for v in p.vertices)]
    ev.to_mesh_clear()
    return BVHTree.FromPolygons(verts, polys)


def exact_penetration_mm(tree, centres, radius):
    """Deepest r − signed distance (mm, negative: the gap) of spheres (centres (k, 3) m, radius (k,)) to the
    mesh of `tree` (a body part cut from the skin, so with holes): inside when most of six
    axis-aligned rays cross the surface an odd number of times."""
    worst = -np.inf
    for c, r in zip(centres, radius):
        _co, _normal, _i, dist = tree.find_nearest(Vector(c))
        worst = max(worst, r - (-dist if _inside(tree, Vector(c)) else dist))
    return 1e3 * worst


_RAYS = [Vector(d) for d in ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1))]


def _inside(tree, point):
    odd = 0
    for d in _RAYS:
        hits, origin = 0, point
        while True:
            hit, _n, _i, _d = tree.ray_cast(origin, d)
            if hit is None:
                break
            hits += 1
            origin = hit + 1e-7 * d
        odd += hits % 2
    return odd > 3


def posed_samples(ob, bone, radius, length, scale):
    """World centres (k, 3) m of a bone's axis samples (spheres one radius apart) in the current pose."""
    pb = ob.pose.bones[bone]
    head, tail = ob.matrix_world @ pb.head, ob.matrix_world @ pb.tail
    k = int(np.ceil(length / radius)) + 1
    return np.array([np.array(head.lerp(tail, t)) for t in np.linspace(0, 1, k)]) * scale


def skin_of(ob):
    return next(c for c in ob.children if c.type == 'MESH'
                and any(m.type == 'ARMATURE' for m in c.modifiers))


def region_mask(addon, ob, mesh_ob, region_name):
    """Per vertex of mesh_ob: belongs to body region `region_name` (the add-on's own reading)."""
    geo = addon.signsim_addon.body.geometry
    sk = addon.signsim_addon.body.rig.skeleton_of(ob.data)
    body = addon.solver.retarget.bonemap.analyse(sk)
    regions = geo.bone_regions(sk, body)
    me = mesh_ob.data
    sparse = [(v.index, g.group, g.weight) for v in me.vertices for g in v.groups]
    group_region = [regions.get(sk.index.get(g.name), -1) for g in mesh_ob.vertex_groups]
    owner = addon.solver.core.body_volumes.region_owner(len(me.vertices), *zip(*sparse), group_region)
    return owner == geo.REGIONS.index(region_name)


def drive(ob, job_bones, start, end, frames_in=24, frames_hold=12):
    """Per-frame poses easing from `start` to `end` ({bone: Quaternion}) then holding."""
    poses = []
    for k in range(frames_in + frames_hold):
        t = min(1.0, k / (frames_in - 1))
        s = 0.5 - 0.5 * np.cos(np.pi * t)
        poses.append({b: start.get(b, Quaternion()).slerp(end[b], s) for b in end})
    return poses


def facing(ob):
    """World forward and right unit vectors of a character (up +Z; right from the hands)."""
    right = np.array(ob.matrix_world @ ob.data.bones["hand.R"].head_local
                     - ob.matrix_world @ ob.data.bones["hand.L"].head_local)
    right[2] = 0.0
    right /= np.linalg.norm(right)
    return np.cross([0.0, 0.0, 1.0], right), right


def surface_point(tree, origin, direction):
    hit, normal, _i, _d = tree.ray_cast(Vector(origin), Vector(direction))
    assert hit is not None
    return np.array(hit), np.array(normal)


ARM_R = ("shoulder.R", "upper_arm.R", "forearm.R", "hand.R")


@pytest.fixture
def godot(shared_data):
    return character(shared_data, "godot")


def _bake(bake, ob, action, frames=None):
    warnings = []
    job = bake.prepare(bpy.context.scene, ob, action, preset="default", report=lambda _level, message: warnings.append(message))
    solved = bake.solve(job)
    new = bake.write(bpy.context.scene, job, solved)
    return job, solved, new, warnings


@pytest.mark.slow
@pytest.mark.parametrize("spot", ["chin", "cheek"])
def test_fingertip_driven_into_the_face_stops_at_the_skin(addon, mods, godot, spot):
    """On one skinned mesh (no face object) the index tip, keyed 1 cm into the chin or
    cheek, stops at the skin: ≤ 0.5 mm on every frame by the exact mesh test on the
    evaluated skin, which also agrees with the reported hand–face penetration."""
    bake, geo, _ = mods
    ob = godot
    skin = skin_of(ob)
    dg = bpy.context.evaluated_depsgraph_get()
    face_tree = region_bvh(skin, dg, region_mask(addon, ob, skin, "face"))
    head = ob.matrix_world @ ob.data.bones["spine.006" if "spine.006" in ob.data.bones else "spine.005"].head_local
    job0 = bake.prepare(bpy.context.scene, ob, key_pose(ob, [{}, {}], "rest"), preset="default")
    face = next(m for m in job0.rig.meshes if m.kind == "face")
    height = face.vertices[:, 1].max() * {"chin": 0.25, "cheek": 0.45}[spot]
    forward, right = facing(ob)
    origin = np.array(head) + 0.5 * forward + {"chin": 0.0, "cheek": 0.035}[spot] * right + [0, 0, height]
    point, normal = surface_point(face_tree, origin, -forward)
    target = point - 0.01 * normal
    m, exact = _drive_and_measure(addon, bake, ob, job0, skin, "face", "f_index.03.R", target, "into_" + spot)
    assert m["reference"]["penetration_max_mm_by_kind"]["hand–face"] > 5.0
    assert exact.max() <= 0.5  # on every frame
    assert exact[-6:].max() > -1.0  # touching at the end, not pushed away
    # one penetration definition: the reported hand–face depth is the exact one to within
    # the distance grid's interpolation (0.1 mm at 5 mm spacing, see sdf.build_distance_grid)
    reported = m["baked"]["penetration_max_mm_by_kind"]["hand–face"]
    assert abs(reported - max(exact.max(), 0.0)) <= 0.15
    assert m["baked"]["fallbacks"] == 0


def _drive_and_measure(addon, bake, ob, job0, skin, region, tip, target, name):
    """Key the right arm so `tip` reaches `target`, bake, show the bake, and return (bake
    metrics, exact per-frame penetration (mm) of the right hand's bones into `region`)."""
    end, _ = reach(addon.solver, job0, ob, ARM_R, tip, target)
    action = key_pose(ob, drive(ob, ARM_R, {}, end), name)
    job, solved, new, _warnings = _bake(bake, ob, action)
    ob.animation_data.action = new
    hand = [n for n, p in zip(job.rig.bone_names, job.rig.parts) if p.endswith(".R") and p.split(".")[0] in
            ("hand", "finger", "thumb")]
    return solved.metrics, _sample_penetration(addon, ob, job, skin, region, hand, job.frames)


def _sample_penetration(addon, ob, job, skin, region, bones, frames):
    """Exact penetration (mm) per frame of the model's sample spheres of `bones` into the
    evaluated skin of `region`: finger axes as capsule samples, the hand as its palm plate."""
    plates = addon.solver.core.body_volumes.hand_plates(job.rig.model, job.rig.parts, job.rig.meshes)
    names = list(job.rig.bone_names)
    model = job.rig.model
    out = []
    for f in frames:
        bpy.context.scene.frame_set(int(f))
        dg = bpy.context.evaluated_depsgraph_get()
        tree = region_bvh(skin, dg, region_mask(addon, ob, skin, region))
        worst = -np.inf
        for name in bones:
            i = names.index(name)
            if i in plates:
                centres, r = plates[i]
                m = np.array(ob.matrix_world @ ob.pose.bones[name].matrix)
                world = (centres / job.rig.world_scale) @ m[:3, :3].T + m[:3, 3]
                worst = max(worst, exact_penetration_mm(tree, world * job.rig.world_scale, [r] * len(world)))
            else:
                r, L = model.capsule_radius[i], model.capsule_length[i]
                worst = max(worst, exact_penetration_mm(tree, posed_samples(ob, name, r, L, job.rig.world_scale),
                                                        [r] * 99))
        out.append(worst)
    return np.array(out)


@pytest.mark.slow
def test_hand_driven_into_the_chest_stops_at_the_chest(addon, mods, godot):
    bake, geo, _ = mods
    ob = godot
    skin = skin_of(ob)
    dg = bpy.context.evaluated_depsgraph_get()
    torso_tree = region_bvh(skin, dg, region_mask(addon, ob, skin, "torso"))
    job0 = bake.prepare(bpy.context.scene, ob, key_pose(ob, [{}, {}], "rest"), preset="default")
    chest = np.array(ob.matrix_world @ ob.data.bones[job0.rig.base_bone].head_local)
    forward, _right = facing(ob)
    point, normal = surface_point(torso_tree, chest + 0.5 * forward, -forward)
    m, exact = _drive_and_measure(addon, bake, ob, job0, skin, "torso", "hand.R", point - 0.02 * normal,
                                  "into_chest")
    assert m["reference"]["penetration_max_mm_by_kind"]["hand–torso"] > 10.0
    assert exact.max() <= 1.0  # on every frame
    # resting on the chest, not pushed away (the chest field is rigid in the chest's frame,
    # the skin there also follows the raised arm's weights: about a millimetre)
    assert exact[-6:].max() > -2.0
    assert m["baked"]["penetration_max_mm_by_kind"]["hand–torso"] <= 1.0
    assert m["baked"]["fallbacks"] == 0


def curl_axes(addon, ob, fingers, side="R"):
    """{finger bone: unit axis (3,) in its rest frame} about which a positive angle curls it
    towards the palm: y × n, n the palm normal (the rig reader's), y the bone's axis."""
    rig = addon.signsim_addon.body.rig
    sk = rig.skeleton_of(ob.data)
    body = addon.solver.retarget.bonemap.analyse(sk)
    rest = np.array([np.array(b.matrix_local) for b in ob.data.bones])
    n = rig._palm_normals(body, rest)[side]
    out = {}
    for name in fingers:
        local_n = rest[sk.index[name]][:3, :3].T @ n
        axis = np.cross([0.0, 1.0, 0.0], local_n)
        out[name] = axis / np.linalg.norm(axis)
    return out


def test_closed_fist_rests_on_the_palm(addon, mods, godot):
    """Every finger of the right hand keyed to curl about its true curl axis (the knuckle
    line, whatever the bone roll) into a fist: the fingers stop on the palm volume
    (≤ 0.5 mm finger–palm penetration reported) and touch it."""
    bake, geo, _ = mods
    ob = godot
    solver = addon.solver
    job0 = bake.prepare(bpy.context.scene, ob, key_pose(ob, [{}, {}], "rest"), preset="default")
    names = list(job0.rig.bone_names)
    model = job0.rig.model
    palm = next(m for m in job0.rig.meshes if m.kind == "palm.R")
    fingers = [n for n, p in zip(names, job0.rig.parts) if p == "finger.R"]
    hand = names.index("hand.R")
    axes = curl_axes(addon, ob, fingers)
    curl = {"01": 1.5, "02": 1.6, "03": 0.9}
    end = {n: Quaternion(axes[n], curl[n.split(".")[1]]) for n in fingers}
    action = key_pose(ob, drive(ob, fingers, {}, end), "fist")
    job, solved, new, warnings = _bake(bake, ob, action)
    m = solved.metrics
    assert m["reference"]["penetration_max_mm_by_kind"]["finger–palm"] > 5.0
    # touching: some phalanx ends within a millimetre of the palm's skin (exact point-to-mesh
    # distance to the hand's rest skin in the hand's frame)
    rot = solved.rotations[-1]
    kin = solver.core.kinematics.forward_kinematics(model, rot, np.eye(3), np.zeros(3))
    seg = solver.core.kinematics.capsule_segments(model, kin)
    R, p = kin.rotations[hand], kin.positions[hand]
    tips = [names.index(n) for n in fingers if n.split(".")[1] in ("02", "03")]
    gaps = [solver.core.sdf.mesh_signed_distance(palm.vertices, palm.triangles, ((seg[t, 1] - p) @ R)[None])[0]
            - model.capsule_radius[t] for t in tips]
    assert min(gaps) <= 1e-3
    assert m["baked"]["penetration_max_mm_by_kind"]["finger–palm"] <= 0.5
    assert m["baked"]["fallbacks"] == 0


def scaled_copy(ob, factor):
    """The character with its data (bone heads and tails, skin vertices) scaled by
    `factor` and the object scale divided by it, as Blender's FBX importer builds a
    centimetre file (factor 100): the same figure in the world. Bone rolls are kept."""
    bpy.ops.object.select_all(action='DESELECT')
    bpy.context.view_layer.objects.active = ob
    ob.select_set(True)
    bpy.ops.object.mode_set(mode='EDIT')
    for b in ob.data.edit_bones:
        roll = b.roll
        b.head, b.tail = b.head * factor, b.tail * factor
        b.roll = roll
    bpy.ops.object.mode_set(mode='OBJECT')
    for c in ob.children:
        if c.type == 'MESH':
            co = np.empty(len(c.data.vertices) * 3, dtype=np.float32)
            c.data.vertices.foreach_get("co", co)
            c.data.vertices.foreach_set("co", co * np.float32(factor))
            c.data.update()
    ob.scale = ob.scale / factor
    bpy.context.view_layer.update()
    return ob


def _relative_close(a, b, rtol, atol, path=""):
    """Assert nested metrics a, b agree within rtol relative or atol absolute."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            if k not in ("bake_seconds", "realtime_factor", "projection_seconds",
                         "seconds_per_colliding_frame"):  # wall-clock timing
                _relative_close(a[k], b[k], rtol, atol, f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _relative_close(x, y, rtol, atol, f"{path}[{i}]")
    elif isinstance(a, (int, float)) and not isinstance(a, bool):
        assert abs(a - b) <= rtol * max(abs(a), abs(b)) + atol, f"{path}: {a} vs {b}"
    else:
        assert a == b, path


@pytest.mark.slow
@pytest.mark.parametrize("factor,unit", [(100.0, False), (128.0, False), (128.0, True)])
def test_centimetre_copy_bakes_the_same_motion(addon, mods, shared_data, factor, unit):
    """Data ×100 with object scale 0.01 (an FBX centimetre import), or ×128 (exact in
    float32), or the figure 128× larger in a scene whose unit is 1/128 m: the same keys
    and metrics as the metre original — every length is metres inside. Exact scales
    within 1e-9; at ×100 within what Blender's float32 copy of the rig itself differs by."""
    bake, geo, _ = mods
    runs = []
    for scaled in (False, True):
        bpy.ops.wm.read_homefile(use_empty=True)
        ob = character(shared_data, "godot")
        if scaled and unit:
            # the whole figure `factor` times larger in Blender units, each unit 1/factor m
            ob.scale, ob.location = ob.scale * factor, ob.location * factor
            bpy.context.scene.unit_settings.scale_length = 1.0 / factor
            bpy.context.view_layer.update()
        elif scaled:
            scaled_copy(ob, factor)
            assert ob.data.bones["hand.R"].length > 1.0 and abs(ob.scale[0] * factor - 1.0) < 1e-6
        if not runs:
            job0 = bake.prepare(bpy.context.scene, ob, key_pose(ob, [{}, {}], "rest"), preset="default")
            skin = skin_of(ob)
            tree = region_bvh(skin, bpy.context.evaluated_depsgraph_get(), region_mask(addon, ob, skin, "face"))
            forward, _right = facing(ob)
            head = np.array(ob.matrix_world @ ob.data.bones["spine.005"].head_local)
            point, normal = surface_point(tree, head + 0.5 * forward + [0, 0, 0.06], -forward)
            end, _ = reach(addon.solver, job0, ob, ARM_R, "f_index.03.R", point - 0.01 * normal)
            poses = drive(ob, ARM_R, {}, end, frames_in=12, frames_hold=4)
        action = key_pose(ob, poses, "touch")
        job, solved, new, warnings = _bake(bake, ob, action)
        runs.append((solved, warnings, job))
    (a, wa, ja), (b, wb, jb) = runs
    assert jb.rig.world_scale == pytest.approx(ja.rig.world_scale * (1.0 if unit else 1.0 / factor), rel=1e-6)
    assert a.metrics["reference"]["penetration_max_mm_by_kind"]["hand–face"] > 1.0  # contact is exercised
    ma, mb = ja.rig.model, jb.rig.model
    # ×128 is exact in Blender's float32 bone and vertex data; ×100 is not, and the rest
    # frames Blender stores then differ by ~1e-6: the bake must not amplify that.
    data = np.abs(ma.rest_rotations - mb.rest_rotations).max()
    assert data < 1e-12 if factor == 128.0 else data < 2e-6
    keys = np.abs(a.rotations - b.rotations).max()
    assert keys <= max(1e-9, 2.0 * data)
    # Metrics: 1e-9 relative when exact; at ×100 the float32 skin and bones differ by
    # ~0.1 µm, so mm and degree values may differ by 1e-3 (1 µm, a thousandth of a degree).
    # The skin penetration is measured on Blender's float32 evaluated skin, which its
    # armature deform computes in float32 at each size: 1 µm at every factor.
    def split(m, skin):
        return {s: {k: v for k, v in m[s].items() if k.startswith(("skin_", "per_frame_skin_")) == skin}
                for s in ("reference", "baked")} | ({} if skin else
                                                    {k: v for k, v in m.items() if k not in ("reference", "baked")})
    _relative_close(split(a.metrics, False), split(b.metrics, False), 1e-6, 1e-3 if factor == 100.0 else 1e-9)
    _relative_close(split(a.metrics, True), split(b.metrics, True), 1e-6, 1e-3)
    assert a.metrics["baked"]["skin_penetration_max_mm"] > 0.0 or a.metrics["reference"]["skin_penetration_max_mm"] > 0.0
    assert wa == wb


def test_non_uniform_scale_is_one_clear_error(mods, godot):
    bake, _geo, SignSimError = mods
    action = key_pose(godot, [{}, {}], "still")
    godot.scale = (1.0, 1.0, 1.5)
    bpy.context.view_layer.update()
    names = sorted(a.name for a in bpy.data.actions)
    with pytest.raises(SignSimError, match="non-uniform scale"):
        bake.prepare(bpy.context.scene, godot, action)
    assert sorted(a.name for a in bpy.data.actions) == names


def test_json_carries_every_warning_the_human_output_prints(addon, godot, tmp_path, capsys):
    """The CC0 base mesh without its skin: default radii, no face, no torso, palm boxes —
    each said once as `warning: …` and listed, with the same text, in --json warnings."""
    for c in list(godot.children):
        bpy.data.objects.remove(c)
    key_pose(godot, [{"f_index.02.R": Quaternion((1, 0, 0), 0.1 * k)} for k in range(6)], "wave")
    blend = tmp_path / "rig.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))
    cli = addon.signsim_addon.cli.main
    args = ["bake", "--blend", str(blend), "--armature", godot.name, "--preset", "default"]
    assert cli([*args, "--out", str(tmp_path / "a.blend")]) == 0
    human = [line[len("warning: "):] for line in capsys.readouterr().out.splitlines() if line.startswith("warning: ")]
    assert cli([*args, "--out", str(tmp_path / "b.blend"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert human and result["warnings"] == human
    assert result["metrics"]["warnings"] == human
    said = " ".join(human)
    for what in ("default radii", "no face", "no torso", "palm is a box"):
        assert what in said, what


# the suite: one clip on each rig; SIGNSIM_SWEEP=1 (bench/bench_body_clips.py): every clip
HAND_CLIPS = (("mocap/pybvh_bvh_test3_fingers.bvh", "mocap/animdrawings_rokoko_jesse_dance.bvh",
               "mocap/bvhpython_test_freebvh_mixamorig.bvh", "mocap/makehuman_face-poseunits.bvh",
               "generated/fingerspell_80.bvh", "generated/fingerspell_80_noisy.bvh", "generated/clap_fast.bvh")
              if os.environ.get("SIGNSIM_SWEEP") else ("generated/fingerspell_80.bvh",))
CLIP_FRAMES = 48  # enough for contacts and limits to act; the whole clips take minutes each


@pytest.fixture(scope="module")
def rig_files(tmp_path_factory, addon):
    """{rig: .blend} for the bundled signer and the two shared glTF characters."""
    root = pathlib.Path(__file__).resolve().parents[2]
    shared = root.parent / "shared" / "data"
    if not shared.is_dir():
        pytest.skip(f"third-party test data not found at {shared}")
    folder = tmp_path_factory.mktemp("rigs")
    out = {"signer": root / "sample_blends" / "signer.blend"}
    for key in ("godot", "robot"):
        bpy.ops.wm.read_homefile(use_empty=True)
        character(shared, key)
        out[key] = folder / f"{key}.blend"
        bpy.ops.wm.save_as_mainfile(filepath=str(out[key]))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("clip", HAND_CLIPS)
@pytest.mark.parametrize("rig", ["signer", "godot", "robot"])
def test_real_clips_bake_without_fallbacks_and_with_body_contact(addon, mods, shared_data, rig_files,
                                                                  tmp_path, rig, clip):
    """Retargeted real and generated clips on three characters: 0 fallbacks, no limit
    rejecting the input (limits cover the reference: 0 excess), and hand–face and
    hand–torso contacts tested whenever the rig has a head and a torso volume."""
    bake, _geo, _ = mods
    out = tmp_path / "clip.blend"
    assert addon.signsim_addon.cli.main(["retarget", "--clip", str(shared_data / clip),
                                         "--rig", str(rig_files[rig]), "--out", str(out)]) == 0
    bpy.ops.wm.open_mainfile(filepath=str(out), load_ui=False)
    ob = next(o for o in bpy.data.objects if o.type == 'ARMATURE' and o.animation_data and o.animation_data.action)
    first = int(ob.animation_data.action.frame_range[0])
    job = bake.prepare(bpy.context.scene, ob, frame_range=(first, first + CLIP_FRAMES - 1), preset="default")
    solved = bake.solve(job)
    m = solved.metrics
    assert m["baked"]["fallbacks"] == 0
    assert m["reference"]["joint_limit_excess_deg"] == 0.0  # the limits hold the reference
    assert not any("fell back" in w or "limit" in w for w in m["warnings"])
    kinds = {mesh.kind for mesh in job.rig.meshes}
    assert {"face", "torso"} <= kinds, kinds
    assert m["contact_pairs"].get("hand–face") and m["contact_pairs"].get("hand–torso")
    assert np.all(np.isfinite(solved.rotations))

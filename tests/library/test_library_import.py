"""The real mocap files through the CLI and the operator, and every kind of bad input."""
import hashlib
import json
import pathlib
import re
import sys

import bpy
import numpy as np
import pytest
from bpy_extras import anim_utils

import library_samples as S

HEAD = re.compile(r"(^|[:_])head$", re.I)
HIPS = re.compile(r"(^|[:_])(hips|root)$", re.I)


def mocap_files(shared_data):
    return sorted((shared_data / "mocap").glob("*.bvh"))


def data_rows(path):
    """Data rows and frame time of a BVH file, counted independently of the add-on."""
    lines = path.read_text().replace("\r", "\n").split("\n")
    i = next(k for k, ln in enumerate(lines) if ln.strip().lower().startswith("frame time"))
    frame_time = float(lines[i].split(":")[1])
    return sum(1 for ln in lines[i + 1:] if ln.strip()), frame_time


@pytest.fixture(scope="module")
def cli_library(tmp_path_factory):
    """All real mocap files imported once through the CLI handler."""
    addon = sys.modules["bl_ext.signsim_dev.signsim"]
    data = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"
    if not data.is_dir():
        pytest.skip("third-party test data not found")
    lib = tmp_path_factory.mktemp("cli") / "library.blend"
    code = addon.signsim_addon.cli.main(
        ["import", str(data / "mocap"), "--library", str(lib), "--tags", "mocap,style:casual",
         "--catalog", "mocap/real", "--json"])
    return code, lib, data


@pytest.mark.compat
@pytest.mark.slow
def test_cli_imports_every_real_file(cli_library, capsys, shared_data):
    code, lib, _ = cli_library
    assert code == 0
    listing = json.loads(_last_json(capsys, ["list", "--library", str(lib), "--json"]))
    names = sorted(c["name"] for c in listing["clips"])
    assert names == sorted(p.stem for p in mocap_files(shared_data))
    for clip in listing["clips"]:
        assert {"name", "fps", "frames", "duration_s", "bones", "tags", "warnings"} <= set(clip)
        assert "mocap" in clip["tags"] and "style:casual" in clip["tags"]
        assert clip["catalog"] == "mocap/real"


def _last_json(capsys, argv):
    from bl_ext.signsim_dev.signsim.signsim_addon import cli
    capsys.readouterr()
    assert cli.main(argv) == 0
    return capsys.readouterr().out.strip().splitlines()[-1]


def _load_all(lib):
    with bpy.data.libraries.load(str(lib), link=False) as (src, dst):
        dst.actions = list(src.actions)
    return {a.name: a for a in dst.actions}


def _sample_heights(action):
    skel = action.signsim.skeleton
    if skel.name not in bpy.context.scene.objects:
        bpy.context.scene.collection.objects.link(skel)
    ad = skel.animation_data_create()
    ad.action = action
    if ad.action_slot_handle != action.slots[0].handle:
        ad.action_slot = action.slots[0]
    names = [b.name for b in skel.pose.bones]
    head = next(i for i, n in enumerate(names) if HEAD.search(n))
    hips = next(i for i, n in enumerate(names) if HIPS.search(n) and "joint_Root" not in n) \
        if any(HIPS.search(n) and "joint_Root" not in n for n in names) else 0
    out = []
    n = action.signsim.frame_count
    for f in np.linspace(1, n, 5).astype(int):
        bpy.context.scene.frame_set(int(f))
        mw = np.array(skel.matrix_world)
        pts = np.array([(mw @ np.append(np.array(pb.head), 1))[:3] for pb in skel.pose.bones])
        out.append((pts[head, 2] - pts[hips, 2], pts[:, 2].max() - pts[:, 2].min()))
    return out


@pytest.mark.slow
def test_real_files_duration_upright_height_and_no_jumps(cli_library, shared_data):
    _code, lib, _ = cli_library
    check_real_clips(lib, shared_data)


def check_real_clips(lib, shared_data):
    """Duration, upright skeleton, height and rotation continuity of every real clip."""
    clips = _load_all(lib)
    for path in mocap_files(shared_data):
        action = clips[path.stem]
        s = action.signsim
        rows, frame_time = data_rows(path)
        # duration = data rows × frame time, within one frame (a calibration frame may go)
        assert abs(s.duration - rows * frame_time) <= frame_time + 1e-6, path.name
        assert abs(s.frame_count - rows) <= 1, path.name
        assert s.fps == pytest.approx(1 / frame_time, rel=1e-3)
        # upright (head above hips) and 1.2–2.2 m tall, in the median sampled frame
        samples = _sample_heights(action)
        assert np.median([d for d, _h in samples]) > 0.1, path.name
        height = float(np.median([h for _d, h in samples]))
        assert 1.2 <= height <= 2.2, (path.name, height)
        # no bone turns more than 90° between adjacent frames, hemispheres continuous
        bag = anim_utils.action_get_channelbag_for_slot(action, action.slots[0])
        per_bone = {}
        for fc in bag.fcurves:
            if fc.data_path.endswith("rotation_quaternion"):
                co = np.empty(2 * len(fc.keyframe_points))
                fc.keyframe_points.foreach_get("co", co)
                per_bone.setdefault(fc.data_path, {})[fc.array_index] = co[1::2]
        assert len(per_bone) == s.bone_count or len(per_bone) > 0
        for bone, comps in per_bone.items():
            q = np.stack([comps[i] for i in range(4)], axis=1)
            dots = np.sum(q[1:] * q[:-1], axis=1)
            assert np.all(dots >= 0), (path.name, bone)
            step = np.degrees(2 * np.arccos(np.clip(dots, 0, 1)))
            assert step.max() <= 90.0, (path.name, bone, step.max())


@pytest.mark.slow
def test_operator_imports_every_real_file(addon, tmp_path, shared_data):
    lib = tmp_path / "op.blend"
    files = mocap_files(shared_data)
    result = bpy.ops.signsim.import_clips(
        directory=str(shared_data / "mocap"), files=[{"name": p.name} for p in files],
        library_path=str(lib))
    assert result == {'FINISHED'}
    names = sorted(c["name"] for c in addon.signsim_addon.library.api.list_clips(str(lib)))
    assert names == sorted(p.stem for p in files)
    # the sidebar list shows them
    assert sorted(i.name for i in bpy.context.scene.signsim.clips) == names
    check_real_clips(lib, shared_data)


# --------------------------------------------------------------------------- bad input

def _good(tmp, name="good.bvh", n=12):
    return S.write(tmp / name, S.bvh_text(S.still_rows(n)))


def _light_fbx(path):
    bpy.ops.wm.read_homefile(use_empty=True)
    arm = bpy.data.objects.new("Rig", bpy.data.armatures.new("Rig"))
    bpy.context.scene.collection.objects.link(arm)
    lamp = bpy.data.objects.new("Lamp", bpy.data.lights.new("Lamp", 'POINT'))
    bpy.context.scene.collection.objects.link(lamp)
    bpy.ops.export_scene.fbx(filepath=str(path))
    bpy.ops.wm.read_homefile(use_empty=True)
    return path


def make_bad(tmp, kind):
    """A broken file of the given kind; returns (path, words the error must contain)."""
    good = S.bvh_text(S.still_rows(12))
    if kind == "empty":
        return S.write(tmp / "empty.bvh", ""), ["empty"]
    if kind == "truncated":
        return S.write(tmp / "truncated.bvh", good[: len(good) - 40]), ["truncated"]
    if kind == "truncated_hierarchy":
        return S.write(tmp / "cut.bvh", good[:300]), ["truncated"]
    if kind == "nan":
        lines = good.splitlines()
        lines[-3] = " ".join(["nan"] + lines[-3].split()[1:])
        return S.write(tmp / "nan.bvh", "\n".join(lines) + "\n"), ["non-finite", "frame 10"]
    if kind == "channels":
        lines = good.splitlines()
        lines[-6] = lines[-6] + " 1.0 2.0"
        return S.write(tmp / "channels.bvh", "\n".join(lines) + "\n"), ["channel", "frame 7"]
    if kind == "not_mocap":
        return S.write(tmp / "notes.bvh", "Shopping list:\n- milk\n- bread\n"), ["not a BVH"]
    if kind == "extension":
        return S.write(tmp / "clip.xyz", good), ["unsupported", ".xyz"]
    if kind == "light_fbx":
        return _light_fbx(tmp / "light.fbx"), ["light", "FBX"]
    raise ValueError(kind)


BAD_KINDS = ("empty", "truncated", "truncated_hierarchy", "nan", "channels", "not_mocap",
             "extension", "light_fbx")


def id_state():
    """Every datablock name per collection, plus the scene settings importers touch."""
    out = {}
    for prop in bpy.types.BlendData.bl_rna.properties:
        if prop.type == 'COLLECTION':
            coll = getattr(bpy.data, prop.identifier)
            try:
                out[prop.identifier] = sorted(i.name for i in coll)
            except (TypeError, AttributeError):
                pass
    sc = bpy.context.scene
    out["scene"] = (sc.render.fps, sc.render.fps_base, sc.frame_start, sc.frame_end,
                    sc.frame_current, bpy.context.view_layer.objects.active and
                    bpy.context.view_layer.objects.active.name)
    return out


def _user_scene():
    """A small user file: an object, an action named like an imported clip, 30 fps."""
    sc = bpy.context.scene
    sc.render.fps = 30
    sc.frame_end = 77
    cube = bpy.data.objects.new("Cube", bpy.data.meshes.new("Cube"))
    sc.collection.objects.link(cube)
    bpy.context.view_layer.objects.active = cube
    bpy.data.actions.new("good").use_fake_user = True


@pytest.mark.parametrize("kind", BAD_KINDS)
def test_bad_input_one_clear_error_and_nothing_changes(addon, tmp_path, kind):
    lib = addon.signsim_addon.library.api
    library = tmp_path / "lib.blend"
    lib.import_paths([str(_good(tmp_path))], str(library))
    lib_bytes = hashlib.sha256(library.read_bytes()).hexdigest()
    listing = lib.list_clips(str(library))
    bad, words = make_bad(tmp_path, kind)
    _user_scene()
    before = id_state()
    result = lib.import_paths([str(bad)], str(library))
    assert result["imported"] == []
    (fail,) = result["failed"]
    assert fail["path"] == str(bad)
    assert bad.name in fail["error"] and "\n" not in fail["error"]
    for w in words:
        assert w.lower() in fail["error"].lower(), fail["error"]
    assert id_state() == before
    assert hashlib.sha256(library.read_bytes()).hexdigest() == lib_bytes
    assert lib.list_clips(str(library)) == listing


@pytest.mark.slow
def test_folder_import_good_and_broken_files(addon, tmp_path, shared_data, capsys):
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    for p in mocap_files(shared_data):
        (folder / "sub" / p.name).symlink_to(p)
    bad_files = [make_bad(folder, k)[0] for k in BAD_KINDS if k not in ("truncated_hierarchy", "extension")]
    (folder / "textures.png").write_bytes(b"\x89PNG")  # not mocap: skipped inside a folder
    make_bad(folder, "extension")                       # clip.xyz: skipped too (an error when named)
    library = tmp_path / "lib.blend"
    cli = addon.signsim_addon.cli.main
    capsys.readouterr()
    code = cli(["import", str(folder), "--library", str(library), "--json"])
    out, err = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 3     # clips imported and files failed: the partial-success status
    assert err.strip().count("\n") == 0 and "failed" in err
    assert sorted(r["name"] for r in result["imported"]) == sorted(p.stem for p in mocap_files(shared_data))
    assert sorted(pathlib.Path(f["path"]).name for f in result["failed"]) == sorted(p.name for p in bad_files)
    not_mocap = addon.signsim_addon.library.api.NOT_MOCAP
    assert [(pathlib.Path(s["path"]).name, s["reason"]) for s in result["skipped"]] == [
        ("clip.xyz", not_mocap), ("textures.png", not_mocap)]
    lib = addon.signsim_addon.library.api
    listing = lib.list_clips(str(library))
    assert sorted(c["name"] for c in listing) == sorted(p.stem for p in mocap_files(shared_data))
    # a second folder import of only broken files changes nothing
    only_bad = tmp_path / "bad"
    only_bad.mkdir()
    for p in bad_files:
        p.rename(only_bad / p.name)
    stamp = hashlib.sha256(library.read_bytes()).hexdigest()
    result = lib.import_paths([str(only_bad)], str(library))
    assert not result["imported"] and len(result["failed"]) == len(bad_files)
    assert hashlib.sha256(library.read_bytes()).hexdigest() == stamp
    assert lib.list_clips(str(library)) == listing


@pytest.mark.slow
def test_keys_pose_the_skeleton_exactly_as_blenders_importer(addon, cli_library, shared_data):
    """The library computes the BVH keys itself (in bulk); Blender's plain importer, run
    with the same axes and scale, must pose every bone the same on every real file."""
    bvh = addon.solver.mocap.bvh_file
    _code, lib, _ = cli_library
    clips = _load_all(lib)
    scene = bpy.context.scene
    for path in mocap_files(shared_data):
        data = bvh.read(str(path))
        up, forward, scale, _h, _note = bvh.detect_orientation(data)
        before = set(bpy.data.objects)
        bpy.ops.import_anim.bvh(filepath=str(path), global_scale=scale, axis_up=up,
                                axis_forward=forward, frame_start=1, use_fps_scale=False)
        (plain,) = set(bpy.data.objects) - before
        action = clips[path.stem]
        ours = action.signsim.skeleton
        scene.collection.objects.link(ours)
        ad = ours.animation_data_create()
        ad.action = action
        if ad.action_slot_handle != action.slots[0].handle:
            ad.action_slot = action.slots[0]
        trim = action.signsim.trimmed_frames
        for row in np.linspace(trim, data.rows - 1, 4).astype(int):
            scene.frame_set(int(row) + 1)
            a = {pb.name: np.array(pb.matrix) for pb in plain.pose.bones}
            scene.frame_set(int(row) + 1 - trim)
            b = {pb.name: np.array(pb.matrix) for pb in ours.pose.bones}
            assert a.keys() == b.keys()
            worst = max(np.abs(a[k] - b[k]).max() for k in a)
            assert worst < 2e-3, (path.name, int(row), worst)
        bpy.data.objects.remove(plain)
        scene.collection.objects.unlink(ours)


def test_folder_skips_files_that_are_not_mocap(addon, tmp_path, capsys):
    """sample_blends/ holds a script, a scene and notes next to the BVH files: a folder import
    skips them (listed, not failures, exit 0); naming one of them is still an error."""
    samples = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends"
    cli = addon.signsim_addon.cli.main
    library = tmp_path / "lib.blend"
    code = cli(["import", str(samples), "--library", str(library), "--json"])
    out, err = capsys.readouterr()
    result = json.loads(out.strip().splitlines()[-1])
    assert code == 0, err
    assert not result["failed"]
    assert sorted(r["name"] for r in result["imported"]) == ["chin_cheek", "fingerspelling"]
    assert sorted(pathlib.Path(s["path"]).name for s in result["skipped"]) == ["README.md", "make_samples.py", "signer.blend"]
    assert cli(["import", str(samples), "--library", str(tmp_path / "lib2.blend")]) == 0
    human = capsys.readouterr().out
    assert "skipped README.md, make_samples.py, signer.blend: not mocap (BVH, FBX, glTF)" in human
    assert cli(["import", str(samples / "make_samples.py"), "--library", str(library)]) == 1
    out, err = capsys.readouterr()
    # A named file of another type stays a failure: one stderr line naming the file and reason.
    assert len(err.strip().splitlines()) == 1
    assert "make_samples.py" in err and "unsupported" in err


def test_hidden_files_links_and_duplicates_are_skipped_with_a_reason(addon, tmp_path, capsys):
    """Inside a folder: hidden files and folders and links to folders (a link may loop) are
    skipped and listed with the reason; a second file with the same content (SHA-256) is
    skipped too, so its clip is imported and counted once. A hidden file named on the
    command line is imported."""
    lib = addon.signsim_addon.library.api
    folder = tmp_path / "in"
    (folder / "sub").mkdir(parents=True)
    (folder / ".git").mkdir()
    other = tmp_path / "other"
    other.mkdir()
    text = S.bvh_text(S.still_rows(12))
    S.write(folder / "a.bvh", text)
    S.write(folder / "sub" / "copy of a.bvh", text)
    S.write(folder / ".hidden.bvh", S.bvh_text(S.still_rows(13)))
    S.write(folder / ".git" / "x.bvh", S.bvh_text(S.still_rows(14)))
    S.write(other / "b.bvh", S.bvh_text(S.still_rows(15)))
    (folder / "loop").symlink_to(folder)
    (folder / "linked").symlink_to(other)
    library = tmp_path / "lib.blend"
    cli = addon.signsim_addon.cli.main
    capsys.readouterr()
    assert cli(["import", str(folder), "--library", str(library), "--json"]) == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [(r["name"], r["updated"]) for r in result["imported"]] == [("a", False)]
    skipped = {str(pathlib.Path(s["path"]).relative_to(folder)): s["reason"] for s in result["skipped"]}
    assert skipped == {".git": lib.HIDDEN, ".hidden.bvh": lib.HIDDEN, "linked": lib.LINKED_FOLDER,
                       "loop": lib.LINKED_FOLDER,
                       "sub/copy of a.bvh": "the same content (SHA-256) as a.bvh, earlier in this import"}
    assert [c["name"] for c in lib.list_clips(str(library))] == ["a"]
    assert cli(["import", str(folder), "--library", str(tmp_path / "h.blend")]) == 0
    human = capsys.readouterr().out
    assert "imported a:" in human and human.count("imported ") == 1
    assert "skipped .git, .hidden.bvh: hidden" in human and "skipped linked, loop: a link to a folder, not followed" in human
    # named on the command line, a hidden file and a linked folder are imported
    assert cli(["import", str(folder / ".hidden.bvh"), str(folder / "linked"), "--library", str(library)]) == 0
    assert [c["name"] for c in lib.list_clips(str(library))] == [".hidden", "a", "b"]

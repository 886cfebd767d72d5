"""The library file: assets, catalogs, tags, search, re-import, edits, atomic save, the
open file left alone, and the sidebar operators."""
import pathlib
import types

import bpy
import pytest

import library_samples as S

import os as _os

# concurrent imports: rounds x processes (SIGNSIM_SWEEP=1, as bench/bench_library.py --concurrent
# runs it: the old 10 x 4)
ROUNDS, PROCESSES = (10, 4) if _os.environ.get("SIGNSIM_SWEEP") else (2, 2)


@pytest.fixture
def lib(addon):
    return addon.signsim_addon.library.api


@pytest.fixture
def three(lib, tmp_path):
    """A library with three clips: different fps, durations, tags and catalogs."""
    library = tmp_path / "lib.blend"
    a = S.write(tmp_path / "hello.bvh", S.bvh_text(S.still_rows(30), frame_time=1 / 30))
    b = S.write(tmp_path / "thanks.bvh", S.bvh_text(S.still_rows(600), frame_time=1 / 60))
    c = S.write(tmp_path / "walk.bvh", S.bvh_text(
        S.still_rows(400, pos=lambda t: (0, S.HIP_HEIGHT, t)), frame_time=1 / 120))
    lib.import_paths([str(a)], str(library), tags="gloss:HELLO,handedness:right,style:formal",
                     catalog="signs/greetings")
    lib.import_paths([str(b)], str(library), tags="gloss:THANK-YOU,handedness:both",
                     catalog="signs/courtesy")
    lib.import_paths([str(c)], str(library), tags="body_part:full_body", catalog="mocap")
    return library


def names(clips):
    return sorted(c["name"] for c in clips)


def test_clips_are_assets_with_catalogs_tags_and_metadata(three, tmp_path):
    cats = (tmp_path / "blender_assets.cats.txt").read_text()
    assert "VERSION 1" in cats
    paths = {line.split(":")[1]: line.split(":")[0] for line in cats.splitlines()
             if line and not line.startswith(("#", "VERSION"))}
    assert {"signs", "signs/greetings", "signs/courtesy", "mocap"} <= set(paths)
    assert len(set(paths.values())) == len(paths)  # one UUID per catalog
    with bpy.data.libraries.load(str(three), link=False) as (src, dst):
        dst.actions = ["hello"]
    hello = dst.actions[0]
    assert hello.asset_data is not None
    assert hello.asset_data.catalog_id == paths["signs/greetings"]
    tags = {t.name for t in hello.asset_data.tags}
    assert {"gloss:HELLO", "handedness:right", "style:formal", "fps:30",
            "duration:short"} <= tags
    s = hello.signsim
    assert s.is_clip and s.source_format == "BVH" and len(s.sha256) == 64
    assert s.fps == 30 and s.frame_count == 30 and s.duration == pytest.approx(1.0)
    assert s.bone_count == len(S.JOINTS) and len(s.skeleton_signature) == 16
    skel = s.skeleton
    assert skel is not None and skel.type == 'ARMATURE' and len(skel.data.bones) == len(S.JOINTS)
    assert skel.animation_data is None or skel.animation_data.action is None


def test_search_filters(lib, three):
    L = str(three)
    assert names(lib.list_clips(L)) == ["hello", "thanks", "walk"]
    assert names(lib.list_clips(L, text="thank")) == ["thanks"]
    assert names(lib.list_clips(L, text="HELLO")) == ["hello"]          # tag text
    assert names(lib.list_clips(L, tags=["handedness:right", "style:formal"])) == ["hello"]
    assert names(lib.list_clips(L, tags=["handedness:right", "handedness:both"])) == []
    assert names(lib.list_clips(L, tags=["handedness:right", "handedness:both"],
                                any_tag=True)) == ["hello", "thanks"]
    assert names(lib.list_clips(L, catalog="signs")) == ["hello", "thanks"]
    assert names(lib.list_clips(L, catalog="signs/courtesy")) == ["thanks"]
    assert names(lib.list_clips(L, min_duration=2.0)) == ["thanks", "walk"]
    assert names(lib.list_clips(L, max_duration=3.4)) == ["hello", "walk"]
    assert names(lib.list_clips(L, fps=120)) == ["walk"]
    assert names(lib.list_clips(L, tags=["has_root_motion"])) == ["walk"]
    sig = lib.list_clips(L)[0]["skeleton"]
    assert names(lib.list_clips(L, skeleton=sig[:6])) == ["hello", "thanks", "walk"]
    assert names(lib.list_clips(L, skeleton="0000000000")) == []


def test_filters_no_clip_can_pass_are_refused(addon, lib, three, capsys):
    """Contradictory or impossible numeric filters: one line saying why, not an empty list."""
    import json
    cli = addon.signsim_addon.cli.main
    for flags, words in ((["--min-duration", "5", "--max-duration", "1"], "minimum duration 5 s is above the maximum 1 s"),
                         (["--fps", "-3"], "frame rate filter -3 fps is not positive"),
                         (["--fps", "0"], "not positive"),
                         (["--max-duration", "-1"], "maximum duration -1 s is negative"),
                         (["--min-duration", "nan"], "not a number")):
        capsys.readouterr()
        assert cli(["list", "--library", str(three), *flags, "--json"]) == 1, flags
        out, err = capsys.readouterr()
        assert err.strip().splitlines() == [err.strip()] and words in err, (flags, err)
        assert words in json.loads(out.strip().splitlines()[-1])["error"]
    with pytest.raises(lib.SignSimError, match="above the maximum"):
        lib.list_clips(str(three), min_duration=2, max_duration=1.5)
    # the edges stay valid: an equal minimum and maximum, a negative minimum
    assert names(lib.list_clips(str(three), min_duration=1.0, max_duration=1.0)) == ["hello"]
    assert names(lib.list_clips(str(three), min_duration=-1)) == ["hello", "thanks", "walk"]


def test_list_cli_flags(addon, three, capsys):
    import json
    cli = addon.signsim_addon.cli.main
    capsys.readouterr()
    assert cli(["list", "--library", str(three), "--tags", "handedness:right,handedness:both",
                "--any", "--catalog", "signs", "--min-duration", "0.5", "--max-duration",
                "20", "--fps", "60", "--text", "than", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert names(out["clips"]) == ["thanks"]
    assert cli(["list", "--library", str(three.parent / "missing.blend"), "--json"]) == 1
    assert "no motion library" in capsys.readouterr().err


def test_reimport_same_file_updates_instead_of_duplicating(lib, tmp_path):
    library = tmp_path / "lib.blend"
    f = S.write(tmp_path / "sign.bvh", S.bvh_text(S.still_rows(20)))
    lib.import_paths([str(f)], str(library), tags="gloss:A")
    lib.edit_clip(str(library), "sign", tags="gloss:A,mine")
    (rec,) = lib.import_paths([str(f)], str(library), tags="style:new")["imported"]
    assert rec["updated"] is True and rec["name"] == "sign"
    clips = lib.list_clips(str(library))
    assert len(clips) == 1
    assert {"gloss:A", "mine", "style:new", "fps:30"} <= set(clips[0]["tags"])
    # a copy under another name is the same file (same SHA-256): still one clip
    g = tmp_path / "copy.bvh"
    g.write_bytes(f.read_bytes())
    lib.import_paths([str(g)], str(library))
    assert len(lib.list_clips(str(library))) == 1
    with bpy.data.libraries.load(str(library)) as (src, _dst):
        assert len(src.objects) == 1 and len(src.armatures) == 1  # old skeleton gone


def test_atomic_save_keeps_no_backup_copy_and_an_index_for_the_file(lib, tmp_path):
    """No .blend1 (the rename is atomic); the index describes exactly the .blend there."""
    import json
    import sqlite3
    library = tmp_path / "lib.blend"
    a = S.write(tmp_path / "a.bvh", S.bvh_text(S.still_rows(10)))
    b = S.write(tmp_path / "b.bvh", S.bvh_text(S.still_rows(11)))
    lib.import_paths([str(a)], str(library))
    lib.import_paths([str(b)], str(library))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "a.bvh", "b.bvh", "blender_assets.cats.txt", "lib.blend", "lib.blend.index.sqlite"]
    con = sqlite3.connect(str(library) + ".index.sqlite")
    # one part (the library .blend itself): its size and time stamp
    assert list(con.execute("SELECT part, size, mtime_ns FROM files")) == [
        (0, library.stat().st_size, library.stat().st_mtime_ns)]
    # each row's record: a JSON array led by the clip's name, in name order
    assert [json.loads(r)[0] for (r,) in con.execute("SELECT record FROM clips ORDER BY rowid")] == ["a", "b"]
    con.close()


def test_list_reads_the_index_and_rebuilds_it_when_missing_or_stale(lib, tmp_path):
    import os
    library = tmp_path / "lib.blend"
    a = S.write(tmp_path / "a.bvh", S.bvh_text(S.still_rows(10)))
    b = S.write(tmp_path / "b.bvh", S.bvh_text(S.still_rows(12)))
    lib.import_paths([str(a), str(b)], str(library), tags="gloss:A")
    expected = lib.list_clips(str(library))
    assert [c["name"] for c in expected] == ["a", "b"]
    index = pathlib.Path(str(library) + ".index.sqlite")
    real, st = library.read_bytes(), library.stat()
    # fresh index: the .blend is never read (garbage of the same size and time still lists)
    library.write_bytes(b"\0" * len(real))
    os.utime(library, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert lib.list_clips(str(library)) == expected
    assert lib.list_clips(str(library), min_duration=0.35) == expected[1:]
    # stale index (another time stamp): not trusted, the .blend is read
    os.utime(library, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(lib.SignSimError, match="cannot read the library"):
        lib.list_clips(str(library))
    library.write_bytes(real)
    assert lib.list_clips(str(library)) == expected
    # rebuilt for the new stamp: the garbage test passes again
    st = library.stat()
    library.write_bytes(b"\0" * len(real))
    os.utime(library, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert lib.list_clips(str(library)) == expected
    library.write_bytes(real)
    os.utime(library, ns=(st.st_atime_ns, st.st_mtime_ns))
    # missing or corrupt index: rebuilt from the .blend
    index.unlink()
    assert lib.list_clips(str(library)) == expected and index.is_file()
    index.write_bytes(b"not a database")
    assert lib.list_clips(str(library)) == expected


def test_rename_retag_delete(lib, three):
    L = str(three)
    rec = lib.edit_clip(L, "hello", rename="hello formal")
    assert rec["name"] == "hello formal"
    with pytest.raises(Exception, match="already has a clip named 'walk'"):
        lib.edit_clip(L, "thanks", rename="walk")
    rec = lib.edit_clip(L, "thanks", tags="gloss:THANKS, style:casual")
    assert rec["tags"] == ["gloss:THANKS", "style:casual"]
    lib.edit_clip(L, "walk", delete=True)
    assert names(lib.list_clips(L)) == ["hello formal", "thanks"]
    with bpy.data.libraries.load(L) as (src, _dst):
        assert len(src.objects) == 2  # the deleted clip's skeleton went with it


def test_successful_import_leaves_the_open_file_alone(lib, tmp_path):
    sc = bpy.context.scene
    sc.render.fps = 25
    sc.frame_end = 33
    own = bpy.data.actions.new("walk")  # same name as the clip about to be imported
    own.use_fake_user = True
    cube = bpy.data.objects.new("walk skeleton", bpy.data.meshes.new("m"))
    sc.collection.objects.link(cube)
    bpy.context.view_layer.objects.active = cube
    before = {k: sorted(i.name for i in getattr(bpy.data, k))
              for k in ("actions", "objects", "armatures", "meshes", "scenes", "libraries")}
    f = S.write(tmp_path / "walk.bvh", S.bvh_text(S.still_rows(40), frame_time=0.01))
    lib.import_paths([str(f)], str(tmp_path / "lib.blend"))
    lib.list_clips(str(tmp_path / "lib.blend"))
    after = {k: sorted(i.name for i in getattr(bpy.data, k)) for k in before}
    assert after == before
    assert (sc.render.fps, sc.frame_end) == (25, 33)
    assert bpy.context.view_layer.objects.active == cube
    # …and the library's names did not pick up '.001' from the open file's names
    clip = lib.list_clips(str(tmp_path / "lib.blend"))[0]
    assert clip["name"] == "walk" and clip["skeleton_object"] == "walk skeleton"


# ------------------------------------------------------------------------ sidebar / UI

def test_sidebar_operators(addon, three):
    s = bpy.context.scene.signsim
    s.library_path = str(three)
    assert not bpy.ops.signsim.clip_preview.poll()
    assert bpy.ops.signsim.library_refresh() == {'FINISHED'}
    assert [i.name for i in s.clips] == ["hello", "thanks", "walk"]
    # the list filter is the CLI's filter
    ul = bpy.types.SIGNSIM_UL_clips
    fake = types.SimpleNamespace(bitflag_filter_item=1 << 30)
    s.filter_tags = "handedness:right,handedness:both"
    flags, _ = ul.filter_items(fake, bpy.context, s, "clips")
    assert [bool(f) for f in flags] == [False, False, False]
    s.filter_any = True
    flags, _ = ul.filter_items(fake, bpy.context, s, "clips")
    assert [bool(f) for f in flags] == [True, True, False]
    s.filter_text = "thank"
    flags, _ = ul.filter_items(fake, bpy.context, s, "clips")
    assert [bool(f) for f in flags] == [False, True, False]
    # preview: the clip on its skeleton, at its true speed, scene fps untouched
    s.clip_index = 1  # thanks: 600 frames at 60 fps = 10 s
    sc = bpy.context.scene
    fps = sc.render.fps
    assert bpy.ops.signsim.clip_preview() == {'FINISHED'}
    skel = bpy.context.view_layer.objects.active
    assert skel.signsim.is_preview and skel.type == 'ARMATURE'
    strip = skel.animation_data.nla_tracks[0].strips[0]
    assert strip.action.name.startswith("thanks")
    assert (strip.frame_end - strip.frame_start) / fps == pytest.approx(10.0, abs=2 / 60)
    assert sc.render.fps == fps and sc.use_preview_range
    assert bpy.ops.signsim.clip_preview() == {'FINISHED'}  # replaces the previous one
    assert sum(o.signsim.is_preview for o in bpy.data.objects) == 1
    # rename / retag / delete through the operators
    assert bpy.ops.signsim.clip_rename(new_name="thank you") == {'FINISHED'}
    assert s.clips[s.clip_index].name == "thank you"
    assert bpy.ops.signsim.clip_retag(tags="gloss:THANK-YOU,style:warm") == {'FINISHED'}
    assert s.clips[s.clip_index].tags == "gloss:THANK-YOU, style:warm"
    with pytest.raises(RuntimeError, match="already has a clip named 'walk'"):
        bpy.ops.signsim.clip_rename(new_name="walk")  # ERROR report, CANCELLED
    assert bpy.ops.signsim.clip_delete() == {'FINISHED'}
    assert [i.name for i in s.clips] == ["hello", "walk"]


def test_import_operator_reports_failures_without_traceback(addon, tmp_path):
    bad = S.write(tmp_path / "empty.bvh", "")
    lib = tmp_path / "lib.blend"
    with pytest.raises(RuntimeError) as err:  # ERROR reports raise in background mode
        bpy.ops.signsim.import_clips(filepath=str(bad), library_path=str(lib))
    assert "empty.bvh: the file is empty" in str(err.value)
    assert "Traceback" not in str(err.value)
    assert not lib.exists()


class _Layout:
    """Records what a panel draws; checks every property and operator exists."""

    def __init__(self):
        self.ops = []

    def __getattr__(self, name):
        if name in ("row", "column", "box", "split"):
            return lambda *a, **k: self
        return lambda *a, **k: None

    def prop(self, data, prop, **kw):
        assert prop in data.bl_rna.properties, prop

    def operator(self, idname, **kw):
        mod, name = idname.split(".")
        assert hasattr(getattr(bpy.ops, mod), name), idname
        self.ops.append(idname)

    def template_list(self, listtype, list_id, data, prop, active_data, active_prop, **kw):
        assert hasattr(bpy.types, listtype)
        assert prop in data.bl_rna.properties and active_prop in active_data.bl_rna.properties


def test_panel_draws_with_real_properties_and_operators(addon, three):
    bpy.context.scene.signsim.library_path = str(three)
    bpy.ops.signsim.library_refresh()
    layout = _Layout()
    bpy.types.SIGNSIM_PT_library.draw(types.SimpleNamespace(layout=layout), bpy.context)
    assert {"signsim.import_clips", "signsim.clip_preview", "signsim.clip_rename",
            "signsim.clip_retag", "signsim.clip_delete"} <= set(layout.ops)
    panel = bpy.types.SIGNSIM_PT_library
    assert (panel.bl_space_type, panel.bl_region_type, panel.bl_category) == ('VIEW_3D', 'UI', 'SignSim')


def test_import_operator_whole_folder_recursive(addon, tmp_path):
    (tmp_path / "in" / "deep").mkdir(parents=True)
    S.write(tmp_path / "in" / "one.bvh", S.bvh_text(S.still_rows(10)))
    S.write(tmp_path / "in" / "deep" / "two.bvh", S.bvh_text(S.still_rows(12)))
    lib = tmp_path / "lib.blend"
    assert bpy.ops.signsim.import_clips(directory=str(tmp_path / "in"), whole_folder=True,
                                        tags="style:test", catalog="tests/folder",
                                        library_path=str(lib)) == {'FINISHED'}
    clips = addon.signsim_addon.library.api.list_clips(str(lib), catalog="tests")
    assert names(clips) == ["one", "two"]
    assert all("style:test" in c["tags"] for c in clips)


@pytest.mark.slow
def test_launcher_import_and_list(tmp_path):
    """`./signsim import … --json` and `./signsim list … --json` in a fresh process."""
    import json
    import subprocess
    root = pathlib.Path(__file__).resolve().parents[2]
    if not (root / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv next to ./signsim")
    f = S.write(tmp_path / "wave.bvh", S.bvh_text(S.still_rows(30)))
    bad = S.write(tmp_path / "bad.bvh", "HIERARCHY\nROOT Hips\n{\n")
    lib = tmp_path / "lib.blend"
    run = subprocess.run([str(root / "signsim"), "import", str(f), str(bad), "--library",
                          str(lib), "--tags", "gloss:WAVE", "--json"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 3      # partial success: a clip imported, a file failed
    assert run.stderr.strip().splitlines() == [
        "signsim: 1 clip(s) imported, 1 file(s) failed: bad.bvh: truncated: the hierarchy is not closed "
        "before the MOTION section"]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert [c["name"] for c in out["imported"]] == ["wave"]
    assert out["failed"][0]["path"] == str(bad) and "truncated" in out["failed"][0]["error"]
    run = subprocess.run([str(root / "signsim"), "list", "--library", str(lib), "--tags",
                          "gloss:WAVE", "--json"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    clips = json.loads(run.stdout.strip().splitlines()[-1])["clips"]
    assert [(c["name"], c["frames"], c["fps"]) for c in clips] == [("wave", 30, 30.0)]


def test_same_name_different_file_keeps_the_existing_clip_name(lib, tmp_path):
    library = tmp_path / "lib.blend"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = S.write(tmp_path / "a" / "walk.bvh", S.bvh_text(S.still_rows(20)))
    second = S.write(tmp_path / "b" / "walk.bvh", S.bvh_text(S.still_rows(25)))
    bpy.data.actions.new("walk").use_fake_user = True  # the open file has one too
    lib.import_paths([str(first)], str(library))
    (rec,) = lib.import_paths([str(second)], str(library))["imported"]
    assert rec["name"] == "walk.001" and rec["updated"] is False
    clips = {c["name"]: c["frames"] for c in lib.list_clips(str(library))}
    assert clips == {"walk": 20, "walk.001": 25}
    assert sorted(a.name for a in bpy.data.actions) == ["walk"]


def test_load_clip_for_scripts_and_bad_library_paths(lib, three, tmp_path):
    before = {k: len(getattr(bpy.data, k)) for k in ("actions", "objects", "libraries")}
    action, skel = lib.load_clip(str(three), "walk")
    assert action.signsim.is_clip and skel.type == 'ARMATURE' and action.signsim.skeleton == skel
    assert len(bpy.data.actions) == before["actions"] + 1
    assert len(bpy.data.libraries) == before["libraries"]
    with pytest.raises(Exception, match="no clip named 'nope'"):
        lib.load_clip(str(three), "nope")
    with pytest.raises(Exception, match="not a folder"):
        lib.import_paths([str(tmp_path)], str(tmp_path))
    with pytest.raises(Exception, match="must be a .blend"):
        lib.list_clips(str(tmp_path / "lib.txt"))
    (tmp_path / "junk.blend").write_text("not a blend file")
    with pytest.raises(Exception, match="cannot read the library"):
        lib.list_clips(str(tmp_path / "junk.blend"))


def test_a_scene_file_is_never_taken_for_a_library(addon, tmp_path):
    """Pointing --library at a rig or scene .blend must not replace its contents."""
    import shutil
    scene_file = tmp_path / "signer_copy.blend"
    shutil.copy(pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends" / "signer.blend", scene_file)
    before = scene_file.read_bytes()
    clip = pathlib.Path(__file__).resolve().parent.parent.parent / "sample_blends" / "chin_cheek.bvh"
    code = addon.signsim_addon.cli.main(["import", str(clip), "--library", str(scene_file)])
    assert code == 1
    assert scene_file.read_bytes() == before


def test_a_waiting_writer_stops_with_a_clear_message(addon, lib, tmp_path, monkeypatch):
    store = addon.signsim_addon.library.store
    library = tmp_path / "lib.blend"
    a = S.write(tmp_path / "a.bvh", S.bvh_text(S.still_rows(10)))
    lib.import_paths([str(a)], str(library))
    stamp = library.read_bytes()
    monkeypatch.setattr(store, "LOCK_TIMEOUT_S", 0.3)
    b = S.write(tmp_path / "b.bvh", S.bvh_text(S.still_rows(11)))
    with store.writer_lock(str(library)):     # another writer holds the library
        with pytest.raises(lib.SignSimError, match="being written by another SignSim process"):
            lib.import_paths([str(b)], str(library))
        with pytest.raises(lib.SignSimError, match="waited 0.3 s"):
            lib.tag_clip(str(library), "a", add="x")
    assert library.read_bytes() == stamp
    assert [c["name"] for c in lib.list_clips(str(library))] == ["a"]    # readers never wait
    lib.import_paths([str(b)], str(library))
    assert [c["name"] for c in lib.list_clips(str(library))] == ["a", "b"]


@pytest.mark.slow
def _waiting_on(pid, lock_path):
    """Whether process `pid` has the library's lock file open (it is at or past the lock)."""
    fd_dir = pathlib.Path(f"/proc/{pid}/fd")
    try:
        return any(str(fd.resolve()) == str(lock_path) for fd in fd_dir.iterdir())
    except (FileNotFoundError, ProcessLookupError, PermissionError, OSError):
        return False


@pytest.mark.slow
def test_concurrent_imports_keep_every_clip(addon, tmp_path):
    """Two `./signsim import` processes into one library at once, twice: all clips kept.
    The test holds the library's writer lock until every process waits on it (seen in
    /proc: the lock file open), then lets them all race for it, so the imports truly
    contend (4 processes x 10 rounds: bench/bench_library.py --concurrent)."""
    import json
    import os
    import subprocess
    import time
    store = addon.signsim_addon.library.store
    root = pathlib.Path(__file__).resolve().parents[2]
    library = tmp_path / "lib.blend"
    lock_path = (tmp_path / "lib.blend.lock").resolve()
    expected = []
    for rep in range(ROUNDS):
        procs = []
        with store.writer_lock(str(library)):
            for k in range(PROCESSES):
                name = f"r{rep}_p{k}"
                f = S.write(tmp_path / f"{name}.bvh", S.bvh_text(S.still_rows(10 + 4 * rep + k)))
                expected.append(name)
                procs.append(subprocess.Popen([str(root / "signsim"), "import", str(f), "--library", str(library),
                                               "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            if os.path.isdir("/proc/self/fd"):
                deadline = time.monotonic() + 300
                while not all(_waiting_on(p.pid, lock_path) for p in procs):
                    assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
                        [p.communicate() for p in procs if p.poll() is not None]
                    time.sleep(0.05)
                # all of them wait on the lock at once: none has written
                assert all(p.poll() is None for p in procs)
            else:                   # no /proc: give them time to reach the lock
                time.sleep(10)
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err
        listing = subprocess.run([str(root / "signsim"), "list", "--library", str(library), "--json"],
                                 capture_output=True, text=True, timeout=300)
        names = sorted(c["name"] for c in json.loads(listing.stdout.strip().splitlines()[-1])["clips"])
        assert names == sorted(expected), f"repetition {rep}"


def test_index_search_agrees_with_matches(lib, three):
    """The index applies every filter in SQL: exactly the clips store.matches passes."""
    L = str(three)
    lib.edit_clip(L, "walk", tags="Ünïcode:Ä,with_under%score,body_part:full_body")
    everything = lib.list_clips(L)
    cases = [dict(text="HeLLo"), dict(text="thanks.bvh"), dict(text="under%s"), dict(text="_"),
             dict(text="ünï"), dict(text="signs greet"), dict(tags=["ünïcode:ä"]),
             dict(tags=["WITH_UNDER%SCORE"]), dict(tags=["gloss:hello", "ünïcode:ä"], any_tag=True),
             dict(tags=["handedness:right", "style:formal"]), dict(min_duration=1.0, max_duration=3.3334),
             dict(max_duration=1.0), dict(tags=["fps:"]), dict(text="a", catalog="signs", fps=30),
             dict(text="ÜNÏ"), dict(catalog=" signs "), dict(catalog="sign"), dict(catalog="signs/courtesy"),
             dict(fps=29.5), dict(fps=30.6), dict(fps=119.5), dict(skeleton=everything[0]["skeleton"][:5]),
             dict(skeleton="x"), dict(text="lib.blend"), dict(text="HELLO thanks", any_tag=True)]
    index = lib.store.index
    for f in cases:
        want = [r["name"] for r in everything if lib.matches(r, **f)]
        assert [r["name"] for r in lib.list_clips(L, **f)] == want, f
        sql = dict(f, catalog=lib.store.normalise_catalog(f["catalog"])) if f.get("catalog") else f
        assert [r["name"] for r in index.search(L, **sql)] == want, f     # from the index alone
    assert [r["name"] for r in lib.list_clips(L, tags=["ünïcode:ä"])] == ["walk"]
    assert [r["name"] for r in lib.list_clips(L, text="under%s")] == ["walk"]


def test_a_large_library_is_split_into_parts_and_a_change_writes_only_its_part(addon, lib, tmp_path, monkeypatch):
    """Parts of PART_CLIPS clips (2 here): adding, tagging, re-importing and deleting load
    and write only the part concerned; list, load_clip and the rebuilt index see them all."""
    import os
    store = addon.signsim_addon.library.store
    monkeypatch.setattr(store, "PART_CLIPS", 2)
    library = tmp_path / "lib.blend"
    parts = tmp_path / "lib.blend.parts"
    src = [S.write(tmp_path / f"c{i}.bvh", S.bvh_text(S.still_rows(10 + i))) for i in range(5)]
    lib.import_paths([str(p) for p in src[:3]], str(library), tags="gloss:A")
    lib.import_paths([str(p) for p in src[3:]], str(library))

    def stamps():
        files = [library] + sorted(parts.iterdir())
        return {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in files}

    assert sorted(p.name for p in parts.iterdir()) == ["part-0001.blend", "part-0002.blend"]
    clips = {c["name"]: c["frames"] for c in lib.list_clips(str(library))}
    assert clips == {f"c{i}": 10 + i for i in range(5)}
    # part 0: c0 c1 (the first call's first two); part 1: c2, then c3 (it had room); part 2: c4
    for f, want in ((library, ["c0", "c1"]), (parts / "part-0001.blend", ["c2", "c3"]),
                    (parts / "part-0002.blend", ["c4"])):
        with bpy.data.libraries.load(str(f)) as (s, _d):
            assert sorted(s.actions) == want
    before = stamps()
    lib.tag_clip(str(library), "c4", add="style:x")
    after = stamps()
    assert [n for n in before if before[n] != after[n]] == ["part-0002.blend"]
    # re-importing a file updates its clip in its own part, keeping its tags
    before = after
    (rec,) = lib.import_paths([str(src[1])], str(library), tags="style:y")["imported"]
    assert rec["updated"] and rec["name"] == "c1"
    after = stamps()
    assert [n for n in before if before[n] != after[n]] == ["lib.blend"]
    assert {"gloss:A", "style:y"} <= set(lib.list_clips(str(library), text="c1")[0]["tags"])
    action, skel = lib.load_clip(str(library), "c4")
    assert action.signsim.frame_count == 14 and skel.type == 'ARMATURE'
    lib.edit_clip(str(library), "c3", delete=True)
    assert sorted(c["name"] for c in lib.list_clips(str(library))) == ["c0", "c1", "c2", "c4"]
    # a part changed behind the index's back: the index is stale and rebuilt from the parts
    expected = lib.list_clips(str(library))
    st = (parts / "part-0001.blend").stat()
    os.utime(parts / "part-0001.blend", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert lib.list_clips(str(library)) == expected
    (parts / "part-0002.blend").unlink()
    assert sorted(c["name"] for c in lib.list_clips(str(library))) == ["c0", "c1", "c2"]


def test_an_interrupted_import_keeps_the_clips_imported_before_it(lib, tmp_path):
    """Ctrl-C (KeyboardInterrupt, here raised as the third file starts) keeps the two clips
    imported before it in the library, says so, leaves no lock file, and goes on as an
    interrupt; the open file is as it was."""
    library = tmp_path / "lib.blend"
    paths = [S.write(tmp_path / f"c{k}.bvh", S.bvh_text(S.still_rows(10 + k))) for k in range(4)]
    before = {a.name for a in bpy.data.actions}
    said = []

    def progress(path, k, n, fraction):   # the third file's stage starts
        if k == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        lib.import_paths([str(p) for p in paths], str(library), report=lambda level, m: said.append((level, m)),
                         progress=progress)
    assert sorted(c["name"] for c in lib.list_clips(str(library))) == ["c0", "c1"]
    assert ("WARNING", f"interrupted: 2 clip(s) imported before the interrupt are kept in {library}; the file in "
                       "progress was not imported") in said
    assert not (tmp_path / "lib.blend.lock").exists()
    assert {a.name for a in bpy.data.actions} == before

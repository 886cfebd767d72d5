"""Bad files, each made in the test by mutating a real mocap file (never copied into the
repository): refused with one clear line naming the file and the reason, never labelled
as Blender's importer's failure, the library untouched; odd but valid layouts import as
the original does; an interrupted import leaves no temporary files."""
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SOURCE = "bandai_dataset-1_bye_active_001.bvh"   # 6 channels per joint, Z X Y rotations
GLB = "threejs_RobotExpressive.glb"


@pytest.fixture
def lib(addon):
    return addon.signsim_addon.library.api


@pytest.fixture
def real(shared_data):
    return (shared_data / "mocap" / SOURCE).read_text()


def _motion_row(text, k=0):
    """(start, end) character span of data row k."""
    m = re.search(r"Frame Time:[^\n]*\n", text)
    pos = m.end()
    for _ in range(k):
        pos = text.index("\n", pos) + 1
    return pos, text.index("\n", pos)


def _set_value(text, column, value, row=0):
    a, b = _motion_row(text, row)
    vals = text[a:b].split()
    vals[column] = value
    return text[:a] + " ".join(vals) + text[b:]


def _second_joint_channels(text):
    """Span of the CHANNELS line of the second JOINT (Spine)."""
    m = list(re.finditer(r"^[ \t]*CHANNELS[^\n]*$", text, re.M))[2]
    return m.start(), m.end()


def _bvh_mutant(text, kind):
    """(mutated text, words the error must contain)."""
    if kind == "float32_overflow":     # finite as float64, infinite as a 32-bit key
        return _set_value(text, 0, "1e300", row=5), ["out-of-range", "frame 6", "32-bit"]
    if kind == "huge_but_finite":
        return _set_value(text, 1, "3.5e38", row=0), ["out-of-range", "frame 1"]
    if kind == "nan":
        return _set_value(text, 2, "nan", row=3), ["non-finite", "frame 4"]
    if kind == "rotation_range":       # column 3: Zrotation of the root
        return _set_value(text, 3, "1e7", row=2), ["rotation", "plausible", "frame 3"]
    if kind in ("fps_zero", "fps_huge", "fps_tiny"):
        value = {"fps_zero": "0", "fps_huge": "1e-9", "fps_tiny": "3.4e38"}[kind]
        words = {"fps_zero": ["frame time", "positive"], "fps_huge": ["1e+09", "outside 1–1000 fps"],
                 "fps_tiny": ["outside 1–1000 fps"]}[kind]
        return re.sub(r"Frame Time:[^\n]*", f"Frame Time: {value}", text), words
    if kind == "repeated_axis":
        a, b = _second_joint_channels(text)
        line = text[a:b].replace("Xrotation", "Zrotation")
        return text[:a] + line + text[b:], ["Spine", "repeats", "zrotation"]
    if kind == "joint_without_channels":
        a, b = _second_joint_channels(text)
        return text[:a] + text[b + 1:], ["Spine", "no CHANNELS"]
    if kind == "channel_count":
        a, b = _second_joint_channels(text)
        return text[:a] + text[a:b].replace("CHANNELS 6", "CHANNELS -6") + text[b:], ["-6 channels"]
    if kind == "truncated_row":
        a, b = _motion_row(text, 7)
        cut = text[:a] + " ".join(text[a:b].split()[:40]) + "\n"
        return cut, ["truncated", "frame 8"]
    if kind == "truncated_header":
        return text[:text.index("Frame Time")], ["truncated", "Frame Time"]
    if kind == "truncated_hierarchy":
        return text[:text.index("OFFSET", 400) + 9], ["truncated"]
    raise ValueError(kind)


BVH_KINDS = ("float32_overflow", "huge_but_finite", "nan", "rotation_range", "fps_zero",
             "fps_huge", "fps_tiny", "repeated_axis", "joint_without_channels", "channel_count",
             "truncated_row", "truncated_header", "truncated_hierarchy")


def _refused(lib, path, library, words):
    result = lib.import_paths([str(path)], str(library))
    assert result["imported"] == []
    (fail,) = result["failed"]
    error = fail["error"]
    assert error.startswith(f"{path.name}: ") and "\n" not in error
    assert "Blender" not in error, error     # SignSim's own check, not the importer's
    for w in words:
        assert w.lower() in error.lower(), error
    return error


@pytest.mark.compat
@pytest.mark.parametrize("kind", BVH_KINDS)
def test_malformed_bvh_refused_before_blenders_importer(lib, real, tmp_path, kind):
    library = tmp_path / "lib.blend"
    good = tmp_path / "good.bvh"
    good.write_text(real)
    lib.import_paths([str(good)], str(library))
    stamp = library.read_bytes()
    text, words = _bvh_mutant(real, kind)
    bad = tmp_path / f"{kind}.bvh"
    bad.write_text(text)
    _refused(lib, bad, library, words)
    assert library.read_bytes() == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(   # no temporary file left
        ["good.bvh", bad.name, "lib.blend", "lib.blend.index.sqlite", "blender_assets.cats.txt"])


def _keys(addon, lib, library, name):
    action, skel = lib.load_clip(str(library), name)
    bag = addon.signsim_addon.compat.get_channelbag(action, action.slots[0])
    out = {}
    for fc in bag.fcurves:
        co = np.empty(2 * len(fc.keyframe_points))
        fc.keyframe_points.foreach_get("co", co)
        out[(fc.data_path, fc.array_index)] = co
    rest = {b.name: np.array(b.matrix_local) for b in skel.data.bones}
    return out, rest


@pytest.mark.parametrize("variant", ("upper_case_channels", "one_line_layout", "partial_rotations"))
def test_odd_but_valid_layouts_import_like_the_original(addon, lib, real, tmp_path, variant):
    library = tmp_path / "lib.blend"
    orig = tmp_path / "orig.bvh"
    orig.write_text(real)
    if variant == "upper_case_channels":
        text = re.sub(r"[XYZ](rotation|position)", lambda m: m.group(0).upper(), real)
    elif variant == "one_line_layout":   # Blender's importer reads statements line by line
        head, motion = real.split("MOTION", 1)
        text = " ".join(head.split()) + "\nMOTION" + motion
    else:   # the root's rotations as Z X only (its Y turn is 0 in every frame): same motion
        full = "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation"
        text = real.replace(full, "CHANNELS 5 Xposition Yposition Zposition Zrotation Xrotation", 1)
        lines = text.split("\n")
        i = next(k for k, ln in enumerate(lines) if ln.startswith("Frame Time")) + 1
        for k in range(i, len(lines)):
            vals = lines[k].split()
            if vals:
                assert float(vals[5]) == 0.0
                lines[k] = " ".join(vals[:5] + vals[6:])
        text = "\n".join(lines)
    other = tmp_path / "variant.bvh"
    other.write_text(text)
    result = lib.import_paths([str(orig), str(other)], str(library))
    assert not result["failed"], result["failed"]
    a, rest_a = _keys(addon, lib, library, "orig")
    b, rest_b = _keys(addon, lib, library, "variant")
    assert rest_a.keys() == rest_b.keys()
    for name in rest_a:
        np.testing.assert_allclose(rest_a[name], rest_b[name], atol=1e-6)
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_allclose(a[k], b[k], atol=1e-6, err_msg=str(k))


def _glb_json(shared_data):
    raw = (shared_data / "characters" / GLB).read_bytes()
    (length,) = np.frombuffer(raw[12:16], dtype="<u4")
    return json.loads(raw[20:20 + int(length)])


def test_gltf_whose_json_is_a_list_is_refused(lib, shared_data, tmp_path):
    doc = _glb_json(shared_data)
    bad = tmp_path / "list.gltf"
    bad.write_text(json.dumps([doc]))
    _refused(lib, bad, tmp_path / "lib.blend", ["JSON is a list", "not an object"])


def test_gltf_node_cycle_is_refused(lib, shared_data, tmp_path):
    doc = _glb_json(shared_data)
    nodes = doc["nodes"]
    children = {c for n in nodes for c in n.get("children", [])}
    root = next(i for i, n in enumerate(nodes) if i not in children and n.get("children"))
    child = nodes[root]["children"][0]
    nodes[child].setdefault("children", []).append(root)   # root → child → root
    bad = tmp_path / "cycle.gltf"
    bad.write_text(json.dumps(doc))
    _refused(lib, bad, tmp_path / "lib.blend", ["cycle", f"node {root}"])


def _fbx_header(version, rest=b"\0" * 100):
    return b"Kaydara FBX Binary  \x00\x1a\x00" + version.to_bytes(4, "little") + rest


@pytest.mark.parametrize("kind,content,words", [
    ("damaged_binary", _fbx_header(0), ["binary FBX header with version 0", "damaged"]),
    ("huge_version", _fbx_header(4_000_000_000), ["version 4000000000", "damaged"]),
    ("old_version", _fbx_header(6100), ["version 6100", "7100 (FBX 7.1) and later"]),
    ("cut_header", b"Kaydara FBX Binary  \x00\x1a\x00\x01", ["truncated inside its header"]),
    ("ascii", b"; FBX 7.4.0 project file\n; ----\nFBXHeaderExtension:  {\n}\n", ["an ASCII FBX file", "binary FBX only"]),
    ("not_fbx", b"PK\x03\x04 a zip archive renamed", ["not an FBX file"]),
])
def test_fbx_header_says_what_the_file_is(lib, tmp_path, kind, content, words):
    """Blender's importer calls every file whose first 24 bytes decode as UTF-8 "ASCII
    FBX" (a binary header with a damaged version too); SignSim reads the header first."""
    path = tmp_path / f"{kind}.fbx"
    path.write_bytes(content)
    error = _refused(lib, path, tmp_path / "lib.blend", words)
    if kind != "ascii":
        assert "ASCII" not in error


def test_cli_stderr_line_names_each_failed_file_and_its_reason(addon, real, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    for kind in ("nan", "repeated_axis"):
        (folder / f"{kind}.bvh").write_text(_bvh_mutant(real, kind)[0])
    capsys.readouterr()
    code = addon.signsim_addon.cli.main(["import", str(folder), "--library", str(tmp_path / "l.blend")])
    out, err = capsys.readouterr()
    assert code == 1
    (line,) = err.strip().splitlines()
    assert "nan.bvh: non-finite value" in line and "repeated_axis.bvh: joint 'Spine' repeats" in line
    assert "Blender" not in line


@pytest.mark.slow
@pytest.mark.parametrize("sig", (signal.SIGTERM, signal.SIGINT))
@pytest.mark.parametrize("delay", (0.3, 1.5))
def test_interrupted_import_leaves_no_temporary_files(shared_data, tmp_path, sig, delay):
    """A long BVH (a real file's rows repeated) is interrupted `delay` seconds after its
    import started: exit 130, one stderr line, no temporary file, no library."""
    real = (shared_data / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh").read_text()
    head, rows = real.split("Frame Time:", 1)
    ft, body = rows.split("\n", 1)
    big = tmp_path / "long.bvh"
    big.write_text(f"{head}Frame Time:{ft}\n" + (body.strip() + "\n") * 60)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, TMPDIR=str(temp))
    proc = subprocess.Popen([str(ROOT / "signsim"), "import", str(big), "--library",
                             str(tmp_path / "lib.blend")], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "[1/1] long.bvh" in proc.stdout.readline()
    time.sleep(delay)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["signsim: interrupted"]
    assert list(temp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.bvh", "tmp"]


@pytest.mark.slow
def test_long_file_reports_its_reading_progress(addon, shared_data, tmp_path, capsys, monkeypatch):
    """A BVH file's import stage advances as its rows are read: '[import 1/1] long.bvh
    43 % eta 2 s' lines (progress.py; every tick here, at most one a second in use)."""
    monkeypatch.setattr(addon.signsim_addon.progress, "AFTER_S", 0.0)
    monkeypatch.setattr(addon.signsim_addon.progress, "EVERY_S", 0.0)
    real = (shared_data / "mocap" / "cmu_01_01_cgspeed__fairmotion.bvh").read_text()
    head, rest = real.split("Frame Time:", 1)
    ft, body = rest.split("\n", 1)
    body = body.strip() + "\n"
    reps = (4 << 20) // len(body) + 1   # 4 MB: read in 20 chunks
    big = tmp_path / "long.bvh"
    big.write_text(f"{head}Frame Time:{ft}\n" + body * reps)
    capsys.readouterr()
    code = addon.signsim_addon.cli.main(["import", str(big), "--library", str(tmp_path / "l.blend")])
    out = capsys.readouterr().out
    assert code == 0
    lines = [ln for ln in out.splitlines() if ln.startswith("[import 1/1] long.bvh ")]
    steps = [int(ln.split()[3]) for ln in lines[:-1]]
    assert len(steps) >= 20 and steps == sorted(steps) and steps[0] == 0 and steps[-1] >= 95, lines
    assert all(" eta " in ln for ln in lines[1:-1]) and " done in " in lines[-1], lines
    (clip,) = addon.signsim_addon.library.api.list_clips(str(tmp_path / "l.blend"))
    rows = reps * len(body.strip().splitlines())   # every row (a calibration pose may be trimmed)
    trimmed = rows - clip["frames"]
    assert trimmed == 0 or (0 < trimmed <= 3 and any("calibration" in w for w in clip["warnings"]))
